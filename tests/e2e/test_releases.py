"""`citeflow_releases` as a backfill runs it: one DAG run per date, each on the release of its date.

Two dated releases (one that republishes the generated snapshot, one derived from it with papers added,
removed and changed), a date without a release and a date run again, in an artifact root that already holds
`citeflow_rebuild`'s versions of the generated snapshot (`seeded_artifacts`): each release gets its own
artifacts, exact to its own counts; versions built for another snapshot are reused (not rebuilt) by a
release whose inputs are the same; and nothing of another release is touched.
"""

import json
import shutil

import pytest

from citeflow.registry import REGISTRY, STAGES
from tests.e2e.airflow_cli import FAST_OVERRIDES, AirflowHome

pytestmark = pytest.mark.slow


def release_run(airflow: AirflowHome, conf: dict, date: str) -> tuple[dict, str]:
    """`citeflow_releases` run for `date`: its tasks' states (the strategy's tasks by their own names) and the log.
    On one machine distributed PBG's rank tasks have no rank to run (listed, then skipped), and are left out."""
    log = airflow.dags_test("citeflow_releases", conf, logical_date=date)
    run_id, _ = airflow.last_run("citeflow_releases")
    states = {
        task.removeprefix("per_strategy."): state
        for (task, _), state in airflow.task_states("citeflow_releases", run_id).items()
    }
    assert states.pop("embed_graph_rank") == "skipped", states
    states.pop("embed_graph_ranks")
    return states, log


def files_and_mtimes(root):
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*")) if p.is_file()}


def test_each_release_date_builds_its_own_artifacts_and_reruns_are_cached(generated_s2orc, seeded_artifacts, tmp_path):
    from citeflow.synthcorpus.derive import DeriveConfig
    from citeflow.synthcorpus.derive import run as derive

    snap, truth = generated_s2orc
    releases = tmp_path / "releases"
    shutil.copytree(snap, releases / "2024-01-01")
    later = derive(
        DeriveConfig(
            derive_from=str(releases / "2024-01-01"),
            out=str(releases / "2024-02-01"),
            added=150,
            removed=30,
            changed=60,
            seed=3,
        )
    )
    assert later["counts"]["citations"] != truth["counts"]["citations"]
    airflow = AirflowHome(tmp_path / "airflow")
    artifacts = seeded_artifacts
    rebuilt = {stage: {p.name for p in (artifacts / "dag-demo" / stage).glob("[!.]*")} for stage in STAGES}
    donor = files_and_mtimes(artifacts / "dag-demo")
    conf = {
        "releases_root": str(releases),
        "artifacts": str(artifacts),
        "triplet_strategy": "scincl",
        "overrides": FAST_OVERRIDES,
    }

    def run_date(date: str) -> tuple[dict, str]:
        return release_run(airflow, conf, date)

    def graph_manifest(date: str) -> dict:
        (path,) = (artifacts / date / "build_graph").glob("*/_manifest.json")
        return json.loads(path.read_text())

    # the generated snapshot again, as a release: every stage reuses the rebuild's version (scincl's only)
    states, log = run_date("2024-01-01")
    # a release built from its shards has no release its graph came from: no drift report
    assert states.pop("drift") == "skipped", states
    assert set(states.values()) == {"success"}, states
    first = graph_manifest("2024-01-01")
    assert first["snapshot"] == "2024-01-01"
    assert first["tables"]["citations"]["rows"] == truth["counts"]["citations"]
    for stage in STAGES:
        manifests = [json.loads(p.read_text()) for p in (artifacts / "2024-01-01" / stage).glob("*/_manifest.json")]
        assert manifests and {m["version"] for m in manifests} <= rebuilt[stage], stage
        for manifest in manifests:
            assert manifest["reused_from"]["snapshot"] == "dag-demo", stage
            # the base model's embeddings too, in their own task (embed_papers_base)
            assert f"{stage}: reused version {manifest['version']} of snapshot dag-demo" in log
    assert "built version" not in log
    (donor_graph,) = (artifacts / "dag-demo" / "build_graph").glob("*/_manifest.json")
    assert first["tables"] == json.loads(donor_graph.read_text())["tables"]
    release_one = files_and_mtimes(artifacts / "2024-01-01")

    # a changed release: built in full, every stage
    states, log = run_date("2024-02-01")
    assert states.pop("drift") == "skipped", states
    assert set(states.values()) == {"success"}, states
    second = graph_manifest("2024-02-01")
    assert second["tables"]["citations"]["rows"] == later["counts"]["citations"]
    assert second["tables"]["papers"]["rows"] == later["counts"]["papers"]
    for stage in STAGES:
        manifests = [json.loads(p.read_text()) for p in (artifacts / "2024-02-01" / stage).glob("*/_manifest.json")]
        assert manifests and all(m["reused_from"] is None for m in manifests), stage
    assert f"build_graph: built version {second['version']} in full" in log
    # the later release's SciDocs papers are still kept out of its training data
    (leak_path,) = (artifacts / "2024-02-01" / "filter_leakage").glob("*/_manifest.json")
    assert (
        json.loads(leak_path.read_text())["metrics"]["mapped_by"]["title"] == truth["scidocs"]["mapped_by_title_only"]
    )
    assert files_and_mtimes(artifacts / "2024-01-01") == release_one

    # a date without a release: the run is skipped as a whole, and writes nothing
    states, log = run_date("2024-01-15")
    assert states.pop("check_inputs") == "success"
    assert set(states.values()) == {"skipped"}, states
    assert "no release 2024-01-15" in log
    assert sorted(p.name for p in artifacts.iterdir()) == ["2024-01-01", "2024-02-01", "dag-demo"]

    # a date run again (a backfill over dates already done): every stage cached, nothing rewritten
    states, log = run_date("2024-01-01")
    helpers = ("check_inputs", "triplet_strategies", "embed_graph_ranks")
    stage_states = {task: state for task, state in states.items() if task not in helpers}
    assert set(stage_states.values()) == {"skipped"}, states
    assert f"build_graph: cached version {first['version']}" in log
    assert files_and_mtimes(artifacts / "2024-01-01") == release_one

    assert files_and_mtimes(artifacts / "dag-demo") == donor  # reused from, never written to
    events = [(name, extra["snapshot"]) for name, extra in airflow.asset_events()]
    assert sorted({snapshot for _, snapshot in events}) == ["2024-01-01", "2024-02-01"]
    # one event per stage task of each release, the base model's embed_papers (a registered variant) among them
    assert len(events) == 2 * (len(STAGES) + sum(len(REGISTRY[s].variants) for s in STAGES))


