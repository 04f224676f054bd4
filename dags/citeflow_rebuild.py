"""DAG citeflow_rebuild: rebuild every stage of one snapshot, from the trigger form or a conf.

    airflow dags test citeflow_rebuild                       # the built-in demo snapshot (make demo)
    airflow dags trigger citeflow_rebuild -c '{"snapshot": "2023-08-29", "corpus": "/data/s2ag/2023-08-29"}'

Stages whose inputs and settings did not change are skipped (cached), the others rebuild; the tasks
are laid out by `citeflow.cockpit.orchestration.stage_tasks`.
"""

from __future__ import annotations

from airflow.sdk import dag, get_current_context, task

from citeflow.cockpit.orchestration import check_settings, stage_tasks, task_defaults
from citeflow.cockpit.params import demo_root, rebuild_params
from citeflow.cockpit.run_settings import ensure_demo_snapshot, settings_from_params

DEMO = demo_root(__file__)


@dag(
    dag_id="citeflow_rebuild",
    schedule=None,
    catchup=False,
    params=rebuild_params(DEMO),
    tags=["citeflow"],
    doc_md=__doc__,
    default_args=task_defaults(),
    max_active_runs=1,
)
def citeflow_rebuild():
    @task
    def check_inputs() -> dict:
        """Every user-supplied id, path and setting checked before any work."""
        params = get_current_context()["params"]
        ensure_demo_snapshot(DEMO, params["corpus"])
        return check_settings(
            settings_from_params(
                params, snapshot=params["snapshot"], corpus=params["corpus"], paper_ids=params["paper_ids"]
            )
        )

    stage_tasks(check_inputs())


dag_object = citeflow_rebuild()
