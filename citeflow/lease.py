"""One writer per version: a lease file beside the version folder, taken before anything is written.

    ROOT/<snapshot>/<stage>/.<version>.lease      JSON: host, pid, process start time, boot and pid
                                                   namespace ids, token, what, acquired_at, heartbeat_s

Reads nothing but lease files and, on Linux, `/proc`; writes only the lease file. A `flock` on the stage
folder serialises the rare transitions below (on a filesystem that cannot lock a folder, on an empty
`.leases.lock` in it).

- **Taking it** is one atomic `open(O_CREAT | O_EXCL)`: of two runs, exactly one creates the file. Nothing
  else ever creates a lease, so there are never two holders.
- **Heartbeat**: a daemon thread touches the open file's modification time every `heartbeat_s` seconds, and
  checks that the file is still its own.
- **Stale** when the holder is gone: on the holder's own machine (same host name, boot id and pid
  namespace) the process table decides — the holder's pid is not running, or runs with another start time
  (a reused pid is not the holder). A live holder on this machine is never stale, however old its heartbeat
  (a stopped process is not a dead one): waiting for it is safe, taking over is not. A holder on another
  machine cannot be looked up, and its clock need not agree with this one's, so no timestamp of it is compared
  with this machine's time: the waiter watches the heartbeat (the file's modification time, whatever clock
  set it) and judges the lease stale when it has not changed for `stale_s` seconds of its own monotonic clock.
- **Taking over** a stale lease happens under the `flock`, after checking that the file is still the one
  judged stale. Processes that still carry the dead holder's token in their environment (children started
  with it, `LEASE_ENV`) are killed first, so a rerun never shares a folder with an orphan.
- **Fencing**: every acquisition is a new file (a new inode and token). A holder checks that the file is still
  its own (`check`, `fence`) before it clears or writes its version's folder, before each staging write of a
  Spark stage and before it commits; its heartbeat checks too, and then runs the `on_lost` callbacks (a Spark
  stage cancels its jobs). A holder that finds its lease taken (`LeaseLost`) stops with one line naming the
  run that holds it now, and leaves the folder, which is that run's, alone.
- **Releasing** unlinks the file, under the `flock`, only when it is still this holder's (same inode).

A holder stopped longer than `stale_s` on another machine (a paused VM) is taken over; when it resumes it
stops within one heartbeat, but a write it had in flight may land in the new holder's folder first: keep
`stale_s` well above any pause a worker can take.

Local filesystems (and POSIX mounts with atomic O_EXCL, such as NFSv3+) only: object stores have no
atomic create that pyarrow exposes, and citeflow takes no lease there (README, "Guarantees").
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from citeflow.errors import CiteflowError

log = logging.getLogger("citeflow")

LEASE_ENV = "CITEFLOW_LEASE"  # the holder's token, inherited by every child it starts
LOCK_FILE = ".leases.lock"
POLL_S = 0.5


def lease_path(version_path: str) -> str:
    """`.../<stage>/.<version>.lease`: beside the version folder, never inside it."""
    folder, version = os.path.split(version_path.rstrip("/"))
    return os.path.join(folder, f".{version}.lease")


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def boot_id() -> str:
    return (_read("/proc/sys/kernel/random/boot_id") or "").strip()


def pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (`/proc/<pid>/stat` field 22), or None when the
    process does not exist or is a zombie (dead, not yet reaped). "" where /proc is not available."""
    if not os.path.isdir("/proc/self"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return ""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "; comm may hold spaces
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]


@dataclass(frozen=True)
class Holder:
    """Who holds a lease, as its file says."""

    host: str
    pid: int
    start: str
    boot: str
    pidns: str
    token: str
    what: str
    acquired_at: str

    @classmethod
    def me(cls, what: str) -> Holder:
        return cls(
            host=socket.gethostname(),
            pid=os.getpid(),
            start=process_start(os.getpid()) or "",
            boot=boot_id(),
            pidns=pid_namespace(),
            token=uuid.uuid4().hex,
            what=what,
            acquired_at=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        )

    @classmethod
    def parse(cls, text: str | None) -> Holder | None:
        try:
            data = json.loads(text or "")
            return cls(**{k: data[k] for k in cls.__dataclass_fields__})
        except (ValueError, TypeError, KeyError):
            return None

    def on_this_machine(self) -> bool:
        return (self.host, self.boot, self.pidns) == (socket.gethostname(), boot_id(), pid_namespace())

    def alive_here(self) -> bool:
        """On this machine: whether the holder's process still runs (same pid and start time)."""
        start = process_start(self.pid)
        return start is not None and (not start or not self.start or start == self.start)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} (since {self.acquired_at})"


class LeaseHeld(CiteflowError):
    """Another live run holds the lease and did not finish within the wait."""


class LeaseLost(CiteflowError):
    """This run's lease was taken over by another run: it must stop and leave the version folder alone."""


