"""The stage registry, and the runner that resolves a stage's upstream versions from it."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from citeflow.config import RunConfig, apply_overrides
from citeflow.errors import CiteflowError
from citeflow.jobs import pipeline
from citeflow.registry import REGISTRY, STAGES, Stage, stage, stages_until, undeclared_reads


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
    from citeflow.jobs.triplet_strategies import STRATEGY_MINERS
    from citeflow.registry import STRATEGIES

    assert list(STRATEGY_MINERS) == list(STRATEGIES)
    for miner in STRATEGY_MINERS.values():
        assert all(callable(getattr(miner, step)) for step in ("prepare", "batch", "batch_metrics", "finish"))


def _choices(section_class, name: str) -> list[str]:
    """The names a setting's Literal allows (None and `auto` left out: they pick among the others)."""
    import typing

    hint = typing.get_type_hints(section_class)[name]
    args = typing.get_args(hint)
    literal = next((a for a in args if typing.get_origin(a) is typing.Literal), hint)
    return [a for a in typing.get_args(literal) if a not in (None, "auto")]


def test_each_named_choice_is_a_table_from_name_to_implementation_that_the_settings_offer():
    from citeflow.config.encoder import TrainEncoderConfig
    from citeflow.config.stages import BuildGraphConfig, MineTripletsConfig
    from citeflow.jobs.build_graph import CORPUS_FORMATS
    from citeflow.models.encoder.model import POOLINGS
    from citeflow.models.training.losses import LOSSES
    from citeflow.models.triplets.knn import INDEX_BUILDERS
    from citeflow.registry import INDEX_KINDS
    from citeflow.snapshot import LAYOUTS

    assert _choices(TrainEncoderConfig, "loss") == list(LOSSES)
    assert _choices(TrainEncoderConfig, "pooling") == list(POOLINGS)
    assert _choices(MineTripletsConfig, "index") == list(INDEX_BUILDERS) == list(INDEX_KINDS)
    assert _choices(BuildGraphConfig, "format") == list(CORPUS_FORMATS) == list(LAYOUTS)
    assert all(callable(LOSSES[n].of) for n in LOSSES) and all(callable(f) for f in POOLINGS.values())


def test_no_code_chooses_a_format_strategy_index_loss_or_pooling_by_comparing_its_name():
    """Adding one is an entry in its table: no `x == "s2orc"`, `loss in ("triplet", ...)` or the like outside
    the tables themselves (and outside tests, the bench and the config's own Literal checks)."""
    import ast
    from pathlib import Path

    from citeflow.models.encoder.model import POOLINGS
    from citeflow.models.training.losses import LOSSES
    from citeflow.registry import INDEX_KINDS, STRATEGIES
    from citeflow.snapshot import LAYOUTS

    names = {*LAYOUTS, *STRATEGIES, *INDEX_KINDS, *LOSSES, *POOLINGS}
    root = Path(__file__).resolve().parents[2]
    found = []
    for package in ("citeflow", "cockpit", "dags", "evaluation", "jobs", "models", "spark"):
        for path in sorted((root / package).rglob("*.py")):
            if path.parts[-3:-1] == ("citeflow", "config"):
                continue  # the settings check their own Literal choices
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Compare):
                    # a side that is a name, or a tuple, list or set of names (not a key looked up on a side)
                    sides = [node.left, *node.comparators]
                    sides += [
                        e for side in sides if isinstance(side, ast.Tuple | ast.List | ast.Set) for e in side.elts
                    ]
                    constants = [c.value for c in sides if isinstance(c, ast.Constant) and isinstance(c.value, str)]
                    if names & set(constants):
                        found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []


def test_drift_is_a_registered_report_whose_reads_are_declared():
    from citeflow.jobs import drift
    from citeflow.registry import REPORTS

    report = REPORTS["drift"]
    assert importlib.import_module(report.module) is drift and drift.TABLES == list(report.tables)
    assert callable(drift.run) and callable(drift.previous_release)
    stages = [{"stage": s, "version": "v", "snapshot": snap} for s in STAGES for snap in ("r1", "r2")]
    assert undeclared_reads("drift", "r2", stages) == []
    assert undeclared_reads("drift", "r2", [*stages, {"stage": "drift", "version": "x"}]) == ["drift x"]


