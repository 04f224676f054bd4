"""Every DAG file imports cleanly, defines its DAG, and pulls in no heavy module at parse time."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

DAGS = sorted((Path(__file__).resolve().parents[2] / "dags").glob("*.py"))
HEAVY = [
    "pyspark",
    "torch",
    "transformers",
    "faiss",
    "torchbiggraph",
    "sklearn",
    "pandas",
    "matplotlib",
    "h5py",
    "citeflow.spark",
    "citeflow.jobs.build_graph",
]

PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("dag_under_test", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from airflow.sdk import DAG
dags = {v.dag_id: sorted(v.task_dict) for v in vars(module).values() if isinstance(v, DAG)}
heavy = sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)
print(json.dumps({"dags": dags, "heavy": heavy}))
"""


@pytest.mark.parametrize("dag_file", DAGS, ids=[p.stem for p in DAGS])
def test_dag_file_parses_light(dag_file, tmp_path):
    env = {"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(dag_file), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["heavy"] == [], f"{dag_file.name} imports heavy modules at parse time: {result['heavy']}"
    assert list(result["dags"]) == [dag_file.stem], "DAG id must equal the file stem"


@pytest.mark.parametrize("dag_id", ["citeflow_rebuild", "citeflow_releases"])
def test_dags_have_one_task_per_stage(dag_id, tmp_path):
    from citeflow.registry import REGISTRY, REPORTS, STAGES

    env = {"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PATH": "/usr/bin:/bin"}
    dag_file = next(p for p in DAGS if p.stem == dag_id)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(dag_file), "[]"], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    tasks = json.loads(done.stdout.strip().splitlines()[-1])["dags"][dag_id]
    # one task per stage (the per-strategy ones in a task group mapped over the strategies), plus the task
    # that checks the run's inputs and the one that lists the strategies
    stages = [f"per_strategy.{s}" if REGISTRY[s].per_strategy else s for s in STAGES]
    # and each registered variant's task (the benchmark's base model: embed_papers_base)
    stages += [
        f"per_strategy.{v.task_id}" if REGISTRY[v.stage].per_strategy else v.task_id
        for s in STAGES
        for v in REGISTRY[s].variants
    ]
    # and distributed PBG's other ranks: one mapped task per rank beside embed_graph, and the task listing them
    extra = ["check_inputs", "triplet_strategies", "embed_graph_ranks", "embed_graph_rank"]
    # the releases DAG ends each strategy with the registered reports (drift) against the previous release
    extra += [f"per_strategy.{name}" for name in REPORTS] if dag_id == "citeflow_releases" else []
    assert sorted(tasks) == sorted([*stages, *extra])


@pytest.mark.parametrize("dag_id", ["citeflow_rebuild", "citeflow_releases"])
def test_stage_tasks_follow_the_registry(dag_id, tmp_path):
    """Each stage task waits on the tasks of the stages the registry says it builds on, reads their Assets and
    takes the pool of its kind of worker: the DAG is derived from the registry, not written beside it."""
    from citeflow.registry import REGISTRY, REPORTS

    env = {
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PATH": "/usr/bin:/bin",
        "CITEFLOW_GPU_POOL": "gpus",
        "CITEFLOW_PBG_POOL": "pbgs",
    }
    tasks = layout(dag_id, env)

    def task_id(name: str) -> str:
        return f"per_strategy.{name}" if REGISTRY[name].per_strategy else name

    for stage in REGISTRY.values():
        found = tasks[task_id(stage.name)]
        stage_tasks = [t for t in found["upstream"] if t.split(".")[-1] in REGISTRY]
        assert stage_tasks == sorted(task_id(name) for name in stage.upstream), stage.name
        assert found["inlets"] == [f"citeflow.{name}" for name in stage.upstream], stage.name
        assert found["pool"] == {"gpu": "gpus", "pbg": "pbgs"}.get(stage.worker, "default_pool"), stage.name
        for variant in stage.variants:  # a task of its own on the edges of the stage it varies, before the stage
            read = REGISTRY[variant.stage]
            task = tasks[task_id(read.name).replace(read.name, variant.task_id)]
            assert [t for t in task["upstream"] if t.split(".")[-1] in REGISTRY] == [task_id(n) for n in read.upstream]
            assert task_id(read.name).replace(read.name, variant.task_id) in found["upstream"], stage.name
            assert task["pool"] == {"gpu": "gpus", "pbg": "pbgs"}.get(read.worker, "default_pool")
    for report in REPORTS.values() if dag_id == "citeflow_releases" else ():  # after the stage it starts from
        found = tasks[f"per_strategy.{report.name}"]["upstream"]
        assert [t for t in found if t.split(".")[-1] in REGISTRY] == [task_id(report.after)]


LAYOUT = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("dag_under_test", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from airflow.sdk import DAG
(dag,) = [v for v in vars(module).values() if isinstance(v, DAG)]
out = {}
for task_id, t in dag.task_dict.items():
    out[task_id] = {
        "mapped": any(c.__name__ == "MappedOperator" for c in type(t).__mro__),
        "pool": t.pool,
        "queue": t.queue,
        "upstream": sorted(t.upstream_task_ids),
        "downstream": sorted(t.downstream_task_ids),
        "outlets": [getattr(o, "name", None) for o in t.outlets],
        "inlets": [getattr(i, "name", None) for i in t.inlets],
        "trigger_rule": str(getattr(t.trigger_rule, "value", t.trigger_rule)),
    }
print(json.dumps(out))
"""


def layout(dag_id: str, env: dict[str, str]) -> dict[str, dict]:
    """Every task of the DAG `dag_id`, parsed in a fresh interpreter under `env` (`LAYOUT`): whether it is
    mapped, its pool and queue, its neighbours, its Assets and its trigger rule."""
    dag_file = next(p for p in DAGS if p.stem == dag_id)
    done = subprocess.run(
        [sys.executable, "-c", LAYOUT, str(dag_file)], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("dag_id", ["citeflow_rebuild", "citeflow_releases"])
def test_distributed_pbg_maps_one_task_per_rank_beside_rank_0(dag_id, tmp_path):
    env = {
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PATH": "/usr/bin:/bin",
        "CITEFLOW_PBG_POOL": "pbg-ranks",
        "CITEFLOW_PBG_RANK_QUEUE": "pbg-workers",
    }
    tasks = layout(dag_id, env)
    leader, ranks, listing = tasks["embed_graph"], tasks["embed_graph_rank"], tasks["embed_graph_ranks"]
    # rank 0 is the stage task (its Asset, its XCom); ranks 1.. are one mapped task, no Asset of their own
    assert not leader["mapped"] and leader["outlets"] == ["citeflow.embed_graph"]
    assert ranks["mapped"] and ranks["outlets"] == []
    # all ranks share one pool (sized >= machines: they must run at once); the rank tasks have their own queue
    assert leader["pool"] == ranks["pool"] == "pbg-ranks" and ranks["queue"] == "pbg-workers"
    # the ranks run beside rank 0, after the filtered graph exists, not after rank 0
    assert ranks["upstream"] == ["check_inputs", "embed_graph_ranks", "filter_leakage"]
    assert leader["upstream"] == ["check_inputs", "filter_leakage"]
    assert "embed_graph_rank" not in leader["downstream"] and ranks["downstream"] == []
    assert listing["upstream"] == ["check_inputs"]
    assert "embed_graph" in tasks["per_strategy.mine_triplets"]["upstream"]
    assert "embed_graph_rank" not in tasks["per_strategy.mine_triplets"]["upstream"]
    assert ranks["trigger_rule"] == listing["trigger_rule"] == "none_failed"
