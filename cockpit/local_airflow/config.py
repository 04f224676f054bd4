"""The local Airflow's configuration: where a home keeps its state (the file names every command of it shares),
`LocalAirflowConfig`, and the environment every Airflow command of the home runs with (`airflow_env`)."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import socket
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PID_FILE = "airflow-local.pid"
PASSWORD_FILE = "simple_auth_manager_passwords.json"
LOG_DIR = "local-logs"
# Airflow's task logs ([logging] base_log_folder), named here so that every command of a home writes and
# reads the same folder
TASK_LOG_DIR = "logs"
DATABASE = "airflow.db"
# seconds a task process waits for the api-server before it retries (Airflow's default is 5)
EXECUTION_API_TIMEOUT_S = 30


@dataclasses.dataclass(frozen=True, kw_only=True)
class LocalAirflowConfig:
    """Where Airflow keeps its state, what it serves and who logs in."""

    home: Path = dataclasses.field(default=REPO / ".airflow", metadata={"help": "AIRFLOW_HOME (SQLite, logs, cfg)"})
    port: int = dataclasses.field(default=8080, metadata={"help": "api-server port (listens on 127.0.0.1 only)"})
    user: str = dataclasses.field(default="admin", metadata={"help": "the simple auth manager's one (admin) user"})
    password: str | None = dataclasses.field(default=None, metadata={"help": "kept from the home when not given"})
    dags: Path = dataclasses.field(default=REPO / "dags", metadata={"help": "DAGs folder"})
    plugins: Path | None = dataclasses.field(
        default=None,
        metadata={"help": "an extra plugins folder (citeflow's own plugin is found through its entry point)"},
    )
    artifacts: Path | None = dataclasses.field(
        default=None,
        metadata={
            "help": "artifact root, exported to every component as CITEFLOW_ARTIFACTS "
            "(for the DAGs' trigger-form default)"
        },
    )
    parallelism: int = dataclasses.field(default=2, metadata={"help": "task slots of the LocalExecutor"})
    extra_env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is not a TCP port")
        if ":" in self.user or "," in self.user or not self.user:
            raise ValueError(f"user name {self.user!r} cannot be empty or hold ':' or ','")
        if self.parallelism < 1:
            raise ValueError("parallelism must be at least 1")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def airflow_executable() -> str:
    """The `airflow` of the Python running this script (the virtualenv's), else the one on PATH."""
    beside = Path(sys.executable).with_name("airflow")
    if beside.exists():
        return str(beside)
    found = shutil.which("airflow")
    if not found:
        raise SystemExit("local_airflow: no `airflow` executable; run with the project's .venv/bin/python")
    return found


def free_port() -> int:
    """A TCP port nothing listens on right now (another process may still take it before us)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def known_password(cfg: LocalAirflowConfig) -> str:
    """The user's password: given, else kept in the home's password file, else new; written to that file."""
    path = cfg.home / PASSWORD_FILE
    stored = json.loads(path.read_text()) if path.exists() and path.read_text().strip() else {}
    password = cfg.password or stored.get(cfg.user) or secrets.token_urlsafe(12)
    if stored != {cfg.user: password}:
        path.write_text(json.dumps({cfg.user: password}) + "\n")
        path.chmod(0o600)
    return password


def airflow_env(cfg: LocalAirflowConfig) -> dict[str, str]:
    """The environment every Airflow command of this home runs with (secrets stay in the home's airflow.cfg)."""
    home = cfg.home.resolve()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(Path(cfg.dags).resolve()),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / DATABASE}",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / TASK_LOG_DIR),
        # What `airflow standalone` uses: LocalExecutor, whose task slots are [core] parallelism.
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": str(cfg.parallelism),
        "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": str(cfg.parallelism),
        # Task processes reach the api-server here; the default assumes port 8080.
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{cfg.port}/execution/",
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{cfg.user}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / PASSWORD_FILE),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(cfg.port),
        "AIRFLOW__API__WORKERS": "1",
        # One api-server worker on two busy cores can take longer than the default 5 s to answer a task's
        # heartbeat; the task's supervisor would then count it failed and kill a task that is working.
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": str(EXECUTION_API_TIMEOUT_S),
        # Two cores: parse with one process, and not more often than a person edits a DAG file.
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "60",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "120",
        "AIRFLOW__DAG_PROCESSOR__PRINT_STATS_INTERVAL": "300",
        "AIRFLOW__TRIGGERER__CAPACITY": "50",
        # Two servers on one machine (a dev server and a test's) must not fight over the log servers' ports.
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        # The components' own children (`airflow` of the same virtualenv) must find the same executable.
        "PATH": f"{Path(airflow_executable()).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    if cfg.plugins is not None:
        env["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(Path(cfg.plugins).resolve())
    if cfg.artifacts is not None:
        env["CITEFLOW_ARTIFACTS"] = str(Path(cfg.artifacts).resolve())
    env.update(dict(cfg.extra_env))
    return env
