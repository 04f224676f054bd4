"""Run Airflow 3 locally with citeflow's DAGs and plugins, sized for a small machine (2 cores).

    python -m citeflow.cockpit.local_airflow                    # foreground: Ctrl-C stops every component
    python -m citeflow.cockpit.local_airflow --background       # returns once healthy; pid file in the home
    python -m citeflow.cockpit.local_airflow --stop             # stops what --background started
    python -m citeflow.cockpit.local_airflow --pools            # only creates the pools in $AIRFLOW_HOME's Airflow
    python -m citeflow.cockpit.local_airflow --dags-test DAG    # one run of DAG with `airflow dags test`: no server

Reads nothing but its arguments (and, with `--dags-test`, the home's own database). Writes the Airflow
home (default `.airflow/`): `airflow.cfg`, the SQLite database, the simple auth manager's password file,
`local-logs/standalone.log`, in the background `airflow-local.pid`, and with `--dags-test` the task logs
under `logs/`. Runs `airflow db migrate`, creates the pools the GPU and PBG tasks queue on
(`citeflow.cockpit.settings.POOLS`), then starts `airflow standalone` (api-server, scheduler, dag-processor,
triggerer, with the LocalExecutor) in a process group of its own, so that stopping the group also stops
the tasks they spawned (Spark's JVM, training processes).

`--dags-test` makes one DAG run in the same home with the same settings (`airflow_env`), so that a server
started later on that home shows the run: `make demo` runs the demo this way and `make airflow` serves
its home. `airflow dags test` runs every task inside its own process and prints the tasks' logs among its
own lines, writing no task log file; this mode passes that output on and then files each task's part of it
where Airflow's UI reads that task's log (`file_task_logs`).

Login: the simple auth manager with one admin user. The password is `--password`, else the one kept in
the home's password file, else a new random one; it is printed once at start (a local demo login).

Airflow itself is not imported here: it is driven through its command line, with the `airflow`
executable next to this Python's (the project's virtualenv). The test `tests/e2e/test_browser.py` uses
`start()` from this file.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from citeflow.cockpit.settings import POOLS

REPO = Path(__file__).resolve().parents[1]
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


# The lines `airflow dags test` logs around each task it runs (`_run_task` in airflow/sdk/definitions/dag.py).
# It runs one task at a time, inside its own process, so every line between a task's start and its end is that
# task's (a child process of the task, such as the encoder's training, prints to the same output).
_TASK_START = re.compile(r"\[DAG TEST\] starting task_id=(?P<task_id>\S+) map_index=(?P<map_index>-?\d+)")
_TASK_END = re.compile(r"\[DAG TEST\] end task task_id=(?P<task_id>\S+) map_index=(?P<map_index>-?\d+)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskLog:
    """One task attempt's part of the output of `airflow dags test`."""

    task_id: str
    map_index: int
    run_id: str
    # 1 for the task's first start in this output, 2 for its next (a retry), ...
    ordinal: int
    text: str


def task_logs(output: str, dag_id: str) -> list[TaskLog]:
    """Each task attempt's lines of `airflow dags test DAG_ID`'s output, from its start line to its end line.

    A task whose end line never came (the run was killed, or the task took the process down) keeps what it
    printed. Lines outside every task (parsing the DAG files, the run's own bookkeeping) belong to none. The
    run id comes from the task's "running task <TaskInstance: DAG.TASK RUN_ID ...>" line; a task cut off before
    that line cannot be placed and is left out.
    """
    found: list[TaskLog] = []
    starts: dict[tuple[str, int], int] = {}
    key: tuple[str, int] | None = None
    run_id: str | None = None
    lines: list[str] = []

    def close() -> None:
        if key is not None and run_id is not None:
            found.append(
                TaskLog(task_id=key[0], map_index=key[1], run_id=run_id, ordinal=starts[key], text="".join(lines))
            )

    for line in output.splitlines(keepends=True):
        if start := _TASK_START.search(line):
            close()
            key, run_id, lines = (start["task_id"], int(start["map_index"])), None, [line]
            starts[key] = starts.get(key, 0) + 1
            continue
        if key is None:
            continue
        lines.append(line)
        if run_id is None and (named := re.search(re.escape(f"<TaskInstance: {dag_id}.{key[0]} ") + r"(\S+)", line)):
            run_id = named[1]
        if (end := _TASK_END.search(line)) and (end["task_id"], int(end["map_index"])) == key:
            close()
            key, run_id, lines = None, None, []
    close()
    return found


