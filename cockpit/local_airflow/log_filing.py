"""`airflow dags test` in a home (`dags_test`), and its output filed as each task's log where Airflow's UI reads it
(`file_task_logs`): `airflow dags test` prints the tasks' logs among its own lines and writes no log file."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from citeflow.cockpit.local_airflow.config import (
    DATABASE,
    TASK_LOG_DIR,
    LocalAirflowConfig,
    airflow_env,
    airflow_executable,
)
from citeflow.cockpit.local_airflow.processes import create_pools, run_cli

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
        assert process.stdout is not None  # a pipe, as asked
        for line in process.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            output.append(line)
    filed = file_task_logs(cfg.home, dag_id, "".join(output))
    print(f"local_airflow: {len(filed)} task logs filed under {cfg.home / TASK_LOG_DIR}", flush=True)
    return process.returncode