def test_the_architecture_page_shows_the_registrys_graph_as_generated():
    from pathlib import Path

    from citeflow.registry import mermaid

    page = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    block = page.split("<!-- generated: python -m citeflow.registry -->\n```mermaid\n", 1)[1].split("```\n", 1)[0]
    assert block == mermaid(), "regenerate it: python -m citeflow.registry"
    graph = mermaid()
    for entry in REGISTRY.values():  # every edge the registry declares is drawn
        for name in entry.upstream:
            assert f"  {name} --> {entry.name}\n" in graph
        for name in entry.lineage:
            assert f'  {name} -. "lineage" .-> {entry.name}\n' in graph


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
    inputs: list = dataclasses.field(default_factory=list)
    variants: dict = dataclasses.field(default_factory=dict)


def test_the_runner_resolves_each_stage_once_and_hands_it_its_upstream(monkeypatch):
    """Both strategies: the shared stages run once, the per-strategy ones once per strategy, each on the
    manifests of the stages the registry names; the benchmark's base model (the registry's variant) is resolved
    by the runner before the benchmark runs, on the trained model's upstream."""
    calls = []

    def entry(self):
        def run_on(ctx):
            config, upstream = ctx.config, ctx.inputs
            calls.append(self.name)
            strategy = config.mine_triplets.strategy if self.per_strategy else None
            return FakeManifest(
                self.name, strategy, config.embed_papers.model, dict(upstream), variants=upstream.variants
            )

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
        "embed_papers",  # scincl's base model
        "benchmark",
        "embed_papers",  # specter's
        "benchmark",
    ]
    # each stage is checked before anything it reads is resolved: the benchmark before its base model
    assert checked == [*calls[:-4], "benchmark", "embed_papers", "benchmark", "embed_papers"]
    by = {(m.stage, m.strategy): m for m in manifests}
    for m in manifests:
        assert list(m.upstream) == list(REGISTRY[m.stage].upstream)
        for name, got in m.upstream.items():
            expected = by[(name, m.strategy if REGISTRY[name].per_strategy else None)]
            assert got is expected
    for m in manifests:
        if m.stage == "benchmark":
            base = m.variants["base"]
            assert base.model == "base" and base.strategy == m.strategy
            assert base.upstream["train_encoder"] is by[("train_encoder", m.strategy)]


def test_the_runner_stops_the_spark_session_it_started_after_the_last_spark_stage(monkeypatch):
    """As the last stage the registry marks `spark` ends, before the next one starts; a session the process held
    before the run (a notebook's, a test's) is left to its owner."""
    from citeflow.spark.engine import session

    events: list[str] = []

    def entry(self):
        def run_on(ctx):
            events.append(self.name)
            return FakeManifest(self.name, None, ctx.config.embed_papers.model, dict(ctx.inputs))

        return run_on

    monkeypatch.setattr(Stage, "entry", entry)
    monkeypatch.setattr(Stage, "check", lambda self, config: None)
    monkeypatch.setattr(pipeline, "preflight", lambda config, stages: None)
    monkeypatch.setattr(session, "stop_spark", lambda: events.append("stop spark") or True)
    config = RunConfig(snapshot="s", corpus="c", scidocs="d")
    for held, expected in (
        (False, ["build_graph", "filter_leakage", "stop spark", "embed_graph", "mine_triplets"]),
        (True, ["build_graph", "filter_leakage", "embed_graph", "mine_triplets"]),
    ):
        events.clear()
        monkeypatch.setattr(session, "spark_held", lambda held=held: held)
        pipeline.run_pipeline(config, until="mine_triplets", report=lambda line: None)
        assert events == expected