def task_log_path(template: str, log: TaskLog, dag_id: str, try_number: int) -> str:
    """Where Airflow's UI reads this attempt's log, relative to the task log folder: the run's log template
    rendered as Airflow renders it (`FileTaskHandler._render_filename`: Jinja when the template holds `{{`,
    else `str.format`). ValueError for a template that needs more than the task instance and its try number
    (such as the logical date, `{{ ts }}`, of Airflow 2's template).
    """
    ti = argparse.Namespace(
        dag_id=dag_id, task_id=log.task_id, run_id=log.run_id, map_index=log.map_index, try_number=try_number
    )
    if "{{" in template:
        import jinja2  # Airflow's own dependency, needed only here

        try:
            env = jinja2.Environment(undefined=jinja2.StrictUndefined)
            return env.from_string(template).render(ti=ti, try_number=try_number)
        except jinja2.TemplateError as exc:
            raise ValueError(f"log template {template!r}: {exc}") from exc
    try:
        return template.format(dag_id=dag_id, task_id=log.task_id, run_id=log.run_id, try_number=try_number)
    except (KeyError, IndexError) as exc:
        raise ValueError(f"log template {template!r} names {exc}") from exc


def file_task_logs(home: Path, dag_id: str, output: str) -> list[Path]:
    """Write each task attempt's part of `airflow dags test`'s output where Airflow's UI reads its log.

    The template and the try numbers come from the home's SQLite database (the one `airflow_env` names), where
    the UI finds them too: the run's `log_template`, and the task instance's `try_number`, which is that of the
    task's last start in this output (a start before it, a retry, had the try before). Returns the files written.
    """
    logs = task_logs(output, dag_id)
    starts = {(log.run_id, log.task_id, log.map_index): log.ordinal for log in logs}  # the last start of each
    base = (home / TASK_LOG_DIR).resolve()
    written = []
    with contextlib.closing(sqlite3.connect(home / DATABASE)) as db:
        for log in logs:
            template = db.execute(
                "SELECT t.filename FROM dag_run r JOIN log_template t ON t.id = r.log_template_id "
                "WHERE r.dag_id = ? AND r.run_id = ?",
                (dag_id, log.run_id),
            ).fetchone()
            last_try = db.execute(
                "SELECT try_number FROM task_instance "
                "WHERE dag_id = ? AND run_id = ? AND task_id = ? AND map_index = ?",
                (dag_id, log.run_id, log.task_id, log.map_index),
            ).fetchone()
            if template is None or last_try is None:
                continue
            try_number = last_try[0] - (starts[(log.run_id, log.task_id, log.map_index)] - log.ordinal)
            try:
                target = base / task_log_path(template[0], log, dag_id, try_number)
            except ValueError as exc:
                print(f"local_airflow: no log file for {log.task_id}: {exc}", flush=True)
                continue
            # A run or task id that would climb out of the log folder is not written anywhere.
            if not target.resolve().is_relative_to(base):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(log.text)
            written.append(target)
    return written


