"""Cost per paper and peak memory of every corpus-sized stage, at growing corpus sizes, with DuckDB beside Spark.

    python bench/bench_scale.py --sizes 1000000 5000000 10000000 --snapshots /data/citeflow-snaps \
        --out bench/results --plots docs/img

For each size N, a generated S2AG release R1 of N papers (seed 5, one shard per 50k papers) and R2, derived from
it with `--change` of its papers touched (40% added, 20% removed, 40% changed) and shipping the diff R1 -> R2,
both kept under `--snapshots` and reused (`bench_incremental.py` `releases`). Then, each step its own process,
the next started only once every process of the last has exited (bench_stages.py `measure`):

1. build_graph of R1 (Spark, from the shards), then DuckDB's twin of it on the same shards
   (`duckdb_stages.py build_graph`);
2. filter_leakage of R1 (Spark), then DuckDB's twin on citeflow's build_graph version;
3. embed_graph: PBG partitioned (`--partitions`, default 4 from 1M papers up, 1 below), `--epochs` epochs
   (default 1: the bench times an epoch, SciNCL trains 20), `--dim` (default 64; SciNCL: 768), PBG's
   first-epoch `hogwild_delay` off (2 s per bucket and edge chunk that a one-epoch run would mostly measure;
   SciNCL's 20 epochs pay it once), no held-out run;
4. mine_triplets at SciNCL's pool and query counts (`mine_triplets.pool_size` 680,967 and `num_queries`
   136,820; a smaller release pools every eligible paper and draws a tenth of its papers as queries), exact
   FAISS search;
5. the diff path: R1's artifact root hard-linked into a fresh one, then R2's build_graph from the diff and
   its filter_leakage in one `citeflow run` (each stage's own seconds from its manifest); only at sizes up to
   `--diff-up-to` (R2 is derived only there: deriving costs about twice generating).

Per step: wall seconds, µs per paper (per paper of the release; per edge too), peak resident memory of the
whole process tree sampled every 0.2 s and each role's own peak (`bench_stages.roles`: citeflow's Python
driver, the Spark JVM, which in local mode is the driver and its executors, Spark's Python workers, other
workers such as PBG's), the bytes the stage's version holds, the load average before and after. DuckDB's
counts are checked against citeflow's (papers and citations; benchmark ids and mapped ids).

The report: OUT/scale.json, OUT/scale.md (one table, then per stage the flatness checks: µs per paper at the
largest size against the smallest, goal within 1.25x; peak memory at the largest size against the one before,
goal within 1.5x; citeflow / DuckDB per size, goal at most 2x at the largest), and with `--plots DIR`
DIR/scale-cost.png and DIR/scale-memory.png (log x). Timings mean something only on a quiet machine: the load
average is beside every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_incremental import R1, R2, first_release, from_diff, manifest, releases  # noqa: E402
from bench_stages import HERE, measure, warm_up  # noqa: E402

STAGES = ("build_graph", "filter_leakage", "embed_graph", "mine_triplets", "diff")
SPARK_STAGES = ("build_graph", "filter_leakage")
# docs/reference.md §4: SciNCL's FAISS pool; its 684K triplets / 5 positives
SCINCL_POOL, SCINCL_QUERIES = 680_967, 136_820
# the goals the report judges: per-unit cost, memory growth, Spark against DuckDB
FLAT_COST, BOUNDED_MEMORY, DUCKDB_RATIO = 1.25, 1.5, 2.0
S2ORC_PAPERS = 136_000_000  # S2ORC 20200705v1: 136M papers (../shared/SPEC.md, docs/scaling.md)
LABELS = {"diff": "diff path (build_graph + filter_leakage)"}
# What a stage's work grows with, where it is not the papers: PBG trains on the filtered graph's edges (the
# generated graph grows denser with the corpus, so its edges per paper grow too), mining searches its
# queries against SciNCL's fixed pool (a tenth of the papers below 1.37M)
UNITS = {"embed_graph": ("edge", "edges"), "mine_triplets": ("query", "queries")}


def unit_cost(stage: str, m: dict, papers: int) -> tuple[str, float]:
    """(the unit, µs per unit) of a stage's measured step: per paper, or per `UNITS` count from its metrics."""
    unit, key = UNITS.get(stage, ("paper", None))
    count = m.get("metrics", {}).get(key) if key else papers
    if not count:
        unit, count = "paper", papers
    return unit, m["seconds"] / count * 1e6


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def stage_settings(n: int, args) -> list[str]:
    partitions = args.partitions or (4 if n >= 1_000_000 else 1)
    return [
        f"embed_graph.num_epochs={args.epochs}",
        f"embed_graph.dimension={args.dim}",
        f"embed_graph.num_partitions={partitions}",
        "embed_graph.pbg=hogwild_delay=0",
        "embed_graph.link_prediction=false",
        f"mine_triplets.pool_size={SCINCL_POOL}",  # the stage takes every eligible paper where there are fewer
        f"mine_triplets.num_queries={min(SCINCL_QUERIES, n // 10)}",
    ]


