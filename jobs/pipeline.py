"""Run the stages of a snapshot in order, skipping the ones that are up to date.

Stage entry points are looked up by name (`STAGE_MODULES`, one per stage of
`citeflow.config.STAGES`): each module exposes `run(config: RunConfig) ->
Manifest`. `run_pipeline` runs every stage up to `until`.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import time
from collections.abc import Callable

from citeflow.artifacts import Manifest
from citeflow.config import STAGES, RunConfig
from citeflow.errors import CiteflowError

log = logging.getLogger("citeflow")

# Stage name -> module with run(config) -> Manifest, in pipeline order.
STAGE_MODULES: dict[str, str] = {stage: f"jobs.{stage}" for stage in STAGES}


# Stages that run once per triplet strategy (the rest are shared by every strategy).
STRATEGY_STAGES = ("mine_triplets", "train_encoder", "embed_papers", "benchmark")


def stages_until(until: str | None) -> list[str]:
    """The stages to run, in order, ending with `until` (inclusive; every stage when None)."""
    if until is None:
        return list(STAGES)
    if until not in STAGES:
        raise CiteflowError(f"unknown stage {until!r}; stages are: {', '.join(STAGES)}")
    return list(STAGES[: STAGES.index(until) + 1])


def run_stage(stage: str, config: RunConfig) -> Manifest:
    module = importlib.import_module(STAGE_MODULES[stage])
    return module.run(config)


def preflight(config: RunConfig, stages: list[str]) -> None:
    """User mistakes that would only surface late (after hours of Spark and PBG), caught before any work."""
    import os

    from citeflow.inputs import check_input_folders
    from citeflow.snapshot import discover

    discover(config.corpus, config.build_graph.format)  # a missing or unknown corpus first
    local_only = [s for s in stages if importlib.import_module(STAGE_MODULES[s]).NEEDS_LOCAL_ROOT]
    if local_only:
        from citeflow.artifacts import ArtifactStore

        ArtifactStore(config.artifacts, config.store).require_local(", ".join(local_only))
    if "train_encoder" in stages and config.train_encoder.model != "small":
        from models.encoder import check_model_dir

        check_model_dir(config.train_encoder.model)
    if "benchmark" in stages and not config.scidocs:
        raise CiteflowError(
            "the benchmark stage needs the SciDocs folder: pass --scidocs DIR (or --until embed_papers)"
        )
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
    """
    stages = stages_until(until)
    preflight(config, stages)
    strategies = strategies or [config.mine_triplets.strategy]
    steps: list[tuple[str, RunConfig, str]] = []
    for stage in stages:
        if stage in STRATEGY_STAGES:
            steps += [
                (stage, with_strategy(config, s), f"{stage} ({s})" if len(strategies) > 1 else stage)
                for s in strategies
            ]
        else:
            steps.append((stage, config, stage))
    manifests = []
    for i, (stage, stage_config, label) in enumerate(steps, 1):
        report(f"[{i}/{len(steps)}] {label}: running")
        t0 = time.monotonic()
        manifest = run_stage(stage, stage_config)
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
    return manifests