@pytest.mark.parametrize("name", STAGES)
def test_a_stage_is_marked_spark_exactly_when_its_code_starts_a_session(name):
    """`Stage.spark` against the stage's own code (its module, or its package's modules): `get_spark` is how a
    stage starts its session, so the runner can stop it after the last one that does."""
    from pathlib import Path

    module = importlib.import_module(REGISTRY[name].module)
    path = Path(str(module.__file__)).resolve()
    files = sorted(path.parent.glob("*.py")) if path.name == "__init__.py" else [path]
    starts = any("get_spark" in file.read_text() for file in files)
    assert REGISTRY[name].spark == starts


def test_a_stage_run_alone_resolves_its_upstream_first(monkeypatch):
    calls = []

    def entry(self):
        def run_on(ctx):
            upstream = ctx.inputs
            calls.append((self.name, sorted(upstream)))
            return FakeManifest(self.name, None, "", dict(upstream))

        return run_on

    monkeypatch.setattr(Stage, "entry", entry)
    monkeypatch.setattr(Stage, "check", lambda self, config: None)

    assert pipeline.run_stage("embed_graph", RunConfig(snapshot="s", corpus="c")).stage == "embed_graph"
    assert calls == [("build_graph", []), ("filter_leakage", ["build_graph"]), ("embed_graph", ["filter_leakage"])]


def test_a_stage_check_fails_before_its_upstream_runs(monkeypatch):
    calls = []
    monkeypatch.setattr(Stage, "entry", lambda self: lambda ctx: calls.append(self.name))

    with pytest.raises(CiteflowError, match="benchmark needs the SciDocs folder"):
        pipeline.run_stage("benchmark", RunConfig(snapshot="s", corpus="c"))
    assert calls == []


def test_a_handed_stage_runs_once_on_the_versions_it_is_given_and_builds_nothing(monkeypatch):
    """What an Airflow task does: the stage's own code on the versions its upstream tasks made; a missing one is
    one line naming the task to clear, and nothing upstream is built."""
    calls = []

    def entry(self):
        def run_on(ctx):
            calls.append(self.name)
            return FakeManifest(self.name, None, "", dict(ctx.inputs), variants=ctx.inputs.variants)

        return run_on

    monkeypatch.setattr(Stage, "entry", entry)
    monkeypatch.setattr(Stage, "check", lambda self, config: None)
    config = RunConfig(snapshot="s", corpus="c", scidocs="d")
    trained, base = (
        FakeManifest("embed_papers", "scincl", "trained", {}),
        FakeManifest("embed_papers", "scincl", "base", {}),
    )
    assert pipeline.handed_inputs("benchmark", config) == {
        "embed_papers": ("embed_papers", config),
        "embed_papers_base": ("embed_papers", REGISTRY["benchmark"].variants[0].config(config)),
    }
    got = pipeline.run_handed("benchmark", config, {"embed_papers": trained, "embed_papers_base": base})
    assert calls == ["benchmark"] and got.upstream == {"embed_papers": trained} and got.variants == {"base": base}
    no_base = apply_overrides(config, ["benchmark.base=false"])
    assert list(pipeline.handed_inputs("benchmark", no_base)) == ["embed_papers"]
    with pytest.raises(CiteflowError, match="task embed_papers_base of this run made, and it is gone.*clear task"):
        pipeline.run_handed("benchmark", config, {"embed_papers": trained, "embed_papers_base": None})
    assert calls == ["benchmark"]


def test_a_stage_is_handed_one_context_its_lineage_reads_only_the_declared_ones():
    """`run_on(ctx)`: the run's config and the stage's section, its inputs, the store, and the lineage reads its
    entry declares, each found on first use through the inputs' own inputs; an undeclared one is not there."""
    graph = FakeManifest("embed_graph", None, "", {}, inputs=[{"stage": "filter_leakage", "version": "f"}])
    leakage = FakeManifest("filter_leakage", None, "", {})

    class Store:
        def upstream(self, manifest, name):
            assert (manifest, name) == (graph, "filter_leakage")
            return leakage

    config = RunConfig(snapshot="s", corpus="c")
    ctx = pipeline.StageContext.of("mine_triplets", config, pipeline.Upstream({"embed_graph": graph}), Store())
    assert ctx.section is config.mine_triplets and ctx.inputs["embed_graph"] is graph
    assert list(ctx.lineage) == ["filter_leakage"] and ctx.lineage["filter_leakage"] is leakage
    with pytest.raises(KeyError, match="build_graph is not among the lineage reads"):
        ctx.lineage["build_graph"]
    bare = pipeline.StageContext.of("embed_graph", config, pipeline.Upstream({"filter_leakage": leakage}), Store())
    assert list(bare.lineage) == []


