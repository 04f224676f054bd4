"""Time `citeflow generate` and the Spark stages, side by side with DuckDB doing the same core work.

    python bench/bench_stages.py --sizes 100000 1000000 --snapshots /tmp/citeflow-snaps --repeat 3 --out bench/results

For each size, a generated S2ORC snapshot (seed 5, one shard per 50k papers;
kept in `--snapshots` and reused when already there), then, `--repeat` times
and interleaved so that both engines see the same machine load:

1. `citeflow run --until build_graph` (a fresh artifact root),
2. `bench/duckdb_stages.py build_graph` on the same corpus,
3. `citeflow run --until filter_leakage` (build_graph is up to date, so this
   times filter_leakage alone, JVM start included),
4. `bench/duckdb_stages.py filter_leakage` on citeflow's build_graph version.

Each step is its own process; its peak memory is the highest sum of resident
memory over the process and all its children (the Spark JVM included),
sampled every 0.2 s. The one-minute load average is read before and after
each step. Per stage the report gives the median seconds of each engine, the
ratio citeflow / DuckDB of the medians, both engines' peak memory, and
whether their counts (papers, citations; benchmark ids mapped) agree.
Results: OUT/stages.json and the Markdown table OUT/stages.md.

`--no-duckdb` times citeflow alone; `--stages` picks stages.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
SEED = 5


def measure(cmd: list[str]) -> dict[str, float]:
    """Run `cmd`; wall seconds, peak RSS (GiB) of its whole process tree, load average around it."""
    load_before = os.getloadavg()[0]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    root = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            tree = [root] + root.children(recursive=True)
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.2)
    seconds = time.monotonic() - t0
    output = proc.stdout.read()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{output[-4000:]}")
    return {
        "seconds": round(seconds, 1),
        "peak_rss_gib": round(peak / 2**30, 2),
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "output": output,
    }


def snapshot(root: Path, n: int, fmt: str) -> tuple[Path, dict | None]:
    """The generated snapshot of `n` papers under `root`, generated (and timed) when absent."""
    snap = root / f"snap-{fmt}-{n}-seed{SEED}"
    if (snap / "generator.json").exists():
        return snap, None
    cmd = [sys.executable, "-m", "jobs.cli", "generate", "--papers", str(n), "--seed", str(SEED)]
    gen = measure(cmd + ["--out", str(snap), "--format", fmt, "--overwrite"])
    gen.pop("output")
    return snap, gen


def manifest_metrics(artifacts: Path, snap_id: str, stage: str) -> tuple[Path, dict]:
    (manifest,) = (artifacts / snap_id / stage).glob("*/_manifest.json")
    return manifest.parent, json.loads(manifest.read_text())["metrics"]


def run_size(n: int, args, work: Path) -> dict:
    snap, gen = snapshot(Path(args.snapshots) if args.snapshots else work, n, args.format)
    truth = json.loads((snap / "generator.json").read_text())
    corpus_bytes = sum(f.stat().st_size for f in (snap / "corpus").rglob("*.gz"))
    runs: dict[str, dict[str, list[dict]]] = {s: {"citeflow": [], "duckdb": []} for s in args.stages}
    agree: dict[str, bool] = {}
    snap_id = f"bench-{n}"
    for rep in range(args.repeat):
        artifacts = work / f"artifacts-{n}-{rep}"
        shutil.rmtree(artifacts, ignore_errors=True)
        for stage in args.stages:
            cmd = [sys.executable, "-m", "jobs.cli", "run", "--snapshot", snap_id, "--artifacts", str(artifacts)]
            cmd += ["--corpus", str(snap / "corpus"), "--scidocs", str(snap / "scidocs")]
            cmd += ["--paper-ids", str(snap / "paper-ids"), "--until", stage, *shlex.split(args.citeflow_args)]
            cf = measure(cmd)
            cf.pop("output")
            _, metrics = manifest_metrics(artifacts, snap_id, stage)
            cf["metrics"] = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str))}
            runs[stage]["citeflow"].append(cf)
            if args.no_duckdb:
                continue
            out = work / f"duckdb-{n}-{rep}-{stage}"
            shutil.rmtree(out, ignore_errors=True)
            dd_cmd = [sys.executable, str(HERE / "duckdb_stages.py"), stage, "--out", str(out)]
            if stage == "build_graph":
                dd_cmd += ["--corpus", str(snap / "corpus")]
                keys = ("papers", "citations")
            else:
                graph, _ = manifest_metrics(artifacts, snap_id, "build_graph")
                dd_cmd += ["--graph", str(graph), "--scidocs", str(snap / "scidocs")]
                dd_cmd += ["--paper-ids", str(snap / "paper-ids")]
                keys = ("benchmark_ids", "mapped", "papers", "citations")
            dd = measure(dd_cmd)
            dd["counts"] = json.loads(dd.pop("output").strip().splitlines()[-1])
            runs[stage]["duckdb"].append(dd)
            agree[stage] = agree.get(stage, True) and all(dd["counts"][k] == metrics[k] for k in keys)
            shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(artifacts, ignore_errors=True)

    row = {"papers": n, "format": args.format, "corpus_gz_mib": round(corpus_bytes / 2**20, 1)}
    if gen:
        row["generate"] = gen
    for stage, engines in runs.items():
        summary = {}
        for engine, measured in engines.items():
            if measured:
                summary[engine] = {
                    "median_s": round(statistics.median(m["seconds"] for m in measured), 1),
                    "seconds": [m["seconds"] for m in measured],
                    "peak_rss_gib": max(m["peak_rss_gib"] for m in measured),
                    "peaks_gib": [m["peak_rss_gib"] for m in measured],
                    "load": round(statistics.mean(x for m in measured for x in (m["load_before"], m["load_after"])), 2),
                }
        if summary.get("duckdb"):
            summary["ratio"] = round(summary["citeflow"]["median_s"] / summary["duckdb"]["median_s"], 2)
            summary["counts_agree"] = agree[stage]
        summary["metrics"] = engines["citeflow"][-1]["metrics"]
        row[stage] = summary
    if "build_graph" in row:
        row["counts_match_generator"] = row["build_graph"]["metrics"]["citations"] == truth["counts"]["citations"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--stages", nargs="+", default=["build_graph", "filter_leakage"])
    parser.add_argument("--format", choices=["s2orc"], default="s2orc", help="DuckDB's side reads S2ORC only")
    parser.add_argument("--repeat", type=int, default=1, help="runs per engine and stage; medians are compared")
    parser.add_argument("--no-duckdb", action="store_true", help="time citeflow alone")
    parser.add_argument("--snapshots", default=None, help="keep (and reuse) generated snapshots here")
    parser.add_argument(
        "--citeflow-args",
        default="",
        help="extra `citeflow run` arguments, one quoted string: --citeflow-args '--set spark.master=local[3]'",
    )
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--workdir", default=None, help="scratch folder (default: a temp dir, removed after)")
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from citeflow.threads import describe

    # the load and the thread settings beside every figure: a shared machine changes them all
    print(f"machine: {json.dumps(describe())}", flush=True)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="citeflow-bench-"))
    rows = []
    try:
        for n in args.sizes:
            rows.append(run_size(n, args, work))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    machine = {
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    (out / "stages.json").write_text(json.dumps({"machine": machine, "results": rows}, indent=2))
    lines = [
        "| papers | stage | citeflow | DuckDB | citeflow / DuckDB | load avg | counts agree |",
        "|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        for stage in args.stages:
            s = r[stage]
            cf = f"{s['citeflow']['median_s']} s, peak {s['citeflow']['peak_rss_gib']} GiB"
            dd = f"{s['duckdb']['median_s']} s, peak {s['duckdb']['peak_rss_gib']} GiB" if "duckdb" in s else "-"
            loads = [s[e]["load"] for e in ("citeflow", "duckdb") if e in s]
            load = round(sum(loads) / len(loads), 2)
            lines.append(
                f"| {r['papers']:,} | {stage} | {cf} | {dd} | {s.get('ratio', '-')} | {load} | "
                f"{s.get('counts_agree', '-')} |"
            )
    text = f"Machine: {machine['cpus']} CPUs, {machine['memory_gib']} GiB; medians of {args.repeat} run(s)\n\n"
    (out / "stages.md").write_text(text + "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
