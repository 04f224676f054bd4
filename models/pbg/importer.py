"""Citations Parquet -> PyTorch-BigGraph's on-disk input, vectorised and deterministic.

PBG's own TSV importer holds everything in Python objects, shuffles entities
without a seed and reads `#` lines as edges (docs/reference.md §3). This importer:

- streams the `citations` table (citing, cited) in Arrow record batches;
- makes one entity per paper that has an edge (SciNCL's node set), ordered
  by a seeded permutation of the sorted corpus ids, dealt round-robin over
  `num_partitions` partitions: the same input and seed give the same order;
- writes every edge to `edges_all/`, the input of the run whose embeddings
  are mined (SciNCL trains those on all edges);
- with `holdout` > 0 also splits the edges for the link-prediction run: a
  seeded share, chosen by a hash of (citing, cited, seed) so the split does
  not depend on batch size or file order, goes to `edges_holdout/`, the rest
  to `edges_train/`;
- sorts each bucket's edges by (lhs, rhs) offset once all are written: the
  rows of a Spark-written `citations` table come in an order that changes
  from run to run (shuffle blocks arrive as tasks finish), and PBG draws its
  per-epoch edge permutation over the stored order, so without this a
  seeded single-worker run would not repeat across builds of the same graph;
- writes what PBG's `FileEntityStorage` / `FileEdgeStorage` read:
  `entity_count_paper_{p}.txt`, `entity_names_paper_{p}.json` and
  `edges_{lhs}_{rhs}.h5` (datasets lhs, rhs, rel; `format_version` 1).

Layout under `out`: `entities/`, `edges_all/`, and with a holdout
`edges_train/` and `edges_holdout/`. Both runs share the entity files, so
their embedding rows line up.

The stage runs it in a process of its own (`import_in_subprocess`: `python -m citeflow.models.pbg.importer`), as it runs
PBG: HDF5 cannot close a file whose last write failed (a full disk) and crashes the process that holds it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pyarrow.fs as pafs

from citeflow.errors import ENVIRONMENT_CAUSES

ENTITY = "paper"
BATCH_ROWS = 1 << 20
_H5_CHUNK = 1 << 16


@dataclass(frozen=True)
class EntityIndex:
    """Where each corpus id lives in PBG: partition and offset within it."""

    ids: np.ndarray  # sorted unique corpus ids (int64)
    partition: np.ndarray  # per sorted id
    offset: np.ndarray  # per sorted id
    num_partitions: int

    def names(self, p: int) -> np.ndarray:
        """Corpus ids of partition p in offset order."""
        mask = self.partition == p
        order = np.argsort(self.offset[mask], kind="stable")
        return self.ids[mask][order]

    def lookup(self, corpus_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = np.searchsorted(self.ids, corpus_ids)
        if len(corpus_ids) and (pos.max(initial=0) >= len(self.ids) or not np.array_equal(self.ids[pos], corpus_ids)):
            raise ValueError("edge endpoint missing from the entity index")
        return self.partition[pos], self.offset[pos]


def build_entity_index(node_ids: np.ndarray, num_partitions: int, seed: int) -> EntityIndex:
    """Seeded permutation of the sorted ids, dealt round-robin over partitions."""
    ids = np.unique(np.asarray(node_ids, dtype=np.int64))
    order = np.random.default_rng(seed).permutation(len(ids))
    partition = np.empty(len(ids), dtype=np.int64)
    offset = np.empty(len(ids), dtype=np.int64)
    slot = np.arange(len(ids), dtype=np.int64)
    partition[order] = slot % num_partitions
    offset[order] = slot // num_partitions
    return EntityIndex(ids=ids, partition=partition, offset=offset, num_partitions=num_partitions)


def holdout_mask(citing: np.ndarray, cited: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """True for edges held out: a splitmix64 hash of (citing, cited, seed) below `fraction`."""
    with np.errstate(over="ignore"):
        x = (citing.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ (cited.astype(np.uint64) + np.uint64(seed))
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53) < fraction


def _batches(citations: str, columns=("citing", "cited")):
    """The table's edges in batches."""
    from citeflow.tables import batches

    for batch in batches(pafs.LocalFileSystem(), str(citations), list(columns), BATCH_ROWS):
        yield (
            batch.column(0).to_numpy(zero_copy_only=False).astype(np.int64),
            batch.column(1).to_numpy(zero_copy_only=False).astype(np.int64),
        )


def node_ids(citations: str) -> np.ndarray:
    """Sorted distinct corpus ids of every paper with an edge (one pass, chunk by chunk)."""
    seen = np.empty(0, dtype=np.int64)
    for citing, cited in _batches(citations):
        seen = np.union1d(seen, np.unique(np.concatenate([citing, cited])))
    return seen


