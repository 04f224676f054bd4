"""`citeflow generate`, `run`, `artifacts`, `verify` and `settings`: each parses nothing, takes the parsed
arguments and returns an exit status."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from citeflow.config import (
    SNAPSHOT_ID_RE,
    RunConfig,
    SparkConfig,
    apply_overrides,
    describe,
    profile_overrides,
)
from citeflow.errors import CiteflowError
from citeflow.registry import REGISTRY, REPORTS, STAGES, STRATEGIES


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
    from citeflow.synthcorpus.config import GenerateConfig
    from citeflow.synthcorpus.generate import run

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
    from citeflow.synthcorpus.derive import DeriveConfig, run

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


def overrides_from_args(args: argparse.Namespace, section: str = "") -> list[str]:
    """The settings files' overrides (`$CITEFLOW_SETTINGS`, then `--settings`; with `section`, that section's
    only: one file serves `run` and `spark-server`), then `--set`'s; a warning on stderr for each `--set` that
    holds a secret (named, never shown), which every local user can read in this process's command line."""
    from citeflow.config.settings_file import settings_overrides
    from citeflow.redaction import redact_setting

    for item in args.overrides:
        if redact_setting(item) != item:
            print(
                f"citeflow: warning: --set {redact_setting(item)} holds a secret, which every local user can read "
                "on this command line; put it in a settings file instead (--settings FILE, docs/secrets.md)",
                file=sys.stderr,
            )
    files = settings_overrides(getattr(args, "settings", []))
    if section:
        files = [item for item in files if item.startswith(f"{section}.")]
    return [*files, *args.overrides]


def run_config_from_args(args: argparse.Namespace) -> RunConfig:
    config = RunConfig(
        snapshot=args.snapshot,
        corpus=args.corpus,
        scidocs=args.scidocs,
        paper_ids=args.paper_ids,
        artifacts=args.artifacts,
    )
    repair = ["store.repair=true"] if getattr(args, "repair", False) else []
    return apply_overrides(config, [*profile_overrides(args.profile), *overrides_from_args(args), *repair])


def cmd_run(args: argparse.Namespace) -> int:
    from citeflow.jobs.pipeline import run_pipeline

    config = run_config_from_args(args)
    strategies = None
    if args.strategy:
        strategies = list(STRATEGIES) if args.strategy == "both" else [args.strategy]
    manifests = run_pipeline(config, until=args.until, strategies=strategies)
    where = manifests[-1].path.rsplit("/", 2)[0] if manifests else config.artifacts
    print(f"artifacts of snapshot {config.snapshot}: {where}")
    return 0


def cmd_artifacts(args: argparse.Namespace) -> int:
    from citeflow.artifacts import ArtifactStore

    store = ArtifactStore(args.artifacts)
    scanned = {stage: store.scan(args.snapshot, stage) for stage in (*STAGES, *REPORTS)}
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
        unfinished = [f"{s}/{v}" for s in scanned for v in store.incomplete_versions(args.snapshot, s)]
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
            if stage == "build_graph":
                _print_lossy(m.metrics)
            if stage == "filter_leakage":
                _print_leakage(m.metrics)
            if stage == "mine_triplets":
                _print_triplets(m.metrics)
            if stage == "drift":
                from citeflow.jobs.drift import table_text

                print(f"      against snapshot {m.config.get('before')} ({m.config.get('strategy')}):")
                print("\n".join(f"      {line}" for line in table_text(m).splitlines()))
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
    from citeflow.artifacts import ArtifactStore
    from citeflow.config import validate_snapshot_id
    from citeflow.manifest import MANIFEST_FORMAT

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
                if manifest is None:  # its manifest could not be read: scan gives the damage found instead
                    problems, files = (damage.problems if damage is not None else []), 0
                else:
                    problems, files = store.verify(manifest), len(manifest.contents)
                if problems:
                    counts["damaged"] += 1
                    print(f"DAMAGED     {label}")
                    for problem in problems:
                        print(f"              {problem}")
                else:
                    counts["intact"] += 1
                    print(f"ok          {label}  ({files} files)")
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


def _print_lossy(metrics: dict) -> None:
    """build_graph's `lossy_text`, when any field has papers holding U+FFFD (nothing for a version without it)."""
    lossy = metrics.get("lossy_text")
    if lossy:
        counts = ", ".join(f"{field} {n:,}" for field, n in lossy.items())
        print(f"      lossy text (bytes that are not UTF-8 replaced by U+FFFD), papers per field: {counts}")


