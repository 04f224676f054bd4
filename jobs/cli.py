"""The `citeflow` command line: a thin layer over the stage entry points.

    citeflow generate --papers 20000 --out demo/snapshot [--seed 0] [--format s2orc|s2ag]
    citeflow generate --derive-from demo/snapshot --out demo/snapshot-2 [--added N] [--removed N] [--changed N]
    citeflow run --snapshot demo --corpus demo/snapshot/corpus [--until build_graph]
                 [--scidocs DIR] [--paper-ids DIR] [--artifacts ROOT] [--set stage.key=value ...]
    citeflow artifacts --snapshot demo [--artifacts ROOT] [--json]
    citeflow settings          # every setting `--set` accepts, with its default and help

User mistakes (bad ids, missing paths, unknown settings) print one line and
exit with status 2; a traceback means a bug.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys

from citeflow.config import PROFILES, STAGES, RunConfig, apply_overrides, describe, profile_overrides
from citeflow.errors import CiteflowError


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
        help="named settings applied before --set: demo (small, this machine) or full (published settings)",
    )
    p.add_argument(
        "--strategy",
        choices=["scincl", "specter", "both"],
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


def _add_benchmark(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "benchmark",
        help="score any model's paper embeddings on SciDocs / SciRepEval tasks",
        description="Score embeddings Parquet files (an id column and 'embedding') on the SciDocs "
        "tasks of a folder in the original layout and on SciRepEval-format task files.",
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
        help="SciRepEval task file or folder (needs --model to embed its papers)",
    )
    p.add_argument("--model", default="", help="local model folder that made the embeddings (for SciRepEval tasks)")
    p.add_argument("--out", required=True, help="folder for scores.parquet, report.md, report.html, scores.png")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="citeflow", description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_generate(sub)
    _add_run(sub)
    _add_artifacts(sub)
    _add_benchmark(sub)
    sub.add_parser("settings", help="list every setting --set accepts")
    return parser


class _ProgressBar:
    """A tqdm bar on a terminal (none otherwise) for `run(..., progress=)`: made at the first report, which
    brings the total."""

    def __init__(self, desc: str) -> None:
        self.desc, self.bar = desc, None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=self.desc, unit="file", disable=None)
        self.bar.update(done - self.bar.n)

    def __enter__(self) -> _ProgressBar:
        return self

    def __exit__(self, *_: object) -> None:
        if self.bar is not None:
            self.bar.close()


def cmd_generate(args: argparse.Namespace) -> int:
    if args.derive_from is not None:
        return _derive(args)
    from citeflow.synth.config import GenerateConfig
    from citeflow.synth.generate import run

    if args.papers is None:
        raise CiteflowError("--papers is required (or --derive-from RELEASE_DIR for a later release of a snapshot)")
    given = [f"--{name}" for name in ("added", "removed", "changed") if getattr(args, name) is not None]
    if given:
        raise CiteflowError(f"{', '.join(given)} only apply with --derive-from RELEASE_DIR")
    args.format = args.format or "s2orc"
    config = GenerateConfig(
        papers=args.papers,
        out=args.out,
        seed=args.seed,
        format=args.format,
        shards=args.shards,
        overwrite=args.overwrite,
        **({} if args.difficulty is None else {"difficulty": args.difficulty}),
    )
    with _ProgressBar("citeflow generate") as bar:
        summary = run(config, progress=bar)
    counts = summary["counts"]
    print(
        f"wrote a {args.format} snapshot of {counts['papers']:,} papers and {counts['citations']:,} citations "
        f"to {args.out}"
    )
    print(f"  corpus:    {args.out}/corpus\n  scidocs:   {args.out}/scidocs\n  paper-ids: {args.out}/paper-ids")
    print(f"  truth:     {args.out}/generator.json")
    return 0


def _derive(args: argparse.Namespace) -> int:
    from citeflow.synth.derive import DeriveConfig, run

    given = [f"--{name}" for name in ("papers", "format", "shards", "difficulty") if getattr(args, name) is not None]
    if given:
        raise CiteflowError(
            f"{', '.join(given)} cannot be used with --derive-from: a derived release keeps "
            "release 1's layout, shards and difficulty, and --added / --removed / --changed set its size"
        )
    summary = run(
        DeriveConfig(
            derive_from=args.derive_from,
            out=args.out,
            added=args.added,
            removed=args.removed,
            changed=args.changed,
            seed=args.seed,
            overwrite=args.overwrite,
        )
    )
    d, counts = summary["diff"], summary["counts"]
    print(
        f"wrote release {summary['release']} ({summary['format']}) of {counts['papers']:,} papers and "
        f"{counts['citations']:,} citations to {args.out}: {d['added']:,} added, {d['removed']:,} removed, "
        f"{d['changed']:,} changed"
    )
    print(f"  corpus:    {args.out}/corpus\n  diff:      {args.out}/release_diff.parquet")
    print(f"  truth:     {args.out}/generator.json")
    return 0


def run_config_from_args(args: argparse.Namespace) -> RunConfig:
    config = RunConfig(
        snapshot=args.snapshot,
        corpus=args.corpus,
        scidocs=args.scidocs,
        paper_ids=args.paper_ids,
        artifacts=args.artifacts,
    )
    return apply_overrides(config, [*profile_overrides(args.profile), *args.overrides])


def cmd_run(args: argparse.Namespace) -> int:
    from jobs.pipeline import run_pipeline

    config = run_config_from_args(args)
    strategies = None
    if args.strategy:
        strategies = ["scincl", "specter"] if args.strategy == "both" else [args.strategy]
    manifests = run_pipeline(config, until=args.until, strategies=strategies)
    where = manifests[-1].path.rsplit("/", 2)[0] if manifests else config.artifacts
    print(f"artifacts of snapshot {config.snapshot}: {where}")
    return 0


def cmd_artifacts(args: argparse.Namespace) -> int:
    from citeflow.artifacts import ArtifactStore

    store = ArtifactStore(args.artifacts)
    found = {stage: store.list_versions(args.snapshot, stage) for stage in STAGES}
    if args.json:
        print(json.dumps({s: [m.to_json() | {"path": m.path} for m in ms] for s, ms in found.items() if ms}, indent=2))
        return 0
    if not any(found.values()):
        known = ", ".join(store.snapshots()) or "none"
        raise CiteflowError(f"no artifacts for snapshot {args.snapshot!r} under {store.uri} (snapshots there: {known})")
    print(f"snapshot {args.snapshot} in {store.uri}")
    for stage, manifests in found.items():
        if not manifests:
            continue
        print(f"{stage}")
        for m in manifests:
            print(f"  {m.version}  finished {m.finished_at}  ({m.duration_s:.1f}s)  {m.path}")
            for name, table in m.tables.items():
                print(f"      {name:<18} {table['rows']:>14,} rows  {table['files']} files")
            if stage == "filter_leakage":
                _print_leakage(m.metrics)
            if stage == "mine_triplets":
                _print_triplets(m.metrics)
            if stage == "benchmark":
                for which in ("trained", "base"):
                    if which in m.metrics and m.metrics[which]["average"] is not None:
                        print(
                            f"      {m.metrics['strategy']} {which}: {m.metrics[which]['average_label']} "
                            f"= {m.metrics[which]['average']:.2f}"
                        )
        if stage == "benchmark" and manifests:
            print(f"  report: {store.stage_path(args.snapshot, stage)}/report.html")
        incomplete = store.incomplete_versions(args.snapshot, stage)
        if incomplete:
            print(f"  incomplete (killed runs, removed on the next run): {', '.join(incomplete)}")
    return 0


def _print_leakage(metrics: dict) -> None:
    """The leakage report of a filter_leakage version, one line per task and split."""
    print(
        f"      mode {metrics['mode']}: {metrics['mapped']:,} of {metrics['benchmark_ids']:,} benchmark ids mapped "
        f"({metrics['unmapped']:,} unmapped), {metrics['removed_papers']:,} papers and "
        f"{metrics['removed_citations']:,} citations removed"
    )
    methods = [m for m, n in metrics["mapped_by"].items() if n]
    print(f"      {'task/split':<22}{'total':>8}" + "".join(f"{m:>10}" for m in methods) + f"{'unmapped':>10}")
    for row in metrics["report"]:
        print(
            f"      {row['task'] + '/' + row['split']:<22}{row['total']:>8}"
            + "".join(f"{row['mapped_' + m]:>10}" for m in methods)
            + f"{row['unmapped']:>10}"
        )


def _print_triplets(metrics: dict) -> None:
    """One line per mine_triplets version: what was mined and where its papers lie in the graph space."""
    ranks = metrics.get("rank_summary", {})
    medians = ", ".join(f"{kind} {ranks[kind]['median']:g}" for kind in ("positive", "hard", "easy") if kind in ranks)
    print(
        f"      {metrics['strategy']}: {metrics['queries']:,} queries, {metrics['negatives']['hard']:,} hard and "
        f"{metrics['negatives']['easy']:,} easy negatives, {metrics['collisions']:,} collisions; "
        f"median neighbour rank: {medians or 'n/a'}"
    )


def cmd_benchmark(args: argparse.Namespace) -> int:
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    from evaluation.report import write_report
    from jobs.benchmark import load_embeddings, score, scores_schema

    if not args.scidocs and not args.scirepeval:
        raise CiteflowError("nothing to score: give --scidocs DIR and/or --scirepeval PATH")
    if args.scidocs and not Path(args.scidocs).is_dir():
        raise CiteflowError(f"SciDocs folder {args.scidocs!r} does not exist")
    if args.label and len(args.label) != len(args.embeddings):
        raise CiteflowError("give one --label per --embeddings, or none")
    labels = args.label or [Path(p).stem for p in args.embeddings]
    rows = []
    for label, path in zip(labels, args.embeddings, strict=True):
        scored = score(
            load_embeddings(path),
            Path(args.scidocs) if args.scidocs else None,
            tuple(args.scirepeval),
            args.model or None,
        )
        for row in scored:
            row.update(model=label, label=label, model_version="", strategy="", leakage_mode="")
        rows += scored
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=scores_schema()), out / "scores.parquet")
    report = write_report(rows, out, "citeflow benchmark")
    for row in rows:
        if row["status"] == "ok" and row["split"] == "test":
            print(f"{row['label']:<24} {row['task']:<22} {row['metric']:<12} {row['value']:7.2f}  (n={row['n']})")
    print(f"report: {report['html']}")
    return 0


def cmd_settings(_args: argparse.Namespace) -> int:
    defaults = RunConfig(snapshot="x", corpus="x")
    for f in dataclasses.fields(RunConfig):
        value = getattr(defaults, f.name)
        if not dataclasses.is_dataclass(value):
            continue
        print(f"[{f.name}]")
        for name, type_name, default, help_text in describe(type(value)):
            print(f"  {f.name}.{name} ({type_name}, default {default!r})\n      {help_text}")
    return 0


COMMANDS = {
    "generate": cmd_generate,
    "run": cmd_run,
    "artifacts": cmd_artifacts,
    "settings": cmd_settings,
    "benchmark": cmd_benchmark,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    for noisy in ("py4j", "matplotlib", "faiss"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return COMMANDS[args.command](args)
    except CiteflowError as exc:
        print(f"citeflow: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("citeflow: interrupted; incomplete artifacts are cleaned up on the next run", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