def citeflow_run(rel: Path, release: str, artifacts: Path, until: str, settings: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "citeflow.jobs.cli", "run", "--snapshot", release, "--artifacts", str(artifacts)]
    cmd += ["--corpus", str(rel / release / "corpus"), "--scidocs", str(rel / release / "scidocs")]
    cmd += ["--paper-ids", str(rel / release / "paper-ids"), "--until", until, "--profile", "full"]
    return cmd + [arg for item in settings for arg in ("--set", item)]


def per_size(measured: dict, n: int, edges: int) -> dict:
    measured.pop("output", None)
    measured["us_per_paper"] = round(measured["seconds"] / n * 1e6, 2)
    measured["us_per_edge"] = round(measured["seconds"] / max(1, edges) * 1e6, 3)
    return measured


def duckdb_twin(stage: str, rel: Path, artifacts: Path, out: Path, n: int, edges: int, keep: bool) -> dict:
    """DuckDB's twin of `stage` on R1, timed like a citeflow stage; `counts` as it printed them. Its tables are
    left in `out` where `keep`."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, str(HERE / "duckdb_stages.py"), stage, "--out", str(out)]
    if stage == "build_graph":
        cmd += ["--corpus", str(rel / R1 / "corpus")]
    else:
        graph = manifest(artifacts, R1, "build_graph")["path"]
        cmd += ["--graph", graph, "--scidocs", str(rel / R1 / "scidocs"), "--paper-ids", str(rel / R1 / "paper-ids")]
    measured = measure(cmd)
    measured["counts"] = json.loads(measured["output"].strip().splitlines()[-1])
    measured["output_mib"] = round(folder_bytes(out) / 2**20, 1)
    if not keep:
        shutil.rmtree(out, ignore_errors=True)
    return per_size(measured, n, edges)


def release_pair(root: Path, n: int, change: float, with_successor: bool) -> Path:
    """The folder of R1 (and R2 where `with_successor`) of `n` papers under `root`, generated when absent as
    `bench_incremental.releases` makes them."""
    return releases(root, n, change).root if with_successor else first_release(root, n)


def run_size(n: int, args, work: Path, save: Callable[[dict], None]) -> dict:
    """One size's steps; `save(row)` after each, so that a long run's finished steps are on disk. A step that
    fails (a run out of memory, say) is recorded in the row's `failed` with its output's end, and the size's
    later steps are skipped."""
    stages = [s for s in args.stages if s != "diff" or n <= args.diff_up_to]
    rel = release_pair(Path(args.snapshots) / f"scale-s2ag-{n}", n, args.change, "diff" in stages)
    truth = json.loads((rel / R1 / "generator.json").read_text())
    edges = truth["counts"]["citations"]
    artifacts = work / f"artifacts-{n}"
    shutil.rmtree(artifacts, ignore_errors=True)
    settings = stage_settings(n, args)
    row: dict = {"papers": n, "citations": edges, "settings": settings, "stages": {}, "duckdb": {}}
    row["corpus_gz_mib"] = round(sum(f.stat().st_size for f in (rel / R1 / "corpus").rglob("*.gz")) / 2**20, 1)
    for stage in stages:
        print(f"{n:,} papers: {stage} ...", flush=True)
        try:
            if stage == "diff":
                measured = diff_path(rel, artifacts, work / f"diff-{n}", settings)
            else:
                measured = measure(citeflow_run(rel, R1, artifacts, stage, settings))
                version = manifest(artifacts, R1, stage)
                measured["artifact_mib"] = round(folder_bytes(Path(version["path"])) / 2**20, 1)
                measured["metrics"] = {k: v for k, v in version["metrics"].items() if isinstance(v, (int, float, str))}
        except SystemExit as failed:  # measure's message: the command, its exit status, its output's end
            row["failed"] = {"stage": stage, "message": str(failed)[-3000:]}
            print(f"  {n:,} {stage} failed:\n{row['failed']['message']}", flush=True)
            save(row)
            break
        row["stages"][stage] = per_size(measured, n, edges)
        say(n, stage, measured)
        if stage in SPARK_STAGES and not args.no_duckdb:
            twin = duckdb_twin(stage, rel, artifacts, work / f"duckdb-{n}-{stage}", n, edges, args.keep)
            keys = ("papers", "citations") if stage == "build_graph" else ("benchmark_ids", "mapped", "papers")
            twin["counts_agree"] = all(twin["counts"][k] == measured["metrics"].get(k) for k in (*keys, "citations"))
            twin["ratio"] = round(measured["seconds"] / twin["seconds"], 2)
            row["duckdb"][stage] = twin
            say(n, f"{stage} (DuckDB)", twin)
        save(row)
    if not args.keep:
        shutil.rmtree(artifacts, ignore_errors=True)
    return row


def diff_path(rel: Path, artifacts: Path, root: Path, settings: list[str]) -> dict:
    """R2's build_graph from its diff onto R1's version and its filter_leakage, in a hard-linked copy of R1's
    artifact root (`artifacts`, which must hold R1's filter_leakage); the copy removed after."""
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(artifacts, root, copy_function=os.link)
    measured = measure(citeflow_run(rel, R2, root, "filter_leakage", settings))
    from_diff(root, R2)
    built = {stage: manifest(root, R2, stage) for stage in SPARK_STAGES}
    measured["stage_seconds"] = {stage: round(m["duration_s"], 1) for stage, m in built.items()}
    measured["artifact_mib"] = round(sum(folder_bytes(Path(m["path"])) for m in built.values()) / 2**20, 1)
    metrics = built["build_graph"]["metrics"]
    measured["metrics"] = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str))}
    measured["from_diff"] = metrics["from_diff"]  # what the diff held and what the merge did with it
    shutil.rmtree(root, ignore_errors=True)
    return measured


