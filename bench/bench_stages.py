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

First, two untimed runs on a 1,000-paper snapshot write and check the Spark
driver's class archive for these settings (`warm_up`). Each step is its own
process, and the next starts only once every process it started has exited
(`lingering_s`: the JVM outlives Python by 0.4-2 s); its peak memory is the
highest sum of resident memory over the process and all its children (the
Spark JVM included), sampled every 0.2 s. The one-minute load average is read
before and after each step. Per stage the report gives the median seconds of
each engine, the ratio citeflow / DuckDB of the medians, both engines' peak
memory, and whether their counts (papers, citations; benchmark ids mapped)
agree.
Results: OUT/stages.json and the Markdown table OUT/stages.md.

`--no-duckdb` times citeflow alone; `--stages` picks stages.

`--spark-connect` also times citeflow as the client of a Spark Connect server that the bench starts once
(spark/engine/connect_server.py, the server `citeflow spark-server` runs, with citeflow's default Spark settings:
`--citeflow-args` reach the clients only), in each repeat
right after the local run of the same stage (its own artifact root). Before the timed runs, the server runs
each stage once on the timed snapshot, untimed (`first_run` in the JSON: a fresh server's JVM compiles the
stage's code on that run, as a long-running server did on its earlier ones). Its peak memory adds the server's
(the JVM holds what it reached in earlier runs) to the client's. The server idles beside the other engines'
runs.
"""

from __future__ import annotations

import argparse
import contextlib
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
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
SEED = 5
LINGER_TIMEOUT_S = 300.0


@contextlib.contextmanager
def spooled(cmd: list[str], **popen) -> Iterator[tuple[subprocess.Popen, Callable[[], str]]]:
    """`cmd` started with its output (stderr too) spooled to a temporary file: (the process, a function that reads
    what it wrote). Not a pipe: one that nobody reads while the tree is sampled fills (64 KiB) and blocks the child
    for good (sentence-transformers' trainer and PBG log every step). The file is closed when the block ends, and
    the child killed if the block raises while it runs."""
    with tempfile.TemporaryFile(mode="w+b") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, **popen)

        def output() -> str:
            # pread: the child writes through the same open file, so moving its offset would move the child's
            fd = log.fileno()
            return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

        try:
            yield proc, output
        except BaseException:
            proc.kill()
            proc.wait()
            raise


def measure(cmd: list[str], beside: psutil.Process | None = None) -> dict[str, float]:
    """Run `cmd`; wall seconds, peak RSS (GiB) of its whole process tree, load average around it.

    A process the command started may outlive it: the Spark driver's JVM shuts down for 0.4-2.3 s after
    Python exits, and for about 12 s, at more than one core, when it writes its class archive
    (spark/engine/class_archive.py).
    The next step is not started until every process of the tree has exited (`lingering_s`, outside
    `seconds`), so that it never runs beside this one's leftovers. `beside`: a process that does the command's
    work without being its child (a Spark Connect server), its tree's memory counted in the peak."""
    load_before = os.getloadavg()[0]
    t0 = time.monotonic()
    peak = 0
    role_peaks: dict[str, int] = {}
    seen: dict[int, psutil.Process] = {}
    with spooled(cmd) as (proc, read_output):
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                tree = [root] + root.children(recursive=True)
                seen.update((p.pid, p) for p in tree[1:])
                outside = [beside] + beside.children(recursive=True) if beside is not None else []
                sample = roles(root, tree)
                sample["server"] = sum(p.memory_info().rss for p in outside if p.is_running())
                peak = max(peak, sum(sample.values()))
                for role, rss in sample.items():
                    role_peaks[role] = max(role_peaks.get(role, 0), rss)
            except psutil.Error:
                pass
            time.sleep(0.2)
        seconds = time.monotonic() - t0
        output = read_output()
    wait_for_exit(list(seen.values()))
    lingering = time.monotonic() - t0 - seconds
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{output[-4000:]}")
    return {
        "seconds": round(seconds, 1),
        "lingering_s": round(lingering, 1),
        "peak_rss_gib": round(peak / 2**30, 2),
        # each role's own peak (they need not peak at once): `roles`
        "peak_by_role_gib": {role: round(rss / 2**30, 2) for role, rss in role_peaks.items() if rss},
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "output": output,
    }


ROLES = ("driver", "jvm", "python_workers", "workers")
# A child younger than this is not counted: one just forked shows its parent's resident pages as its own until it
# executes its program (a JVM launching a process would count the JVM's pages twice)
YOUNG_S = 1.0


def roles(root: psutil.Process, tree: list[psutil.Process], now: float | None = None) -> dict[str, int]:
    """The resident memory of a measured tree by role: `driver` the command's own process (citeflow's Python
    driver), `jvm` a Java process (Spark's driver, which in local mode holds the executors too), `python_workers`
    a process a JVM started (Spark's Python workers: the executors' side of pandas UDFs), `workers` any other
    (PBG's HOGWILD and partition processes, DuckDB is its command's own process). A child younger than
    `YOUNG_S` is left out (`now`: the clock its age is read on)."""
    now = time.time() if now is None else now
    by_pid = {p.pid: p for p in tree}
    out = dict.fromkeys(ROLES, 0)
    for p in tree:
        try:
            if p.pid != root.pid and now - p.create_time() < YOUNG_S:
                continue
            rss = p.memory_info().rss
            if p.pid == root.pid:
                role = "driver"
            elif p.name() == "java":
                role = "jvm"
            else:
                role, parent = "workers", by_pid.get(p.ppid())
                while parent is not None and parent.pid != root.pid:
                    if parent.name() == "java":
                        role = "python_workers"
                        break
                    parent = by_pid.get(parent.ppid())
        except psutil.Error:
            continue
        out[role] += rss
    return out


def wait_for_exit(procs: list[psutil.Process], timeout: float = LINGER_TIMEOUT_S) -> None:
    """Wait until none of `procs` runs: exited, or a zombie (exited; only waiting for its new parent, init, to
    collect it)."""

    def running(p: psutil.Process) -> bool:
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    deadline = time.monotonic() + timeout
    while any(running(p) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.1)


def connect_server(stack: contextlib.ExitStack, work: Path):
    """A Spark Connect server (spark/engine/connect_server.py, citeflow's default Spark settings) on a free port,
    its log in `work`, stopped when `stack` closes."""
    from citeflow.config import SparkConfig
    from citeflow.spark.engine import connect_server as CS

    log = stack.enter_context(open(work / "connect-server.log", "w"))
    return stack.enter_context(CS.running(SparkConfig(), port=CS.free_port(), output=log))


def warm_up(snapshots: Path, work: Path, extra: list[str]) -> None:
    """Two untimed `citeflow run --until build_graph` on a 1,000-paper snapshot (kept in `snapshots`), with the
    `citeflow run` arguments `extra` that the timed runs take: the first run's JVM writes the class archive for
    these Spark settings as it exits (that run starts about 5 s slower), the second has it checked, so no timed
    run writes or checks one (spark/engine/class_archive.py)."""
    snap, _ = snapshot(snapshots, 1000, "s2orc")
    for rep in range(2):
        artifacts = work / f"warm-up-{rep}"
        shutil.rmtree(artifacts, ignore_errors=True)
        cmd = [sys.executable, "-m", "citeflow.jobs.cli", "run", "--snapshot", "warm-up", "--artifacts", str(artifacts)]
        measure([*cmd, "--corpus", str(snap / "corpus"), "--until", "build_graph", *extra])
        shutil.rmtree(artifacts, ignore_errors=True)


def snapshot(root: Path, n: int, fmt: str) -> tuple[Path, dict | None]:
    """The generated snapshot of `n` papers under `root`, generated (and timed) when absent."""
    snap = root / f"snap-{fmt}-{n}-seed{SEED}"
    if (snap / "generator.json").exists():
        return snap, None
    cmd = [sys.executable, "-m", "citeflow.jobs.cli", "generate", "--papers", str(n), "--seed", str(SEED)]
    gen = measure(cmd + ["--out", str(snap), "--format", fmt, "--overwrite"])
    gen.pop("output")
    return snap, gen


def manifest_metrics(artifacts: Path, snap_id: str, stage: str) -> tuple[Path, dict]:
    (manifest,) = (artifacts / snap_id / stage).glob("*/_manifest.json")
    return manifest.parent, json.loads(manifest.read_text())["metrics"]


def run_size(n: int, args, work: Path, server=None) -> dict:
    """One size's runs; `server`: a Spark Connect server (spark/engine/connect_server.py `Server`) to time citeflow
    through as well."""
    snap, gen = snapshot(Path(args.snapshots) if args.snapshots else work, n, args.format)
    truth = json.loads((snap / "generator.json").read_text())
    corpus_bytes = sum(f.stat().st_size for f in (snap / "corpus").rglob("*.gz"))
    engines = ["citeflow", "duckdb"] + (["citeflow_connect"] if server else [])
    runs: dict[str, dict[str, list[dict]]] = {s: {e: [] for e in engines} for s in args.stages}
    agree: dict[str, bool] = {}
    snap_id = f"bench-{n}"
    server_process = psutil.Process(server.process.pid) if server else None

    def citeflow(stage: str, artifacts: Path, connect: bool) -> dict:
        cmd = [sys.executable, "-m", "citeflow.jobs.cli", "run", "--snapshot", snap_id, "--artifacts", str(artifacts)]
        cmd += ["--corpus", str(snap / "corpus"), "--scidocs", str(snap / "scidocs")]
        cmd += ["--paper-ids", str(snap / "paper-ids"), "--until", stage, *shlex.split(args.citeflow_args)]
        if connect:
            cmd += ["--set", f"spark.remote={server.remote}"]
        cf = measure(cmd, beside=server_process if connect else None)
        cf.pop("output")
        _, metrics = manifest_metrics(artifacts, snap_id, stage)
        cf["metrics"] = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str))}
        return cf

    first_runs = {}
    if server:  # the server's first run of each stage, untimed in the medians (module docstring)
        artifacts = work / f"artifacts-connect-{n}-first"
        shutil.rmtree(artifacts, ignore_errors=True)
        for stage in args.stages:
            first_runs[stage] = citeflow(stage, artifacts, connect=True)
        shutil.rmtree(artifacts, ignore_errors=True)
    for rep in range(args.repeat):
        artifacts = work / f"artifacts-{n}-{rep}"
        connect_artifacts = work / f"artifacts-connect-{n}-{rep}"
        shutil.rmtree(artifacts, ignore_errors=True)
        shutil.rmtree(connect_artifacts, ignore_errors=True)
        for stage in args.stages:
            cf = citeflow(stage, artifacts, connect=False)
            metrics = cf["metrics"]
            runs[stage]["citeflow"].append(cf)
            if server:
                cc = citeflow(stage, connect_artifacts, connect=True)
                runs[stage]["citeflow_connect"].append(cc)
                agree[stage] = agree.get(stage, True) and cc["metrics"] == cf["metrics"]
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
        shutil.rmtree(connect_artifacts, ignore_errors=True)

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
                    "lingering_s": [m["lingering_s"] for m in measured],
                    "peak_rss_gib": max(m["peak_rss_gib"] for m in measured),
                    "peaks_gib": [m["peak_rss_gib"] for m in measured],
                    "load": round(statistics.mean(x for m in measured for x in (m["load_before"], m["load_after"])), 2),
                }
        if summary.get("duckdb"):
            summary["ratio"] = round(summary["citeflow"]["median_s"] / summary["duckdb"]["median_s"], 2)
            if summary.get("citeflow_connect"):
                summary["ratio_connect"] = round(
                    summary["citeflow_connect"]["median_s"] / summary["duckdb"]["median_s"], 2
                )
        if stage in agree:
            summary["counts_agree"] = agree[stage]
        if stage in first_runs:
            summary["citeflow_connect"]["first_run"] = {
                k: first_runs[stage][k] for k in ("seconds", "peak_rss_gib", "load_before", "load_after")
            }
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
    parser.add_argument(
        "--spark-connect",
        action="store_true",
        help="also time citeflow as the client of a Spark Connect server the bench starts (module docstring)",
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
        with contextlib.ExitStack() as stack:
            warm_up(Path(args.snapshots) if args.snapshots else work, work, shlex.split(args.citeflow_args))
            server = connect_server(stack, work) if args.spark_connect else None
            for n in args.sizes:
                rows.append(run_size(n, args, work, server))
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
            dd = f"{s['duckdb']['median_s']} s, peak {s['duckdb']['peak_rss_gib']} GiB" if "duckdb" in s else "-"
            for engine, label, ratio in (
                ("citeflow", "", "ratio"),
                ("citeflow_connect", " (Spark Connect server)", "ratio_connect"),
            ):
                if engine not in s:
                    continue
                cf = f"{s[engine]['median_s']} s, peak {s[engine]['peak_rss_gib']} GiB"
                loads = [s[e]["load"] for e in (engine, "duckdb") if e in s]
                load = round(sum(loads) / len(loads), 2)
                lines.append(
                    f"| {r['papers']:,} | {stage}{label} | {cf} | {dd} | {s.get(ratio, '-')} | {load} | "
                    f"{s.get('counts_agree', '-')} |"
                )
    text = f"Machine: {machine['cpus']} CPUs, {machine['memory_gib']} GiB; medians of {args.repeat} run(s)\n\n"
    (out / "stages.md").write_text(text + "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
