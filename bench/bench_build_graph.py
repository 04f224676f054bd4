"""Time `citeflow generate` and `build_graph` at several corpus sizes.

    python bench/bench_build_graph.py --sizes 100000 1000000 --out bench/results

Each step runs as its own `citeflow` process; peak memory is the highest sum
of resident memory over that process and all its children (the Spark JVM
included), sampled every 0.2 s. Results go to OUT/build_graph.json and a
Markdown table OUT/build_graph.md. Targets (issue 2): the 1M-paper build in
under 10 minutes with peak memory under 8 GB on a 2-core, 24 GB machine.
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
            gen = measure(citeflow + ["generate", "--papers", str(n), "--out", str(snap), "--format", args.format,
                                      "--overwrite"])
            truth = json.loads((snap / "generator.json").read_text())
            build = measure(citeflow + ["run", "--snapshot", f"bench-{n}", "--corpus", str(snap / "corpus"),
                                        "--artifacts", str(work / "artifacts"), "--until", "build_graph"])
            (manifest,) = (work / "artifacts" / f"bench-{n}" / "build_graph").glob("*/_manifest.json")
            metrics = json.loads(manifest.read_text())["metrics"]
            corpus_bytes = sum(f.stat().st_size for f in (snap / "corpus").rglob("*.gz"))
            row = {"papers": n, "format": args.format, "corpus_gz_mib": round(corpus_bytes / 2**20, 1),
                   "generate": gen, "build_graph": build, "citations": metrics["citations"],
                   "rejected_total": metrics["rejected_total"],
                   "counts_match_generator": metrics["citations"] == truth["counts"]["citations"]}
            rows.append(row)
            print(json.dumps(row), flush=True)
            shutil.rmtree(snap)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    machine = {"cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
               "python": platform.python_version(), "platform": platform.platform()}
    (out / "build_graph.json").write_text(json.dumps({"machine": machine, "results": rows}, indent=2))
    lines = ["| papers | corpus (gz) | generate | generate peak | build_graph | build peak | citations | counts match |",
             "|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    for r in rows:
        lines.append(f"| {r['papers']:,} | {r['corpus_gz_mib']} MiB | {r['generate']['seconds']} s | "
                     f"{r['generate']['peak_rss_gib']} GiB | {r['build_graph']['seconds']} s | "
                     f"{r['build_graph']['peak_rss_gib']} GiB | {r['citations']:,} | {r['counts_match_generator']} |")
    (out / "build_graph.md").write_text(
        f"Machine: {machine['cpus']} CPUs, {machine['memory_gib']} GiB\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
