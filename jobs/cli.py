"""The `citeflow` command line: a thin layer over the stage entry points.

    citeflow generate --papers 20000 --out demo/snapshot [--seed 0] [--format s2orc|s2ag]
    citeflow generate --derive-from demo/snapshot --out demo/snapshot-2 [--added N] [--removed N] [--changed N]
    citeflow run --snapshot demo --corpus demo/snapshot/corpus [--until build_graph]
                 [--scidocs DIR] [--paper-ids DIR] [--artifacts ROOT] [--set stage.key=value ...]
    citeflow artifacts --snapshot demo [--artifacts ROOT] [--json]
    citeflow verify [--snapshot demo] [--stage build_graph] [--artifacts ROOT]
    citeflow settings          # every setting `--set` accepts, with its default and help
    citeflow benchmark --embeddings E.parquet --scidocs DIR [--scirepeval scirepeval_tasks.jsonl] --out DIR
    citeflow export-model --snapshot demo --strategy scincl --out DIR [--artifacts ROOT]
    citeflow report --snapshot demo --benchmark V1 --benchmark V2 --out DIR [--artifacts ROOT]

User mistakes (bad ids, missing paths, unknown settings) print one line and
exit with status 2; a traceback means a bug.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys

from citeflow.config import (
    PROFILES,
    SNAPSHOT_ID_RE,
    STAGES,
    RunConfig,
    apply_overrides,
    describe,
    profile_overrides,
)
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
    p.add_argument(
        "--repair",
        action="store_true",
        help="re-hash every version the run reads; move damaged ones aside to <stage>/.damaged/ and rebuild them "
        "(same as --set store.repair=true)",
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
        help="SciRepEval task list (scirepeval_tasks.jsonl, data in the reference layout), a folder holding one, or "
        "flat task record files; papers are looked up in --embeddings",
    )
    p.add_argument(
        "--model",
        default="",
        help="local model folder that made the embeddings: embeds SciRepEval papers missing from --embeddings and "
        "the queries of ad-hoc search (classification, regression and proximity need no model)",
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
        help="copy a snapshot's trained model and its model card into one folder, loadable with AutoModel",
    )
    p.add_argument("--snapshot", required=True, help="snapshot id")
    p.add_argument("--strategy", required=True, choices=["scincl", "specter"], help="triplet strategy of the model")
    p.add_argument("--out", required=True, help="output folder (absent or empty, unless --overwrite)")
    p.add_argument("--artifacts", default="artifacts", help="artifact root (default: ./artifacts)")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty output folder")
    p.add_argument("--benchmark", help="the benchmark version to export (needed when the strategy has several)")


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="put named benchmark versions of a snapshot side by side in one report")
    p.add_argument("--snapshot", required=True, help="snapshot id")
    p.add_argument(
        "--benchmark", action="append", required=True, help="a benchmark version (repeatable; see citeflow artifacts)"
    )
    p.add_argument("--out", required=True, help="folder for report.md, report.html, scores.png")
    p.add_argument("--artifacts", default="artifacts", help="artifact root (default: ./artifacts)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="citeflow", description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_generate(sub)
    _add_run(sub)
    _add_artifacts(sub)
    _add_verify(sub)
    _add_benchmark(sub)
    _add_export_model(sub)
    _add_report(sub)
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
    repair = ["store.repair=true"] if getattr(args, "repair", False) else []
    return apply_overrides(config, [*profile_overrides(args.profile), *args.overrides, *repair])


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
    scanned = {stage: store.scan(args.snapshot, stage) for stage in STAGES}
    found = {
        stage: sorted((m for _, m, _ in versions if m is not None), key=lambda m: (m.finished_at, m.version))
        for stage, versions in scanned.items()
    }
    if args.json:
        from citeflow.redaction import redact

        listing = {s: [redact(m.to_json()) | {"path": m.path} for m in ms] for s, ms in found.items() if ms}
        print(json.dumps(listing, indent=2))  # redacted again: manifests written before redaction may hold secrets
        return 0
    if not any(scanned.values()):
        known = ", ".join(store.snapshots()) or "none"
        unfinished = [f"{s}/{v}" for s in STAGES for v in store.incomplete_versions(args.snapshot, s)]
        more = f"; unfinished (being built, or killed runs): {', '.join(unfinished)}" if unfinished else ""
        raise CiteflowError(
            f"no artifacts for snapshot {args.snapshot!r} under {store.uri} (snapshots there: {known}){more}"
        )
    print(f"snapshot {args.snapshot} in {store.uri}")
    for stage, manifests in found.items():
        damaged = [(v, d) for v, _, d in scanned[stage] if d is not None]
        incomplete = store.incomplete_versions(args.snapshot, stage)
        if not manifests and not damaged and not incomplete:
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
                    if which in m.metrics and m.metrics[which].get("mean") is not None:
                        print(
                            f"      {m.metrics['strategy']} {which}: {m.metrics[which]['average_label']} "
                            f"= {m.metrics[which]['mean']:.2f}"
                        )
        for version, damage in damaged:
            print(f"  {version}  DAMAGED: {damage.problems[0] if damage.problems else damage}")
        if stage == "benchmark" and manifests:
            print(
                f"  reports: <version>/report.html; side by side: citeflow report --snapshot {args.snapshot} "
                f"--benchmark V1 --benchmark V2 --out DIR"
            )
        building = [v for v in incomplete if store.being_built(args.snapshot, stage, v)]
        if building:
            print(f"  being built now (a live run holds the lease): {', '.join(building)}")
        killed = [v for v in incomplete if v not in building]
        if killed:
            print(f"  incomplete (killed runs, removed on the next run): {', '.join(killed)}")
    if any(d for versions in scanned.values() for _, _, d in versions):
        print("damaged versions are not used; `citeflow run ... --repair` moves them aside and rebuilds them")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Full verification of committed versions; exit 1 when any is damaged."""
    from citeflow.artifacts import MANIFEST_FORMAT, ArtifactStore
    from citeflow.config import validate_snapshot_id

    store = ArtifactStore(args.artifacts)
    if args.snapshot is not None:
        snapshots = [validate_snapshot_id(args.snapshot)]
    else:
        snapshots = [s for s in store.snapshots() if SNAPSHOT_ID_RE.fullmatch(s)]
    stages = [args.stage] if args.stage else list(STAGES)
    counts = {"intact": 0, "damaged": 0, "unverifiable": 0}
    for snapshot in snapshots:
        for stage in stages:
            for version, manifest, damage in store.scan(snapshot, stage):
                label = f"{snapshot}/{stage}/{version}"
                if manifest is not None and manifest.manifest_format < MANIFEST_FORMAT:
                    counts["unverifiable"] += 1
                    print(f"UNVERIFIED  {label}: manifest format {manifest.manifest_format} lists no files")
                    continue
                problems = damage.problems if damage is not None else store.verify(manifest)
                if problems:
                    counts["damaged"] += 1
                    print(f"DAMAGED     {label}")
                    for problem in problems:
                        print(f"              {problem}")
                else:
                    counts["intact"] += 1
                    print(f"ok          {label}  ({len(manifest.contents)} files)")
    total = sum(counts.values())
    if total == 0:
        where = f"snapshot {args.snapshot!r}" if args.snapshot else "any snapshot"
        raise CiteflowError(f"no committed versions of {where} under {store.uri}")
    print(
        f"{total} versions: {counts['intact']} intact, {counts['damaged']} damaged, "
        f"{counts['unverifiable']} unverifiable"
    )
    if counts["damaged"]:
        print(
            "citeflow: damaged versions found; `citeflow run ... --repair` moves them aside and rebuilds them",
            file=sys.stderr,
        )
        return 1
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
    from jobs.benchmark import load_embeddings, score, scores_schema, table_rows

    if not args.scidocs and not args.scirepeval:
        raise CiteflowError("nothing to score: give --scidocs DIR and/or --scirepeval PATH")
    if args.scidocs and not Path(args.scidocs).is_dir():
        raise CiteflowError(f"SciDocs folder {args.scidocs!r} does not exist")
    for path in args.scirepeval:
        if not Path(path).exists():
            raise CiteflowError(f"SciRepEval path {path!r} does not exist")
    if args.model and not Path(args.model).is_dir():
        raise CiteflowError(f"model folder {args.model!r} does not exist")
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
            splits=tuple(dict.fromkeys(args.split or ["test"])),
        )
        for row in scored:
            row.update(model=label, label=label, model_version=path, strategy="", leakage_mode="")
        rows += scored
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(table_rows(rows), schema=scores_schema()), out / "scores.parquet")
    report = write_report(rows, out, "citeflow benchmark")
    for row in rows:
        if row["value"] is not None:
            print(
                f"{row['label']:<20} {row['split']:<5} {row['task']:<40} {row['metric']:<10} {row['value']:7.2f}"
                f"  (n={row['n']}{', ' + row['average_label'] if row['average_label'] else ''})"
            )
        elif row["task"] == "average":
            print(f"{row['label']:<20} {row['split']:<5} average: {row['average_label']}; no average of 12")
    print(f"report: {report['html']}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from citeflow.artifacts import ArtifactStore
    from jobs.benchmark import compare_report

    report = compare_report(ArtifactStore(args.artifacts), args.snapshot, args.benchmark, Path(args.out))
    print(f"report: {report['html']}")
    return 0


def cmd_export_model(args: argparse.Namespace) -> int:
    from jobs.export_model import export_model

    target = export_model(
        snapshot=args.snapshot,
        strategy=args.strategy,
        out=args.out,
        artifacts=args.artifacts,
        overwrite=args.overwrite,
        benchmark=args.benchmark,
    )
    print(f"exported the {args.strategy} model of snapshot {args.snapshot} with its model card to {target}")
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
    "verify": cmd_verify,
    "settings": cmd_settings,
    "report": cmd_report,
    "benchmark": cmd_benchmark,
    "export-model": cmd_export_model,
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
