"""The `citeflow` command's arguments: one `_add_<command>` per subcommand."""

from __future__ import annotations

import argparse

from citeflow.config import PROFILES
from citeflow.registry import STAGES, STRATEGIES


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the pipeline stages for a snapshot, skipping up-to-date ones")
    p.add_argument("--snapshot", required=True, help="snapshot id (letters, digits, . _ -), e.g. 20200705v1")
    p.add_argument("--corpus", required=True, help="snapshot folder (S2ORC metadata/ or S2AG papers/ ...)")
    p.add_argument("--scidocs", default="", help="SciDocs folder (original or BEIR layout)")
    p.add_argument("--paper-ids", default="", help="S2AG paper-ids folder (sha -> corpus id)")
    p.add_argument("--artifacts", default="artifacts", help="artifact root: local path or URI (default: ./artifacts)")
    p.add_argument("--until", choices=STAGES, help="last stage to run (default: every implemented stage)")
    p.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="demo",
        help="named settings applied before --set: demo (small, this machine), pretrained-cpu (a real pretrained "
        "encoder, --set train_encoder.model=DIR, fine-tuned on one small machine) or full (published settings)",
    )
    p.add_argument(
        "--strategy",
        choices=[*STRATEGIES, "both"],
        default=None,
        help="triplet strategy from mine_triplets on; both: mine (and train) once per strategy "
        "(default: mine_triplets.strategy, scincl)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="STAGE.KEY=VALUE",
        help="override a setting, e.g. build_graph.citations_from=inbound or spark.master=spark://h:7077",
    )
    _add_settings(p)
    p.add_argument(
        "--repair",
        action="store_true",
        help="re-hash every version the run reads; move damaged ones aside to <stage>/.damaged/ and rebuild them "
        "(same as --set store.repair=true)",
    )
    p.add_argument(
        "--rebase",
        action="store_true",
        help="build the release again the way the artifact root allows now (from a diff onto a release built "
        "since), though it holds a version built otherwise; the new version supersedes it (same as --set "
        "store.rebase=true)",
    )


def _add_settings(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--settings",
        action="append",
        default=[],
        metavar="FILE",
        help="STAGE.KEY=VALUE lines, applied before --set: the place for secrets, which a command line shows to "
        "every local user; only its owner may read the file (chmod 600). $CITEFLOW_SETTINGS names one too. "
        "See docs/secrets.md",
    )


def _add_generate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "generate",
        help="write a realistic synthetic snapshot (+ SciDocs set and paper-ids), or a "
        "later release of one (--derive-from)",
    )
    p.add_argument("--papers", type=int, default=None, help="number of papers (required unless --derive-from)")
    p.add_argument("--out", required=True, help="output folder (must be empty or absent)")
    p.add_argument("--seed", type=int, default=0, help="random seed (same seed, same bytes)")
    p.add_argument("--format", choices=["s2orc", "s2ag"], default=None, help="snapshot layout (default: s2orc)")
    p.add_argument("--shards", type=int, default=None, help="number of corpus shards (default: one per 50k papers)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    p.add_argument(
        "--difficulty",
        type=float,
        default=None,
        help="how weakly topics shape text and citations, 0 .. 1 (default 0.5: calibrated on real samples; "
        "0: easy, text nearly labels its topic)",
    )
    later = p.add_argument_group(
        "a later release",
        "derive release 2 from a generated release 1, in its layout: "
        "papers added, removed (never SciDocs papers) and changed",
    )
    later.add_argument(
        "--derive-from", metavar="RELEASE_DIR", default=None, help="release 1: a folder written by citeflow generate"
    )
    later.add_argument("--added", type=int, default=None, help="papers to add (default: 5%% of release 1's)")
    later.add_argument("--removed", type=int, default=None, help="papers to remove (default: 1%% of release 1's)")
    later.add_argument(
        "--changed",
        type=int,
        default=None,
        help="papers whose title and/or abstract change (default: 2%% of release 1's)",
    )


