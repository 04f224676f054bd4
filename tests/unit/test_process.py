"""Children under a guard: they end when the parent dies or is interrupted, grandchildren included."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from citeflow.lease import processes_with_token
from citeflow.process import run_child

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A child that starts a grandchild in a session of its own (as torchrun starts its ranks), then waits.
FAMILY = textwrap.dedent(
    """
    import subprocess, sys, time
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    print("family started", flush=True)
    time.sleep(120)
    """
)


def tagged_env(tag: str) -> dict[str, str]:
    # the lease token variable marks every process of the family (children inherit the environment)
    return {**os.environ, "CITEFLOW_LEASE": tag, "PYTHONPATH": REPO}


def wait_until(predicate, timeout_s=20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_exit_status_and_output_of_the_child(tmp_path):
    log = tmp_path / "child.log"
    code = run_child([sys.executable, "-c", "print('hello'); raise SystemExit(3)"], log_path=log)
    assert code == 3 and log.read_text() == "hello\n"


def sigkill_the_parent_of(family: str, tmp_path, at_least: int) -> None:
    """Run `family` under run_child in a parent process, SIGKILL the parent once `at_least` processes of the
    family run, and assert that none is left."""
    tag = uuid.uuid4().hex
    log = tmp_path / "family.log"
    parent_code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from citeflow.process import run_child
        run_child([sys.executable, "-c", {family!r}], log_path=Path({str(log)!r}))
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], env=tagged_env(tag), start_new_session=True)
    try:
        assert wait_until(lambda: log.exists() and "family started" in log.read_text())
        assert wait_until(lambda: len(processes_with_token(tag)) >= at_least)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert wait_until(lambda: processes_with_token(tag) == [], timeout_s=10), processes_with_token(tag)
    finally:
        for pid in processes_with_token(tag):
            os.kill(pid, signal.SIGKILL)


def test_a_sigkilled_parent_takes_its_children_and_grandchildren_with_it(tmp_path):
    sigkill_the_parent_of(FAMILY, tmp_path, at_least=4)  # parent, guard, child, grandchild


# A child whose main thread exits while another thread runs on (its /proc entry then reads as a zombie), after
# starting a grandchild: the grandchild still belongs to the family.
LEADERLESS = textwrap.dedent(
    """
    import ctypes, subprocess, sys, threading, time
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    def live_on():
        time.sleep(0.5)  # the main thread has exited by then
        print("family started", flush=True)
        time.sleep(120)
    threading.Thread(target=live_on).start()
    ctypes.CDLL(None).pthread_exit(None)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pthread_exit of the main thread, /proc")
def test_a_child_whose_main_thread_exited_still_takes_its_grandchild_with_it(tmp_path):
    # parent, guard, grandchild (the leaderless child's environment can no longer be read)
    sigkill_the_parent_of(LEADERLESS, tmp_path, at_least=3)


def test_an_interrupted_parent_kills_the_family_before_the_exception_propagates(tmp_path):
    tag = uuid.uuid4().hex
    log = tmp_path / "family.log"
    parent_code = textwrap.dedent(
        f"""
        import signal, sys
        from pathlib import Path
        from citeflow.process import run_child
        from citeflow.lease import processes_with_token
        def interrupt(*_):
            raise KeyboardInterrupt
        signal.signal(signal.SIGALRM, interrupt)
        signal.alarm(3)
        try:
            run_child([sys.executable, "-c", {FAMILY!r}], log_path=Path({str(log)!r}))
        except KeyboardInterrupt:
            print("left:", len(processes_with_token({tag!r})))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", parent_code], env=tagged_env(tag), capture_output=True, text=True, timeout=60
    )
    assert "family started" in log.read_text()
    assert done.stdout.strip() == "left: 0", done.stderr


@pytest.mark.parametrize("point", ["child-started"])
def test_fault_point_kills_the_process_where_named(tmp_path, point):
    tag = uuid.uuid4().hex
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from citeflow.process import run_child
        run_child([sys.executable, "-c", "import time; time.sleep(60)"], log_path=Path({str(tmp_path / "l")!r}))
        """
    )
    env = {**tagged_env(tag), "CITEFLOW_FAULT_KILL": point}
    done = subprocess.run([sys.executable, "-c", code], env=env, timeout=60)
    assert done.returncode == -signal.SIGKILL
    assert wait_until(lambda: processes_with_token(tag) == [], timeout_s=10)


