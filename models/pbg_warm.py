"""Warm start of a PBG run from a previous release's embeddings, through PBG's own `init_path`.

PBG (torchbiggraph/train.py, `load_embeddings` inside `train`) reads, for each entity partition that the run's
checkpoint does not hold yet, the partition from `config.init_path` with its `CheckpointManager`: version from
`checkpoint_version.txt` (0 when absent) and `embeddings_<entity>_<part>.v<version>.h5` holding the dataset
`embeddings` (rows in the order of `entity_names_<entity>_<part>.json`) and the attribute `format_version` 1
(torchbiggraph/checkpoint_storage.py). Only entities without such a file fall back to PBG's random init.

`write_init` writes that folder for the new release's entity order: a surviving paper gets its previous vector,
a new paper a random one drawn like PBG's own init (normal, times `init_scale`), seeded. No optimizer state is
written: PBG then starts Adagrad's accumulators afresh, as for a new run.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

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
