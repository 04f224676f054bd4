"""`citeflow run` stops its Spark session and the local driver's JVM once the last stage that runs Spark is done
(jobs/pipeline.py, `citeflow.spark.engine.session.stop_spark`), before the first stage that does not: seen from
outside, in the processes of a real run, sampled through each stage by `bench/bench_run_memory.py` (which this
test runs as its smoke test too)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import TEST_SPARK_OVERRIDES
from tests.support.bench import finite, run_bench

pytestmark = [pytest.mark.slow, pytest.mark.jvm]


def test_no_jvm_is_left_once_the_spark_stages_are_done(tmp_path):
    from citeflow.synthcorpus.config import GenerateConfig
    from citeflow.synthcorpus.generate import run as generate

    snapshot = tmp_path / "snapshot"
    generate(GenerateConfig(papers=400, out=str(snapshot), seed=3, format="s2orc", shards=1))
    # a JVM as small as a test's, and PBG trained as little as it can be: embed_graph is here to be seen starting
    small = ["spark.driver_memory=1g", "embed_graph.num_epochs=1", "embed_graph.link_prediction=false"]
    settings = [arg for item in [*TEST_SPARK_OVERRIDES, *small, "embed_graph.workers=1"] for arg in ("--set", item)]
    figures = tmp_path / "memory.json"
    args = ["--snapshot", str(snapshot), "--work", str(tmp_path / "work"), "--until", "embed_graph", "--every", "0.1"]
    run_bench("bench_run_memory.py", *args, *settings, "--json", str(figures), timeout=600)

    stages = json.loads(figures.read_text())["runs"]["current"]["stages"]
    assert {"build_graph", "filter_leakage", "embed_graph"} <= set(stages), stages
    # while the Spark stages run, the probe sees the JVM build_graph started (filter_leakage reuses it)...
    assert stages["filter_leakage"]["jvm_samples"] > 0 and stages["filter_leakage"]["jvm_peak_mib"] > 0, stages
    # ...and from the first stage after them on, none: not one sample of embed_graph's process tree holds a JVM
    assert stages["embed_graph"]["samples"] > 0 and stages["embed_graph"]["jvm_samples"] == 0, stages
    for figure in stages["embed_graph"].values():
        assert finite(figure)
