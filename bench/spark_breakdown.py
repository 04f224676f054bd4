"""Where a Spark stage's time goes: `citeflow run --until STAGE` with Spark's event log on, read back step by step.

    python bench/spark_breakdown.py --snapshot /tmp/citeflow-snaps/snap-s2orc-1000000-seed5 \\
        --stages build_graph filter_leakage --out bench/results

For each stage in order (each later one finds the earlier up to date, as `bench/bench_stages.py` times them), one
`citeflow run` process, timed from outside, with `spark.eventLog.enabled` and its own event-log folder. The
stages tag their Spark jobs by step (`citeflow.spark.engine.session.step`: an operation tag), so the event log says
which step each job belongs to. The breakdown of the process's wall time:

- **before Spark**: from the process's start to the Spark application's (Python imports, the settings and
  input checks, the JVM and the session);
- **each step**: the wall time during which at least one of its jobs ran (a step's jobs' intervals merged; a
  job no query submitted, such as a read's file listing, carries no tag and counts to the step before it);
  steps run at once (`session.concurrently`) overlap, so the steps can add up to more than they took together;
- **driver between jobs**: time inside the application with no job running (query planning, pyarrow work and
  file listings on the driver);
- **after the last job**: to the process's end (the manifest, hashing the written files, stopping the JVM).

Per step also: the tasks' summed run time (what the cores did) and the part of it in the JVM's garbage collection,
bytes read and written, shuffle bytes, and the bytes spilled to disk (a sort or an aggregation that outgrew its
memory).
Results: OUT/spark_breakdown.json and OUT/spark_breakdown.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from citeflow.spark.engine.session import STEP_TAG  # noqa: E402


def merged_seconds(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of `intervals` (start, end), in the intervals' unit."""
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def read_event_log(folder: Path) -> dict:
    """The application's start and end, and each job's description, interval and its tasks' figures, from the
    one application's event log in `folder` (uncompressed; Spark 4 writes a folder `eventlog_v2_<app>` of
    `events_<n>_<app>` files; times in epoch seconds)."""
    paths = sorted(
        (p for p in folder.rglob("*") if p.is_file() and p.name.startswith(("events_", "local-", "app-"))),
        key=lambda p: int(p.name.split("_")[1]) if p.name.startswith("events_") else 0,
    )
    if not paths:
        raise SystemExit(f"no Spark event log in {folder}")
    app: dict = {}
    jobs: dict[int, dict] = {}
    stage_job: dict[int, int] = {}
    for line in (line for path in paths for line in path.open()):
        event = json.loads(line)
        kind = event["Event"]
        if kind == "SparkListenerApplicationStart":
            app["start"] = event["Timestamp"] / 1000
        elif kind == "SparkListenerApplicationEnd":
            app["end"] = event["Timestamp"] / 1000
        elif kind == "SparkListenerJobStart":
            tags = ((event.get("Properties") or {}).get("spark.job.tags") or "").split(",")
            # a tag reads "spark-session-<id>-thread-<id>-<tag>" (a local driver) or ends with the tag itself
            steps = [t.split(STEP_TAG, 1)[1] for t in tags if STEP_TAG in t]
            description = steps[0] if steps else None  # a job outside any SQL query (a file listing)
            jobs[event["Job ID"]] = {
                "description": description,
                "start": event["Submission Time"] / 1000,
                "task_s": 0.0,
                "read": 0,
                "written": 0,
                "shuffle": 0,
                "spilled": 0,
                "gc_s": 0.0,
            }
            for stage in event.get("Stage IDs", []):
                stage_job[stage] = event["Job ID"]
        elif kind == "SparkListenerJobEnd":
            jobs[event["Job ID"]]["end"] = event["Completion Time"] / 1000
        elif kind == "SparkListenerTaskEnd" and event.get("Stage ID") in stage_job:
            job = jobs[stage_job[event["Stage ID"]]]
            metrics = event.get("Task Metrics") or {}
            job["task_s"] += metrics.get("Executor Run Time", 0) / 1000
            job["read"] += (metrics.get("Input Metrics") or {}).get("Bytes Read", 0)
            job["written"] += (metrics.get("Output Metrics") or {}).get("Bytes Written", 0)
            job["shuffle"] += (metrics.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0)
            job["spilled"] += metrics.get("Disk Bytes Spilled", 0)
            job["gc_s"] += metrics.get("JVM GC Time", 0) / 1000
    done = sorted((j for j in jobs.values() if "end" in j), key=lambda j: j["start"])
    # a job that carries no tag (a schema or file listing of a read, which no query submits) belongs to the step
    # that ran before it, or else to the first one after it
    named = [j["description"] for j in done if j["description"]]
    last = named[0] if named else "(no step named)"
    for job in done:
        last = job["description"] = job["description"] or last
    return {"app": app, "jobs": done}