def test_a_backfill_out_of_order_keeps_each_releases_versions(tmp_path):
    """Releases A and B (derived from A), backfilled B first: B's graph is built in full (A is not built yet),
    then A (from the command line), then B's date run again through the DAG: every stage of B is cached, the
    build_graph task's log says why it does not take the diff A -> B, and B holds one version per stage."""
    from citeflow.artifacts import ArtifactStore
    from citeflow.jobs import filter_leakage
    from citeflow.synthcorpus.config import GenerateConfig
    from citeflow.synthcorpus.derive import DeriveConfig
    from citeflow.synthcorpus.derive import run as derive
    from citeflow.synthcorpus.generate import run as generate
    from tests.e2e.conftest import release_config

    a, b = "2024-01-01", "2024-02-01"
    releases = tmp_path / "releases"
    generate(GenerateConfig(papers=1500, out=str(releases / a), seed=11, format="s2ag", shards=2))
    derive(DeriveConfig(derive_from=str(releases / a), out=str(releases / b), added=60, removed=15, changed=30, seed=2))
    artifacts = tmp_path / "artifacts"
    airflow = AirflowHome(tmp_path / "airflow")
    conf = {
        "releases_root": str(releases),
        "artifacts": str(artifacts),
        "triplet_strategy": "scincl",
        "overrides": FAST_OVERRIDES,
    }

    states, log = release_run(airflow, conf, b)
    assert states.pop("drift") == "skipped" and "success" in states.values(), states
    store = ArtifactStore(str(artifacts))
    built = {stage: [m.version for m in store.list_versions(b, stage)] for stage in STAGES}
    expected = {stage: 1 for stage in STAGES}
    for stage in STAGES:  # a variant is a version of its stage besides (embed_papers of the base model)
        for variant in REGISTRY[stage].variants:
            expected[variant.stage] += 1
    assert {stage: len(versions) for stage, versions in built.items()} == expected
    assert "from_diff" not in store.list_versions(b, "build_graph")[0].metrics  # in full: A is not built
    filter_leakage.run(release_config(releases, a, artifacts, FAST_OVERRIDES))  # release A, late

    states, log = release_run(airflow, conf, b)
    helpers = ("check_inputs", "triplet_strategies", "drift")
    assert {s for t, s in states.items() if t not in helpers} == {"skipped"}, states
    assert "built version" not in log
    assert (
        f"build_graph: release {b} keeps version {built['build_graph'][0]}, built in full; from the diff {a} -> {b}"
        in log
    )
    assert {stage: [m.version for m in store.list_versions(b, stage)] for stage in STAGES} == built
