"""Time `citeflow generate` and each pipeline stage at several corpus sizes.

    python bench/bench_stages.py --sizes 100000 1000000 --stages build_graph filter_leakage --out bench/results

Each step runs as its own `citeflow` process (`citeflow run --until STAGE`,
so earlier stages are already up to date and skipped); peak memory is the
highest sum of resident memory over that process and all its children (the
Spark JVM included), sampled every 0.2 s. Results go to OUT/stages.json and
a Markdown table OUT/stages.md. Targets on a 2-core, 24 GB machine: the
1M-paper build_graph under 10 minutes with peak memory under 8 GB (issue 2);
filter_leakage on 1M papers under 5 minutes (issue 3).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil


def measure(cmd: list[str]) -> dict[str, float]:
    """Run `cmd`; wall seconds and peak RSS (GiB) of its whole process tree."""
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
    output = proc.stdout.read()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{output[-4000:]}")
    return {"seconds": round(time.monotonic() - t0, 1), "peak_rss_gib": round(peak / 2**30, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--stages", nargs="+", default=["build_graph", "filter_leakage"])
    parser.add_argument("--format", choices=["s2orc", "s2ag"], default="s2orc")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--workdir", default=None, help="scratch folder (default: a temp dir, removed after)")
    args = parser.parse_args()

    citeflow = [sys.executable, "-m", "jobs.cli"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="citeflow-bench-"))
    rows = []
    try:
        for n in args.sizes:
            snap = work / f"snap-{n}"
            gen = measure(
                citeflow + ["generate", "--papers", str(n), "--out", str(snap), "--format", args.format, "--overwrite"]
            )
            truth = json.loads((snap / "generator.json").read_text())
            corpus_bytes = sum(f.stat().st_size for f in (snap / "corpus").rglob("*.gz"))
            row = {"papers": n, "format": args.format, "corpus_gz_mib": round(corpus_bytes / 2**20, 1), "generate": gen}
            for stage in args.stages:
                row[stage] = measure(
                    citeflow
                    + [
                        "run",
                        "--snapshot",
                        f"bench-{n}",
                        "--corpus",
                        str(snap / "corpus"),
                        "--scidocs",
                        str(snap / "scidocs"),
                        "--paper-ids",
                        str(snap / "paper-ids"),
                        "--artifacts",
                        str(work / "artifacts"),
                        "--until",
                        stage,
                    ]
                )
                (manifest,) = (work / "artifacts" / f"bench-{n}" / stage).glob("*/_manifest.json")
                row[stage]["metrics"] = {
                    k: v
                    for k, v in json.loads(manifest.read_text())["metrics"].items()
                    if isinstance(v, (int, float, str))
                }
            if "build_graph" in row:
                row["counts_match_generator"] = (
                    row["build_graph"]["metrics"]["citations"] == truth["counts"]["citations"]
                )
            rows.append(row)
            print(json.dumps(row), flush=True)
            shutil.rmtree(snap)
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
    header = "| papers | corpus (gz) | generate | " + " | ".join(args.stages) + " |"
    lines = [header, "|---:|---:|---:|" + "---:|" * len(args.stages)]
    for r in rows:
        cells = [f"{r[s]['seconds']} s, peak {r[s]['peak_rss_gib']} GiB" for s in args.stages]
        lines.append(
            f"| {r['papers']:,} | {r['corpus_gz_mib']} MiB | {r['generate']['seconds']} s, peak "
            f"{r['generate']['peak_rss_gib']} GiB | " + " | ".join(cells) + " |"
        )
    (out / "stages.md").write_text(
        f"Machine: {machine['cpus']} CPUs, {machine['memory_gib']} GiB\n\n" + "\n".join(lines) + "\n"
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
