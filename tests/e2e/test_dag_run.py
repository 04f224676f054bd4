"""`airflow dags test citeflow_rebuild` on a generated snapshot, with its own AIRFLOW_HOME and SQLite."""

import json

import pytest

from citeflow.registry import REGISTRY
from tests.e2e.airflow_cli import AirflowHome

pytestmark = pytest.mark.slow
STRATEGY_STAGES = [name for name, stage in REGISTRY.items() if stage.per_strategy]
# the registered variants' tasks (embed_papers_base), by the stage each runs
VARIANTS = [v.stage for stage in REGISTRY.values() for v in stage.variants]


def test_rebuild_builds_every_stage_then_skips_them_as_cached(airflow_rebuild, generated_s2orc):
    _, truth = generated_s2orc
    # the first run is airflow_rebuild's (tests/e2e/conftest.py): Spark's master comes from the Airflow
    # connection there, as with the Spark provider's operators
    airflow, artifacts, conf, log = (
        airflow_rebuild.airflow,
        airflow_rebuild.artifacts,
        airflow_rebuild.conf,
        airflow_rebuild.log,
    )
    first_run, _ = airflow.last_run("citeflow_rebuild")
    states = airflow.task_states("citeflow_rebuild", first_run)
    # one machine: PBG's other ranks (embed_graph_rank, mapped over none) are skipped, the rest succeed
    assert states.pop(("embed_graph_rank", -1)) == "skipped", states
    assert set(states.values()) == {"success"}, states
    assert sum(1 for task, _ in states if task.startswith("per_strategy.")) == 2 * (
        len(STRATEGY_STAGES) + len(VARIANTS)
    )
    (manifest_path,) = artifacts.glob("dag-demo/build_graph/*/_manifest.json")
    manifest = json.loads(manifest_path.read_text())
    assert manifest["tables"]["citations"]["rows"] == truth["counts"]["citations"]
    assert manifest["config"]["spark"]["master"] == "local[2]"
    assert f"build_graph: built version {manifest['version']} in full" in log
    (leak_path,) = artifacts.glob("dag-demo/filter_leakage/*/_manifest.json")
    leak = json.loads(leak_path.read_text())
    assert leak["metrics"]["mapped_by"]["title"] == truth["scidocs"]["mapped_by_title_only"]
    assert leak["inputs"][0] == {
        "stage": "build_graph",
        "version": manifest["version"],
        "path": str(manifest_path.parent),
    }

    # one Asset event per built version, carrying version, rows, manifest and headline metrics
    events = airflow.asset_events()
    by_stage: dict[str, list[dict]] = {}
    for name, extra in events:
        by_stage.setdefault(name.removeprefix("citeflow."), []).append(extra)
    assert {s: len(e) for s, e in by_stage.items()} == {
        "build_graph": 1,
        "filter_leakage": 1,
        "embed_graph": 1,
        **{s: 2 * (1 + VARIANTS.count(s)) for s in STRATEGY_STAGES},
    }
    (graph_event,) = by_stage["build_graph"]
    assert graph_event["version"] == manifest["version"]
    assert graph_event["manifest"] == str(manifest_path)
    assert graph_event["rows"]["citations"] == truth["counts"]["citations"]
    assert graph_event["metrics"]["citations"] == truth["counts"]["citations"]
    assert sorted(e["strategy"] for e in by_stage["mine_triplets"]) == ["scincl", "specter"]
    for event in by_stage["benchmark"]:
        # the generated SciDocs has all 12 numbers: the average of 12, and the mean of those there are equals it
        assert 0 < event["metrics"]["trained.average"] == event["metrics"]["trained.mean"] <= 100

    # the same trigger again: every stage is cached, shown as skipped, and no new Asset event is recorded
    built = sorted(str(p) for p in artifacts.glob("dag-demo/*/*"))
    log = airflow.dags_test("citeflow_rebuild", conf)
    second_run, _ = airflow.last_run("citeflow_rebuild")
    states = airflow.task_states("citeflow_rebuild", second_run)
    helpers = ("check_inputs", "triplet_strategies", "embed_graph_ranks", "embed_graph_rank")
    stage_states = {task: state for task, state in states.items() if task[0] not in helpers}
    assert set(stage_states.values()) == {"skipped"}, states
    assert len(stage_states) == 3 + 2 * (len(STRATEGY_STAGES) + len(VARIANTS))
    assert states[("embed_graph_rank", -1)] == "skipped"
    assert f"build_graph: cached version {manifest['version']}" in log
    assert len(airflow.asset_events()) == len(events)
    assert [p.name for p in artifacts.glob("dag-demo/build_graph/[!.]*")] == [manifest["version"]]  # no rebuild
    for stage in STRATEGY_STAGES:
        for m in (json.loads(p.read_text()) for p in artifacts.glob(f"dag-demo/{stage}/*/_manifest.json")):
            assert f"{stage}: cached version {m['version']}" in log  # the base model's in embed_papers_base
    assert sorted(str(p) for p in artifacts.glob("dag-demo/*/*")) == built  # no version added


def test_rebuild_refuses_bad_input_before_any_work(tmp_path):
    airflow = AirflowHome(tmp_path / "airflow")
    artifacts = tmp_path / "artifacts"
    bad_id = airflow.airflow("dags", "test", "citeflow_rebuild", "-c", json.dumps({"snapshot": "../../etc"}))
    assert bad_id.returncode != 0
    assert "Invalid input for param snapshot" in bad_id.stdout + bad_id.stderr

    missing = airflow.airflow(
        "dags",
        "test",
        "citeflow_rebuild",
        "-c",
        json.dumps({"snapshot": "ok", "corpus": str(tmp_path / "nowhere"), "artifacts": str(artifacts)}),
    )
    assert missing.returncode != 0
    assert f"citeflow: corpus folder '{tmp_path / 'nowhere'}' does not exist" in missing.stdout + missing.stderr
    run_id, _ = airflow.last_run("citeflow_rebuild")
    states = airflow.task_states("citeflow_rebuild", run_id)
    assert states[("check_inputs", -1)] == "failed"
    assert states[("build_graph", -1)] == "upstream_failed"
    assert not artifacts.exists()
