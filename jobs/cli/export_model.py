"""`citeflow export-model`: the trained model of a snapshot and strategy, with its model card, in one folder.

    citeflow export-model --snapshot demo --strategy scincl --out dist/citeflow-scincl [--benchmark V]

Reads the benchmark version of the snapshot whose strategy is `--strategy` (its manifest, its `model_card.md`):
the only one, or the one `--benchmark` names when there are several (never "the newest"), and the trained model
it scored (train_encoder's `model/`: safetensors, config, tokenizer, citeflow.json). Writes `--out` (absent or
empty, or `--overwrite`): the model's files plus the card as `README.md`, ready to load with
`transformers.AutoModel.from_pretrained(out)` and to publish. Written into a temporary sibling folder and renamed
into place, so a killed export leaves no half folder at `--out`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from citeflow.artifacts import ArtifactStore
from citeflow.errors import CiteflowError
from jobs.benchmark import CARD, STAGE

STRATEGIES = ("scincl", "specter")


def export_model(
    *, snapshot: str, strategy: str, out: str, artifacts: str, overwrite: bool = False, benchmark: str | None = None
) -> Path:
    if strategy not in STRATEGIES:
        raise CiteflowError(f"--strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    store = ArtifactStore(artifacts)
    if not store.local:
        raise CiteflowError("export-model reads a local artifact root")
    versions = [m for m in store.list_versions(snapshot, STAGE) if m.metrics.get("strategy") == strategy]
    if not versions:
        raise CiteflowError(
            f"no benchmark of snapshot {snapshot!r} with strategy {strategy!r} under {store.uri}: "
            f"run `citeflow run --snapshot {snapshot} ... --strategy {strategy}` first"
        )
    if benchmark is not None:
        named = [m for m in versions if m.version == benchmark]
        if not named:
            raise CiteflowError(
                f"benchmark version {benchmark!r} is not one of snapshot {snapshot!r}'s {strategy} benchmarks: "
                f"{', '.join(m.version for m in versions)}"
            )
        versions = named
    if len(versions) > 1:
        listed = ", ".join(f"{m.version} ({m.finished_at[:19]})" for m in versions)
        raise CiteflowError(
            f"snapshot {snapshot!r} has {len(versions)} {strategy} benchmarks: name one with --benchmark ({listed})"
        )
    benchmark = versions[0]
    card = Path(benchmark.path) / CARD
    embedded = [
        store.read_manifest(snapshot, "embed_papers", item["version"])
        for item in benchmark.inputs
        if item.get("stage") == "embed_papers"
    ]
    trained = next((m for m in embedded if m is not None and m.metrics.get("model") == "trained"), None)
    model = Path(trained.metrics.get("model_folder", "")) if trained else Path("/nonexistent")
    if not (model / "config.json").is_file() or not card.is_file():
        raise CiteflowError(f"benchmark {benchmark.version} has no trained model folder or model card to export")
    target = Path(out).resolve()
    if target.exists() and any(target.iterdir()) and not overwrite:
        raise CiteflowError(f"{out!r} is not empty: choose another folder or pass --overwrite")
    if target.exists() and not target.is_dir():
        raise CiteflowError(f"{out!r} is a file")
    staging = target.with_name(f".{target.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(model, staging)
    shutil.copyfile(card, staging / "README.md")
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)
    return target