def test_run_together_stops_the_whole_gang_when_one_fails(tmp_path):
    from citeflow.process import run_together

    tag = uuid.uuid4().hex
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    t0 = time.monotonic()
    failed, code = run_together(
        [[sys.executable, "-c", FAMILY], [sys.executable, "-c", "import time; time.sleep(1.5); raise SystemExit(4)"]],
        log_paths=logs,
        env=tagged_env(tag),
    )
    assert (failed, code) == (1, 4)
    assert time.monotonic() - t0 < 30
    assert "family started" in logs[0].read_text()
    # the first command and the grandchild it started in a session of its own are gone too
    assert wait_until(lambda: processes_with_token(tag) == [])


def test_run_together_returns_when_all_succeed_and_stops_all_when_watch_raises(tmp_path):
    from citeflow.process import run_together

    ok = run_together([[sys.executable, "-c", "pass"]] * 2, log_paths=[tmp_path / "1", tmp_path / "2"])
    assert ok == (-1, 0)
    tag = uuid.uuid4().hex
    calls = []

    def watch():
        calls.append(1)
        if len(calls) > 10:
            raise RuntimeError("peer gone")

    with pytest.raises(RuntimeError, match="peer gone"):
        run_together([[sys.executable, "-c", FAMILY]], log_paths=[tmp_path / "3"], env=tagged_env(tag), watch=watch)
    assert wait_until(lambda: processes_with_token(tag) == [])


def test_an_armed_fault_file_stops_the_first_process_at_its_point_once(tmp_path):
    fault = tmp_path / "fault"
    fault.write_text("manifest-staged")
    code = "from citeflow.process import fault_point; fault_point('other'); fault_point('manifest-staged'); print('on')"
    env = {**tagged_env(uuid.uuid4().hex), "CITEFLOW_FAULT_FILE": str(fault)}
    first = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        claimed = tmp_path / f"fault.{first.pid}"
        assert wait_until(claimed.exists), list(tmp_path.iterdir())
        assert wait_until(lambda: open(f"/proc/{first.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "T")
        assert not fault.exists()
        # the file is claimed: the next process passes the point
        second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 0 and second.stdout.strip() == "on", second.stderr
    finally:
        first.kill()
        first.wait()
    assert first.returncode == -signal.SIGKILL


def test_a_process_bound_to_its_parent_dies_with_it(tmp_path):
    """die_with_parent: the parent SIGKILLed, its child (in a process group of its own, as Airflow starts a
    task) is killed by the kernel; unbound, the same child lives on as an orphan."""
    child = "import time; from citeflow.process import die_with_parent; {} time.sleep(60)"
    parent = textwrap.dedent(
        """
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], start_new_session=True)
        print(child.pid, flush=True)
        time.sleep(60)
        """
    )
    for bound, survives in (("die_with_parent();", False), ("", True)):
        env = tagged_env(uuid.uuid4().hex)
        process = subprocess.Popen(
            [sys.executable, "-c", parent, child.format(bound)], env=env, stdout=subprocess.PIPE, text=True
        )
        pid = int(process.stdout.readline())
        time.sleep(2)  # the child has armed its death signal (or not)
        process.kill()
        process.wait()
        try:
            gone = wait_until(lambda pid=pid: not os.path.exists(f"/proc/{pid}"), timeout_s=5)
            assert gone != survives, f"bound={bool(bound)}"
        finally:
            if os.path.exists(f"/proc/{pid}"):
                os.kill(pid, signal.SIGKILL)
