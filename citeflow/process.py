"""Child processes that die with the stage that started them.

    run_child([sys.executable, "-m", "citeflow.models.pbg.train", CONFIG], log_path=LOG, env=ENV)

Every process a stage starts (PBG's trainer and the workers it spawns, the encoder trainer, torchrun and
its ranks) runs under a *guard*, `python -m citeflow.process PARENT_PID -- COMMAND...`:

- The guard runs in a session and process group of its own (`start_new_session`), asks the kernel to
  send it SIGTERM when its parent dies (`prctl(PR_SET_PDEATHSIG)`, Linux; after setting it, it checks that
  the parent is still the one that started it, which closes the race of a parent dying first), and also
  watches its parent's pid once a second (the fallback where prctl does not exist).
- It makes itself a *child subreaper* (`PR_SET_CHILD_SUBREAPER`): descendants whose own parent dies — a
  torchrun rank whose torchrun was killed, PBG's pool workers — are re-parented to the guard instead of
  init, so the guard still finds them.
- It starts COMMAND in its own group and waits. When the command exits, or the parent dies, or it is
  told to stop (SIGTERM, SIGINT, SIGHUP), it SIGKILLs every descendant it has (walking `/proc` by parent
  pid, which also reaches torchrun's ranks in their own sessions) and exits with the command's status.
- On the parent's side, `run_child` kills the guard's whole group when the command fails or the parent is
  interrupted (KeyboardInterrupt, any exception), then re-raises.

So a SIGKILL of the stage (a killed CLI or Airflow task) ends everything below it within about a second,
and with it every writer in the version folder: a rerun never shares the folder with an orphan (the lease,
`citeflow.lease`, additionally kills any process that still carries a dead holder's token).

`run_together(commands, ...)` runs several commands at once, each under its own guard, as one gang: when one
fails (or a `watch` callback raises) every other is stopped before the failure is reported, the way a job of
distributed ranks must end (PBG's ranks wait forever for a peer that died).

`private_file(name, text)` hands a child process settings that may hold secrets: a file only this user can
read, removed when the block ends, so that nothing secret is on a command line (every local user reads any
process's `/proc/PID/cmdline`, e.g. with `ps`).

`die_with_parent()` is the same promise for a process someone else started: an Airflow task process (forked by
its worker's task supervisor) dies when that supervisor dies, as when its whole worker is killed, so that no
orphan goes on writing into a version whose retry runs elsewhere.

`fault_point(name)` is the fault-injection hook of the tests: the process SIGKILLs itself when the environment
variable CITEFLOW_FAULT_KILL equals `name`; or, when CITEFLOW_FAULT_FILE names a file that holds `name`, the
first process to reach that point claims the file (renames it to `FILE.<pid>`) and stops itself (SIGSTOP),
held there for a test to kill whatever it means to kill around it (a whole worker). Reads and writes only what
COMMAND does, plus the log file it is given (and the fault file).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import cast

FAULT_ENV = "CITEFLOW_FAULT_KILL"
FAULT_FILE_ENV = "CITEFLOW_FAULT_FILE"
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def faults_armed() -> bool:
    """Whether a test armed a `fault_point` in this process (code that buffers may then write as it goes)."""
    return bool(os.environ.get(FAULT_ENV))


def fault_point(name: str) -> None:
    """Fault injection for tests: SIGKILL this process here when CITEFLOW_FAULT_KILL names this point; stop it
    here (SIGSTOP) when the file CITEFLOW_FAULT_FILE names this point and this process is the first to claim it."""
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    armed = os.environ.get(FAULT_FILE_ENV)
    if armed and _claim(armed, name):
        os.kill(os.getpid(), signal.SIGSTOP)


def _claim(path: str, name: str) -> bool:
    """Whether the fault file at `path` names `name` and this process took it (one rename wins)."""
    try:
        with open(path) as fh:
            if fh.read().strip() != name:
                return False
        os.rename(path, f"{path}.{os.getpid()}")
    except OSError:
        return False
    return True


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Have the kernel send `sig` to this process when its parent (the process that forked it) dies: Linux's
    `PR_SET_PDEATHSIG`. False where the kernel has no such promise."""
    return _prctl(PR_SET_PDEATHSIG, sig)


