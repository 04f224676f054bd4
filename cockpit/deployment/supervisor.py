"""The deployment's processes: each component (PostgreSQL, Redis, Airflow's api-server, scheduler, dag-processor
and triggerer, each Celery worker) is one command under a guard of its own (`citeflow.process`: its own process
group, and everything under it dies with the launcher, should the launcher itself be killed). `Deployment`
starts them in order, waits until all answer, restarts an Airflow component or worker that dies (as a service
manager would restart a worker whose machine rebooted), and stops them all, gracefully first.

The state file (`deployment.json` in the home, rewritten atomically on every change) says where each component
runs: the launcher's pid, each component's process group, restarts and (for a worker) queues, the ports and
the URL, and whether the deployment is up. `--stop` and the tests read it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import citeflow.cockpit.deployment.services as services
from citeflow.cockpit.deployment.config import (
    AIRFLOW_COMPONENTS,
    COMPONENT_LOG_DIR,
    POSTGRES_DIR,
    REDIS_DIR,
    STATE_FILE,
    DeploymentConfig,
    deployment_env,
    known_secrets,
)
from citeflow.cockpit.local_airflow import (
    airflow_executable,
    create_pools,
    free_port,
    health,
    is_healthy,
    known_password,
    run_cli,
)
from citeflow.errors import CiteflowError
from citeflow.process import children_of, start_guarded, stop_guarded

# An Airflow component that dies this soon after its start, this many times in a row, is not restarted again:
# something is wrong with the deployment itself (a bad setting, a full disk), and the launcher stops.
QUICK_DEATH_S = 30.0
QUICK_DEATHS = 5
STOP_GRACE_S = 20.0


@dataclasses.dataclass
class Component:
    """One long-running command of the deployment, under a guard, its output appended to `log`."""

    name: str
    command: list[str]
    env: dict[str, str]
    log: Path
    # what asks the command itself to end cleanly (PostgreSQL: SIGINT, its fast shutdown)
    stop_signal: int = signal.SIGTERM
    # Airflow's components are restarted when they die; the services are not (the launcher stops instead)
    restart: bool = True
    queues: tuple[str, ...] = ()
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    restarts: int = 0
    quick_deaths: int = 0

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            out.write(f"--- deployment: starting {self.name} at {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
            out.flush()
            self.process = start_guarded(
                self.command, env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )
        self.started_at = time.monotonic()

    @property
    def pgid(self) -> int | None:
        """The process group of the guard and the command (the guard's pid)."""
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Ask the command to end (`stop_signal`), give it `grace_s`, then end the guard and all under it."""
        if self.process is None:
            return
        if self.alive():
            for pid in children_of(self.process.pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, self.stop_signal)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=grace_s)
        stop_guarded(self.process, grace_s=5)


class DeploymentFailed(CiteflowError):
    """A service died, or an Airflow component keeps dying: the deployment cannot go on."""


@dataclasses.dataclass
class Deployment:
    """A running deployment (`start`), kept running (`watch`) and stopped (`stop`)."""

    cfg: DeploymentConfig
    say: Callable[[str], None] = lambda message: print(f"deployment: {message}", flush=True)
    components: dict[str, Component] = dataclasses.field(default_factory=dict)
    ports: dict[str, int] = dataclasses.field(default_factory=dict)
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    password: str = ""
    ready: bool = False

    @property
    def home(self) -> Path:
        return self.cfg.home

    def _component(self, name: str, command: list[str], env: dict[str, str], **kwargs) -> Component:
        component = Component(name, command, env, self.home / COMPONENT_LOG_DIR / f"{name}.log", **kwargs)
        self.components[name] = component
        component.start()
        self.write_state()
        return component

    def start(self, timeout_s: float = 600.0) -> None:
        """PostgreSQL, Redis, the migrated database with citeflow's pools, Airflow's components, the workers;
        returns once the api-server reports every component healthy and every worker is ready. On any failure
        (Ctrl-C included) whatever was started is stopped again."""
        self.home.mkdir(parents=True, exist_ok=True)
        refuse_if_running(self.home)
        try:
            self._start(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        self.password = known_password(self.cfg.local())
        keys = known_secrets(self.home)
        self.ports = {"api": self.cfg.port, "postgres": free_port(), "redis": free_port(), "pbg": free_port()}
        base = dict(os.environ)

        pg = self.home / POSTGRES_DIR
        self.say(f"PostgreSQL in {pg} on port {self.ports['postgres']}")
        services.init_postgres(pg, keys["postgres"])
        self._component(
            "postgres",
            services.postgres_command(pg, self.ports["postgres"]),
            base,
            stop_signal=signal.SIGINT,
            restart=False,
        )
        self._wait("PostgreSQL", lambda: services.postgres_ready(self.ports["postgres"], keys["postgres"]), deadline)
        services.create_database(self.ports["postgres"], keys["postgres"])

        redis = self.home / REDIS_DIR
        self.say(f"Redis in {redis} on port {self.ports['redis']}")
        command = services.redis_command(redis, self.ports["redis"], keys["redis"])
        self._component("redis", command, base, restart=False)
        self._wait("Redis", lambda: services.redis_ready(self.ports["redis"], keys["redis"]), deadline)

        self.env = deployment_env(
            self.cfg,
            database=services.database_url(self.ports["postgres"], keys["postgres"]),
            broker=services.broker_url(self.ports["redis"], keys["redis"]),
        )
        # where PBG's rank 0 serves the other ranks (the connection a team sets once; host: rank 0's worker)
        self.env["AIRFLOW_CONN_PBG_RENDEZVOUS"] = json.dumps({"conn_type": "generic", "port": self.ports["pbg"]})
        self.say("airflow db migrate")
        run_cli(["db", "migrate"], self.env)
        create_pools(self.env)

        airflow = airflow_executable()
        for name in AIRFLOW_COMPONENTS:
            self._component(name, [airflow, name], self.env)
        logs_served = False
        for worker in self.cfg.workers:
            command = [airflow, "celery", "worker", "--queues", ",".join(worker.queues)]
            command += ["--concurrency", str(worker.concurrency), "--celery-hostname", f"{worker.name}@%h"]
            # One machine, one task log folder: one log server serves every worker's logs while they run.
            command += ["--skip-serve-logs"] if logs_served else []
            logs_served = True
            self._component(f"worker-{worker.name}", command, self.env, queues=worker.queues)
        self._wait("Airflow", lambda: is_healthy(health(self.cfg.url)) and self._workers_ready(), deadline)
        self.ready = True
        self.write_state()

    def _workers_ready(self) -> bool:
        """Whether every worker has logged its `NAME@host ready.` since it was last started."""
        for component in self.components.values():
            if not component.name.startswith("worker-") or not component.log.exists():
                continue
            text = component.log.read_text(errors="replace")
            since = text.rsplit(f"--- deployment: starting {component.name}", 1)[-1]
            if f"{component.name.removeprefix('worker-')}@" not in since or " ready." not in since:
                return False
        return True

    def _wait(self, what: str, ready: Callable[[], bool], deadline: float) -> None:
        while not ready():
            self.check_alive()
            if time.monotonic() > deadline:
                raise DeploymentFailed(f"{what} not ready in time; logs in {self.home / COMPONENT_LOG_DIR}")
            time.sleep(1)

    def check_alive(self) -> None:
        """Fail at once when a component died while starting (its log's end says why)."""
        for component in self.components.values():
            if not component.alive():
                code = component.process.returncode if component.process else None
                tail = component.log.read_text(errors="replace")[-1500:] if component.log.exists() else ""
                raise DeploymentFailed(f"{component.name} exited ({code}):\n{tail}")

    def watch(self) -> None:
        """One round of keeping the deployment up: a dead service stops it all (DeploymentFailed); a dead Airflow
        component or worker is started again (unless it keeps dying right after its start)."""
        for component in self.components.values():
            if component.alive():
                continue
            code = component.process.returncode if component.process else None
            if not component.restart:
                raise DeploymentFailed(f"{component.name} exited ({code}); see {component.log}")
            lived = time.monotonic() - component.started_at
            component.quick_deaths = component.quick_deaths + 1 if lived < QUICK_DEATH_S else 0
            if component.quick_deaths >= QUICK_DEATHS:
                raise DeploymentFailed(
                    f"{component.name} died {QUICK_DEATHS} times within {QUICK_DEATH_S:.0f} s of its start; "
                    f"see {component.log}"
                )
            if component.process is not None:
                stop_guarded(component.process, grace_s=1)  # anything of its group still there
            component.restarts += 1
            self.say(f"{component.name} exited ({code}) after {lived:.0f} s; restart {component.restarts}")
            component.start()
            self.write_state()

    def stop(self) -> None:
        """Stop everything started, the workers and Airflow's components first, the services last."""
        self.ready = False
        for component in reversed(list(self.components.values())):
            if component.alive():
                self.say(f"stopping {component.name}")
            component.stop()
        (self.home / STATE_FILE).unlink(missing_ok=True)

    def write_state(self) -> None:
        state = {
            "launcher": os.getpid(),
            "url": self.cfg.url,
            "user": self.cfg.user,
            "ready": self.ready,
            "ports": self.ports,
            "components": {
                c.name: {"pgid": c.pgid, "restarts": c.restarts, "queues": list(c.queues), "log": str(c.log)}
                for c in self.components.values()
            },
        }
        path = self.home / STATE_FILE
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(state, indent=1) + "\n")
        os.replace(tmp, path)


def read_state(home: Path) -> dict | None:
    path = home / STATE_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def is_guard(pid: int | None) -> bool:
    """Whether `pid` runs a `citeflow.process` guard."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"citeflow.process" in fh.read()
    except OSError:
        return False


def refuse_if_running(home: Path) -> None:
    state = read_state(home)
    if state and pid_alive(int(state["launcher"])) and int(state["launcher"]) != os.getpid():
        raise DeploymentFailed(f"a deployment runs in {home} already (launcher pid {state['launcher']}); --stop first")


def stop_from_state(home: Path, timeout_s: float = 120.0) -> bool:
    """Stop the deployment of `home` from another process: SIGTERM to its launcher (which stops everything it
    started), then, if the launcher does not end in time, SIGKILL to it and to every component's group (their
    guards end what is under them). False when nothing was running."""
    state = read_state(home)
    if state is None:
        return False
    launcher = int(state["launcher"])
    running = pid_alive(launcher)
    if running:
        os.kill(launcher, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while pid_alive(launcher) and time.monotonic() < deadline:
            time.sleep(0.5)
    if running and not pid_alive(launcher):
        return True  # it stopped everything itself (and removed the state file)
    with contextlib.suppress(ProcessLookupError):
        os.kill(launcher, signal.SIGKILL)
    # a launcher killed (or gone) before it could stop its components: their groups, guard and all
    for component in state["components"].values():
        if is_guard(component["pgid"]):  # not a group that took a dead guard's number since
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(component["pgid"]), signal.SIGKILL)
    (home / STATE_FILE).unlink(missing_ok=True)
    return running
