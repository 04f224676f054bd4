"""PBG's trained vectors out of its checkpoint into `paper_embeddings`, one partition at a time.

A checkpoint holds `embeddings_paper_{p}.v{N}.h5` per partition (dataset `embeddings`, rows in the order of
`entity_names_paper_{p}.json`). PBG itself never holds more than two partitions in memory: that is what
`num_partitions` bounds. Reading every partition into one array to sort it by corpus id held the whole table in
the stage's driver, three times over while it was sorted and written (about 3 × N × D × 4 B, which grows with the
corpus without bound). `write_sorted` holds one partition: each is sorted
by corpus id into a run file of its own, and the runs are merged batch by batch into the table.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import pyarrow as pa

from citeflow.errors import CiteflowError
from citeflow.models.pbg.importer import dataset
from citeflow.tables import table_writer

EXPORT_BATCH = 65_536  # rows per batch of a run file; the merge holds one batch of each run


def schema(dimension: int) -> pa.Schema:
    """`paper_embeddings`' columns: the corpus id and the vector as a fixed-size list of float32."""
    return pa.schema([("corpus_id", pa.int64()), ("embedding", pa.list_(pa.float32(), dimension))])


def partition_ids(entities: Path, p: int) -> np.ndarray:
    """The corpus ids of partition `p`, in the order of its rows."""
    return np.asarray(json.loads((entities / f"entity_names_paper_{p}.json").read_text()), dtype=np.int64)


def entity_ids(entities: Path, num_partitions: int) -> np.ndarray:
    """Every entity's corpus id, partitions concatenated in order (the rows of `load_embeddings`)."""
    return np.concatenate([partition_ids(entities, p) for p in range(num_partitions)])


def partitions(checkpoint: Path, entities: Path, num_partitions: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(corpus ids, float32 vectors) of each partition of the checkpoint's latest version, one at a time."""
    version = int((checkpoint / "checkpoint_version.txt").read_text().strip())
    for p in range(num_partitions):
        ids = partition_ids(entities, p)
        with h5py.File(checkpoint / f"embeddings_paper_{p}.v{version}.h5", "r") as hf:
            vectors = dataset(hf, "embeddings")[:]
        if len(vectors) != len(ids):
            raise CiteflowError(f"partition {p}: {len(vectors)} embeddings for {len(ids)} entities")
        yield ids, vectors.astype(np.float32, copy=False)


def _batch(ids: np.ndarray, vectors: np.ndarray, dimension: int) -> pa.RecordBatch:
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), pa.float32())
    embedding = pa.FixedSizeListArray.from_arrays(flat, dimension)
    return pa.RecordBatch.from_arrays([pa.array(ids, pa.int64()), embedding], schema=schema(dimension))


def merge_sorted(paths: list[Path]) -> Iterator[pa.Table]:
    """The rows of Arrow IPC files, each sorted by its first column (ids unique across the files), as tables in
    that column's order: at each step every row up to the least of the last ids buffered by the files that
    have more to read, so that only one batch of each file is held."""
    readers = [pa.ipc.open_file(pa.OSFile(str(path))) for path in paths]
    read = [0] * len(readers)
    held = [pa.RecordBatch.from_pylist([], schema=reader.schema) for reader in readers]
    while True:
        for i, reader in enumerate(readers):
            while len(held[i]) == 0 and read[i] < reader.num_record_batches:
                held[i] = reader.get_batch(read[i])
                read[i] += 1
        live = [i for i, batch in enumerate(held) if len(batch)]
        if not live:
            return
        pending = [held[i].column(0)[-1].as_py() for i in live if read[i] < readers[i].num_record_batches]
        bound = min(pending) if pending else None
        parts = []
        for i in live:
            batch = held[i]
            cut = len(batch) if bound is None else int(np.searchsorted(batch.column(0).to_numpy(), bound, "right"))
            parts.append(batch.slice(0, cut))
            held[i] = batch.slice(cut)
        table = pa.Table.from_batches(parts)
        yield table.take(pa.array(np.argsort(table.column(0).to_numpy(), kind="stable")))


def write_sorted(
    checkpoint: Path,
    entities: Path,
    num_partitions: int,
    dimension: int,
    folder: Path,
    scratch: Path,
    batch_rows: int = EXPORT_BATCH,
) -> int:
    """`paper_embeddings` in `folder`: one row per entity, sorted by corpus id, written from the checkpoint one
    partition at a time through run files in `scratch` (removed after); the rows written."""
    scratch.mkdir(parents=True, exist_ok=True)
    runs = []
    for p, (ids, vectors) in enumerate(partitions(checkpoint, entities, num_partitions)):
        if vectors.shape[1:] != (dimension,):
            raise CiteflowError(f"partition {p}: vectors of shape {vectors.shape[1:]}, not ({dimension},)")
        order = np.argsort(ids, kind="stable")
        runs.append(scratch / f"run-{p}.arrow")
        with pa.OSFile(str(runs[-1]), "wb") as sink, pa.ipc.new_file(sink, schema(dimension)) as writer:
            for start in range(0, len(order), batch_rows):
                rows = order[start : start + batch_rows]
                writer.write_batch(_batch(ids[rows], vectors[rows], dimension))
        del ids, vectors, order
    written = 0
    with table_writer(folder, schema(dimension)) as out:
        for table in merge_sorted(runs):
            out.write_table(table)
            written += table.num_rows
    shutil.rmtree(scratch)
    return written
