"""Run the stages of a snapshot in order, skipping the ones that are up to date.

The stages and their edges come from `citeflow.registry`. `run_stage` calls the stage's `check(config)` when it
has one (user mistakes, before any work), resolves its upstream versions and its variants (each one built, or
found up to date), then calls its `run_on(ctx)` with a `StageContext` (its settings, its resolved inputs, the
store, the logger), and checks that the version it made reads no
version its registry entry does not declare; `run_pipeline` runs every stage up to `until`, each once (per
strategy), handing each stage the manifests of the ones before.

This is the only module that resolves or runs a stage (tests/unit/test_registry.py holds every other module to
that). An orchestrator that has resolved the upstream versions itself hands them in (`run_handed`: Airflow's
tasks, each given its upstream tasks' versions): the stage is run once, and nothing upstream is built.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import RunConfig, to_dict
from citeflow.errors import CiteflowError
from citeflow.registry import REGISTRY, STAGES, Stage, stages_until, undeclared_reads
from citeflow.registry import stage as stage_named

log = logging.getLogger("citeflow")

__all__ = [
    "STAGES",
    "MissingInput",
    "StageContext",
    "Upstream",
    "follow_rank",
    "handed_inputs",
    "preflight",
    "run_handed",
    "run_pipeline",
    "run_stage",
    "stages_until",
    "with_strategy",
]

# The manifests one run has resolved, by (stage, strategy of a per-strategy stage, the stage's own settings).
Resolved = dict[tuple[str, str | None, str], Manifest]


class Upstream(Mapping[str, Manifest]):
    """The manifests of the versions a stage builds on, by stage name, as the runner resolved them, and its
    variants (`citeflow.registry.Variant`) by name: `upstream.variants["base"]` is the benchmark's untrained
    base model's embed_papers version, present when the variant's setting asks for it."""

    def __init__(self, manifests: dict[str, Manifest], variants: dict[str, Manifest] | None = None) -> None:
        self._manifests = manifests
        self.variants: dict[str, Manifest] = dict(variants or {})

    def __getitem__(self, name: str) -> Manifest:
        return self._manifests[name]

    def __iter__(self):
        return iter(self._manifests)

    def __len__(self) -> int:
        return len(self._manifests)


@dataclasses.dataclass(frozen=True)
class StageContext:
    """What a stage's `run_on(ctx)` is handed, so that its code reads as "read these, write those" and a test can
    hand it inputs without a pipeline: the run's `config` and the stage's own `section` of it; its `inputs` (the
    upstream versions' manifests, and `inputs.variants`), the versions its registry entry reads through their
    lineage (`lineage`, by stage name), the artifact `store` and the logger."""

    stage: str
    config: RunConfig
    inputs: Upstream
    store: ArtifactStore
    lineage: Mapping[str, Manifest] = dataclasses.field(default_factory=dict)
    log: logging.Logger = log

    @property
    def section(self) -> Any:
        """The stage's own settings (`RunConfig.<section>` as the registry names it)."""
        return getattr(self.config, REGISTRY[self.stage].section)

    @classmethod
    def of(cls, stage: str, config: RunConfig, inputs: Upstream, store: ArtifactStore | None = None) -> StageContext:
        """The context of `stage` on `inputs`, with the store the config names."""
        store = store or ArtifactStore(config.artifacts, config.store)
        lineage = LineageReads(store, inputs, REGISTRY[stage].lineage)
        return cls(stage=stage, config=config, inputs=inputs, store=store, lineage=lineage)


class LineageReads(Mapping[str, Manifest]):
    """The versions of the stages a registry entry reads through its inputs' lineage (`Stage.lineage`), each found
    on first use through the input versions' own inputs; a stage the entry does not declare is not there."""

    def __init__(self, store: ArtifactStore, inputs: Mapping[str, Manifest], names: tuple[str, ...]) -> None:
        self._store, self._inputs, self._names, self._found = store, inputs, names, {}

    def __getitem__(self, name: str) -> Manifest:
        if name not in self._names:
            raise KeyError(f"{name} is not among the lineage reads the registry declares ({', '.join(self._names)})")
        if name not in self._found:
            for manifest in self._inputs.values():
                if any(item.get("stage") == name for item in manifest.inputs):
                    self._found[name] = self._store.upstream(manifest, name)
                    break
            else:
                raise CiteflowError(f"no input version was built from a {name} version")
        return self._found[name]

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _key(stage: str, config: RunConfig) -> tuple[str, str | None, str]:
    spec = REGISTRY[stage]
    strategy = config.mine_triplets.strategy if spec.per_strategy else None
    return stage, strategy, json.dumps(to_dict(getattr(config, spec.section)), sort_keys=True, default=str)


def run_stage(stage: str, config: RunConfig, resolved: Resolved | None = None) -> Manifest:
    """Run `stage` (or find its version up to date) on the versions of its upstream stages and variants, resolved
    first.

    `resolved` carries what this run has resolved already, so that each stage is looked at once per run.
    """
    spec = stage_named(stage)
    resolved = {} if resolved is None else resolved
    key = _key(stage, config)
    if key not in resolved:
        spec.check(config)  # a user mistake the stage would only meet after its upstream built
        upstream = {name: run_stage(name, config, resolved) for name in spec.upstream}
        variants = {v.name: run_stage(v.stage, v.config(config), resolved) for v in spec.variants if v.wanted(config)}
        resolved[key] = _run(spec, config, Upstream(upstream, variants))
    return resolved[key]


def _run(spec: Stage, config: RunConfig, upstream: Upstream) -> Manifest:
    """The stage's own code on its resolved inputs, then the check that it read only what its entry declares."""
    manifest = spec.entry()(StageContext.of(spec.name, config, upstream))
    undeclared = undeclared_reads(spec.name, config.snapshot, manifest.inputs)
    if undeclared:  # a stage's code reads what the registry does not show: the registry is the picture or wrong
        raise RuntimeError(
            f"{spec.name} {manifest.version} read {', '.join(undeclared)}, which citeflow.registry does not "
            f"declare for {spec.name}"
        )
    return manifest


def handed_inputs(stage: str, config: RunConfig) -> dict[str, tuple[str, RunConfig]]:
    """What `stage` reads in this run, by the name an orchestrator hands it under: each upstream stage by its
    name, each wanted variant as `<stage>_<variant>` (its task id), with the config that stage runs under."""
    spec = stage_named(stage)
    needed = {name: (name, config) for name in spec.upstream}
    needed.update({v.task_id: (v.stage, v.config(config)) for v in spec.variants if v.wanted(config)})
    return needed


class MissingInput(CiteflowError):
    """A version an orchestrator's upstream task made is gone: the task to clear is named."""


def run_handed(stage: str, config: RunConfig, given: Mapping[str, Manifest | None]) -> Manifest:
    """Run `stage` once on the upstream versions an orchestrator resolved (`given`, by `handed_inputs`' names),
    building nothing upstream: a version that is missing is one line naming it and the task that makes it."""
    spec = stage_named(stage)
    spec.check(config)
    found: dict[str, Manifest] = {}
    for name in handed_inputs(stage, config):
        manifest = given.get(name)
        if manifest is None:
            raise MissingInput(
                f"{stage} needs the version that task {name} of this run made, and it is gone (moved aside by "
                f"--repair, or deleted): clear task {name} to build it again"
            )
        found[name] = manifest
    upstream = {name: found[name] for name in spec.upstream}
    variants = {v.name: found[v.task_id] for v in spec.variants if v.wanted(config)}
    return _run(spec, config, Upstream(upstream, variants))


def follow_rank(config: RunConfig, rank: int, leakage: Manifest | None = None) -> Manifest:
    """Rank `rank` of a distributed embed_graph (`citeflow.jobs.embed_graph.follow`) on the filter_leakage version rank
    0
    builds on: `leakage` when an orchestrator hands it, else resolved here (built when missing) as rank 0 does."""
    import importlib

    # through the registry's module name, as `Stage.entry` imports a stage: the stage module imports this one
    follow = importlib.import_module(REGISTRY["embed_graph"].module).follow
    return follow(config, rank, leakage or run_stage("filter_leakage", config))


def entry_point(stage: str) -> Callable[[RunConfig], Manifest]:
    """`run(config)` of a stage module: the stage with its upstream resolved, for tests, notebooks and benches."""

    def run(config: RunConfig) -> Manifest:
        return run_stage(stage, config)

    run.__doc__ = f"Run {stage} on `config`, building (or finding up to date) every stage it builds on first."
    return run


def preflight(config: RunConfig, stages: list[str]) -> None:
    """User mistakes that would only surface late (after hours of Spark and PBG), caught before any work."""
    import os

    from citeflow.inputs import check_input_folders
    from citeflow.snapshot import discover

    discover(config.corpus, config.build_graph.format)  # a missing or unknown corpus first
    local_only = [s for s in stages if REGISTRY[s].local_root]
    if local_only:
        from citeflow.artifacts import ArtifactStore

        ArtifactStore(config.artifacts, config.store).require_local(", ".join(local_only))
    if "train_encoder" in stages and config.train_encoder.model != "small":
        from citeflow.models.encoder.folder import check_model_folder

        check_model_folder(config.train_encoder.model)  # weights, tokenizer and usage, not only the folder
    if "benchmark" in stages:
        REGISTRY["benchmark"].check(config)  # the SciDocs folder, before hours of training it would score
    for path in (config.embed_papers.papers, *config.benchmark.scirepeval):
        if path and not os.path.exists(path):
            raise CiteflowError(f"path {path!r} does not exist")
    check_input_folders(config)  # last: it walks the folders, which the checks above show to exist


def with_strategy(config: RunConfig, strategy: str) -> RunConfig:
    """The config with mine_triplets.strategy set (validated by the config class)."""
    return dataclasses.replace(config, mine_triplets=dataclasses.replace(config.mine_triplets, strategy=strategy))


def run_pipeline(
    config: RunConfig,
    until: str | None = None,
    report: Callable[[str], None] = print,
    strategies: list[str] | None = None,
) -> list[Manifest]:
    """Run stages in order; `report` receives one human-readable line per event.

    `strategies` (e.g. ["scincl", "specter"]) runs mine_triplets and every later stage once per triplet
    strategy, so their models can be compared; the stages before are shared.

    The Spark session the run starts is stopped, with its JVM, as soon as the last stage that runs Spark jobs
    (`Stage.spark`) is done: the driver's heap would otherwise sit idle through embedding, mining and training. A
    session this process held before the run (a notebook's, a test's) is its owner's, and is left alone.
    """
    from citeflow.spark.engine.session import spark_held, stop_spark

    stages = stages_until(until)
    preflight(config, stages)
    strategies = strategies or [config.mine_triplets.strategy]
    steps: list[tuple[str, RunConfig, str]] = []
    for stage in stages:
        if REGISTRY[stage].per_strategy:
            steps += [
                (stage, with_strategy(config, s), f"{stage} ({s})" if len(strategies) > 1 else stage)
                for s in strategies
            ]
        else:
            steps.append((stage, config, stage))
    last_spark = max((i for i, (stage, _, _) in enumerate(steps, 1) if REGISTRY[stage].spark), default=0)
    owns_spark = not spark_held()
    resolved: Resolved = {}
    manifests = []
    for i, (stage, stage_config, label) in enumerate(steps, 1):
        report(f"[{i}/{len(steps)}] {label}: running")
        t0 = time.monotonic()
        manifest = run_stage(stage, stage_config, resolved)
        took = time.monotonic() - t0
        rows = ", ".join(f"{name} {t['rows']:,}" for name, t in manifest.tables.items())
        state = (
            "up to date, skipped"
            if manifest.skipped
            else f"reused from snapshot {manifest.reused_from['snapshot']} in {took:.1f}s"
            if manifest.reused_from
            else f"built in {took:.1f}s"
        )
        report(f"[{i}/{len(steps)}] {label}: {state} — version {manifest.version} ({rows})")
        report(f"      {manifest.path}")
        manifests.append(manifest)
        if i == last_spark and owns_spark and stop_spark():
            log.info("Spark session stopped: no later stage of this run needs it")
    return manifests