def _add_artifacts(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("artifacts", help="list each stage's versions, row counts and paths for a snapshot")
    p.add_argument("--snapshot", required=True)
    p.add_argument("--artifacts", default="artifacts", help="artifact root (default: ./artifacts)")
    p.add_argument("--json", action="store_true", help="print the manifests as JSON")


def _add_verify(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verify",
        help="check every committed version against its manifest: file set, sizes, content hashes, row counts",
        description="Re-hash every file of every committed version (or those of one snapshot / stage) and "
        "compare with its manifest. Exit status 0: all intact; 1: damage found (citeflow run --repair "
        "moves damaged versions aside and rebuilds them).",
    )
    p.add_argument("--snapshot", default=None, help="only this snapshot (default: every snapshot under the root)")
    p.add_argument("--stage", choices=STAGES, default=None, help="only this stage (default: every stage)")
    p.add_argument("--artifacts", default="artifacts", help="artifact root (default: ./artifacts)")


def _add_benchmark(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "benchmark",
        help="score any model's paper embeddings on SciDocs / SciRepEval tasks, or on MTEB's SCIDOCS retrieval",
        description="Score embeddings Parquet files (an id column and 'embedding') on the SciDocs "
        "tasks of a folder in the original layout, on SciRepEval-format task files and, with --beir, on a BEIR "
        "folder as MTEB scores its SCIDOCS task (title queries searching the whole corpus, nDCG@10: a different "
        "benchmark from SciDocs' cite task, reported apart and never in SciDocs' average; docs/benchmarks-mteb.md).",
    )
    p.add_argument(
        "--embeddings",
        action="append",
        required=True,
        metavar="PARQUET",
        help="embeddings to score (file or folder); repeat to compare models side by side",
    )
    p.add_argument("--label", action="append", default=[], help="a name per --embeddings (default: file name)")
    p.add_argument("--scidocs", default="", help="SciDocs folder (original layout)")
    p.add_argument(
        "--scirepeval",
        action="append",
        default=[],
        metavar="PATH",
        help="SciRepEval task list (scirepeval_tasks.jsonl, data in the reference layout), a folder holding one, or "
        "flat task record files; papers are looked up in --embeddings",
    )
    p.add_argument(
        "--model",
        default="",
        help="local model folder that made the embeddings: embeds SciRepEval papers missing from --embeddings and "
        "the queries of ad-hoc search (classification, regression and proximity need no model)",
    )
    mteb = p.add_argument_group(
        "MTEB retrieval (--beir)",
        "a BEIR folder scored as MTEB 2.26 scores its retrieval task: exact search over the whole corpus, "
        "nDCG@10 main score; rows labelled with the MTEB task name and suite mteb",
    )
    mteb.add_argument(
        "--beir", default="", metavar="DIR", help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv"
    )
    mteb.add_argument(
        "--query-embeddings",
        action="append",
        default=[],
        metavar="PARQUET",
        help="the queries' vectors (by query id), one per --embeddings; MTEB encodes a query's text alone (for "
        "SCIDOCS a paper title). Without it, --model embeds the queries",
    )
    mteb.add_argument("--mteb-task", default="SCIDOCS", help="the MTEB retrieval task the folder is (default SCIDOCS)")
    mteb.add_argument(
        "--similarity",
        choices=["cosine", "dot"],
        default=None,
        help="the model's similarity function (default: the task's, cosine, as MTEB uses for a sentence-transformers "
        "model that declares none)",
    )
    mteb.add_argument(
        "--ignore-identical-ids",
        action="store_const",
        const=True,
        default=None,
        help="drop the document whose id is the query's from its ranking (not SCIDOCS' setting: MTEB keeps it)",
    )
    p.add_argument(
        "--split",
        action="append",
        choices=["test", "val"],
        default=[],
        help="SciDocs splits to score (default: test; val: the reference's val_or_test='val')",
    )
    p.add_argument("--out", required=True, help="folder for scores.parquet, report.md, report.html, scores.png")


def _add_export_model(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export-model",
        help="a snapshot's trained model and its model card in one folder, loadable with transformers' AutoModel "
        "and with sentence-transformers",
    )
    p.add_argument("--snapshot", required=True, help="snapshot id")
    p.add_argument("--strategy", required=True, choices=list(STRATEGIES), help="triplet strategy of the model")
    p.add_argument("--out", required=True, help="output folder (absent or empty, unless --overwrite)")
    p.add_argument("--artifacts", default="artifacts", help="artifact root (default: ./artifacts)")
    p.add_argument("--overwrite", action="store_true", help=OVERWRITE_EXPORT_HELP)
    p.add_argument("--benchmark", help="the benchmark version to export (needed when the strategy has several)")


def _add_export_dataset(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export-dataset",
        help="copy a stage version's tables and a dataset card into one folder, loadable with Hugging Face datasets",
    )
    p.add_argument("--snapshot", required=True, help="snapshot id")
    p.add_argument("--stage", required=True, choices=list(STAGES), help="the stage whose tables to export")
    p.add_argument("--version", help="the version to export (needed when the stage has several)")
    p.add_argument("--tables", help="comma-separated tables to export (default: every table of the version)")
    p.add_argument("--out", required=True, help="output folder (absent or empty, unless --overwrite)")
    p.add_argument("--artifacts", default="artifacts", help="artifact root (default: ./artifacts)")
    p.add_argument("--overwrite", action="store_true", help=OVERWRITE_EXPORT_HELP)


OVERWRITE_EXPORT_HELP = (
    "replace a previous citeflow export at --out (one that holds only the files its .citeflow-export.json "
    "lists); any other non-empty folder is refused"
)


def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="what a later release changed: graph, graph and encoder embeddings, triplets and scores of two snapshots",
    )
    p.add_argument("--snapshot", action="append", required=True, help="the earlier release, then the later one")
    p.add_argument("--strategy", choices=list(STRATEGIES), help="the strategy compared (needed when there are two)")
    p.add_argument("--artifacts", default="artifacts", help="artifact root (default: ./artifacts)")


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="put named benchmark versions of a snapshot side by side in one report")
    p.add_argument("--snapshot", required=True, help="snapshot id")
    p.add_argument(
        "--benchmark", action="append", required=True, help="a benchmark version (repeatable; see citeflow artifacts)"
    )
    p.add_argument("--out", required=True, help="folder for report.md, report.html, scores.png")
    p.add_argument("--artifacts", default="artifacts", help="artifact root (default: ./artifacts)")


def _add_spark_server(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "spark-server",
        help="run a Spark Connect server with citeflow's driver settings until interrupted; stages run as its "
        "clients with --set spark.remote=sc://HOST:PORT, without a JVM start or warm-up of their own",
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: Spark Connect has no login)"
    )
    p.add_argument("--port", type=int, default=15002, help="port to listen on (default 15002)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="spark.KEY=VALUE",
        help="a spark setting (citeflow settings), e.g. spark.driver_memory=8g or spark.master=local[4]",
    )
    _add_settings(p)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="citeflow",
        description="The `citeflow` command line: a thin layer over the stage entry points.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_generate(sub)
    _add_run(sub)
    _add_artifacts(sub)
    _add_verify(sub)
    _add_benchmark(sub)
    _add_export_model(sub)
    _add_export_dataset(sub)
    _add_compare(sub)
    _add_report(sub)
    sub.add_parser("settings", help="list every setting --set accepts")
    _add_spark_server(sub)
    return parser