# The leases this process holds, by version path: `fence` finds the one a write belongs to.
_HELD: dict[str, Lease] = {}


def holding(version_path: str) -> Lease | None:
    """The lease this process holds on `version_path`, if any (none on a store without leases)."""
    return _HELD.get(os.path.normpath(version_path))


def fence(version_path: str) -> None:
    """Raise `LeaseLost` unless this process still holds the lease it took on `version_path` (nothing where it
    took none: a store without leases)."""
    lease = holding(version_path)
    if lease is not None:
        lease.check()


@contextlib.contextmanager
def _transition(folder: str) -> Iterator[None]:
    """Serialise take-overs and releases of the leases in `folder`: an exclusive flock on the folder itself,
    so no lock file is left behind; where a filesystem cannot lock a folder (some network mounts), on the
    folder's `LOCK_FILE` instead."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            os.close(fd)
            fd = os.open(os.path.join(folder, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def processes_with_token(token: str) -> list[int]:
    """Pids of this user's processes whose environment carries `LEASE_ENV=token` (Linux; [] elsewhere)."""
    if not os.path.isdir("/proc/self"):
        return []
    needle = f"{LEASE_ENV}={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def kill_orphans(token: str, timeout_s: float = 20.0) -> list[int]:
    """SIGKILL every process still carrying a dead holder's token; wait until they are gone."""
    killed: list[int] = []
    deadline = time.monotonic() + timeout_s
    while True:
        pids = [p for p in processes_with_token(token) if process_start(p) is not None]
        if not pids:
            return killed
        if time.monotonic() > deadline:
            raise CiteflowError(f"processes {pids} of a dead run do not die; stop them, then run again")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            if pid not in killed:
                killed.append(pid)
        time.sleep(0.1)


