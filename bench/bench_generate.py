"""Time `citeflow generate` of this checkout against another commit's, side by side in one run.

    python bench/bench_generate.py --papers 1000000 --baseline 0a9199d --rounds 2 --out bench/results

The baseline's tree is exported with `git archive` into a scratch folder and run from there (its own code, the
same Python and packages); the two generators then run alternately, `--rounds` times each, each as its own
process writing to a fresh scratch folder, so that a busy machine slows both alike. Reports each run's wall
seconds and peak resident memory, the medians and the ratio new / baseline in OUT/generate.json and
OUT/generate.md. The target: the ratio at most 1.2 at 1,000,000 papers. Timings from a shared or busy
machine say little: note the load average (printed) with any figure you quote.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_stages import spooled  # noqa: E402


def measure(cmd: list[str], tree: Path) -> dict[str, float]:
    """Run `cmd` in `tree` (its code first on the path); wall seconds and peak RSS (GiB) of its process tree,
    sampled every 0.2 s."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.monotonic()
    with spooled(cmd, env=env, cwd=tree) as (proc, read_output):
        root, peak = psutil.Process(proc.pid), 0
        while proc.poll() is None:
            try:
                peak = max(peak, sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]))
            except psutil.Error:
                pass
            time.sleep(0.2)
        output = read_output()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{output[-4000:]}")
    return {"seconds": round(time.monotonic() - t0, 1), "peak_rss_gib": round(peak / 2**30, 2)}


def export(commit: str, dest: Path) -> str:
    """The tree of `commit` under dest (via git archive); returns the full commit id."""
    full = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{commit}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if full.returncode != 0:
        raise SystemExit(f"bench_generate: {commit!r} is not a commit of {ROOT}")
    archive = dest.with_suffix(".tar")
    subprocess.run(["git", "-C", str(ROOT), "archive", "--output", str(archive), full.stdout.strip()], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    return full.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", type=int, default=1_000_000)
    parser.add_argument(
        "--baseline", default="0a9199d", help="commit to compare with (default: the generator before its calibration)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="runs of each generator, alternating")
    parser.add_argument("--format", choices=["s2orc", "s2ag"], default="s2orc")
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--workdir", default=None, help="scratch folder (default: a temp dir, removed after)")
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from citeflow.threads import describe

    # the load and the thread settings beside every figure: a shared machine changes them all
    print(f"machine: {json.dumps(describe())}", flush=True)

    work = Path(args.workdir or tempfile.mkdtemp(prefix="citeflow-bench-generate-"))
    work.mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        baseline = export(args.baseline, work / "baseline")
        trees = {"baseline": work / "baseline", "new": ROOT}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for r in range(args.rounds):
            for name, tree in trees.items():
                target = work / f"snap-{name}-{r}"
                cmd = [
                    sys.executable,
                    "-m",
                    "citeflow.jobs.cli",
                    "generate",
                    "--papers",
                    str(args.papers),
                    "--out",
                    str(target),
                ]
                cmd += ["--format", args.format]
                result = measure(cmd, tree)
                result["load_average_1m"] = round(os.getloadavg()[0], 2)
                runs[name].append(result)
                print(f"{name} round {r + 1}: {result}", flush=True)
                shutil.rmtree(target, ignore_errors=True)
        median = {name: statistics.median(x["seconds"] for x in rs) for name, rs in runs.items()}
        report = {
            "papers": args.papers,
            "format": args.format,
            "baseline_commit": baseline,
            "runs": runs,
            "median_seconds": median,
            "ratio_new_to_baseline": round(median["new"] / median["baseline"], 3),
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        }
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    (out / "generate.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [
        f"# citeflow generate, {args.papers:,} papers ({args.format}): this checkout vs {baseline[:10]}",
        "",
        "| generator | run | seconds | peak RSS GiB | load (1 min) |",
        "|---|---|---|---|---|",
    ]
    for name, rs in runs.items():
        for i, x in enumerate(rs, 1):
            lines.append(f"| {name} | {i} | {x['seconds']} | {x['peak_rss_gib']} | {x['load_average_1m']} |")
    lines += [
        "",
        f"Median: baseline {median['baseline']} s, new {median['new']} s; ratio {report['ratio_new_to_baseline']}.",
    ]
    (out / "generate.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
