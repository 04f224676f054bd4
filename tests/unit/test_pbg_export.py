"""`citeflow.models.pbg.export`: PBG's checkpoint into `paper_embeddings` one partition at a time, equal to
sorting every partition's rows at once, which held the whole table in the stage's driver."""

import json

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from citeflow.errors import CiteflowError
from citeflow.models.pbg.export import entity_ids, merge_sorted, write_sorted


def checkpoint(tmp_path, sizes: list[int], dimension: int, seed: int = 0):
    """A PBG checkpoint (version 3) of len(sizes) partitions, ids dealt at random over them, as PBG's files lay
    them out; (checkpoint folder, entities folder, every id, every vector) in partition order."""
    rng = np.random.default_rng(seed)
    ids = rng.choice(10**12, size=sum(sizes), replace=False).astype(np.int64)
    vectors = rng.normal(size=(len(ids), dimension)).astype(np.float32)
    ckpt, entities = tmp_path / "checkpoint", tmp_path / "entities"
    ckpt.mkdir()
    entities.mkdir()
    (ckpt / "checkpoint_version.txt").write_text("3\n")
    start = 0
    for p, n in enumerate(sizes):
        (entities / f"entity_names_paper_{p}.json").write_text(json.dumps(ids[start : start + n].tolist()))
        with h5py.File(ckpt / f"embeddings_paper_{p}.v3.h5", "w") as hf:
            hf.create_dataset("embeddings", data=vectors[start : start + n])
        start += n
    return ckpt, entities, ids, vectors


@pytest.mark.parametrize("batch_rows", [1, 7, 1000])
def test_the_partitions_are_written_sorted_by_corpus_id_as_one_sort_of_all_rows_would(tmp_path, batch_rows):
    ckpt, entities, ids, vectors = checkpoint(tmp_path, [50, 0, 31, 64], dimension=5)
    rows = write_sorted(ckpt, entities, 4, 5, tmp_path / "paper_embeddings", tmp_path / "scratch", batch_rows)
    table = pq.read_table(tmp_path / "paper_embeddings")
    order = np.argsort(ids)
    assert rows == table.num_rows == len(ids)
    assert table.schema.field("embedding").type == pa.list_(pa.float32(), 5)
    assert table.column("corpus_id").to_numpy().tolist() == ids[order].tolist()
    got = np.asarray(table.column("embedding").combine_chunks().flatten()).reshape(-1, 5)
    assert np.array_equal(got, vectors[order])
    assert not (tmp_path / "scratch").exists()  # the run files are removed
    assert entity_ids(entities, 4).tolist() == ids.tolist()


def test_the_merge_holds_one_batch_of_each_run_and_yields_rows_in_order(tmp_path):
    """Runs of very different id ranges and batch sizes: every step's table is in order, the steps follow each
    other in order, and no step holds more rows than one batch of each run."""
    paths = []
    for n, (ids, size) in enumerate(((np.arange(0, 300, 3), 8), (np.arange(1000, 1010), 3), (np.arange(1, 90, 7), 5))):
        paths.append(tmp_path / f"run-{n}.arrow")
        with pa.OSFile(str(paths[-1]), "wb") as sink, pa.ipc.new_file(sink, pa.schema([("id", pa.int64())])) as w:
            for start in range(0, len(ids), size):
                w.write_batch(pa.record_batch([pa.array(ids[start : start + size])], names=["id"]))
    merged = [t.column("id").to_pylist() for t in merge_sorted(paths)]
    flat = [i for step in merged for i in step]
    assert flat == sorted([*range(0, 300, 3), *range(1000, 1010), *range(1, 90, 7)])
    assert max(len(step) for step in merged) <= 8 + 3 + 5


def test_a_partition_whose_vectors_do_not_match_its_names_is_refused(tmp_path):
    ckpt, entities, _, _ = checkpoint(tmp_path, [4, 4], dimension=3)
    (entities / "entity_names_paper_1.json").write_text(json.dumps([1, 2, 3]))
    with pytest.raises(CiteflowError, match="partition 1: 4 embeddings for 3 entities"):
        write_sorted(ckpt, entities, 2, 3, tmp_path / "out", tmp_path / "scratch")
