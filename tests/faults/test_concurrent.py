"""Two runs of the same version at once (issue #16, attack 2), and nothing written outside the root (5).

Run A builds; run B, started while A holds the lease with `store.lease_wait_s=0`, stops with one line naming
A; run C, started alongside with a wait, waits for A and then skips the version A committed. Exactly one
version folder results, equal to the uninterrupted reference.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.faults.conftest import SECRET, SNAPSHOT, Watch, digest, error_lines, finish, read, sweep, wait_until


def _race(world, root: Path, stage: str, env: dict | None = None) -> None:
    version = world.manifests[stage].version
    lease = root / SNAPSHOT / stage / f".{version}.lease"
    a = world.cli(root, stage, env=env)
    watches = [Watch(a.tag)]
    b = c = None
    try:
        assert wait_until(lambda: lease.exists() or a.poll() is not None, timeout_s=300)
        assert a.poll() is None, finish(a)[1]
        b = world.cli(root, stage, "store.lease_wait_s=0", env=env)
        c = world.cli(root, stage, "store.lease_wait_s=600", env=env)
        watches += [Watch(b.tag), Watch(c.tag)]
        code_b, log_b = finish(b)
        assert code_b == 2, log_b
        (error,) = [line for line in log_b.splitlines() if line.startswith("citeflow: error:")]
        assert f"{stage} version {version} of snapshot {SNAPSHOT} is being built by pid {a.pid} on " in error
        assert "Traceback" not in log_b
        code_a, log_a = finish(a)
        code_c, log_c = finish(c)
        assert code_a == 0, log_a
        assert code_c == 0, log_c
        assert "built in" in [line for line in log_a.splitlines() if f"] {stage}:" in line][-1]
        assert f"{stage}: up to date, skipped" in log_c and "waiting up to" in log_c
        for log in (log_a, log_b, log_c):
            assert SECRET not in log  # nor in any log line
        for watch in watches:  # nor on the command line of any process the runs started, nor of the runs
            watch.stop()
            assert watch.seen and watch.carrying(SECRET) == []
    finally:
        for watch in watches:
            watch.stop()
        for process in (a, b, c):
            if process is not None:
                sweep(process.tag)
    assert sorted(os.listdir(root / SNAPSHOT / stage)) == [version]
    assert digest(read(root, stage)) == world.digests[stage]


def test_two_build_graph_runs_of_one_version(world):
    root = world.tmp / "race-build-graph"
    root.mkdir()
    _race(world, root, "build_graph")


def _walk(*folders: Path, skip: tuple[Path, ...]) -> dict[str, tuple[int, int]]:
    found = {}
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = [d for d in dirnames if Path(dirpath, d) not in skip and d != ".git"]
            for name in filenames:
                path = Path(dirpath, name)
                if path.is_file():
                    stat = path.stat()
                    found[str(path)] = (stat.st_size, stat.st_mtime_ns)
            found[dirpath] = (-1, 0)
    return found


def test_two_embed_graph_runs_of_one_version_write_only_under_the_root(world):
    """...and walking the file system before and after: no file appears or changes outside the root."""
    root = world.copy("race-embed-graph", without=("embed_graph", "mine_triplets", "train_encoder"))
    home, tmpdir, cache = world.tmp / "home-race", world.tmp / "tmpdir-race", world.tmp / "mpl-cache"
    for folder in (home, tmpdir, cache):
        folder.mkdir()
    env = {"HOME": str(home), "TMPDIR": str(tmpdir), "MPLCONFIGDIR": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}
    outside = [world.tmp, Path(__file__).resolve().parents[2]]  # the test's area, and the code's checkout
    skip = (root, cache)  # matplotlib's font cache is a library's, not the stage's
    before = _walk(*outside, skip=skip)
    _race(world, root, "embed_graph", env=env)
    after = _walk(*outside, skip=skip)
    logs = {p for p in after if p.endswith(".log") and Path(p).parent == world.tmp}  # the runs' own output
    assert {p: v for p, v in after.items() if p not in logs and before.get(p) != v} == {}
    assert set(before) - set(after) == set()


def test_a_pbg_path_override_is_refused_before_anything_is_written(world):
    root = world.tmp / "pbg-path"
    target = world.tmp / "elsewhere"
    for key, value in (("checkpoint_path", target), ("init_path", target), ("entity_path", target)):
        code, log = finish(world.cli(root, "embed_graph", f"embed_graph.pbg={key}={value}"))
        assert code == 2 and len(log.strip().splitlines()) == 1, log
        assert error_lines(log) == [
            f"citeflow: error: embed_graph.pbg: {key} is set by the stage (PBG reads and writes inside the "
            "version folder) and cannot be overridden"
        ]
    assert not target.exists() and not root.exists()


# Loaded by every Python process of a run whose PYTHONPATH puts its folder first: the run stands for another
# host (FAKE_HOST) whose clock is CLOCK_SKEW_S seconds off.
OTHER_HOST = """
import os, socket, time

_skew = float(os.environ.get("CLOCK_SKEW_S", "0"))
if _skew:
    _real = time.time
    time.time = lambda: _real() + _skew
if os.environ.get("FAKE_HOST"):
    socket.gethostname = lambda: os.environ["FAKE_HOST"]
"""


def test_a_run_on_a_host_whose_clock_is_ahead_never_takes_a_live_lease_over(world):
    """The attack: while run A builds (heartbeat every second), run B stands for another host whose clock is
    400 s ahead, and waits longer than `store.lease_stale_s` (10 s here). B must never take A's lease over: it
    waits for A and uses what A built (or stops with one line naming A), and one clean version results."""
    stage = "build_graph"
    version = world.manifests[stage].version
    root = world.tmp / "race-skewed-clock"
    root.mkdir()
    shim = world.tmp / "other-host"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(OTHER_HOST)
    lease = root / SNAPSHOT / stage / f".{version}.lease"
    a = world.cli(root, stage)
    b = None
    try:
        assert wait_until(lambda: lease.exists() or a.poll() is not None, timeout_s=300)
        assert a.poll() is None, finish(a)[1]
        repo = Path(__file__).resolve().parents[2]
        env = {"PYTHONPATH": f"{shim}{os.pathsep}{repo}", "CLOCK_SKEW_S": "400", "FAKE_HOST": "clock-ahead"}
        b = world.cli(root, stage, "store.lease_wait_s=600", env=env)
        code_b, log_b = finish(b)
        code_a, log_a = finish(a)
        assert code_a == 0 and "built in" in log_a, log_a
        assert "taking over" not in log_b and "Traceback" not in log_b, log_b
        assert code_b == 0 and f"{stage}: up to date, skipped" in log_b, log_b
        assert f"is being built by pid {a.pid} on " in log_b  # it waited for A, by name
    finally:
        for process in (a, b):
            if process is not None:
                sweep(process.tag)
    assert sorted(os.listdir(root / SNAPSHOT / stage)) == [version]
    assert digest(read(root, stage)) == world.digests[stage]