class _EdgeWriter:
    """Appends edges to one resizable HDF5 file per (lhs, rhs) bucket."""

    def __init__(self, root: Path, num_partitions: int):
        self.root = root
        self.p = num_partitions
        self.files: dict[tuple[int, int], h5py.File] = {}

    def _file(self, lhs: int, rhs: int) -> h5py.File:
        key = (lhs, rhs)
        if key not in self.files:
            self.root.mkdir(parents=True, exist_ok=True)
            hf = h5py.File(self.root / f"edges_{lhs}_{rhs}.h5", "w")
            hf.attrs["format_version"] = 1
            for name in ("lhs", "rhs", "rel"):
                hf.create_dataset(name, shape=(0,), maxshape=(None,), dtype="int64", chunks=(_H5_CHUNK,))
            self.files[key] = hf
        return self.files[key]

    def append(self, lhs_p, lhs_o, rhs_p, rhs_o) -> None:
        bucket = lhs_p * self.p + rhs_p
        order = np.argsort(bucket, kind="stable")
        bucket, lhs_o, rhs_o = bucket[order], lhs_o[order], rhs_o[order]
        bounds = np.flatnonzero(np.diff(bucket)) + 1
        for start, end in zip(np.r_[0, bounds], np.r_[bounds, len(bucket)], strict=True):
            if start == end:
                continue
            b = int(bucket[start])
            hf = self._file(b // self.p, b % self.p)
            n = dataset(hf, "lhs").shape[0]
            for name, values in (
                ("lhs", lhs_o[start:end]),
                ("rhs", rhs_o[start:end]),
                ("rel", np.zeros(end - start, dtype=np.int64)),
            ):
                column = dataset(hf, name)
                column.resize((n + end - start,))
                column[n:] = values

    def close(self) -> dict[str, int]:
        counts = {}
        # PBG expects a file for every bucket, even an empty one.
        for lhs in range(self.p):
            for rhs in range(self.p):
                hf = self._file(lhs, rhs)
                counts[f"{lhs}_{rhs}"] = _sort_bucket(hf)
                hf.close()
        return counts


def dataset(hf: h5py.Group, name: str) -> h5py.Dataset:
    """`hf[name]`, which in every PBG file citeflow reads or writes is a dataset (h5py types an item as a group, a
    dataset or a named type)."""
    found = hf[name]
    if not isinstance(found, h5py.Dataset):
        raise ValueError(f"{hf.file.filename}: {name} is not a dataset")
    return found


def _sort_bucket(hf: h5py.File) -> int:
    """Rewrite one bucket's edges in (lhs, rhs) order; returns its edge count.

    One int64 key per edge (lhs * (max rhs + 1) + rhs, sorted in place) is what is held once `rhs`, read
    once, is folded into it: 8 bytes per edge beside the column being written, less than PBG's trainer holds
    for the same bucket (lhs, rhs and rel tensors). Every edge has relation 0, so `rel` stays as written.
    """
    n = int(dataset(hf, "lhs").shape[0])
    if n < 2:
        return n
    rhs = dataset(hf, "rhs")[...]
    width = int(rhs.max()) + 1
    key = dataset(hf, "lhs")[...]
    key *= width
    key += rhs
    del rhs
    key.sort()
    dataset(hf, "lhs")[...] = key // width
    dataset(hf, "rhs")[...] = key % width
    return n


def import_citations(
    citations: str | Path, out: str | Path, *, num_partitions: int = 1, holdout: float = 0.01, seed: int = 0
) -> dict[str, object]:
    """Write PBG entities, all edges, and (holdout > 0) train / holdout edge buckets; returns counts."""
    if num_partitions < 1:
        raise ValueError("num_partitions must be at least 1")
    if not 0 <= holdout < 1:
        raise ValueError("holdout must be in [0, 1)")
    out = Path(out)
    index = build_entity_index(node_ids(str(citations)), num_partitions, seed)
    entities = out / "entities"
    entities.mkdir(parents=True, exist_ok=True)
    counts = []
    for p in range(num_partitions):
        names = index.names(p)
        counts.append(len(names))
        (entities / f"entity_count_{ENTITY}_{p}.txt").write_text(f"{len(names)}\n")
        with open(entities / f"entity_names_{ENTITY}_{p}.json", "w") as fh:
            json.dump([str(x) for x in names.tolist()], fh)
    split = holdout > 0
    every, train, held = (
        _EdgeWriter(out / name, num_partitions) for name in ("edges_all", "edges_train", "edges_holdout")
    )
    for citing, cited in _batches(str(citations)):
        lhs_p, lhs_o = index.lookup(citing)
        rhs_p, rhs_o = index.lookup(cited)
        every.append(lhs_p, lhs_o, rhs_p, rhs_o)
        if split:
            mask = holdout_mask(citing, cited, holdout, seed)
            train.append(lhs_p[~mask], lhs_o[~mask], rhs_p[~mask], rhs_o[~mask])
            held.append(lhs_p[mask], lhs_o[mask], rhs_p[mask], rhs_o[mask])
    all_counts = every.close()
    train_counts, held_counts = (train.close(), held.close()) if split else ({}, {})
    return {
        "entities": int(len(index.ids)),
        "entities_per_partition": counts,
        "num_partitions": num_partitions,
        "edges": sum(all_counts.values()),
        "train_edges": sum(train_counts.values()),
        "holdout_edges": sum(held_counts.values()),
        "buckets": all_counts,
        "train_buckets": train_counts,
        "holdout_buckets": held_counts,
    }


def import_in_subprocess(
    citations: str | Path, out: str | Path, *, num_partitions: int, holdout: float, seed: int, log_path: Path
) -> dict[str, Any]:
    """`import_citations` in a child process (`citeflow.process.run_child`); its counts. A failed child raises
    with its log's tail, which names the cause (`citeflow.errors.environment_cause` reads a full disk there)."""
    import sys

    from citeflow.process import run_child

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    counts = out / "import.json"
    command = [sys.executable, "-m", "citeflow.models.pbg.importer", str(citations), str(out), str(num_partitions)]
    # through a pipe (relayed to nothing: the terminal stays quiet), never straight into a file on the disk it
    # writes: HDF5 crashes the child when it cannot print its errors about a full disk
    code = run_child(
        [*command, repr(float(holdout)), str(seed), str(counts)], log_path=log_path, echo=True, relay=lambda _: True
    )
    if code in ENVIRONMENT_CAUSES:  # the child's exit status is the errno of a full disk, a read-only folder...
        raise OSError(code, os.strerror(code), str(out))
    if code != 0 or not counts.is_file():
        tail = log_path.read_text(errors="replace")[-3000:] if log_path.is_file() else ""
        raise RuntimeError(f"the PBG import failed (exit {code}); log {log_path}:\n{tail}")
    result = json.loads(counts.read_text())
    counts.unlink()
    return result


def main(argv: list[str]) -> int:
    """`python -m citeflow.models.pbg.importer CITATIONS OUT PARTITIONS HOLDOUT SEED COUNTS_JSON`.

    A failure ends the process at once (`os._exit`) after its traceback is printed, with the errno of a full
    disk or an unwritable folder as the exit status (`ENVIRONMENT_CAUSES`; 1 for anything else): the files
    HDF5 could not write must not be closed again at the interpreter's exit, which crashes it."""
    import sys
    import traceback

    citations, out, partitions, holdout, seed, counts = argv
    try:
        result = import_citations(
            citations, out, num_partitions=int(partitions), holdout=float(holdout), seed=int(seed)
        )
        Path(counts).write_text(json.dumps(result))
    except BaseException as exc:  # noqa: BLE001 - every failure ends the process the same way
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_environment_errno(exc) or 1)
    return 0


def _environment_errno(exc: BaseException | None) -> int | None:
    """The errno of a machine-state failure anywhere in `exc`'s chain (HDF5 words a full disk as 'errno = 28' in
    a RuntimeError's text), else None."""
    import re

    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in ENVIRONMENT_CAUSES:
            return exc.errno
        found = re.search(r"errno = (\d+)", str(exc))
        if found and int(found.group(1)) in ENVIRONMENT_CAUSES:
            return int(found.group(1))
        exc = exc.__cause__ or exc.__context__
    return None


def read_edges(edges: str | Path, entities: str | Path, num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    """All edges of an edge folder as row indices into the partitions' embeddings concatenated in order."""
    edges, entities = Path(edges), Path(entities)
    counts = [int((entities / f"entity_count_{ENTITY}_{p}.txt").read_text()) for p in range(num_partitions)]
    start = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    lhs, rhs = [], []
    for lp in range(num_partitions):
        for rp in range(num_partitions):
            with h5py.File(edges / f"edges_{lp}_{rp}.h5", "r") as hf:
                lhs.append(dataset(hf, "lhs")[:] + start[lp])
                rhs.append(dataset(hf, "rhs")[:] + start[rp])
    return np.concatenate(lhs), np.concatenate(rhs)


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
