"""DAG citeflow_rebuild: rebuild every implemented stage of one snapshot.

Trigger it with a conf (or the trigger form) naming the snapshot:
    airflow dags test citeflow_rebuild -c '{"snapshot": "demo", "corpus": "/data/demo/corpus"}'

Each stage is one task that calls the stage's `run(config)`; an up-to-date
stage returns its existing manifest at once (cached, not re-run). XCom
carries the manifest's path and version, never data. Heavy libraries
(pyspark, torch, ...) are imported inside the tasks only: this file is parsed
by the scheduler every few seconds.
"""

from __future__ import annotations

import os

from airflow.sdk import Asset, Param, dag, get_current_context, task

# GPU work (encoder training, embedding) goes to this Airflow pool, and to this queue / executor where a
# deployment runs GPU workers separately (e.g. CeleryExecutor queue "gpu"). The pool must exist:
#   airflow pools set gpu 1 "citeflow encoder training"
GPU_POOL = os.environ.get("CITEFLOW_GPU_POOL", "gpu")
GPU_QUEUE = os.environ.get("CITEFLOW_GPU_QUEUE", "default")
DEFAULT_ROOT = os.environ.get("CITEFLOW_HOME", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo"))

PARAMS = {
    "snapshot": Param("demo", type="string", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                      description="snapshot id (letters, digits, . _ -)"),
    "corpus": Param(os.path.join(DEFAULT_ROOT, "snapshot", "corpus"), type="string",
                    description="snapshot folder (S2ORC metadata/ or S2AG papers/ abstracts/ citations/)"),
    "scidocs": Param(os.path.join(DEFAULT_ROOT, "snapshot", "scidocs"), type="string",
                     description="SciDocs folder"),
    "paper_ids": Param(os.path.join(DEFAULT_ROOT, "snapshot", "paper-ids"), type="string",
                       description="S2AG paper-ids folder"),
    "artifacts": Param(os.path.join(DEFAULT_ROOT, "artifacts"), type="string",
                       description="artifact root (local path or URI)"),
    "triplet_strategy": Param("scincl", enum=["scincl", "specter", "both"],
                              description="triplets: SciNCL kNN windows, SPECTER citations, or both for comparison"),
    "profile": Param("demo", enum=["demo", "full"], description="demo: small settings for one machine; full: published"),
    "overrides": Param([], type="array", items={"type": "string"},
                       description="settings as stage.key=value, e.g. build_graph.citations_from=inbound"),
}


def stage_asset(stage: str) -> Asset:
    """The Asset a stage's task updates: one per stage, named after it."""
    return Asset(name=f"citeflow.{stage}", uri=f"citeflow://{stage}")


def _run_stage(stage: str, strategy: str | None = None) -> dict[str, object]:
    """Run one stage from the DAG run's params; returns what XCom should carry."""
    from citeflow.config import RunConfig, apply_overrides, profile_overrides
    from jobs.pipeline import run_stage

    params = get_current_context()["params"]
    config = apply_overrides(
        RunConfig(snapshot=params["snapshot"], corpus=params["corpus"], scidocs=params["scidocs"],
                  paper_ids=params["paper_ids"], artifacts=params["artifacts"]),
        [*profile_overrides(params["profile"]), *params["overrides"]],
    )
    if strategy is not None:
        from jobs.pipeline import with_strategy

        config = with_strategy(config, strategy)
    manifest = run_stage(stage, config)
    print(f"{stage}: {'cached' if manifest.skipped else 'built'} version {manifest.version} at {manifest.path}")
    return {
        "stage": stage,
        "version": manifest.version,
        "manifest": f"{manifest.path}/_manifest.json",
        "skipped": manifest.skipped,
        "strategy": strategy,
        "rows": {name: t["rows"] for name, t in manifest.tables.items()},
    }


@dag(dag_id="citeflow_rebuild", schedule=None, catchup=False, params=PARAMS, tags=["citeflow"],
     doc_md=__doc__, max_active_runs=1)
def citeflow_rebuild():
    @task(outlets=[stage_asset("build_graph")])
    def build_graph() -> dict[str, object]:
        return _run_stage("build_graph")

    @task(outlets=[stage_asset("filter_leakage")])
    def filter_leakage() -> dict[str, object]:
        return _run_stage("filter_leakage")

    @task(outlets=[stage_asset("embed_graph")])
    def embed_graph() -> dict[str, object]:
        return _run_stage("embed_graph")

    @task
    def triplet_strategies() -> list[str]:
        choice = get_current_context()["params"]["triplet_strategy"]
        return ["scincl", "specter"] if choice == "both" else [choice]

    @task(outlets=[stage_asset("mine_triplets")], map_index_template="{{ task.op_kwargs['strategy'] }}")
    def mine_triplets(strategy: str) -> dict[str, object]:
        return _run_stage("mine_triplets", strategy)

    # Training runs as its own process (python -m models.train_encoder, or torchrun), started by the task.
    @task(outlets=[stage_asset("train_encoder")], pool=GPU_POOL, queue=GPU_QUEUE,
          map_index_template="{{ task.op_kwargs['mined']['strategy'] }}")
    def train_encoder(mined: dict) -> dict[str, object]:
        return _run_stage("train_encoder", str(mined["strategy"]))

    @task(outlets=[stage_asset("embed_papers")], pool=GPU_POOL, queue=GPU_QUEUE,
          map_index_template="{{ task.op_kwargs['trained']['strategy'] }}")
    def embed_papers(trained: dict) -> dict[str, object]:
        return _run_stage("embed_papers", str(trained["strategy"]))

    @task(outlets=[stage_asset("benchmark")], map_index_template="{{ task.op_kwargs['embedded']['strategy'] }}")
    def benchmark(embedded: dict) -> dict[str, object]:
        result = _run_stage("benchmark", str(embedded["strategy"]))
        report = os.path.join(os.path.dirname(os.path.dirname(str(result["manifest"]))), "report.html")
        print(f"benchmark report of the snapshot: {report}")
        return {**result, "report": report}

    graph = build_graph() >> filter_leakage() >> embed_graph()
    mined = mine_triplets.expand(strategy=triplet_strategies())
    graph >> mined
    benchmark.expand(embedded=embed_papers.expand(trained=train_encoder.expand(mined=mined)))


dag_object = citeflow_rebuild()
