"""Warm start of the encoder from a previous release's trained model: the release's triplets, fewer steps.

`train_encoder.init_from` names the source: `previous` (the release this release's build_graph was merged from
by a diff, as `embed_graph.warm_start=auto` finds its source) or a snapshot id. `find_warm_model` picks that
snapshot's train_encoder version of the same triplet strategy and the same base model (the fingerprint of
`train_encoder.model`; for the small BERT, its shape), and refuses to choose between several; `check_compatible`
refuses, in one line, a model of another architecture or tokenizer than the run's base model. The run then
trains `warm_steps(...)` optimizer steps (`train_encoder.warm_share` of what a run from the base model trains),
and its version names the source version.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from pathlib import Path
from typing import Any

from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import RunConfig
from citeflow.errors import CiteflowError

log = logging.getLogger("citeflow")
STAGE = "train_encoder"
# config.json keys two encoders must share for one's weights to start the other's training
SHAPE_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "sentencepiece.bpe.model", "spiece.model", "merges.txt")


def source_snapshot(config: RunConfig, store: ArtifactStore, triplets: Manifest) -> str:
    """The snapshot `train_encoder.init_from` names: `previous` is the base release of this release's graph."""
    setting = config.train_encoder.init_from
    if setting != "previous":
        source = setting
    else:
        graph = store.upstream(store.upstream(triplets, "filter_leakage"), "build_graph")
        diff = graph.metrics.get("from_diff")
        if not isinstance(diff, dict):
            raise CiteflowError(
                "train_encoder.init_from=previous: this release's build_graph was not built from a release diff, "
                "so it has no previous release; name one (train_encoder.init_from=SNAPSHOT) or set "
                "train_encoder.init_from=off"
            )
        source = diff["base"]["snapshot"]
    if source == config.snapshot:
        raise CiteflowError(f"train_encoder.init_from names this run's own snapshot {source!r}")
    return source


def find_warm_model(
    config: RunConfig, store: ArtifactStore, triplets: Manifest, base_inputs: list[dict[str, Any]]
) -> Manifest:
    """The train_encoder version to start from: of the source snapshot, the same strategy and the same base
    model (`base_inputs`: this run's model fingerprint, none for the small BERT); one line when there is none or
    several."""
    source = source_snapshot(config, store, triplets)
    strategy = triplets.metrics["strategy"]
    base = [{k: i.get(k) for k in ("kind", "fingerprint")} for i in base_inputs]
    found = [
        m for m in store.list_versions(source, STAGE) if m.config.get("strategy") == strategy and _base_of(m) == base
    ]
    if len(found) > 1:  # the one trained on the graph this release's graph was merged from
        graph = store.upstream(store.upstream(triplets, "filter_leakage"), "build_graph").metrics.get("from_diff")
        if isinstance(graph, dict):
            found = [m for m in found if _graph_of(store, m) == graph["base"].get("version")] or found
    fix = "train it first, or set train_encoder.init_from=off to train from the base model"
    if not found:
        raise CiteflowError(
            f"train_encoder.init_from: snapshot {source!r} has no train_encoder version of strategy {strategy} "
            f"from the same base model ({config.train_encoder.model or 'unset'}) under {store.uri}: {fix}"
        )
    if len(found) > 1:  # never chosen by age
        listed = ", ".join(m.version for m in found)
        raise CiteflowError(
            f"train_encoder.init_from: snapshot {source!r} has {len(found)} train_encoder versions that could start "
            f"this run ({listed}): remove the ones not wanted, or set train_encoder.init_from=off"
        )
    return found[0]


def _base_of(manifest: Manifest) -> list[dict[str, Any]]:
    return [{k: i.get(k) for k in ("kind", "fingerprint")} for i in manifest.inputs if i.get("kind") == "model"]


def _graph_of(store: ArtifactStore, trained: Manifest) -> str | None:
    try:
        triplets = store.upstream(trained, "mine_triplets")
        return store.upstream(store.upstream(triplets, "filter_leakage"), "build_graph").version
    except CiteflowError:
        return None


def _tokenizer_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for name in TOKENIZER_FILES:
        if (folder / name).is_file():
            digest.update(name.encode() + b"\0" + (folder / name).read_bytes())
    return digest.hexdigest()


def check_compatible(previous: Path, base: Path | None, shape: dict[str, Any] | None = None) -> None:
    """One line when the previous model cannot start this run: another architecture than the base model's (its
    config.json, or `shape` for the small BERT), or another tokenizer (the base's files)."""
    theirs = json.loads((previous / "config.json").read_text())
    ours = json.loads((base / "config.json").read_text()) if base is not None else dict(shape or {})
    differ = [k for k in SHAPE_KEYS if k in ours and theirs.get(k) != ours.get(k)]
    if differ:
        pairs = ", ".join(f"{k} {theirs.get(k)} vs {ours.get(k)}" for k in differ)
        raise CiteflowError(
            f"train_encoder.init_from: the previous model ({previous}) has another architecture than the base model "
            f"({pairs}): set train_encoder.init_from=off, or the base model it was trained from"
        )
    if base is not None and _tokenizer_digest(previous) != _tokenizer_digest(base):
        raise CiteflowError(
            f"train_encoder.init_from: the previous model ({previous}) has another tokenizer than the base model "
            f"{base}: set train_encoder.init_from=off, or the base model it was trained from"
        )


def warm_steps(share: float, triplets: int, batch_size: int, epochs: int, max_steps: int) -> tuple[int, int]:
    """(steps of the warm run, steps of a run from the base model): `share` of the second, at least one."""
    from citeflow.models.training.plan import steps_per_epoch

    full = steps_per_epoch(triplets, batch_size) * epochs
    if max_steps:
        full = min(full, max_steps)
    return max(1, math.ceil(share * full - 1e-9)), full
