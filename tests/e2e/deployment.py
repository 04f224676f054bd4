"""The deployment launcher (`python -m citeflow.cockpit.deployment`) run as a user runs it, for the tests of
`tests/e2e/test_deployment.py`: started in a process of its own, in a home of its own, and stopped with SIGTERM
(its Ctrl-C); then nothing it started may be left running.

`DeployedAirflow` adds what the tests need: the state file (each component's process group), a login for the
REST API (`RestClient`), the metadata database (PostgreSQL, read with psycopg), and the fault file the workers'
tasks watch (`citeflow.process.fault_point`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

from citeflow.cockpit.deployment import DeploymentConfig, read_state
from citeflow.cockpit.deployment.config import SECRETS_FILE
from citeflow.cockpit.deployment.services import database_url
from citeflow.cockpit.local_airflow import free_port
from citeflow.process import FAULT_FILE_ENV, descendants
from tests.e2e.airflow_server import RestClient
from tests.support.processes import TAG_ENV, describe, tagged
from tests.support.shared import missing

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "deployment-test"
# How soon the scheduler fails the task of a dead worker: the launcher's floor, twice Airflow's heartbeat interval
# several times over, so a merely late heartbeat on two busy cores is not taken for a death.
HEARTBEAT_TIMEOUT_S = 60


def check_prerequisites() -> None:
    """The Debian packages and providers the deployment needs (`.ci/run` installs them)."""
    from citeflow.cockpit.deployment import services
    from citeflow.errors import CiteflowError

    try:
        services.postgres_bin("postgres")
        services.redis_bin()
    except CiteflowError as exc:
        missing(str(exc))
    try:
        import airflow.providers.celery  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as exc:
        missing(f"the Celery and Postgres providers are not installed ({exc}): make install")


class DeployedAirflow:
    """A running deployment: its launcher process, home, login and state."""

    def __init__(self, home: Path, launcher: subprocess.Popen, tag: str, log: Path):
        self.home, self.launcher, self.tag, self.log = home, launcher, tag, log
        self.cfg = DeploymentConfig(home=home)  # RestClient reads the task logs from cfg.home
        self.password = PASSWORD
        self.fault_file = home / "fault"
        self._family: dict[int, int] = {}

    @classmethod
    def start(cls, root: Path, timeout_s: float = 600, **env: str) -> DeployedAirflow:
        """The launcher in the foreground, in a session of its own, told to stop should this process die."""
        check_prerequisites()
        home = root / "home"
        tag = f"deployment-{uuid.uuid4().hex[:8]}"
        log = root / "launcher.log"
        command = [sys.executable, "-m", "citeflow.cockpit.deployment", "--home", str(home)]
        command += ["--port", str(free_port()), "--password", PASSWORD]
        command += ["--heartbeat-timeout", str(HEARTBEAT_TIMEOUT_S)]
        environment = {
            **os.environ,
            TAG_ENV: tag,
            FAULT_FILE_ENV: str(home / "fault"),
            # a retried task waits 5 s, not the DAGs' default 30 s
            "CITEFLOW_TASK_RETRY_DELAY_S": "5",
            **env,
        }
        with open(log, "ab") as out:
            launcher = subprocess.Popen(
                command,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_stop_with_parent,
            )
        handle = cls(home, launcher, tag, log)
        deadline = time.monotonic() + timeout_s
        while not ((state := read_state(home)) and state["ready"] and state["launcher"] == launcher.pid):
            if launcher.poll() is not None or time.monotonic() > deadline:
                handle.stop()
                raise AssertionError(f"the deployment did not come up:\n{log.read_text(errors='replace')[-4000:]}")
            time.sleep(2)
        handle.remember_family()
        return handle

    @property
    def state(self) -> dict:
        state = read_state(self.home)
        assert state is not None, f"no state file in {self.home}"
        return state

    @property
    def url(self) -> str:
        return self.state["url"]

    def token(self) -> str:
        body = json.dumps({"username": "admin", "password": self.password}).encode()
        request = urllib.request.Request(
            f"{self.url}/auth/token", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)["access_token"]

    def rest(self) -> RestClient:
        return RestClient(self)

    def workers(self) -> dict[str, tuple[str, ...]]:
        """Each Celery worker's node-name prefix (`NAME@`) and the queues it serves."""
        return {
            name.removeprefix("worker-"): tuple(c["queues"])
            for name, c in self.state["components"].items()
            if name.startswith("worker-")
        }

    def group_of(self, component: str) -> int:
        return int(self.state["components"][component]["pgid"])

    def restarts(self, component: str) -> int:
        return int(self.state["components"][component]["restarts"])

    def query(self, sql: str, *params) -> list[tuple]:
        """Rows of a query of the metadata database (PostgreSQL), as its own user."""
        import psycopg

        keys = json.loads((self.home / SECRETS_FILE).read_text())
        url = database_url(self.state["ports"]["postgres"], keys["postgres"], driver="postgresql")
        with psycopg.connect(url, connect_timeout=10) as db:
            return db.execute(sql, params).fetchall()

    def arm(self, point: str) -> None:
        """Stop the first task process (or its child) that reaches `point` (`citeflow.process.fault_point`)."""
        for claimed in self.home.glob("fault.*"):
            claimed.unlink()
        self.fault_file.write_text(point)

    def held(self, timeout_s: float) -> int | None:
        """The pid of the process that claimed the armed fault and stopped itself there, once it has."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for claimed in self.home.glob("fault.*"):
                pid = int(claimed.suffix.lstrip("."))
                if _state_of(pid) == "T":
                    return pid
            time.sleep(0.5)
        return None

    def remember_family(self) -> None:
        """Note every process under the launcher now (Celery rewrites its processes' environment, where
        `tagged` looks, so the check after stopping also goes by these pids and their start times)."""
        for pid in descendants(self.launcher.pid):
            if (started := _start_time(pid)) is not None:
                self._family[pid] = started

    def leftovers(self) -> list[str]:
        alive = [pid for pid, started in self._family.items() if _start_time(pid) == started]
        found = {pid: cmd for pid, cmd in tagged(self.tag)}
        for pid in alive:
            found.setdefault(pid, _cmdline(pid))
        return describe(sorted(found.items()))

    def stop(self, timeout_s: float = 180) -> None:
        """SIGTERM to the launcher (its Ctrl-C), which stops everything it started; then sweep, by pid, what
        would still be running and fail if there was any."""
        if self.launcher.poll() is None:
            self.remember_family()
            self.launcher.send_signal(signal.SIGTERM)
            try:
                self.launcher.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.launcher.kill()
                self.launcher.wait()
        deadline = time.monotonic() + 20
        while (left := self.leftovers()) and time.monotonic() < deadline:
            time.sleep(0.5)
        for line in left:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
        assert not left, "the deployment left processes behind:\n" + "\n".join(left)


def _stop_with_parent() -> None:
    from citeflow.process import die_with_parent

    die_with_parent(signal.SIGTERM)


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _state_of(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[0] if fields else None


def _start_time(pid: int) -> int | None:
    fields = _stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def deployment_root() -> Path:
    """A folder for the deployment's home that PostgreSQL's user can enter (pytest's own temporary folders are
    private to root, and PostgreSQL refuses to run as root)."""
    root = Path(tempfile.mkdtemp(prefix="citeflow-deployment-"))
    root.chmod(0o755)
    return root


def remove_root(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)


def quoted(run_id: str) -> str:
    return urllib.parse.quote(run_id, safe="")
