"""What a deployment is: `DeploymentConfig` (its home, the api-server's port, the Celery workers and the queues
they serve, how soon a lost task is noticed), the file names of its home, the secrets it keeps there, and the
environment every Airflow component and command of it runs with (`deployment_env`: the local launcher's
`airflow_env` with the metadata database, the executor and the broker replaced).
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
from pathlib import Path

from citeflow.cockpit.local_airflow import LocalAirflowConfig, airflow_env
from citeflow.cockpit.settings import INPUT_ROOTS_VARIABLE

REPO = Path(__file__).resolve().parents[2]
# in the home (which is also AIRFLOW_HOME): the state file, the secrets, the components' logs and the services
STATE_FILE = "deployment.json"
SECRETS_FILE = "deployment-secrets.json"
COMPONENT_LOG_DIR = "component-logs"
POSTGRES_DIR = "postgres"
REDIS_DIR = "redis"
# Airflow's own components, started in this order after the database is migrated
AIRFLOW_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkerSpec:
    """One Celery worker: its name (the node name `NAME@host` and its log's), the queues it serves and its task
    slots."""

    name: str
    queues: tuple[str, ...]
    concurrency: int = 1

    def __post_init__(self):
        if not self.name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"worker name {self.name!r}: letters, digits, - and _ only")
        if not self.queues or any(not q or "," in q for q in self.queues):
            raise ValueError(f"worker {self.name}: needs one or more queue names without commas")
        if self.concurrency < 1:
            raise ValueError(f"worker {self.name}: concurrency must be at least 1")

    @classmethod
    def parse(cls, text: str) -> WorkerSpec:
        """`NAME=QUEUE[+QUEUE...][:SLOTS]`, as the command line's --worker takes it."""
        name, sep, rest = text.partition("=")
        queues, _, slots = rest.partition(":")
        if not sep or not queues:
            raise ValueError(f"--worker {text!r}: expected NAME=QUEUE[+QUEUE...][:SLOTS]")
        try:
            concurrency = int(slots) if slots else 1
        except ValueError:
            raise ValueError(f"--worker {text!r}: SLOTS must be a whole number") from None
        return cls(name=name, queues=tuple(queues.split("+")), concurrency=concurrency)


# Sized for 2 cores: the Spark stages (and PBG's rank 0) on the default queue with two slots; training and
# embedding on the `gpu` queue, one at a time (its pool has one slot too); the other PBG ranks on a worker of
# their own, as on another machine, so that the ranks of one run meet across workers.
DEFAULT_WORKERS = (
    WorkerSpec(name="default", queues=("default",), concurrency=2),
    WorkerSpec(name="gpu", queues=("gpu",), concurrency=1),
    WorkerSpec(name="pbg", queues=("pbg_rank",), concurrency=1),
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeploymentConfig:
    """A deployment of citeflow's DAGs on one machine: PostgreSQL, Redis, Airflow's components and Celery
    workers, all under `home`."""

    home: Path = dataclasses.field(
        default=REPO / ".deploy",
        metadata={"help": "folder of the deployment: AIRFLOW_HOME, the database, the broker, the components' logs"},
    )
    port: int = dataclasses.field(default=8080, metadata={"help": "api-server port (listens on 127.0.0.1 only)"})
    user: str = dataclasses.field(default="admin", metadata={"help": "the simple auth manager's one (admin) user"})
    password: str | None = dataclasses.field(default=None, metadata={"help": "kept from the home when not given"})
    dags: Path = dataclasses.field(default=REPO / "dags", metadata={"help": "DAGs folder"})
    artifacts: Path | None = dataclasses.field(
        default=None,
        metadata={"help": "artifact root every worker mounts, the trigger form's default (CITEFLOW_ARTIFACTS)"},
    )
    workers: tuple[WorkerSpec, ...] = dataclasses.field(
        default=DEFAULT_WORKERS, metadata={"help": "the Celery workers: NAME=QUEUE[+QUEUE...][:SLOTS], repeatable"}
    )
    gpu_queue: str = dataclasses.field(
        default="gpu", metadata={"help": "queue of training and embedding (CITEFLOW_GPU_QUEUE)"}
    )
    pbg_queue: str = dataclasses.field(
        default="default", metadata={"help": "queue of embed_graph, PBG's rank 0 (CITEFLOW_PBG_QUEUE)"}
    )
    pbg_rank_queue: str = dataclasses.field(
        default="pbg_rank", metadata={"help": "queue of PBG's other ranks (CITEFLOW_PBG_RANK_QUEUE)"}
    )
    input_roots: str = dataclasses.field(
        default="",
        metadata={
            "help": "folders a trigger may read inputs from, comma-separated (the Variable citeflow_input_roots); "
            "empty: the Variable as set in Airflow, else the demo folder"
        },
    )
    heartbeat_timeout_s: int = dataclasses.field(
        default=120,
        metadata={
            "help": "seconds without a heartbeat after which the scheduler fails a running task (and retries it): "
            "how soon the task of a worker that died is run again"
        },
    )
    extra_env: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port {self.port} is not a TCP port")
        names = [w.name for w in self.workers]
        if len(set(names)) != len(names):
            raise ValueError(f"worker names must differ: {names}")
        served = {q for w in self.workers for q in w.queues}
        unserved = sorted({"default", self.gpu_queue, self.pbg_queue, self.pbg_rank_queue} - served)
        if unserved:
            raise ValueError(f"no worker serves the queue {unserved[0]!r}, where citeflow's DAGs send tasks")
        if self.heartbeat_timeout_s < 30:
            raise ValueError("heartbeat_timeout_s below 30 s would fail tasks whose heartbeat is merely late")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def slots(self) -> int:
        return sum(w.concurrency for w in self.workers)

    def local(self) -> LocalAirflowConfig:
        """The local launcher's view of this deployment, whose environment `deployment_env` starts from."""
        return LocalAirflowConfig(
            home=self.home,
            port=self.port,
            user=self.user,
            password=self.password,
            dags=self.dags,
            artifacts=self.artifacts,
            parallelism=self.slots,
            extra_env=self.extra_env,
        )


def known_secrets(home: Path) -> dict[str, str]:
    """The passwords of the database user and of Redis: kept in the home (mode 0600), made on first use."""
    path = home / SECRETS_FILE
    stored = json.loads(path.read_text()) if path.exists() else {}
    wanted = {name: stored.get(name) or secrets.token_urlsafe(18) for name in ("postgres", "redis")}
    if wanted != stored:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(wanted) + "\n")
    return wanted


def deployment_env(cfg: DeploymentConfig, *, database: str, broker: str) -> dict[str, str]:
    """The environment of every Airflow component and command of the deployment: the local launcher's (auth
    manager, api-server, DAG parsing sized for 2 cores, task logs in the home), with the PostgreSQL `database`,
    the CeleryExecutor on the Redis `broker`, citeflow's queues, and how a lost task is found again."""
    env = airflow_env(cfg.local())
    env.update(
        {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database,
            # a few connections per component: PostgreSQL's 100 go round the components and workers' tasks
            "AIRFLOW__DATABASE__SQL_ALCHEMY_POOL_SIZE": "3",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_MAX_OVERFLOW": "5",
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CELERY__BROKER_URL": broker,
            # Celery's task results (and so each task's worker, with `result_extended`) in the metadata database
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + database,
            "AIRFLOW__CELERY__EXTRA_CELERY_CONFIG": json.dumps({"result_extended": True}),
            # A message is acknowledged when its task has ended, not when a worker takes it: the message of a
            # task whose worker died before finishing is delivered again (and a worker takes one message at a
            # time, so a worker that dies strands nothing queued behind the task it ran). Airflow ignores the
            # second delivery of a task that did start; the scheduler fails a started task whose heartbeat
            # stopped, and the DAGs' retries run it again.
            "AIRFLOW__CELERY__TASK_ACKS_LATE": "True",
            "AIRFLOW__CELERY__WORKER_PREFETCH_MULTIPLIER": "1",
            # an unacknowledged message comes back after this long: longer than any one stage runs
            "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT": str(12 * 3600),
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(cfg.heartbeat_timeout_s),
            "AIRFLOW__OPERATORS__DEFAULT_QUEUE": "default",
            "CITEFLOW_GPU_QUEUE": cfg.gpu_queue,
            "CITEFLOW_PBG_QUEUE": cfg.pbg_queue,
            "CITEFLOW_PBG_RANK_QUEUE": cfg.pbg_rank_queue,
        }
    )
    if cfg.input_roots:
        env[f"AIRFLOW_VAR_{INPUT_ROOTS_VARIABLE.upper()}"] = cfg.input_roots
    env.update(dict(cfg.extra_env))
    return env
