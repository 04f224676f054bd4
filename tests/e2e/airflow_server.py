"""A running Airflow (api-server, scheduler, ...) for end-to-end tests, started by `cockpit/local_airflow/`.

One implementation of start / stop: this module uses that one, and adds what tests need on top of it:
a small REST client and waits for a DAG and a DAG run.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from citeflow.cockpit import local_airflow as airflow_local  # noqa: F401  (the tests start Airflow through it)

REPO = Path(__file__).resolve().parents[2]


def http_get(url: str, token: str | None = None, cookie: str | None = None) -> tuple[int, str]:
    """GET with an optional bearer token or Cookie header; (status, body) for any status."""
    headers = {**({"Authorization": f"Bearer {token}"} if token else {}), **({"Cookie": cookie} if cookie else {})}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


class RestClient:
    """Airflow's public REST API (/api/v2) as the local admin user."""

    def __init__(self, handle):
        self.handle = handle
        self.token = handle.token()

    def get(self, path: str, **query) -> tuple[int, dict]:
        url = f"{self.handle.url}/api/v2/{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        status, body = http_get(url, token=self.token)
        return status, (json.loads(body) if body.startswith(("{", "[")) else {"body": body})

    def send(self, method: str, path: str, body: dict) -> tuple[int, dict]:
        """POST, PATCH, ... with a JSON body; (status, JSON answer) for any status."""
        request = urllib.request.Request(
            f"{self.handle.url}/api/v2/{path}",
            data=json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as err:
            return err.code, {"body": err.read().decode(errors="replace")}

    def trigger(self, dag_id: str, run_id: str, conf: dict) -> dict:
        """A DAG run through the REST API, as a user's script starts one (the DAG unpaused first)."""
        status, dag = self.send("PATCH", f"dags/{dag_id}", {"is_paused": False})
        assert status == 200, f"unpausing {dag_id}: {status} {dag}"
        status, run = self.send(
            "POST", f"dags/{dag_id}/dagRuns", {"dag_run_id": run_id, "logical_date": None, "conf": conf}
        )
        assert status == 200, f"triggering {dag_id}: {status} {run}"
        return run

    def wait_for_dag(self, dag_id: str, timeout: float = 180) -> dict:
        """The DAG once the dag-processor has parsed it; fails at once on an import error."""
        deadline = time.monotonic() + timeout
        while True:
            status, dag = self.get(f"dags/{dag_id}")
            if status == 200:
                return dag
            _, errors = self.get("importErrors")
            assert not errors.get("import_errors"), f"DAG import errors: {errors['import_errors']}"
            assert time.monotonic() < deadline, f"{dag_id} not parsed after {timeout:.0f}s: {status} {dag}"
            time.sleep(3)

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float) -> dict:
        """The DAG run once it has finished (success or failed)."""
        quoted = urllib.parse.quote(run_id, safe="")
        deadline = time.monotonic() + timeout
        while True:
            status, run = self.get(f"dags/{dag_id}/dagRuns/{quoted}")
            assert status == 200, f"dag run {run_id}: {status} {run}"
            if run["state"] in ("success", "failed"):
                return run
            assert time.monotonic() < deadline, (
                f"dag run {run_id} still {run['state']} after {timeout:.0f}s: {self.task_states(dag_id, run_id)}"
            )
            time.sleep(10)

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        quoted = urllib.parse.quote(run_id, safe="")
        _, listing = self.get(f"dags/{dag_id}/dagRuns/{quoted}/taskInstances", limit=100)
        return {f"{ti['task_id']}[{ti['map_index']}]": ti["state"] for ti in listing.get("task_instances", [])}

    def failure_report(self, dag_id: str, run_id: str, chars: int = 2500) -> str:
        """Task states and the end of each failed task's log, for an assertion message."""
        states = self.task_states(dag_id, run_id)
        logs = []
        for key, state in states.items():
            if state == "failed":
                task_id = key.split("[")[0]
                for log in sorted(
                    self.handle.cfg.home.glob(f"logs/dag_id={dag_id}/run_id={run_id}/task_id={task_id}/**/*.log")
                ):
                    logs.append(
                        f"--- {log.relative_to(self.handle.cfg.home)} ---\n{log.read_text(errors='replace')[-chars:]}"
                    )
        return f"{states}\n" + "\n".join(logs)
