"""The version lease: one holder, stale only when the holder is gone (whatever the clocks of other hosts say),
orphans of a dead holder killed, a holder that lost its lease stopped by its fence, dead leases cleared."""

import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from citeflow.errors import CiteflowError
from citeflow.lease import (
    LEASE_ENV,
    Lease,
    LeaseHeld,
    LeaseLost,
    boot_id,
    dead_leases,
    lease_path,
    pid_namespace,
    read_holder,
    remove_dead,
)


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


def test_a_holder_on_another_host_is_trusted_until_its_heartbeat_stops_for_the_stale_time_here(tmp_path):
    """Another host's lease is never judged by its timestamps, only by watching its heartbeat: an old one is not
    taken over at a glance, but after `stale_s` of this host's clock without a beat."""
    path = version_dir(tmp_path)
    write_lease(path, pid=dead_pid(), start="1", host="elsewhere", age_s=10_000)
    with pytest.raises(LeaseHeld, match=r"pid .* on elsewhere.*lease_stale_s, 60 s, watched from here"):
        Lease(path, what="v", heartbeat_s=1, stale_s=60).acquire(0)
    t0 = time.monotonic()
    with Lease(path, what="v", heartbeat_s=0.2, stale_s=1) as lease:
        assert lease.acquire(10)
        assert 1 <= time.monotonic() - t0 < 8


@pytest.mark.parametrize("skew_s", [400, -400])
def test_a_live_holder_is_never_taken_over_from_a_host_whose_clock_is_off(tmp_path, monkeypatch, skew_s):
    """A second writer standing for another host whose clock is 400 s ahead (or behind), while the holder is
    alive and beating: it waits and never takes over. A holder that stops beating is taken over from such a host
    all the same, after `stale_s` of its own clock."""
    path = version_dir(tmp_path)
    holder = Lease(path, what="v", heartbeat_s=0.1, stale_s=1)
    assert holder.acquire(0)
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + skew_s)
    monkeypatch.setattr(socket, "gethostname", lambda: "other-host")
    try:
        with pytest.raises(LeaseHeld, match="is being built by pid"):
            Lease(path, what="v", heartbeat_s=0.1, stale_s=1).acquire(3)
        assert holder.held()
        holder._stop.set()  # the holder freezes: no more beats
        holder._thread.join()
        with Lease(path, what="v", heartbeat_s=0.1, stale_s=1) as second:
            assert second.acquire(10)
            with pytest.raises(LeaseLost, match=r"taken over .* pid \d+ on other-host .* holds it now"):
                holder.check()
    finally:
        holder.release()


# A holder on "another host" (its host name patched), in a process of its own: it takes the lease, says so, and
# when told (a file appears) checks its fence, as a stage does before each staging write and its commit.
FROZEN_HOLDER = """
import os, socket, sys, time
socket.gethostname = lambda: "frozen-host"
from citeflow.lease import Lease, LeaseLost, fence
path, go, lost = sys.argv[1:4]
lease = Lease(path, what="stage v of s", heartbeat_s=0.2, stale_s=1.5)
assert lease.acquire(0)
lease.on_lost(lambda: open(lost, "w").close())
print("held", flush=True)
while not os.path.exists(go):
    time.sleep(0.05)
try:
    fence(path)
except LeaseLost as exc:
    print(f"citeflow: error: {exc}", file=sys.stderr)
    lease.release()
    sys.exit(2)
print("still held", flush=True)
"""


def test_a_holder_frozen_past_the_stale_time_on_another_host_is_taken_over_and_then_stops(tmp_path):
    """The holder, on another host, is stopped (SIGSTOP) for longer than `stale_s`: a waiter here takes over after
    watching no beat for that long (and kills nothing: no process of another host is its business). Resumed, the
    holder's heartbeat finds the lease gone (its `on_lost` callback runs), and its fence stops it with one line
    naming the new holder; it leaves the new holder's lease alone."""
    import signal

    path = version_dir(tmp_path)
    go, lost = tmp_path / "go", tmp_path / "lost"
    frozen = subprocess.Popen(
        [sys.executable, "-c", FROZEN_HOLDER, path, str(go), str(lost)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert frozen.stdout.readline().strip() == "held"
        assert read_holder(path).host == "frozen-host"
        os.kill(frozen.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        with Lease(path, what="stage v of s", heartbeat_s=0.2, stale_s=1.5) as lease:
            assert lease.acquire(20)
            assert time.monotonic() - t0 >= 1.5
            os.kill(frozen.pid, signal.SIGCONT)
            deadline = time.monotonic() + 10
            while not lost.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert lost.exists()  # its heartbeat saw it
            go.touch()
            out, err = frozen.communicate(timeout=30)
            assert frozen.returncode == 2, (out, err)
            line = err.strip().splitlines()[-1]
            assert line.startswith("citeflow: error: stage v of s: this run's lease was taken over")
            assert f"pid {os.getpid()} on {socket.gethostname()}" in line and "leaves the version's folder" in line
            assert lease.held() and read_holder(path).pid == os.getpid()
    finally:
        if frozen.poll() is None:
            os.kill(frozen.pid, signal.SIGCONT)
            frozen.kill()
            frozen.wait()


def test_a_dead_holders_lease_is_found_and_removed_but_a_live_ones_is_not(tmp_path):
    path = version_dir(tmp_path)
    folder = os.path.dirname(path)
    write_lease(path, pid=dead_pid(), start="1")
    live = os.path.join(folder, "fedcba9876543210")
    with Lease(live, what="live") as lease:
        assert lease.acquire(0)
        assert dead_leases(folder) == [lease_path(path)]
        assert remove_dead(lease_path(path)) and not os.path.exists(lease_path(path))
        assert dead_leases(folder) == [] and not remove_dead(lease_path(live)) and lease.held()
    write_lease(path, pid=dead_pid(), start="1", host="elsewhere")  # another host's: not judged at a glance
    assert dead_leases(folder) == []


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
