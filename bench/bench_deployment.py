"""What a running deployment (`python -m citeflow.cockpit.deployment`) costs at rest: its processes, their memory
(RSS, and PSS, which shares the pages forked workers have in common) and their CPU over a quiet interval, per
component.

    .venv/bin/python bench/bench_deployment.py --home DIR [--seconds 60]

Reads the home's state file and /proc only; prints one row per component and the total.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from citeflow.cockpit.deployment import read_state
from citeflow.process import descendants

TICKS = os.sysconf("SC_CLK_TCK")


def _proc(pid: int, name: str) -> str:
    """/proc/PID/NAME, or "" once the process is gone."""
    path = Path("/proc") / str(pid) / name
    try:
        return path.read_text()
    except OSError:
        return ""


def memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of a process in KiB, from /proc/PID/smaps_rollup."""
    text = _proc(pid, "smaps_rollup")
    values = {line.split(":")[0]: int(line.split()[1]) for line in text.splitlines()[1:] if line.endswith("kB")}
    return values.get("Rss", 0), values.get("Pss", 0)


def cpu_ticks(pid: int) -> int:
    stat = _proc(pid, "stat")
    if not stat:
        return 0
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def family(pgid: int) -> list[int]:
    """The component's guard and everything under it."""
    return [pgid, *descendants(pgid)] if _proc(pgid, "stat") else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=60, help="the interval over which CPU is measured")
    args = parser.parse_args(argv)
    state = read_state(args.home)
    if state is None:
        raise SystemExit(f"no deployment state in {args.home}")
    groups = {name: int(c["pgid"]) for name, c in state["components"].items()}
    before = {name: {pid: cpu_ticks(pid) for pid in family(pgid)} for name, pgid in groups.items()}
    time.sleep(args.seconds)
    print(f"{'component':<16} {'processes':>9} {'RSS MiB':>8} {'PSS MiB':>8} {'CPU %':>6}")
    totals = [0, 0, 0, 0.0]
    for name, pgid in groups.items():
        pids = family(pgid)
        rss, pss = (sum(m) for m in zip(*(memory_kib(p) for p in pids), strict=True)) if pids else (0, 0)
        ticks = sum(cpu_ticks(p) - before[name].get(p, 0) for p in pids)
        cpu = 100.0 * ticks / TICKS / args.seconds
        print(f"{name:<16} {len(pids):>9} {rss / 1024:>8.0f} {pss / 1024:>8.0f} {cpu:>6.1f}")
        totals = [totals[0] + len(pids), totals[1] + rss, totals[2] + pss, totals[3] + cpu]
    print(f"{'total':<16} {totals[0]:>9} {totals[1] / 1024:>8.0f} {totals[2] / 1024:>8.0f} {totals[3]:>6.1f}")
    print(f"load average {os.getloadavg()[0]:.2f} over the last minute; {args.seconds:.0f} s measured")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