def _print_leakage(metrics: dict) -> None:
    """The leakage report of a filter_leakage version, one line per suite, task and split (an older version's
    report has no suites: its rows are SciDocs')."""
    print(
        f"      mode {metrics['mode']}: {metrics['mapped']:,} of {metrics['benchmark_ids']:,} benchmark ids mapped "
        f"({metrics['unmapped']:,} unmapped), {metrics['removed_papers']:,} papers and "
        f"{metrics['removed_citations']:,} citations removed"
    )
    if metrics.get("strict"):
        print(
            f"      strict: {metrics['strict']['papers']:,} papers one citation away from a benchmark paper and "
            f"{metrics['strict']['edges']:,} of their edges removed besides"
        )
    for name, why in metrics.get("unaudited", {}).items():
        print(f"      not audited: SciRepEval task {name!r} ({why})")
    methods = [m for m, n in metrics["mapped_by"].items() if n]
    counts = ["removed_papers", "removed_edges"] if "removed_edges" in metrics["report"][0] else []
    counts += ["one_hop_papers", "one_hop_edges"] if metrics.get("strict") else []
    heads = {
        "removed_papers": "papers",
        "removed_edges": "edges",
        "one_hop_papers": "1-hop",
        "one_hop_edges": "1-hop e",
    }
    print(
        f"      {'suite/task/split':<34}{'total':>8}"
        + "".join(f"{m:>10}" for m in methods)
        + f"{'unmapped':>10}"
        + "".join(f"{heads[c]:>10}" for c in counts)
    )
    for row in metrics["report"]:
        label = "/".join(str(row[k]) for k in ("suite", "task", "split") if k in row)
        print(
            f"      {label:<34}{row['total']:>8}"
            + "".join(f"{row['mapped_' + m]:>10}" for m in methods)
            + f"{row['unmapped']:>10}"
            + "".join(f"{row[c]:>10}" for c in counts)
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


def cmd_settings(_args: argparse.Namespace) -> int:
    defaults = RunConfig(snapshot="x", corpus="x")
    for f in dataclasses.fields(RunConfig):
        value = getattr(defaults, f.name)
        if not dataclasses.is_dataclass(value):
            continue
        stage = REGISTRY.get(f.name)
        if stage is None:
            print(f"[{f.name}]")
        else:
            after = f", after {', '.join(stage.upstream)}" if stage.upstream else ""
            once = "once per triplet strategy" if stage.per_strategy else "shared by every strategy"
            print(f"[{f.name}] stage {STAGES.index(f.name) + 1} of {len(STAGES)}{after}, {once}: {stage.summary}")
            print(f"  tables: {', '.join(stage.tables)}")
        for name, type_name, default, help_text in describe(type(value)):
            print(f"  {f.name}.{name} ({type_name}, default {default!r})\n      {help_text}")
    return 0


@dataclasses.dataclass(frozen=True)
class _ServerSettings:
    """What `citeflow spark-server --set` may set: the spark section only."""

    spark: SparkConfig = dataclasses.field(default_factory=SparkConfig)


def cmd_spark_server(args: argparse.Namespace) -> int:
    """Run a Spark Connect server (spark/engine/connect_server.py) in the foreground until Ctrl-C or SIGTERM."""
    import signal

    from citeflow.spark.engine import connect_server as CS

    spark = apply_overrides(_ServerSettings(), overrides_from_args(args, "spark")).spark
    CS.check_address(args.host, args.port)
    if not CS.is_loopback(args.host):
        print(
            f"citeflow: warning: listening on {args.host}: anyone who reaches it can run Spark jobs as this user "
            "(Spark Connect has no login)",
            file=sys.stderr,
        )

    def terminated(*_: object) -> None:
        raise SystemExit(143)

    signal.signal(signal.SIGTERM, terminated)
    try:
        with CS.running(spark, args.host, args.port) as server:
            print(
                f"Spark Connect server at {server.remote} (master {spark.master}, driver memory "
                f"{spark.driver_memory}); run stages with --set spark.remote={server.remote}; Ctrl-C stops it",
                flush=True,
            )
            code = server.process.wait()
    except KeyboardInterrupt:
        print("citeflow: Spark Connect server stopped", file=sys.stderr)
        return 0
    print(f"citeflow: the Spark Connect server exited on its own ({code})", file=sys.stderr)
    return 1