def say(n: int, stage: str, m: dict) -> None:
    roles = ", ".join(f"{k} {v}" for k, v in m["peak_by_role_gib"].items())
    print(
        f"  {n:,} {stage}: {m['seconds']} s, {m['us_per_paper']} µs/paper, peak {m['peak_rss_gib']} GiB ({roles}), "
        f"load {m['load_before']} -> {m['load_after']}",
        flush=True,
    )


def checks(result: dict) -> list[dict]:
    """Per stage measured at two sizes or more, the flatness checks of the module docstring on the sizes that
    stage ran at: cost per paper at its largest size against its smallest, peak memory at its largest against
    the one before, Spark against DuckDB at its largest."""
    out = []
    for stage in STAGES:
        sizes = sorted((r for r in result["sizes"] if stage in r["stages"]), key=lambda r: r["papers"])
        if len(sizes) < 2:
            continue
        first, before, last = sizes[0], sizes[-2], sizes[-1]
        unit, smallest = unit_cost(stage, first["stages"][stage], first["papers"])
        _, largest = unit_cost(stage, last["stages"][stage], last["papers"])
        cost = largest / smallest
        memory = last["stages"][stage]["peak_rss_gib"] / before["stages"][stage]["peak_rss_gib"]
        row = {
            "stage": stage,
            "sizes": [first["papers"], before["papers"], last["papers"]],
            "unit": unit,
            "us_per_unit": [round(smallest, 3), round(largest, 3)],
            "cost_ratio": round(cost, 2),
            "cost_flat": cost <= FLAT_COST,
            "memory_ratio": round(memory, 2),
            "memory_bounded": memory <= BOUNDED_MEMORY,
        }
        twin = last["duckdb"].get(stage)
        if twin:
            row |= {"duckdb_ratio": twin["ratio"], "duckdb_within": twin["ratio"] <= DUCKDB_RATIO}
        out.append(row)
    return out


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(a, b) of the least-squares line y = a + b x through `points` (x papers); b alone through one point."""
    if len(points) == 1:
        ((x, y),) = points
        return 0.0, y / x
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - b * mx, b


def plan(result: dict, papers: int, cores: int) -> list[dict]:
    """Per stage, its seconds, core-hours and artifact GiB at `papers` papers on the lines fitted through the
    measured sizes (`fit`): a fixed part and a part per paper, each measured, nothing assumed."""
    sizes = result["sizes"]
    rows = []
    for stage in STAGES:
        measured = [r for r in sizes if stage in r["stages"]]
        if not measured:
            continue
        a, b = fit([(r["papers"], r["stages"][stage]["seconds"]) for r in measured])
        mib_a, mib_b = fit([(r["papers"], r["stages"][stage]["artifact_mib"]) for r in measured])
        seconds = a + b * papers
        rows.append(
            {
                "stage": stage,
                "fixed_s": round(a, 1),
                "us_per_paper_marginal": round(b * 1e6, 2),
                "seconds": round(seconds),
                "core_hours": round(seconds * cores / 3600, 1),
                "artifact_gib": round((mib_a + mib_b * papers) / 1024, 1),
            }
        )
    return rows


def report(result: dict) -> str:
    lines = [
        f"# Corpus-sized stages at growing size ({result['machine']})",
        "",
        "Peak GiB: the whole tree, then each role's own peak (driver: citeflow's Python process; JVM: Spark's "
        "driver with its local executors; py workers: Spark's Python workers; workers: PBG's processes).",
        "",
        "| papers | citations | stage | seconds | µs / paper | peak GiB | driver / JVM / py workers / workers GiB "
        "| artifact MiB | DuckDB s | DuckDB GiB | Spark / DuckDB | load before → after |",
        "|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for row in result["sizes"]:
        for stage, m in row["stages"].items():
            by_role = m["peak_by_role_gib"]
            split = " / ".join(str(by_role.get(k, 0)) for k in ("driver", "jvm", "python_workers", "workers"))
            twin = row["duckdb"].get(stage)
            dd = f"{twin['seconds']} | {twin['peak_rss_gib']} | {twin['ratio']}×" if twin else "– | – | –"
            label = LABELS.get(stage, stage)
            if stage == "diff":
                label = "diff path: bg {build_graph} + FL {filter_leakage} s".format(**m["stage_seconds"])
            lines.append(
                f"| {row['papers']:,} | {row['citations']:,} | {label} | {m['seconds']} | {m['us_per_paper']} | "
                f"{m['peak_rss_gib']} | {split} | {m['artifact_mib']} | {dd} | "
                f"{m['load_before']} → {m['load_after']} |"
            )
    for row in result["sizes"]:
        if "failed" in row:
            lines.append(
                f"| {row['papers']:,} | {row['citations']:,} | {row['failed']['stage']} | failed | | | | | | | | |"
            )
    agree = all(t["counts_agree"] for r in result["sizes"] for t in r["duckdb"].values())
    lines += ["", f"DuckDB's counts equal citeflow's at every size: {agree}."]
    found = checks(result)
    if found:
        lines += [
            "",
            f"| stage | µs per unit of work, largest ÷ smallest size (goal ≤ {FLAT_COST}) "
            f"| peak GiB, largest ÷ the size before (goal ≤ {BOUNDED_MEMORY}) "
            f"| Spark ÷ DuckDB at the largest (goal ≤ {DUCKDB_RATIO}) |",
            "|---|---:|---:|---:|",
        ]
        mark = lambda ok: "" if ok else " (missed)"  # noqa: E731
        short = lambda n: f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n:,}"  # noqa: E731
        for c in found:
            first, before, last = map(short, c["sizes"])
            dd = f"{c['duckdb_ratio']}×{mark(c['duckdb_within'])}" if "duckdb_ratio" in c else "–"
            small, large = c["us_per_unit"]
            lines.append(
                f"| {LABELS.get(c['stage'], c['stage'])} | {c['cost_ratio']}×{mark(c['cost_flat'])} "
                f"({last} ÷ {first}: {large:g} ÷ {small:g} µs per {c['unit']}) | "
                f"{c['memory_ratio']}×{mark(c['memory_bounded'])} ({last} ÷ {before}) | {dd} |"
            )
    if len(result["sizes"]) > 1:
        cores = os.cpu_count() or 1
        lines += [
            "",
            f"On the lines fitted through the sizes measured (seconds = fixed + marginal × papers, {cores} cores), at "
            f"S2ORC's {S2ORC_PAPERS:,} papers:",
            "",
            "| stage | fixed s | marginal µs / paper | seconds | core-hours | artifact GiB |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for p in plan(result, S2ORC_PAPERS, cores):
            lines.append(
                f"| {LABELS.get(p['stage'], p['stage'])} | {p['fixed_s']} | {p['us_per_paper_marginal']} | "
                f"{p['seconds']:,} | {p['core_hours']} | {p['artifact_gib']} |"
            )
    lines += ["", "Settings per size:", *(f"- {r['papers']:,}: `{' '.join(r['settings'])}`" for r in result["sizes"])]
    return "\n".join(lines) + "\n"


def plot(result: dict, folder: Path) -> list[Path]:
    """scale-cost.png (µs per paper) and scale-memory.png (peak GiB of the tree), against papers on a log axis:
    one line per stage, DuckDB's twins dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(result["sizes"], key=lambda r: r["papers"])
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, key, ylabel in (
        ("scale-cost.png", "us_per_paper", "µs per paper"),
        ("scale-memory.png", "peak_rss_gib", "peak resident memory of the process tree, GiB"),
    ):
        fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=110, layout="constrained")
        for stage in STAGES:
            points = [(r["papers"], r["stages"][stage][key]) for r in sizes if stage in r["stages"]]
            if points:
                (line,) = ax.plot(*zip(*points, strict=True), marker="o", label=LABELS.get(stage, stage))
                twins = [(r["papers"], r["duckdb"][stage][key]) for r in sizes if stage in r["duckdb"]]
                if twins:
                    ax.plot(
                        *zip(*twins, strict=True), marker="s", ls="--", color=line.get_color(), label=f"{stage}, DuckDB"
                    )
        ax.set_xscale("log")
        ax.set_xlabel("papers in the release")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.set_title(f"{ylabel} ({result['machine']})", fontsize=9)
        fig.legend(loc="outside right center", fontsize=7, frameon=False)
        fig.savefig(folder / name)
        plt.close(fig)
        written.append(folder / name)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 5_000_000, 10_000_000])
    parser.add_argument("--snapshots", default=os.path.join(tempfile.gettempdir(), "citeflow-snaps"))
    parser.add_argument("--change", type=float, default=0.01, help="share of R1's papers R2 touches")
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    parser.add_argument("--no-duckdb", action="store_true", help="time citeflow alone")
    parser.add_argument(
        "--diff-up-to",
        type=int,
        default=sys.maxsize,
        help="the diff path only at sizes up to this (a larger size's successor release is not derived)",
    )
    parser.add_argument("--epochs", type=int, default=1, help="PBG epochs (SciNCL: 20)")
    parser.add_argument("--dim", type=int, default=64, help="PBG dimension (SciNCL: 768)")
    parser.add_argument("--partitions", type=int, default=0, help="PBG partitions (0: 4 from 1M papers, else 1)")
    parser.add_argument("--keep", action="store_true", help="keep each size's artifact root and DuckDB's tables")
    parser.add_argument("--no-warm-up", action="store_true", help="skip writing the Spark driver's class archive")
    parser.add_argument("--workdir", default=None, help="scratch folder (default: a temp dir, removed after)")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--plots", default=None, help="draw scale-cost.png and scale-memory.png into this folder")
    parser.add_argument("--from", dest="source", default=None, help="a scale.json: its report and plots, no run")
    args = parser.parse_args()
    if args.source:
        result = json.loads(Path(args.source).read_text())
        result["checks"] = checks(result)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "scale.json").write_text(json.dumps(result, indent=2) + "\n")
        (out / "scale.md").write_text(report(result))
        for path in plot(result, Path(args.plots)) if args.plots else []:
            print(f"plot: {path}")
        print(report(result))
        return 0
    if "diff" in args.stages and "filter_leakage" not in args.stages:
        parser.error("the diff path builds on R1's filter_leakage: --stages needs filter_leakage with diff")
    args.stages = [s for s in STAGES if s in args.stages]  # in the pipeline's order, whatever order was given

    from citeflow.threads import describe

    # the load and the thread settings beside every figure: a shared machine changes them all
    print(f"machine: {json.dumps(describe())}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="citeflow-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
    result = {"machine": f"{cpu or platform.processor()}, {os.cpu_count()} cores", "sizes": []}
    try:
        if set(args.stages) & {*SPARK_STAGES, "diff"} and not args.no_warm_up:
            warm_up(Path(args.snapshots), work, [])  # the Spark driver's class archive, written before any timing
        for n in args.sizes:
            done = list(result["sizes"])

            def save(row: dict, done: list[dict] = done) -> None:
                result["sizes"] = [*done, row]
                result["checks"] = checks(result)
                (out / "scale.json").write_text(json.dumps(result, indent=2) + "\n")
                (out / "scale.md").write_text(report(result))

            save(run_size(n, args, work, save))
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.plots:
        for path in plot(result, Path(args.plots)):
            print(f"plot: {path}")
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
