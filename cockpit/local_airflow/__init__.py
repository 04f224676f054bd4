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
`start()` from this package.

The package's parts:
- `config.py`: the home's file names, `LocalAirflowConfig` and the environment of every Airflow command
  (`airflow_env`).
- `processes.py`: `airflow` commands, `airflow standalone` started and waited for (`start`, `AirflowHandle`), and
  its process group stopped (`stop_group`, `stop_from_pid_file`).
- `log_filing.py`: `dags_test` and the filing of its output as each task's log (`file_task_logs`).
- `cli.py`: the command line (`main`); `__main__.py` runs it for `python -m citeflow.cockpit.local_airflow`.
"""

from citeflow.cockpit.local_airflow.config import (
    EXECUTION_API_TIMEOUT_S,
    LocalAirflowConfig,
    airflow_env,
    airflow_executable,
    free_port,
    known_password,
)
from citeflow.cockpit.local_airflow.log_filing import TaskLog, dags_test, file_task_logs, task_log_path, task_logs
from citeflow.cockpit.local_airflow.processes import (
    AirflowHandle,
    create_pools,
    group_alive,
    health,
    is_healthy,
    run_cli,
    start,
    stop_from_pid_file,
    stop_group,
)

__all__ = [
    "EXECUTION_API_TIMEOUT_S",
    "AirflowHandle",
    "LocalAirflowConfig",
    "TaskLog",
    "airflow_env",
    "airflow_executable",
    "create_pools",
    "dags_test",
    "file_task_logs",
    "free_port",
    "group_alive",
    "health",
    "is_healthy",
    "known_password",
    "run_cli",
    "start",
    "stop_from_pid_file",
    "stop_group",
    "task_log_path",
    "task_logs",
]
