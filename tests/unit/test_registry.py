"""The stage registry, and the runner that resolves a stage's upstream versions from it."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from citeflow.config import RunConfig
from citeflow.errors import CiteflowError
from citeflow.registry import REGISTRY, STAGES, Stage, stage, stages_until
from jobs import pipeline


@pytest.mark.parametrize("name", STAGES)
def test_each_stage_module_matches_its_entry(name):
    entry = REGISTRY[name]
    module = importlib.import_module(entry.module)
    assert module.STAGE == name
    assert module.TABLES == list(entry.tables)
    assert callable(module.run_on)
    section = getattr(RunConfig(snapshot="s", corpus="c"), entry.section)  # its settings: a frozen dataclass
    assert dataclasses.is_dataclass(section) and type(section).__dataclass_params__.frozen
    assert entry.worker in ("default", "pbg", "gpu")


def test_each_registered_strategy_has_its_miner_and_nothing_else_does():
    from citeflow.registry import STRATEGIES
    from jobs.triplet_strategies import STRATEGY_MINERS

    assert list(STRATEGY_MINERS) == list(STRATEGIES)
    for miner in STRATEGY_MINERS.values():
        assert all(callable(getattr(miner, step)) for step in ("prepare", "batch", "batch_metrics", "finish"))


def test_an_unknown_stage_lists_the_known_ones():
    with pytest.raises(CiteflowError, match="unknown stage 'embed'; stages are: build_graph, filter_leakage"):
        stage("embed")
    with pytest.raises(CiteflowError, match="unknown stage"):
        stages_until("embed")
    assert stages_until("embed_graph") == ["build_graph", "filter_leakage", "embed_graph"]


@dataclasses.dataclass
class FakeManifest:
    stage: str
    strategy: str | None
    model: str
    upstream: dict
    tables: dict = dataclasses.field(default_factory=dict)
    skipped: bool = False
    reused_from: dict | None = None
    version: str = "v"
    path: str = "p"


def test_the_runner_resolves_each_stage_once_and_hands_it_its_upstream(monkeypatch):
    """Both strategies: the shared stages run once, the per-strategy ones once per strategy, each on the
    manifests of the stages the registry names; the benchmark's base model is resolved through the runner and
    reuses the trained model's upstream."""
    calls = []

    def entry(self):
        def run_on(config, upstream):
            calls.append(self.name)
            if self.name == "benchmark":
                base = dataclasses.replace(config.embed_papers, model="base")
                upstream.resolve("embed_papers", dataclasses.replace(config, embed_papers=base))
            strategy = config.mine_triplets.strategy if self.per_strategy else None
            return FakeManifest(self.name, strategy, config.embed_papers.model, dict(upstream))

        return run_on

    checked = []
    monkeypatch.setattr(Stage, "entry", entry)
    monkeypatch.setattr(Stage, "check", lambda self, config: checked.append(self.name))
    monkeypatch.setattr(pipeline, "preflight", lambda config, stages: None)
    config = RunConfig(snapshot="s", corpus="c", scidocs="d")

    manifests = pipeline.run_pipeline(config, strategies=["scincl", "specter"], report=lambda line: None)

    assert calls == [
        "build_graph",
        "filter_leakage",
        "embed_graph",
        *["mine_triplets"] * 2,
        *["train_encoder"] * 2,
        *["embed_papers"] * 2,
        "benchmark",
        "embed_papers",  # scincl's base model
        "benchmark",
        "embed_papers",  # specter's
    ]
    assert checked == calls
    by = {(m.stage, m.strategy): m for m in manifests}
    for m in manifests:
        assert list(m.upstream) == list(REGISTRY[m.stage].upstream)
        for name, got in m.upstream.items():
            expected = by[(name, m.strategy if REGISTRY[name].per_strategy else None)]
            assert got is expected


def test_a_stage_run_alone_resolves_its_upstream_first(monkeypatch):
    calls = []

    def entry(self):
        def run_on(config, upstream):
            calls.append((self.name, sorted(upstream)))
            return self.name

        return run_on

    monkeypatch.setattr(Stage, "entry", entry)
    monkeypatch.setattr(Stage, "check", lambda self, config: None)

    assert pipeline.run_stage("embed_graph", RunConfig(snapshot="s", corpus="c")) == "embed_graph"
    assert calls == [("build_graph", []), ("filter_leakage", ["build_graph"]), ("embed_graph", ["filter_leakage"])]


def test_a_stage_check_fails_before_its_upstream_runs(monkeypatch):
    calls = []
    monkeypatch.setattr(Stage, "entry", lambda self: lambda config, upstream: calls.append(self.name))

    with pytest.raises(CiteflowError, match="benchmark needs the SciDocs folder"):
        pipeline.run_stage("benchmark", RunConfig(snapshot="s", corpus="c"))
    assert calls == []
