"""`airflow dags test citeflow_rebuild` on a generated snapshot, with its own AIRFLOW_HOME and SQLite."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def airflow(args, env, timeout=600):
    airflow_bin = Path(sys.executable).with_name("airflow")
    return subprocess.run([str(airflow_bin), *args], capture_output=True, text=True, env=env, timeout=timeout)


def test_rebuild_dag_runs_the_stages_then_skips_them(generated_s2orc, tmp_path):
    snap, truth = generated_s2orc
    home = tmp_path / "airflow"
    home.mkdir()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__PARALLELISM": "2",
    }
    migrated = airflow(["db", "migrate"], env)
    assert migrated.returncode == 0, migrated.stderr[-3000:]
    pool = airflow(["pools", "set", "gpu", "1", "citeflow encoder training"], env)
    assert pool.returncode == 0, pool.stderr[-3000:]
    artifacts = tmp_path / "artifacts"
    conf = {"snapshot": "dag-demo", "corpus": str(snap / "corpus"), "scidocs": str(snap / "scidocs"),
            "paper_ids": str(snap / "paper-ids"), "artifacts": str(artifacts),
            "triplet_strategy": "both",
            "overrides": ["spark.shuffle_partitions=4", "spark.driver_memory=2g", "build_graph.output_files=2",
                          "mine_triplets.num_queries=200", "train_encoder.hidden_size=32", "train_encoder.layers=1",
                          "train_encoder.max_length=32", "train_encoder.vocab_size=2000"]}

    first = airflow(["dags", "test", "citeflow_rebuild", "-c", json.dumps(conf)], env)
    log = first.stdout + first.stderr
    assert first.returncode == 0, log[-4000:]
    assert "state=success" in log
    (manifest_path,) = artifacts.glob("dag-demo/build_graph/*/_manifest.json")
    manifest = json.loads(manifest_path.read_text())
    assert manifest["tables"]["citations"]["rows"] == truth["counts"]["citations"]
    assert f"build_graph: built version {manifest['version']}" in log
    (leak_path,) = artifacts.glob("dag-demo/filter_leakage/*/_manifest.json")
    leak = json.loads(leak_path.read_text())
    assert leak["metrics"]["mode"] == "exclude"
    assert leak["metrics"]["mapped_by"]["title"] == truth["scidocs"]["mapped_by_title_only"]
    assert leak["inputs"][0] == {"stage": "build_graph", "version": manifest["version"],
                                 "path": str(manifest_path.parent)}

    second = airflow(["dags", "test", "citeflow_rebuild", "-c", json.dumps(conf)], env)
    log = second.stdout + second.stderr
    assert second.returncode == 0, log[-4000:]
    assert f"build_graph: cached version {manifest['version']}" in log
    assert f"filter_leakage: cached version {leak['version']}" in log
    assert len(list(artifacts.glob("dag-demo/build_graph/*"))) == 1
    assert len(list(artifacts.glob("dag-demo/filter_leakage/*"))) == 1
    # both strategies went through mining, training and embedding, once each, and were cached the second time
    for stage in ("mine_triplets", "train_encoder", "embed_papers", "benchmark"):
        manifests = [json.loads(p.read_text()) for p in artifacts.glob(f"dag-demo/{stage}/*/_manifest.json")]
        models = ["trained", "base"] if stage == "embed_papers" else [None]   # benchmark also embeds with the base
        assert sorted((m["metrics"]["strategy"], m["metrics"].get("model") if stage == "embed_papers" else None)
                      for m in manifests) == sorted((s, x) for s in ("scincl", "specter") for x in models), stage
        for m in manifests:
            if m["metrics"].get("model") == "base":
                continue  # embedded inside the benchmark task, whose own version is checked as cached
            assert f"{stage}: cached version {m['version']}" in log