def breakdown(started: float, ended: float, log: dict) -> dict:
    """The wall time of one process (`started`, `ended`: epoch seconds) by part (module docstring)."""
    jobs, app = log["jobs"], log["app"]
    first = min((j["start"] for j in jobs), default=app.get("start", ended))
    last = max((j["end"] for j in jobs), default=app.get("start", ended))
    steps: dict[str, dict] = defaultdict(lambda: {"intervals": [], "jobs": 0, "task_s": 0.0, "read": 0})
    for job in jobs:
        step = steps[job["description"]]
        step["intervals"].append((job["start"], job["end"]))
        step["jobs"] += 1
        for key in ("task_s", "read", "written", "shuffle", "spilled", "gc_s"):
            step[key] = step.get(key, 0) + job[key]
    busy = merged_seconds([(j["start"], j["end"]) for j in jobs])
    return {
        "wall_s": round(ended - started, 2),
        "before_spark_s": round(app.get("start", first) - started, 2),
        "spark_start_to_first_job_s": round(first - app.get("start", first), 2),
        "driver_between_jobs_s": round((last - first) - busy, 2),
        "after_last_job_s": round(ended - last, 2),
        "jobs": len(jobs),
        "steps": {
            name: {
                "wall_s": round(merged_seconds(s["intervals"]), 2),
                "from_s": round(min(a for a, _ in s["intervals"]) - started, 2),
                "jobs": s["jobs"],
                "task_s": round(s["task_s"], 2),
                "read_mb": round(s["read"] / 1e6, 1),
                "written_mb": round(s["written"] / 1e6, 1),
                "shuffle_mb": round(s["shuffle"] / 1e6, 1),
                "spilled_mb": round(s["spilled"] / 1e6, 1),
                "gc_s": round(s["gc_s"], 2),
            }
            for name, s in sorted(steps.items(), key=lambda item: min(a for a, _ in item[1]["intervals"]))
        },
    }


def run_stage(stage: str, snapshot: Path, artifacts: Path, events: Path, extra: list[str]) -> dict:
    events.mkdir(parents=True)
    cmd = [sys.executable, "-m", "citeflow.jobs.cli", "run", "--snapshot", snapshot.name, "--artifacts", str(artifacts)]
    cmd += ["--corpus", str(snapshot / "corpus"), "--scidocs", str(snapshot / "scidocs")]
    cmd += ["--paper-ids", str(snapshot / "paper-ids"), "--until", stage, *extra]
    log = f"spark.eventLog.enabled=true,spark.eventLog.compress=false,spark.eventLog.dir=file://{events}"
    cmd += ["--set", f"spark.conf={log}"]
    load = os.getloadavg()[0]
    started = time.time()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    ended = time.time()
    if done.returncode != 0:
        raise SystemExit(f"{stage} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return {"load_before": load, "load_after": os.getloadavg()[0], **breakdown(started, ended, read_event_log(events))}


def markdown(report: dict) -> str:
    lines = [f"snapshot {report['snapshot']}", ""]
    for stage, b in report["stages"].items():
        lines += [
            f"### {stage}: {b['wall_s']} s wall, {b['jobs']} Spark jobs, load {b['load_before']:.1f} → "
            f"{b['load_after']:.1f}",
            "",
            "| part | from s | wall s | jobs | task s | GC s | read MB | written MB | shuffle MB | spilled MB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| before Spark (imports, checks, JVM and session) | 0 | {b['before_spark_s']} | | | | | | | |",
            f"| Spark start to the first job | | {b['spark_start_to_first_job_s']} | | | | | | | |",
        ]
        for name, s in b["steps"].items():
            lines.append(
                f"| {name} | {s['from_s']} | {s['wall_s']} | {s['jobs']} | {s['task_s']} | {s['gc_s']} | "
                f"{s['read_mb']} | {s['written_mb']} | {s['shuffle_mb']} | {s['spilled_mb']} |"
            )
        lines += [
            f"| driver between jobs | | {b['driver_between_jobs_s']} | | | | | | | |",
            f"| after the last job (manifest, hashing, JVM stop) | | {b['after_last_job_s']} | | | | | | | |",
            "",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshot", required=True, help="a generated snapshot folder (corpus, scidocs, paper-ids)")
    parser.add_argument("--stages", nargs="+", default=["build_graph", "filter_leakage"])
    parser.add_argument("--work", default=None, help="artifact root and event logs (default: a temporary folder)")
    parser.add_argument("--citeflow-args", default="", help="more `citeflow run` arguments, e.g. --set ...")
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args(argv)
    import shlex

    snapshot = Path(args.snapshot).resolve()
    with tempfile.TemporaryDirectory(prefix="citeflow-breakdown-") as scratch:
        work = Path(args.work or scratch)
        report = {"snapshot": str(snapshot), "stages": {}}
        for stage in args.stages:
            report["stages"][stage] = run_stage(
                stage, snapshot, work / "artifacts", work / f"events-{stage}", shlex.split(args.citeflow_args)
            )
            print(json.dumps({stage: report["stages"][stage]}, indent=1), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "spark_breakdown.json").write_text(json.dumps(report, indent=1))
    (out / "spark_breakdown.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