@contextlib.contextmanager
def private_file(name: str, text: str) -> Iterator[str]:
    """The path of a file `name` holding `text`, readable by this user only (mode 0600, in a fresh folder of
    mode 0700 under the temporary folder); the folder is removed when the block ends."""
    folder = tempfile.mkdtemp(prefix="citeflow-private-")
    try:
        path = os.path.join(folder, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _exited(pid: int, state: str) -> bool:
    """Whether /proc's entry is a process that is gone but not yet reaped. A zombie thread-group leader whose
    other threads still run (its main thread exited) is not: it lives on, and so may its children."""
    if state == "X":
        return True
    if state != "Z":
        return False
    try:
        return len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:
        return True


def _family_tree() -> tuple[dict[int, list[int]], set[int]]:
    """Every process's children (by parent pid, from /proc) and the pids that are gone but not yet reaped."""
    children: dict[int, list[int]] = {}
    exited: set[int] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return children, exited
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        pid = int(entry)
        if _exited(pid, fields[0]):
            exited.add(pid)
        children.setdefault(int(fields[1]), []).append(pid)
    return children, exited


def children_of(pid: int) -> list[int]:
    """Pids of the live processes whose parent is `pid`."""
    children, exited = _family_tree()
    return [child for child in children.get(pid, []) if child not in exited]


def descendants(root: int) -> list[int]:
    """Pids of every live descendant of `root` (from /proc's parent pids; [] without /proc).

    The walk goes through zombie entries too: a process whose main thread has exited shows as a zombie while
    its other threads, and the children it started, live on.
    """
    children, exited = _family_tree()
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in exited:
                found.append(child)
            todo.append(child)
    return found


def kill_descendants(root: int, rounds: int = 50) -> None:
    """SIGKILL every descendant of `root` until none is left (new ones may fork while we kill)."""
    for _ in range(rounds):
        pids = descendants(root)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        # reap the ones that are ours (the subreaper inherits orphans), so they leave the process table
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        time.sleep(0.02)


def guard_main(argv: list[str]) -> int:
    """`python -m citeflow.process PARENT_PID -- COMMAND...`: run COMMAND, die with PARENT_PID."""
    parent = int(argv[0])
    command = argv[argv.index("--") + 1 :]
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the death signal was armed
        return 128 + signal.SIGKILL
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    me = os.getpid()

    def stop(signum: int, _frame) -> None:
        kill_descendants(me)
        os._exit(128 + signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, stop)

    def watch_parent() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                kill_descendants(me)
                os._exit(128 + signal.SIGKILL)

    # PDEATHSIG on the command too: if the guard itself is SIGKILLed, the command goes with it.
    child = subprocess.Popen(command, preexec_fn=lambda: _prctl(PR_SET_PDEATHSIG, signal.SIGKILL))
    threading.Thread(target=watch_parent, daemon=True).start()
    code = child.wait()
    kill_descendants(me)  # whatever the command left behind (pool workers, ranks) ends with it
    return code if code >= 0 else 128 - code


def guarded(command: Sequence[str]) -> list[str]:
    """The command line that runs `command` under a guard for this process."""
    return [sys.executable, "-m", "citeflow.process", str(os.getpid()), "--", *command]


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (this process's environment by default) with this checkout first on PYTHONPATH: the guard and
    the command import this checkout's code, whatever else is installed."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH")) if p
    )
    return env


def start_guarded(command: Sequence[str], *, env: dict[str, str] | None = None, **popen) -> subprocess.Popen:
    """`command` started under a guard for this process, in a process group of its own (`child_env(env)`;
    `popen`: Popen's stream arguments). Stop it with `stop_guarded`."""
    return subprocess.Popen(guarded(command), env=child_env(env), start_new_session=True, **popen)


def stop_guarded(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Stop the guard and everything under it: SIGTERM (the guard kills its descendants), then SIGKILL."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # the guard's group: anything still in it
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace_s)


def run_child(
    command: Sequence[str],
    *,
    log_path: Path,
    env: dict[str, str] | None = None,
    echo: bool = False,
    relay: Callable[[str], bool] | None = None,
) -> int:
    """Run `command` under a guard; its output goes to `log_path` (appended) and, with `echo`, to stderr.

    `relay` (with `echo`): each whole line of output is offered to it first, and goes to stderr only where it
    returns False (a parent logs its child's progress lines itself, so they reach its run log).

    Returns the exit status. On any exception in this process (KeyboardInterrupt included) the guard and
    every descendant are killed before the exception propagates.
    """
    with open(log_path, "ab") as out:
        process = start_guarded(command, env=env, stdout=subprocess.PIPE if echo else out, stderr=subprocess.STDOUT)
        try:
            fault_point("child-started")
            if echo:
                reader = cast(io.BufferedReader, process.stdout)  # the pipe, opened in binary mode
                pending = b""
                for chunk in iter(lambda: reader.read1(4096), b""):
                    out.write(chunk)
                    out.flush()
                    if relay is None:
                        _to_stderr(chunk)
                        continue
                    *lines, pending = (pending + chunk).split(b"\n")
                    _to_stderr(b"".join(line + b"\n" for line in lines if not relay(line.decode(errors="replace"))))
                if pending and not (relay and relay(pending.decode(errors="replace"))):
                    _to_stderr(pending)
            code = process.wait()
        except BaseException:
            stop_guarded(process)
            raise
    # the command is done; sweep its group in case a stray ignored the guard
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    return code


def _to_stderr(data: bytes) -> None:
    if data:
        sys.stderr.buffer.write(data)
        sys.stderr.flush()


def run_together(
    commands: Sequence[Sequence[str]],
    *,
    log_paths: Sequence[Path],
    env: dict[str, str] | None = None,
    watch: Callable[[], None] | None = None,
    poll_s: float = 0.2,
) -> tuple[int, int]:
    """Run `commands` at once, each under a guard with its own log; all succeed or all are stopped.

    Returns (-1, 0) when every command exited 0, else (index, status) of the first one seen failing, after
    every other has been stopped (the guards kill their descendants). `watch()` is called every `poll_s`
    seconds while they run; when it raises, all are stopped and the exception propagates, as it does on any
    exception here (KeyboardInterrupt included).
    """
    processes: list[subprocess.Popen] = []
    try:
        for command, log_path in zip(commands, log_paths, strict=True):
            with open(log_path, "ab") as out:
                processes.append(start_guarded(command, env=env, stdout=out, stderr=subprocess.STDOUT))
        fault_point("gang-started")
        while True:
            codes = [p.poll() for p in processes]
            failed = next((i for i, c in enumerate(codes) if c not in (None, 0)), None)
            if failed is not None:
                for process in processes:
                    stop_guarded(process)
                return failed, cast(int, codes[failed])  # neither None nor 0, as found just above
            if all(c == 0 for c in codes):
                return -1, 0
            if watch is not None:
                watch()
            time.sleep(poll_s)
    except BaseException:
        for process in processes:
            stop_guarded(process)
        raise
    finally:
        for process in processes:  # sweep each group in case a stray ignored its guard
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(guard_main(sys.argv[1:]))
