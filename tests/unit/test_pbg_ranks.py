"""Ranks started apart (Airflow's per-rank tasks) watch each other through the run folder: all finish, or all stop.

The PBG rank is replaced by small commands here (sleep, exit N); the real 2-rank PBG runs are in
tests/e2e/test_pbg_distributed.py. Each child writes its pid first, so that the tests can see it gone.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from citeflow.errors import CiteflowError
from citeflow.lease import process_start
from citeflow.models.pbg import ranks as pbg_ranks

TOKEN = "attempt-1"


def command(pids: Path, name: str, seconds: float, code: int = 0) -> list[str]:
    script = (
        f"import os, sys, time; open({str(pids / name)!r}, 'w').write(str(os.getpid())); "
        f"time.sleep({seconds}); sys.exit({code})"
    )
    return [sys.executable, "-c", script]


def alive(pids: Path, name: str) -> bool:
    path = pids / name
    return path.exists() and process_start(int(path.read_text())) is not None


def wait_for(predicate, timeout_s=30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


class Leader(threading.Thread):
    """Rank 0 in a thread: publishes the launch and leads; keeps what it raised."""

    def __init__(self, folder: Path, cmd: list[str], machines: int = 2, wait_s: float = 30, stale_s: float = 30):
        super().__init__(daemon=True)
        self.folder, self.cmd, self.machines, self.wait_s, self.stale_s = folder, cmd, machines, wait_s, stale_s
        self.error: BaseException | None = None
        self.finished_at: float | None = None

    def run(self) -> None:
        pbg_ranks.publish_launch(self.folder, token=TOKEN, machines=self.machines, seed=5)
        try:
            pbg_ranks.lead(
                self.folder,
                command=self.cmd,
                log_path=self.folder / "rank0.log",
                env=dict(os.environ),
                token=TOKEN,
                machines=self.machines,
                wait_s=self.wait_s,
                stale_s=self.stale_s,
                poll_s=0.05,
            )
        except BaseException as exc:  # noqa: BLE001 - kept for the test to assert on
            self.error = exc
        self.finished_at = time.monotonic()


def follow(folder: Path, cmd: list[str], *, leader=lambda: TOKEN, finished=lambda: False, wait_s=30.0, token=None):
    return pbg_ranks.follow(
        folder,
        rank=1,
        command=lambda launch: cmd,
        log_path=folder / "rank1.log",
        env=lambda launch: dict(os.environ),
        leader=leader,
        finished=finished,
        wait_s=wait_s,
        heartbeat_s=0.2,
        token=token,
        poll_s=0.05,
    )


@pytest.fixture
def run_folder(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "pids").mkdir()
    return tmp_path / "run", tmp_path / "pids"


def test_both_ranks_finish_and_the_reports_say_so(run_folder):
    folder, pids = run_folder
    leader = Leader(folder, command(pids, "r0", 0.5))
    leader.start()
    assert follow(folder, command(pids, "r1", 1.0)) == TOKEN
    leader.join(30)
    assert leader.error is None and leader.finished_at is not None
    report = json.loads((folder / "rank-1.json").read_text())
    assert report["state"] == "done" and report["token"] == TOKEN and report["rank"] == 1
    assert json.loads((folder / "launch.json").read_text())["seed"] == 5
    # nothing is written after "done": the heartbeat stopped (the manifest's hashes and sizes must hold)
    before = (folder / "rank-1.json").stat().st_mtime_ns
    time.sleep(0.5)
    assert (folder / "rank-1.json").stat().st_mtime_ns == before


def test_rank_0_waits_for_the_other_ranks_to_be_done(run_folder):
    folder, pids = run_folder
    leader = Leader(folder, command(pids, "r0", 0.1))
    leader.start()
    t0 = time.monotonic()
    follow(folder, command(pids, "r1", 2.0))
    leader.join(30)
    assert leader.error is None and leader.finished_at - t0 >= 1.9


def test_a_failing_rank_stops_rank_0_which_names_it(run_folder):
    folder, pids = run_folder
    leader = Leader(folder, command(pids, "r0", 120))
    leader.start()
    assert wait_for(lambda: alive(pids, "r0"))
    with pytest.raises(CiteflowError, match=r"PBG rank 1: its PBG process stopped \(exit 3\)"):
        follow(folder, command(pids, "r1", 0.2, code=3))
    leader.join(30)
    assert isinstance(leader.error, CiteflowError)
    assert "PBG rank 1 of 2 on " in str(leader.error) and "failed: its PBG process stopped (exit 3)" in str(
        leader.error
    )
    assert wait_for(lambda: not alive(pids, "r0"), 15)  # rank 0's PBG process was stopped, not left waiting
    assert json.loads((folder / "rank-1.json").read_text())["state"] == "failed"


def test_a_rank_stops_its_pbg_process_when_rank_0_goes(run_folder):
    folder, pids = run_folder
    pbg_ranks.publish_launch(folder, token=TOKEN, machines=2, seed=0)
    live = {"token": TOKEN}
    threading.Timer(1.0, lambda: live.update(token=None)).start()  # rank 0's lease ends
    t0 = time.monotonic()
    with pytest.raises(CiteflowError, match="rank 0 is gone"):
        follow(folder, command(pids, "r1", 120), leader=lambda: live["token"])
    assert time.monotonic() - t0 < 15
    assert wait_for(lambda: not alive(pids, "r1"), 15)
    report = json.loads((folder / "rank-1.json").read_text())
    assert report["state"] == "failed" and "rank 0 is gone" in report["reason"]


def test_rank_0_fails_when_a_rank_never_joins(run_folder):
    folder, pids = run_folder
    leader = Leader(folder, command(pids, "r0", 120), machines=3, wait_s=1.0)
    leader.start()
    assert wait_for(lambda: alive(pids, "r0"))
    leader.join(30)
    assert isinstance(leader.error, CiteflowError) and "PBG rank 1 of 3 did not join within 1 s" in str(leader.error)
    assert wait_for(lambda: not alive(pids, "r0"), 15)


def test_rank_0_fails_when_a_running_rank_stops_reporting(run_folder):
    folder, pids = run_folder
    report = folder / "rank-1.json"
    report.write_text(json.dumps({"token": TOKEN, "rank": 1, "host": "h1", "pid": 1, "state": "running"}))
    old = time.time() - 60
    os.utime(report, (old, old))
    with pytest.raises(CiteflowError, match=r"PBG rank 1 of 2 on h1 \(pid 1\) stopped reporting 6\d s ago"):
        pbg_ranks.check_ranks(folder, token=TOKEN, machines=2, started=time.monotonic(), wait_s=30, stale_s=30)
    os.utime(report)  # a fresh heartbeat: running
    assert pbg_ranks.check_ranks(folder, token=TOKEN, machines=2, started=0, wait_s=1, stale_s=30) == {1: "running"}


def test_a_report_of_another_attempt_does_not_count(run_folder):
    folder, _ = run_folder
    (folder / "rank-1.json").write_text(json.dumps({"token": "attempt-0", "rank": 1, "state": "done"}))
    assert pbg_ranks.check_ranks(folder, token=TOKEN, machines=2, started=time.monotonic(), wait_s=30, stale_s=30) == {
        1: "waiting"
    }


def test_a_launch_left_by_a_dead_attempt_is_never_joined(run_folder):
    folder, pids = run_folder
    pbg_ranks.publish_launch(folder, token="attempt-0", machines=2, seed=0)
    with pytest.raises(CiteflowError, match="rank 0 did not launch run within 1 s"):
        follow(folder, command(pids, "r1", 0.1), wait_s=1.0)  # the live attempt is TOKEN
    assert not (pids / "r1").exists() and not (folder / "rank-1.json").exists()


def test_a_rank_bound_to_an_attempt_refuses_a_new_one(run_folder):
    folder, pids = run_folder
    pbg_ranks.publish_launch(folder, token="attempt-2", machines=2, seed=0)
    with pytest.raises(CiteflowError, match="rank 0 started a new attempt"):
        follow(folder, command(pids, "r1", 0.1), leader=lambda: "attempt-2", token=TOKEN)
    assert not (pids / "r1").exists()


def test_nothing_to_do_once_the_version_is_complete(run_folder):
    folder, pids = run_folder
    assert follow(folder, command(pids, "r1", 0.1), leader=lambda: None, finished=lambda: True) is None
    assert not (pids / "r1").exists()
