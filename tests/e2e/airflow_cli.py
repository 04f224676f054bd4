"""Run Airflow's own command line in a throw-away AIRFLOW_HOME (SQLite) for end-to-end DAG tests."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from citeflow.cockpit.settings import POOLS

REPO = Path(__file__).resolve().parents[2]
# The overrides that make a whole rebuild of a 3,000-paper snapshot take a few minutes here.
FAST_OVERRIDES = [
    "spark.shuffle_partitions=4",
    "spark.driver_memory=2g",
    "build_graph.output_files=2",
    # PBG waits 2 s per HOGWILD worker in the first epoch by default: 4.3 s of embed_graph's 14.1 s at 3k papers
    "embed_graph.pbg=hogwild_delay=0",
    "mine_triplets.num_queries=200",
    "train_encoder.hidden_size=32",
    "train_encoder.layers=1",
    "train_encoder.max_length=32",
    "train_encoder.vocab_size=2000",
]


class AirflowHome:
    """An AIRFLOW_HOME with citeflow's DAGs, a migrated SQLite database and the `gpu` pool."""

    def __init__(self, home: Path, **env: str):
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        self.env = {
            **os.environ,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
            "AIRFLOW__CORE__PARALLELISM": "2",
            **env,
        }
        self.check("db", "migrate")
        for pool in POOLS:
            self.check("pools", "set", *pool)

    def airflow(self, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
        airflow_bin = Path(sys.executable).with_name("airflow")
        return subprocess.run([str(airflow_bin), *args], capture_output=True, text=True, env=self.env, timeout=timeout)

    def check(self, *args: str, timeout: int = 900) -> str:
        done = self.airflow(*args, timeout=timeout)
        log = done.stdout + done.stderr
        assert done.returncode == 0, f"airflow {' '.join(args[:3])} failed:\n{log[-4000:]}"
        return log

    def dags_test(self, dag_id: str, conf: dict | None = None, logical_date: str | None = None) -> str:
        args = ["dags", "test", dag_id, *([logical_date] if logical_date else [])]
        return self.check(*args, *(["-c", json.dumps(conf)] if conf is not None else []))

    def query(self, sql: str, *params) -> list[tuple]:
        with sqlite3.connect(self.home / "airflow.db") as db:
            return db.execute(sql, params).fetchall()

    def last_run(self, dag_id: str) -> tuple[str, float]:
        """run_id and duration in seconds of the DAG's latest run."""
        run_id, start, end = self.query(
            "select run_id, start_date, end_date from dag_run where dag_id = ? order by id desc limit 1", dag_id
        )[0]
        from datetime import datetime

        def parse(text: str) -> datetime:
            return datetime.fromisoformat(text.replace(" ", "T"))

        return run_id, (parse(end) - parse(start)).total_seconds()

    def task_states(self, dag_id: str, run_id: str) -> dict[tuple[str, int], str]:
        rows = self.query(
            "select task_id, map_index, state from task_instance where dag_id = ? and run_id = ?", dag_id, run_id
        )
        return {(task, index): state for task, index, state in rows}

    def asset_events(self) -> list[tuple[str, dict]]:
        rows = self.query("select a.name, e.extra from asset_event e join asset a on a.id = e.asset_id order by e.id")
        return [(name, json.loads(extra)) for name, extra in rows]
