"""Warm start of a PBG run from a previous release's embeddings, through PBG's own `init_path`.

PBG (torchbiggraph/train.py, `load_embeddings` inside `train`) reads, for each entity partition that the run's
checkpoint does not hold yet, the partition from `config.init_path` with its `CheckpointManager`: version from
`checkpoint_version.txt` (0 when absent) and `embeddings_<entity>_<part>.v<version>.h5` holding the dataset
`embeddings` (rows in the order of `entity_names_<entity>_<part>.json`) and the attribute `format_version` 1
(torchbiggraph/checkpoint_storage.py). Only entities without such a file fall back to PBG's random init.

`write_init` writes that folder for the new release's entity order: a surviving paper gets its previous vector,
a new paper a random one drawn like PBG's own init (normal, times `init_scale`), seeded. No optimizer state is
written: PBG then starts Adagrad's accumulators afresh, as for a new run.

`find_warm_start` picks the source (an embed_graph version of an earlier snapshot with the same `warm_shape`);
`warm_init` reads its `paper_embeddings` table and writes `<version>/pbg/init/` for jobs/embed_graph.py.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import EmbedGraphConfig, RunConfig
from citeflow.errors import CiteflowError

log = logging.getLogger("citeflow")

# checkpoint_storage.py: the HDF5 attribute and dataset PBG checks and reads.
FORMAT_VERSION_ATTR, FORMAT_VERSION, DATASET = "format_version", 1, "embeddings"


def pbg_init_scale() -> float:
    """PBG's default `init_scale` (the scale of its random initial embeddings)."""
    import attr
    from torchbiggraph.config import ConfigSchema

    return float(attr.fields(ConfigSchema).init_scale.default)


def write_init(
    init_dir: Path,
    entities: Path,
    num_partitions: int,
    previous_ids: np.ndarray,
    previous_vectors: np.ndarray,
    *,
    init_scale: float,
    seed: int,
) -> dict[str, int]:
    """Write PBG's init_path layout into `init_dir` for the entities under `entities`; returns how many
    papers kept their previous vector (`kept`) and how many start random (`new`)."""
    import h5py

    if previous_vectors.ndim != 2 or len(previous_ids) != len(previous_vectors):
        raise ValueError("previous embeddings: one vector per id expected")
    order = np.argsort(previous_ids, kind="stable")
    ids_sorted, dim = previous_ids[order], previous_vectors.shape[1]
    rng = np.random.default_rng(seed)
    init_dir.mkdir(parents=True, exist_ok=True)
    kept = new = 0
    for p in range(num_partitions):
        names = np.asarray(json.loads((entities / f"entity_names_paper_{p}.json").read_text()), dtype=np.int64)
        pos = np.searchsorted(ids_sorted, names)
        pos_clipped = np.minimum(pos, max(len(ids_sorted) - 1, 0))
        found = (pos < len(ids_sorted)) & (ids_sorted[pos_clipped] == names) if len(ids_sorted) else pos < 0
        emb = (rng.standard_normal((len(names), dim)) * init_scale).astype(np.float32)
        emb[found] = previous_vectors[order[pos_clipped[found]]]
        with h5py.File(init_dir / f"embeddings_paper_{p}.v0.h5", "w") as hf:
            hf.attrs[FORMAT_VERSION_ATTR] = FORMAT_VERSION
            hf.create_dataset(DATASET, data=emb)
        kept += int(found.sum())
        new += int((~found).sum())
    (init_dir / "checkpoint_version.txt").write_text("0\n")
    return {"kept": kept, "new": new}


def warm_shape(cfg: EmbedGraphConfig) -> dict[str, Any]:
    """What a warm-start source must share with this run: the embedding space and its partitioning."""
    return {"dimension": cfg.dimension, "comparator": cfg.comparator, "num_partitions": cfg.num_partitions}


def warm_epochs(cfg: EmbedGraphConfig) -> int:
    import math

    return max(1, math.ceil(cfg.warm_epochs * cfg.num_epochs - 1e-9))


def find_warm_start(config: RunConfig, upstream: Manifest, store: ArtifactStore) -> Manifest | None:
    """The embed_graph version to warm-start from (`embed_graph.warm_start`), or None, with one log line
    saying why when a warm start was asked for. auto: the base release of this release's build_graph diff."""
    setting = config.embed_graph.warm_start
    if setting == "off":
        return None
    source = setting
    if setting == "auto":
        graph = store.upstream(upstream, "build_graph")
        diff = graph.metrics.get("from_diff")
        if not isinstance(diff, dict):
            log.info("embed_graph: warm_start=auto, but build_graph was not built from a diff: cold start")
            return None
        source = diff["base"]["snapshot"]
    if source == config.snapshot:
        raise CiteflowError(f"embed_graph.warm_start names this run's own snapshot {source!r}")
    shape = warm_shape(config.embed_graph)
    found = [m for m in store.list_versions(source, "embed_graph") if m.config.get("shape") == shape]
    if setting == "auto" and len(found) > 1:  # the one trained on the graph the diff was applied to
        found = [m for m in found if _graph_of(store, m) == diff["base"].get("version")]
    if not found:
        log.info(
            "embed_graph: no embed_graph version of snapshot %s with %s to warm-start from: cold start", source, shape
        )
        return None
    if len(found) > 1:  # never chosen by age
        log.info(
            "embed_graph: %d embed_graph versions of snapshot %s with %s (%s) could warm-start this run: cold start",
            len(found),
            source,
            shape,
            ", ".join(m.version for m in found),
        )
        return None
    return found[0]


def _graph_of(store: ArtifactStore, embedded: Manifest) -> str | None:
    """The build_graph version an embed_graph version was trained on (through its filter_leakage input)."""
    try:
        return store.upstream(store.upstream(embedded, "filter_leakage"), "build_graph").version
    except CiteflowError:
        return None


def warm_init(cfg: EmbedGraphConfig, warm: Manifest, work: Path) -> dict[str, Any]:
    """PBG's init_path folder (`work/init`) from the source version's paper embeddings, for this import's
    entity order; returns the manifest's `warm_start`."""
    import pyarrow.parquet as pq

    table = pq.read_table(warm.table_path("paper_embeddings"))
    ids = table.column("corpus_id").to_numpy()
    vectors = np.asarray(table.column("embedding").combine_chunks().flatten().to_numpy(), dtype=np.float32)
    vectors = vectors.reshape(len(ids), cfg.dimension)
    extra = {key.strip(): value.strip() for key, value in (item.split("=", 1) for item in cfg.pbg)}
    scale = float(extra["init_scale"]) if "init_scale" in extra else pbg_init_scale()
    counts = write_init(
        work / "init", work / "entities", cfg.num_partitions, ids, vectors, init_scale=scale, seed=cfg.seed
    )
    epochs = warm_epochs(cfg)
    log.info(
        "embed_graph: warm start from version %s of snapshot %s: %s papers keep their vectors, %s start random; "
        "%d of %d epochs",
        warm.version,
        warm.snapshot,
        f"{counts['kept']:,}",
        f"{counts['new']:,}",
        epochs,
        cfg.num_epochs,
    )
    return {"snapshot": warm.snapshot, "version": warm.version, "epochs": epochs, "of_epochs": cfg.num_epochs, **counts}
