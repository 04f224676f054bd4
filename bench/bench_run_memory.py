"""The memory `citeflow run` holds while each stage runs, and how much of it is Spark's JVM.

    python bench/bench_run_memory.py --snapshot DIR --work DIR [--until train_encoder] [--run LABEL=PYTHON ...]
        [--every 1.0] [--set STAGE.KEY=VALUE ...] [--json FILE]

Each `--run LABEL=PYTHON` is one `citeflow run` of the generated snapshot folder `--snapshot` (corpus/, scidocs/,
paper-ids/: `citeflow generate`) up to `--until`, with that interpreter (another checkout's virtualenv measures
that checkout; default: one run, `current`, with this interpreter), into its own artifact root under `--work`,
one run after the other so that none runs beside another. The run's process tree (the citeflow process, Spark's
JVM, the trainer and PBG's workers) is sampled every `--every` seconds: its proportional set size (PSS, from
/proc/PID/smaps_rollup: a page shared by several processes counted once in all), and the part of it that is Java
processes. Each sample belongs to the stage the run last said it started (`[i/n] STAGE: running`). Prints, per
run and stage, the samples, the tree's median and peak PSS and the JVM's, in MiB, with the CPU model and the load
average before and after; `--json FILE` writes the same figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

STARTED = re.compile(r"\] (?P<stage>\w+)(?: \((?P<strategy>\w+)\))?: running")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def tree_memory(root: psutil.Process) -> tuple[int, int, int]:
    """(PSS of `root` and its descendants, PSS of the Java processes among them, how many processes), in bytes."""
    total = java = count = 0
    for process in [root, *root.children(recursive=True)]:
        try:
            pss = process.memory_full_info().pss
            name = os.path.basename(process.exe())
        except (psutil.Error, OSError):
            continue  # exited between the listing and the read
        total += pss
        count += 1
        if name == "java":
            java += pss
    return total, java, count


def measure(command: list[str], every: float, cwd: Path) -> tuple[dict[str, list[tuple[int, int, int]]], str, int]:
    """({stage: [(tree PSS, JVM PSS, processes) per sample]}, the run's output, its exit status). Run in `cwd`, not
    in a checkout, whose own `citeflow/` folder would come first on the run's path."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)
    root = psutil.Process(process.pid)
    samples: dict[str, list[tuple[int, int, int]]] = {}
    current = ["(start)"]
    output: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            if started := STARTED.search(line):
                current[0] = started["stage"] + (f" ({started['strategy']})" if started["strategy"] else "")

    reader = threading.Thread(target=read, name="run-output", daemon=True)
    reader.start()
    while process.poll() is None:
        stage = current[0]
        sample = tree_memory(root)
        if sample[2]:
            samples.setdefault(stage, []).append(sample)
        time.sleep(every)
    reader.join()
    return samples, "".join(output), process.returncode


def summary(samples: list[tuple[int, int, int]]) -> dict[str, float]:
    mib = 2**20
    tree, java = [s[0] / mib for s in samples], [s[1] / mib for s in samples]
    return {
        "samples": len(samples),
        "tree_median_mib": round(statistics.median(tree)),
        "tree_peak_mib": round(max(tree)),
        "jvm_median_mib": round(statistics.median(java)),
        "jvm_peak_mib": round(max(java)),
        "jvm_samples": sum(1 for s in samples if s[1]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--snapshot", type=Path, required=True, help="a `citeflow generate` output folder")
    parser.add_argument("--work", type=Path, required=True, help="each run's artifact root goes in WORK/LABEL")
    parser.add_argument("--until", default="train_encoder", help="the last stage to run")
    parser.add_argument(
        "--run", action="append", default=[], metavar="LABEL=PYTHON", help="a run with this interpreter (repeat)"
    )
    parser.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--set", action="append", default=[], metavar="STAGE.KEY=VALUE", help="for every run")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args(argv)
    runs = [item.split("=", 1) for item in args.run] or [["current", sys.executable]]
    measured: dict[str, dict] = {}
    result = {"cpu": cpu_model(), "cores": os.cpu_count(), "runs": measured}
    print(f"CPU: {result['cpu']} ({result['cores']} cores)")
    for label, python in runs:
        command = [python, "-m", "citeflow.jobs.cli", "run", "--snapshot", "memory", "--until", args.until]
        command += ["--corpus", str(args.snapshot / "corpus"), "--scidocs", str(args.snapshot / "scidocs")]
        command += ["--paper-ids", str(args.snapshot / "paper-ids"), "--artifacts", str(args.work / label)]
        for item in args.set:
            command += ["--set", item]
        load_before = os.getloadavg()
        t0 = time.monotonic()
        args.work.mkdir(parents=True, exist_ok=True)
        samples, output, code = measure(command, args.every, args.work)
        seconds = time.monotonic() - t0
        load_after = os.getloadavg()
        if code != 0:
            raise SystemExit(f"{label}: citeflow run failed ({code}):\n{output[-4000:]}")
        stages = {stage: summary(found) for stage, found in samples.items()}
        measured[label] = {
            "python": python,
            "seconds": round(seconds, 1),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in load_after],
            "stages": stages,
        }
        print(
            f"\n{label} ({python}): {seconds:.0f} s, "
            f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after"
        )
        print(f"{'stage':<28}{'samples':>8}{'tree median':>13}{'tree peak':>11}{'JVM median':>12}{'JVM peak':>10}")
        for stage, s in stages.items():
            print(
                f"{stage:<28}{s['samples']:>8}{s['tree_median_mib']:>10} MiB{s['tree_peak_mib']:>7} MiB"
                f"{s['jvm_median_mib']:>8} MiB{s['jvm_peak_mib']:>6} MiB"
            )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