def test_a_stage_that_reads_a_version_its_entry_does_not_declare_fails(monkeypatch):
    """The registry is the picture of the system: a version among a manifest's inputs that the stage's entry does
    not declare (another stage of the release, or an earlier release where no `previous` read is declared) fails
    the run as a programming error; declared reads pass."""
    read = {}

    def entry(self):
        return lambda ctx: FakeManifest(self.name, None, "", {}, inputs=read.get(self.name, []))

    monkeypatch.setattr(Stage, "entry", entry)
    monkeypatch.setattr(Stage, "check", lambda self, config: None)
    config = RunConfig(snapshot="s", corpus="c", scidocs="d")
    read["embed_graph"] = [
        {"stage": "filter_leakage", "version": "f"},
        {"stage": "embed_graph", "version": "w", "snapshot": "earlier"},  # a warm start: declared `previous`
    ]
    pipeline.run_stage("embed_graph", config)
    read["embed_graph"] = [{"stage": "build_graph", "version": "b"}]
    with pytest.raises(RuntimeError, match="embed_graph v read build_graph b, which citeflow.registry does not"):
        pipeline.run_stage("embed_graph", config)
    read["embed_graph"] = []
    read["mine_triplets"] = [{"stage": "mine_triplets", "version": "m", "snapshot": "earlier"}]
    with pytest.raises(RuntimeError, match="read mine_triplets m of snapshot earlier"):
        pipeline.run_stage("mine_triplets", config)
    assert undeclared_reads("benchmark", "s", [{"stage": "embed_papers", "version": "e"}, {"kind": "scidocs"}]) == []


def test_no_module_but_the_pipeline_resolves_or_runs_a_stage():
    """citeflow.jobs.pipeline is the only place that resolves a stage's upstream or runs a stage: no other module of the
    package calls run_stage, run_pipeline or a stage's entry, and no stage module imports another stage's module
    (the CLI and Airflow call the pipeline's own functions: run_pipeline, run_handed, follow_rank)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    stage_modules = {REGISTRY[s].module for s in STAGES}
    allowed_callers = {"jobs/cli/commands.py": {"run_pipeline"}}
    found = []
    for path in sorted(
        p
        for folder in ("citeflow", "jobs", "models", "evaluation", "spark", "cockpit", "dags")
        for p in (root / folder).rglob("*.py")
    ):
        rel = path.relative_to(root).as_posix()
        if rel == "jobs/pipeline.py":
            continue
        module = rel[:-3].replace("/", ".").removesuffix(".__init__")
        module = module if module.startswith(("citeflow.", "dags.")) else f"citeflow.{module}"
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in ("run_stage", "run_pipeline", "entry") and name not in allowed_callers.get(rel, ()):
                    found.append(f"{rel}:{node.lineno} calls {name}")
            if isinstance(node, ast.ImportFrom) and node.module:
                imported = {f"{node.module}.{a.name}" for a in node.names} | {node.module}
                own = (
                    module
                    if module in stage_modules
                    else next((m for m in stage_modules if module.startswith(m + ".")), None)
                )
                others = {m for m in imported & stage_modules if m != own}
                if own and others:
                    found.append(f"{rel}:{node.lineno} imports stage module {sorted(others)}")
                if own and {"run_stage", "run_pipeline"} & {a.name for a in node.names}:
                    found.append(f"{rel}:{node.lineno} imports the runner's run_stage/run_pipeline")
    assert found == []
