"""The local Airflow's processes: `airflow` commands run to completion (`run_cli`, `create_pools`), `airflow
standalone` started in a process group of its own and waited for until healthy (`start`, `AirflowHandle`), and
the whole group stopped (`stop_group`), also from the pid file `--background` leaves (`stop_from_pid_file`)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from citeflow.cockpit.local_airflow.config import (
    LOG_DIR,
    PID_FILE,
    LocalAirflowConfig,
    airflow_env,
    airflow_executable,
    known_password,
)
from citeflow.cockpit.settings import POOLS


def run_cli(args: list[str], env: dict[str, str], timeout: float = 600) -> str:
    """One `airflow` command to completion; its output, or SystemExit with the tail of it."""
    done = subprocess.run([airflow_executable(), *args], env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(
            f"airflow {' '.join(args[:2])} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}"
        )
    return done.stdout


def create_pools(env: dict[str, str]) -> None:
    """The pools citeflow's DAGs queue on (`citeflow.cockpit.settings.POOLS`), created or resized."""
    for pool in POOLS:
        run_cli(["pools", "set", *pool], env)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(pgid: int, timeout: float = 30, children: Iterable[subprocess.Popen] = ()) -> None:
    """SIGTERM to the whole process group, SIGKILL to what is left after `timeout` seconds.

    `children` are this process's own children in the group: they are reaped while waiting, since a dead
    child stays in its group as a zombie until its parent waits for it (before, every stop waited the full
    grace period and 10 s more for zombies: the browser test's teardown took 40 s).
    """
    children = list(children)
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and group_alive(pgid):
            for child in children:
                child.poll()
            time.sleep(0.2)
        if not group_alive(pgid):
            return


@dataclasses.dataclass
class AirflowHandle:
    """A running local Airflow: where it answers, who logs in, and how to stop it."""

    cfg: LocalAirflowConfig
    password: str
    pgid: int
    processes: dict[str, subprocess.Popen]
    env: dict[str, str]

    @property
    def url(self) -> str:
        return self.cfg.url

    @property
    def log_dir(self) -> Path:
        return self.cfg.home / LOG_DIR

    def token(self) -> str:
        """A JWT for the REST API, from the simple auth manager's POST /auth/token."""
        body = json.dumps({"username": self.cfg.user, "password": self.password}).encode()
        request = urllib.request.Request(
            f"{self.url}/auth/token", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)["access_token"]

    def exited(self) -> dict[str, int]:
        """Components that have exited, with their status."""
        return {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}

    def log_tail(self, chars: int = 3000) -> str:
        parts = []
        for name in self.processes:
            path = self.log_dir / f"{name}.log"
            if path.exists():
                parts.append(f"--- {name} ---\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    def stop(self, timeout: float = 30) -> None:
        """Stop every component and whatever they spawned (idempotent)."""
        stop_group(self.pgid, timeout, self.processes.values())
        for process in self.processes.values():
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        pid_file = self.cfg.home / PID_FILE
        if pid_file.exists() and pid_file.read_text().split()[0] == str(self.pgid):
            pid_file.unlink()


def health(url: str) -> dict | None:
    """GET /api/v2/monitor/health (no login needed), or None while the api-server does not answer."""
    try:
        with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=5) as response:
            return json.load(response)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def is_healthy(report: dict | None) -> bool:
    return bool(report) and all(part.get("status") == "healthy" for part in report.values())


def start(cfg: LocalAirflowConfig, timeout: float = 300, quiet: bool = False) -> AirflowHandle:
    """Migrate the database, create the pools, start `airflow standalone`, wait until all is healthy.

    Standalone runs in a new session (a process group of its own, which its components and their tasks
    inherit), so that Ctrl-C in a terminal does not reach it and `handle.stop()` ends all of them.
    """
    say = (lambda *_: None) if quiet else (lambda msg: print(f"local_airflow: {msg}", flush=True))
    cfg.home.mkdir(parents=True, exist_ok=True)
    if (cfg.home / PID_FILE).exists():
        pgid = int((cfg.home / PID_FILE).read_text().split()[0])
        if group_alive(pgid):
            raise SystemExit(f"local_airflow: already running in {cfg.home} (process group {pgid}); --stop first")
        (cfg.home / PID_FILE).unlink()
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", cfg.port)) == 0:
            raise SystemExit(f"local_airflow: port {cfg.port} is taken; pick another with --port")
    password = known_password(cfg)
    env = airflow_env(cfg)
    say(f"AIRFLOW_HOME={env['AIRFLOW_HOME']}: airflow db migrate")
    run_cli(["db", "migrate"], env)
    create_pools(env)

    log_dir = cfg.home / LOG_DIR
    log_dir.mkdir(exist_ok=True)
    pgid = 0
    try:
        with open(log_dir / "standalone.log", "ab") as log:
            process = subprocess.Popen(
                [airflow_executable(), "standalone"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        pgid = process.pid
        handle = AirflowHandle(cfg=cfg, password=password, pgid=pgid, processes={"standalone": process}, env=env)
        say(f"started airflow standalone (process group {pgid}); log: {log_dir / 'standalone.log'}")
        deadline = time.monotonic() + timeout
        while not is_healthy(report := health(cfg.url)):
            if handle.exited():
                raise RuntimeError(f"airflow components exited: {handle.exited()}\n{handle.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"airflow not healthy after {timeout:.0f}s: {report}\n{handle.log_tail()}")
            time.sleep(2)
    except BaseException:
        if pgid:
            stop_group(pgid)
        raise
    return handle


def stop_from_pid_file(home: Path) -> bool:
    """Stop the process group recorded by --background; False when nothing was running."""
    pid_file = home / PID_FILE
    if not pid_file.exists():
        return False
    pgid = int(pid_file.read_text().split()[0])
    running = group_alive(pgid)
    stop_group(pgid)
    pid_file.unlink()
    return running
