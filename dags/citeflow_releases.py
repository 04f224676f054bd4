"""DAG citeflow_releases: one run per corpus release date; a run processes the release of its date.

Releases lie under the `releases_root` param, one folder per release named by its date, as Semantic
Scholar names them (`2023-08-29/`, holding `papers/ abstracts/ citations/` or a `corpus/` folder, and
optionally `paper-ids/` and `scidocs/`). The snapshot id of a run is its logical date; a date without a
release skips the whole run. Bring past releases through with Airflow's own backfill:

    airflow backfill create --dag-id citeflow_releases --from-date 2023-08-01 --to-date 2023-09-30

Each release gets its own artifacts (`ARTIFACTS/<date>/...`); re-running a date reuses every stage whose
inputs did not change, and never touches other releases' artifacts. A release built from a diff of an earlier
one ends with the drift report against it (`drift`, jobs/drift.py), shown in the Artifacts tab.
"""

from __future__ import annotations

import datetime
import os

from airflow.sdk import dag, get_current_context, task

from citeflow.cockpit.orchestration import check_settings, stage_tasks, task_defaults
from citeflow.cockpit.params import demo_root, release_params
from citeflow.cockpit.run_settings import settings_from_params

DEMO = demo_root(__file__)
RELEASES_ROOT = os.environ.get("CITEFLOW_RELEASES", os.path.join(DEMO, "releases"))


@dag(
    dag_id="citeflow_releases",
    schedule="@daily",
    start_date=datetime.datetime(2020, 1, 1),
    catchup=False,
    params=release_params(DEMO, RELEASES_ROOT),
    tags=["citeflow"],
    doc_md=__doc__,
    default_args=task_defaults(),
    max_active_runs=1,
)
def citeflow_releases():
    @task.short_circuit
    def check_inputs() -> dict | None:
        """The release of this run's date, checked; no release on that date skips the run."""
        context = get_current_context()
        when = context.get("logical_date") or context["dag_run"].run_after
        release = when.strftime("%Y-%m-%d")
        params = context["params"]
        folder = os.path.join(params["releases_root"], release)
        if not os.path.isdir(folder):
            print(f"no release {release} under {params['releases_root']}: nothing to do")
            return None
        corpus = os.path.join(folder, "corpus")
        paper_ids = os.path.join(folder, "paper-ids")
        settings = settings_from_params(
            params,
            snapshot=release,
            corpus=corpus if os.path.isdir(corpus) else folder,
            paper_ids=paper_ids if os.path.isdir(paper_ids) else "",
        )
        if os.path.isdir(os.path.join(folder, "scidocs")):
            settings["scidocs"] = os.path.join(folder, "scidocs")
        print(f"release {release}: corpus {settings['corpus']}")
        return check_settings(settings)

    stage_tasks(check_inputs(), reports=True)


dag_object = citeflow_releases()
