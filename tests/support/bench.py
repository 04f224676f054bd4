"""Running a bench script as its smoke test does: from the repository root, in a session of its own.

    from tests.support.bench import finite, run_bench
    out = run_bench("bench_stages.py", "--sizes", "1000", timeout=600)

A run past `timeout`, or one whose test is interrupted, is killed with everything it started (the `citeflow run`
processes and their Spark JVMs, PBG's trainer and workers), so that no smoke test leaves a process behind.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_command(name: str, cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> str:
    """`cmd`'s output (stdout and stderr together), once it exited 0, run from the repository root."""
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, env=env
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, f"{name} failed ({proc.returncode}):\n{out[-4000:]}"
    return out


def run_bench(script: str, *args: str, timeout: float, env: dict[str, str] | None = None) -> str:
    """`python bench/<script> ARGS`' output, once it exited 0 (`run_command`)."""
    return run_command(f"bench/{script}", [sys.executable, str(REPO / "bench" / script), *args], timeout, env)


def finite(value) -> bool:
    """A figure a report can hold: an int or float that is finite (not a bool, not NaN)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
