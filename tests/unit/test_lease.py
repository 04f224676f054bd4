"""The version lease: one holder, stale only when the holder is gone, orphans of a dead holder killed."""

import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from citeflow.errors import CiteflowError
from citeflow.lease import LEASE_ENV, Lease, LeaseHeld, boot_id, lease_path, pid_namespace, read_holder


def version_dir(tmp_path):
    folder = tmp_path / "snap" / "stage" / "0123456789abcdef"
    folder.parent.mkdir(parents=True)
    return str(folder)


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def write_lease(path, *, pid, start, host=None, token="t0ken", age_s=0.0):
    with open(lease_path(path), "w") as fh:
        json.dump(
            {
                "host": host or socket.gethostname(),
                "pid": pid,
                "start": start,
                "boot": boot_id(),
                "pidns": pid_namespace(),
                "token": token,
                "what": "x",
                "acquired_at": "2020-01-01T00:00:00+00:00",
            },
            fh,
        )
    if age_s:
        then = time.time() - age_s
        os.utime(lease_path(path), (then, then))


def test_the_lease_file_lies_beside_the_version_and_names_its_holder(tmp_path):
    path = version_dir(tmp_path)
    with Lease(path, what="demo 0123") as lease:
        assert lease.acquire(0)
        assert lease_path(path) == os.path.join(os.path.dirname(path), ".0123456789abcdef.lease")
        holder = read_holder(path)
        assert holder.pid == os.getpid() and holder.host == socket.gethostname()
        assert holder.start == open(f"/proc/{os.getpid()}/stat").read().rsplit(")", 1)[1].split()[19]
        assert os.environ[LEASE_ENV] == holder.token
    assert not os.path.exists(lease_path(path)) and LEASE_ENV not in os.environ


def test_a_second_run_stops_at_once_naming_the_live_holder(tmp_path):
    path = version_dir(tmp_path)
    with Lease(path, what="demo 0123") as first:
        assert first.acquire(0)
        with pytest.raises(LeaseHeld, match=rf"demo 0123 is being built by pid {os.getpid()} on "):
            Lease(path, what="demo 0123").acquire(0)
        assert first.held()


def test_a_waiting_run_returns_when_the_holder_has_finished(tmp_path):
    path = version_dir(tmp_path)
    finished = threading.Event()
    holder = Lease(path, what="v")
    assert holder.acquire(0)

    def finish_later():
        time.sleep(1.0)
        finished.set()
        holder.release()

    threading.Thread(target=finish_later).start()
    t0 = time.monotonic()
    assert Lease(path, what="v").acquire(30, done=finished.is_set) is False
    assert 0.9 < time.monotonic() - t0 < 10


def test_a_dead_holder_or_a_reused_pid_is_stale_and_taken_over(tmp_path):
    path = version_dir(tmp_path)
    write_lease(path, pid=dead_pid(), start="1")
    with Lease(path, what="v") as lease:
        assert lease.acquire(0)
        assert read_holder(path).pid == os.getpid()
    # a live pid whose start time is not the holder's: the pid was reused, the holder is gone
    write_lease(path, pid=os.getppid(), start="1")
    with Lease(path, what="v") as lease:
        assert lease.acquire(0)


def test_a_holder_on_another_host_is_trusted_until_its_heartbeat_is_old(tmp_path):
    path = version_dir(tmp_path)
    write_lease(path, pid=dead_pid(), start="1", host="elsewhere", age_s=5)
    with pytest.raises(LeaseHeld, match="pid .* on elsewhere"):
        Lease(path, what="v", heartbeat_s=1, stale_s=60).acquire(0)
    write_lease(path, pid=dead_pid(), start="1", host="elsewhere", age_s=120)
    with Lease(path, what="v", heartbeat_s=1, stale_s=60) as lease:
        assert lease.acquire(0)


def test_the_heartbeat_keeps_the_lease_fresh(tmp_path):
    path = version_dir(tmp_path)
    with Lease(path, what="v", heartbeat_s=0.1, stale_s=1) as lease:
        assert lease.acquire(0)
        then = time.time() - 100
        os.utime(lease_path(path), (then, then))
        time.sleep(0.5)
        assert time.time() - os.stat(lease_path(path)).st_mtime < 1


def test_a_lease_taken_over_is_not_released_by_its_old_holder_and_cannot_commit(tmp_path):
    path = version_dir(tmp_path)
    old = Lease(path, what="v")
    assert old.acquire(0)
    os.unlink(lease_path(path))  # as a take-over does
    new = Lease(path, what="v")
    assert new.acquire(0)
    with pytest.raises(CiteflowError, match="lease was taken over"):
        old.check()
    old.release()
    assert new.held() and os.path.exists(lease_path(path))
    new.release()


def test_orphans_of_a_dead_holder_are_killed_before_the_take_over(tmp_path):
    path = version_dir(tmp_path)
    token = "orphan-token-" + os.urandom(4).hex()
    orphan = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], env={**os.environ, LEASE_ENV: token}
    )
    try:
        write_lease(path, pid=dead_pid(), start="1", token=token)
        with Lease(path, what="v") as lease:
            assert lease.acquire(0)
        assert orphan.wait(timeout=10) == -9
    finally:
        orphan.kill()