class Lease:
    """The lease on one version folder. `acquire` it before writing; `release` (or `with`) when done."""

    def __init__(self, version_path: str, *, what: str, heartbeat_s: float = 10.0, stale_s: float = 300.0):
        self.version_path = os.path.normpath(version_path)
        self.path = lease_path(version_path)
        self.folder = os.path.dirname(self.path)
        self.what = what
        self.heartbeat_s = heartbeat_s
        self.stale_s = stale_s
        self.holder: Holder | None = None
        self._fd: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._saved_env: str | None = None
        self._watched: dict[tuple[int, str], tuple[int, float]] = {}  # (inode, text) -> (heartbeat, since)
        self._on_lost: list[Callable[[], None]] = []

    # -- taking and giving back ---------------------------------------------------------------
    def acquire(self, wait_s: float, done: Callable[[], bool] = lambda: False) -> bool:
        """Take the lease; True when taken. While another live run holds it, wait up to `wait_s` seconds:
        return False as soon as `done()` says the version is complete (the other run built it), or raise
        `LeaseHeld` naming the holder when the time is up."""
        os.makedirs(self.folder, exist_ok=True)
        deadline = time.monotonic() + wait_s
        announced = 0.0
        waited = False
        while True:
            if waited and done():  # the holder we waited for finished the version
                return False
            if self._try_create():
                return True
            text = _read(self.path)
            if text is None:
                continue  # released between our attempt and the read: try again at once
            holder = Holder.parse(text)
            reason = self._stale_reason(holder, text)
            if reason is not None:
                self._take_over(text, holder, reason)
                continue
            waited = True
            if done():
                return False
            left = deadline - time.monotonic()
            who = holder.describe() if holder else "a run that is just starting"
            if left <= 0:
                waited = f"waited {wait_s:.0f} s; " if wait_s else ""
                elsewhere = ""
                if holder is not None and not holder.on_this_machine():
                    elsewhere = (
                        f" (a holder on another host is taken over once its heartbeat has not changed for "
                        f"store.lease_stale_s, {self.stale_s:.0f} s, watched from here)"
                    )
                raise LeaseHeld(
                    f"{self.what} is being built by {who}; {waited}run again when it has finished "
                    f"(or set store.lease_wait_s to wait longer){elsewhere}"
                )
            if time.monotonic() - announced > 30:
                log.info("%s is being built by %s; waiting up to %.0f s", self.what, who, left)
                announced = time.monotonic()
            time.sleep(min(POLL_S, max(left, 0.01)))

    def _try_create(self) -> bool:
        holder = Holder.me(self.what)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        payload = json.dumps({**holder.__dict__, "heartbeat_s": self.heartbeat_s}, indent=1).encode()
        os.write(fd, payload)
        os.fsync(fd)
        self._fd, self.holder = fd, holder
        self._saved_env = os.environ.get(LEASE_ENV)
        os.environ[LEASE_ENV] = holder.token
        _HELD[self.version_path] = self
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name=f"lease {self.what}", daemon=True)
        self._thread.start()
        return True

    def _stale_reason(self, holder: Holder | None, text: str = "") -> str | None:
        """Why the lease file (whose text is `text`) is stale, or None while its holder may be alive."""
        if holder is not None and holder.on_this_machine():
            return None if holder.alive_here() else f"its holder, {holder.describe()}, is gone"
        # Another machine's holder, or a lease file being written right now (or left unreadable by a crash
        # while it was written): stale when its heartbeat has not changed for `stale_s` of this clock.
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        key, beat, now = (st.st_ino, text), st.st_mtime_ns, time.monotonic()
        seen = self._watched.get(key)
        if seen is None or seen[0] != beat:  # first seen, or it beat since: alive
            self._watched[key] = (beat, now)
            return None
        silent = now - seen[1]
        if silent <= self.stale_s:
            return None
        who = holder.describe() if holder is not None else "an unreadable lease file"
        return f"no heartbeat from {who} for {silent:.0f} s, watched on this host's clock"

    def _take_over(self, text: str, holder: Holder | None, reason: str) -> None:
        with _transition(self.folder):
            if _read(self.path) != text:
                return  # someone else took over or released meanwhile: look again
            if holder is not None and holder.on_this_machine():
                killed = kill_orphans(holder.token)
                if killed:
                    log.warning("%s: killed orphaned processes of the dead run: %s", self.what, killed)
            log.warning("%s: taking over a stale lease (%s)", self.what, reason)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def release(self) -> None:
        if self._fd is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with _transition(self.folder):
            if self.held():
                os.unlink(self.path)
        os.close(self._fd)
        self._fd = None
        if _HELD.get(self.version_path) is self:
            del _HELD[self.version_path]
        if self._saved_env is None:
            os.environ.pop(LEASE_ENV, None)
        else:
            os.environ[LEASE_ENV] = self._saved_env

    def held(self) -> bool:
        """Whether the lease file is still the one this process created (not taken over)."""
        if self._fd is None:
            return False
        try:
            return os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
        except FileNotFoundError:
            return False

    def check(self) -> None:
        """Raise `LeaseLost`, naming the run that holds the lease now, unless this run still holds it: before
        the version folder is cleared, before each staging write and before the version is committed."""
        if self.held():
            return
        now = Holder.parse(_read(self.path))
        who = f"{now.describe()} holds it now" if now is not None else "nobody holds it now"
        raise LeaseLost(
            f"{self.what}: this run's lease was taken over while it was building (its heartbeat was not seen for "
            f"store.lease_stale_s, {self.stale_s:.0f} s); {who}. This run stops, commits nothing and leaves "
            "the version's folder to that run"
        )

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Call `callback` (once, from the heartbeat thread) when the heartbeat finds the lease taken over: a
        Spark stage cancels its jobs, so that they stop writing into a folder that is no longer theirs."""
        self._on_lost.append(callback)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            fd = self._fd
            if fd is None:
                return
            if not self.held():
                log.error("%s: this run's lease was taken over by another run; stopping its work", self.what)
                for callback in self._on_lost:
                    with contextlib.suppress(Exception):
                        callback()
                return
            with contextlib.suppress(OSError):
                os.utime(fd)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def read_holder(version_path: str) -> Holder | None:
    """Who holds the lease on a version folder now (None: nobody, or an unreadable lease file)."""
    return Holder.parse(_read(lease_path(version_path)))


def is_being_built(version_path: str, stale_s: float = 300.0) -> bool:
    """Whether a run may hold the lease on `version_path` (a folder without a manifest is then not the remains
    of a killed run, but a version being written): a live holder on this machine, or any holder on another,
    which one look cannot judge (only a waiter watching its heartbeat can, `Lease.acquire`)."""
    holder = read_holder(version_path)
    if holder is None:
        return os.path.exists(lease_path(version_path))
    return not holder.on_this_machine() or holder.alive_here()


def dead_leases(stage_folder: str) -> list[str]:
    """The lease files in a stage folder whose holder, on this machine, is gone: what a killed run left."""
    found = []
    with contextlib.suppress(FileNotFoundError):
        for name in sorted(os.listdir(stage_folder)):
            if not (name.startswith(".") and name.endswith(".lease")):
                continue
            holder = Holder.parse(_read(os.path.join(stage_folder, name)))
            if holder is not None and holder.on_this_machine() and not holder.alive_here():
                found.append(os.path.join(stage_folder, name))
    return found


def remove_dead(lease_file: str) -> bool:
    """Remove a lease file whose holder on this machine is gone (under the folder's `flock`, after checking it
    again: it may have been taken meanwhile); True when removed."""
    folder = os.path.dirname(lease_file)
    with _transition(folder):
        holder = Holder.parse(_read(lease_file))
        if holder is None or not holder.on_this_machine() or holder.alive_here():
            return False
        kill_orphans(holder.token)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lease_file)
    return True
