"""citeflow's DAGs deployed as teams run Airflow, on one machine: PostgreSQL as the metadata database, Redis as
Celery's broker, Airflow's api-server, scheduler, dag-processor and triggerer, and Celery workers on citeflow's
queues, sized for 2 cores. The worked example of docs/airflow.md, "Deploying citeflow's DAGs".

    python -m citeflow.cockpit.deployment --home DIR                # foreground: Ctrl-C stops every process
    python -m citeflow.cockpit.deployment --home DIR --background   # returns once up
    python -m citeflow.cockpit.deployment --home DIR --status
    python -m citeflow.cockpit.deployment --home DIR --stop

Everything lives in the home, which is also AIRFLOW_HOME: PostgreSQL's data folder (`postgres/`) and Redis's
(`redis/`), each on a free loopback port picked at every start (never the services' default ports, never the
system's own services), `airflow.cfg`, the task logs (`logs/`), each component's output (`component-logs/`),
the passwords (`deployment-secrets.json` and the login's `simple_auth_manager_passwords.json`, mode 0600) and
the state file `deployment.json` (where each component runs). Needs Debian's `postgresql` and `redis-server`
and the Celery and Postgres providers (the lock file pins them).

The workers (default: `default` with two slots on the default queue, `gpu` on `gpu`, `pbg` on `pbg_rank`) are
named on the command line as NAME=QUEUE[+QUEUE]:SLOTS; the DAGs route to them through CITEFLOW_GPU_QUEUE,
CITEFLOW_PBG_QUEUE and CITEFLOW_PBG_RANK_QUEUE, which the launcher sets for every component. The launcher
restarts an Airflow component or worker that dies; the scheduler fails the tasks a dead worker was running once
their heartbeat is `--heartbeat-timeout` seconds old, and the DAGs' retries run them again.

The package's parts:
- `config.py`: `DeploymentConfig`, `WorkerSpec`, the home's file names, its secrets and the environment of every
  Airflow component (`deployment_env`, built on the local launcher's `airflow_env`).
- `services.py`: PostgreSQL and Redis, each in its own folder on its own port.
- `supervisor.py`: the components under guards, started, kept up and stopped (`Deployment`), the state file.
- `cli.py`: the command line (`main`); `__main__.py` runs it.
"""

from citeflow.cockpit.deployment.config import DeploymentConfig, WorkerSpec, deployment_env
from citeflow.cockpit.deployment.supervisor import Deployment, DeploymentFailed, read_state, stop_from_state

__all__ = [
    "Deployment",
    "DeploymentConfig",
    "DeploymentFailed",
    "WorkerSpec",
    "deployment_env",
    "read_state",
    "stop_from_state",
]