def dags_test(cfg: LocalAirflowConfig, dag_id: str) -> int:
    """One run of `dag_id` with `airflow dags test` in this home, with every setting a server of the home gets.

    Migrates the database and creates the pools first, as `start` does. The command's output is passed on to
    stdout as it comes, then filed as each task's log (`file_task_logs`): `airflow dags test` writes none
    itself. Returns the command's exit status.
    """
    cfg.home.mkdir(parents=True, exist_ok=True)
    env = airflow_env(cfg)
    print(f"local_airflow: AIRFLOW_HOME={env['AIRFLOW_HOME']}: airflow db migrate", flush=True)
    run_cli(["db", "migrate"], env)
    create_pools(env)
    print(f"local_airflow: airflow dags test {dag_id}", flush=True)
    output = []
    with subprocess.Popen(
        [airflow_executable(), "dags", "test", dag_id],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    ) as process:
        for line in process.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            output.append(line)
    filed = file_task_logs(cfg.home, dag_id, "".join(output))
    print(f"local_airflow: {len(filed)} task logs filed under {cfg.home / TASK_LOG_DIR}", flush=True)
    return process.returncode


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


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    helps = {f.name: f.metadata.get("help", "") for f in dataclasses.fields(LocalAirflowConfig)}
    parser.add_argument("--home", type=Path, default=REPO / ".airflow", help=helps["home"])
    parser.add_argument("--port", type=int, default=8080, help=helps["port"])
    parser.add_argument("--user", default="admin", help=helps["user"])
    parser.add_argument("--password", help=helps["password"])
    parser.add_argument("--dags", type=Path, default=REPO / "dags", help=helps["dags"])
    parser.add_argument("--plugins", type=Path, help=helps["plugins"])
    parser.add_argument("--artifacts", type=Path, help=helps["artifacts"])
    parser.add_argument("--parallelism", type=int, default=2, help=helps["parallelism"])
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for a healthy Airflow")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--background", action="store_true", help="write the pid file and return once healthy")
    mode.add_argument("--stop", action="store_true", help="stop the Airflow started with --background")
    mode.add_argument(
        "--pools", action="store_true", help="only create citeflow's pools in the Airflow of $AIRFLOW_HOME (migrated)"
    )
    mode.add_argument(
        "--dags-test",
        metavar="DAG_ID",
        help="one run of the DAG with `airflow dags test` in this home (no server), its task logs filed for the UI",
    )
    args = parser.parse_args(argv)

    if args.pools:
        create_pools(dict(os.environ))
        return 0

    if args.stop:
        stopped = stop_from_pid_file(args.home)
        print(f"local_airflow: {'stopped' if stopped else 'nothing running'} in {args.home}")
        return 0
    try:
        cfg = LocalAirflowConfig(
            home=args.home,
            port=args.port,
            user=args.user,
            password=args.password,
            dags=args.dags,
            plugins=args.plugins,
            artifacts=args.artifacts,
            parallelism=args.parallelism,
        )
    except ValueError as exc:
        parser.error(str(exc))
    if args.dags_test:
        return dags_test(cfg, args.dags_test)
    handle = start(cfg, timeout=args.timeout)
    print(f"local_airflow: Airflow is up at {handle.url}/  login: {cfg.user} / {handle.password}", flush=True)
    if args.background:
        (cfg.home / PID_FILE).write_text(f"{handle.pgid} {cfg.port}\n")
        print(
            f"local_airflow: running in the background; stop it with: "
            f"{Path(sys.executable).name} -m citeflow.cockpit.local_airflow --stop --home {cfg.home}"
        )
        return 0

    # Foreground: stay until Ctrl-C (or SIGTERM), or until a component dies; then stop the whole group.
    signal.signal(signal.SIGTERM, _interrupt)
    print("local_airflow: Ctrl-C stops it", flush=True)
    try:
        while not handle.exited():
            time.sleep(1)
        print(f"local_airflow: a component exited {handle.exited()}; stopping\n{handle.log_tail(1500)}", flush=True)
        status = 1
    except KeyboardInterrupt:
        status = 0
    print("local_airflow: stopping", flush=True)
    handle.stop()
    return status


if __name__ == "__main__":
    sys.exit(main())
