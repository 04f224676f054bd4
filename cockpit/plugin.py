"""The citeflow Airflow plugin: an "Artifacts" tab on every task instance, served by Airflow itself.

Registered through the `airflow.plugins` entry point (setup.cfg), so `pip install citeflow` is enough:
no file to copy into Airflow's plugins folder. The tab is an external view (an iframe in Airflow 3's
UI) of `citeflow.cockpit.artifact_view`'s FastAPI app, mounted under `/citeflow` in Airflow's API server, where
Airflow's authentication and DAG permissions guard every route.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

URL_PREFIX = "/citeflow"
TASK_VIEW = URL_PREFIX + "/artifacts/task?dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}&map_index={MAP_INDEX}"


def _app():
    from citeflow.cockpit.artifact_view import create_app

    return create_app()


class CiteflowPlugin(AirflowPlugin):
    name = "citeflow"
    fastapi_apps = [{"app": _app(), "url_prefix": URL_PREFIX, "name": "citeflow artifacts"}]
    external_views = [
        {
            "name": "Artifacts",
            "href": TASK_VIEW,
            "destination": "task_instance",
            "url_route": "citeflow_artifacts",
        }
    ]
