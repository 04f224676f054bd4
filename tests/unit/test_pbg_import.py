"""Parquet -> PBG import: readable by PBG's own storages, lossless, seeded, partitioned."""

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from citeflow.models.pbg.importer import build_entity_index, holdout_mask, import_citations


def write_citations(path, edges):
    path.mkdir(parents=True)
    citing, cited = zip(*edges, strict=True)
    pq.write_table(
        pa.table({"citing": pa.array(citing, pa.int64()), "cited": pa.array(cited, pa.int64())}),
        path / "part-0.parquet",
    )
    return str(path)


def read_back(out, num_partitions, which="edges_train"):
    """Edges as corpus-id pairs, read through PBG's FileEntityStorage and FileEdgeStorage."""
    from torchbiggraph.graph_storages import FileEdgeStorage, FileEntityStorage

    entities = FileEntityStorage(str(out / "entities"))
    names = [entities.load_names("paper", p) for p in range(num_partitions)]
    for p in range(num_partitions):
        assert entities.load_count("paper", p) == len(names[p])
    storage = FileEdgeStorage(str(out / which))
    pairs = set()
    for lhs in range(num_partitions):
        for rhs in range(num_partitions):
            edges = storage.load_chunk_of_edges(lhs, rhs)
            assert edges.rel.eq(0).all()
            for a, b in zip(edges.lhs.to_tensor().tolist(), edges.rhs.to_tensor().tolist(), strict=True):
                pairs.add((int(names[lhs][a]), int(names[rhs][b])))
    return pairs, names


@pytest.mark.parametrize("partitions", [1, 3])
def test_every_edge_survives_the_round_trip(tmp_path, partitions):
    rng = np.random.default_rng(1)
    edges = {(int(a), int(b)) for a, b in rng.integers(1, 400, size=(3000, 2)) if a != b}
    src = write_citations(tmp_path / "citations", sorted(edges))
    counts = import_citations(src, tmp_path / "pbg", num_partitions=partitions, holdout=0.1, seed=5)
    train, names = read_back(tmp_path / "pbg", partitions)
    held, _ = read_back(tmp_path / "pbg", partitions, "edges_holdout")
    assert train | held == edges and not train & held
    assert counts["train_edges"] == len(train) and counts["holdout_edges"] == len(held)
    every, _ = read_back(tmp_path / "pbg", partitions, "edges_all")  # what the mining run trains on
    assert every == edges and counts["edges"] == len(edges)
    assert 0.06 < len(held) / len(edges) < 0.14
    nodes = {x for e in edges for x in e}
    assert sorted(int(n) for part in names for n in part) == sorted(nodes)
    assert counts["entities"] == len(nodes) and sum(counts["entities_per_partition"]) == len(nodes)


def test_without_holdout_only_the_all_edges_input_is_written(tmp_path):
    edges = [(1, 2), (2, 3), (3, 1), (4, 1), (5, 4)]
    src = write_citations(tmp_path / "citations", edges)
    counts = import_citations(src, tmp_path / "pbg", holdout=0.0, seed=1)
    assert read_back(tmp_path / "pbg", 1, "edges_all")[0] == set(edges)
    assert not (tmp_path / "pbg" / "edges_train").exists() and not (tmp_path / "pbg" / "edges_holdout").exists()
    assert (counts["edges"], counts["train_edges"], counts["holdout_edges"]) == (5, 0, 0)


def test_same_edges_in_any_row_order_give_identical_files(tmp_path, monkeypatch):
    """A Spark-written citations table holds the same rows in another order on every build (and over other
    files): the buckets PBG reads must not follow it, or a seeded run would not repeat."""
    import citeflow.models.pbg.importer as pbg_import

    monkeypatch.setattr(pbg_import, "BATCH_ROWS", 500)  # several batches per file, appended bucket by bucket
    rng = np.random.default_rng(3)
    edges = sorted({(int(a), int(b)) for a, b in rng.integers(1, 300, size=(4000, 2)) if a != b})
    src = write_citations(tmp_path / "citations", edges)
    shuffled = tmp_path / "shuffled"
    shuffled.mkdir()
    order = rng.permutation(len(edges))
    for i, part in enumerate(np.array_split(order, 3)):
        citing, cited = zip(*(edges[j] for j in part), strict=True)
        pq.write_table(pa.table({"citing": citing, "cited": cited}), shuffled / f"part-{i}.parquet")

    def digest(src, out):
        import_citations(src, out, num_partitions=2, holdout=0.3, seed=9)
        names = sorted((out / "entities").glob("*.json"))
        h5 = sorted((out / "edges_train").glob("*.h5"))
        import h5py

        parts = [p.read_bytes() for p in names]
        for f in h5:
            with h5py.File(f) as hf:
                parts += [hf[k][:].tobytes() for k in ("lhs", "rhs", "rel")]
        return hashlib.sha256(b"".join(parts)).hexdigest()

    assert digest(src, tmp_path / "a") == digest(src, tmp_path / "b") == digest(str(shuffled), tmp_path / "c")
    other = import_citations(src, tmp_path / "d", num_partitions=2, holdout=0.3, seed=10)
    assert other["entities"] == len({x for e in edges for x in e})


def test_entity_order_is_a_seeded_permutation():
    ids = np.array([50, 10, 40, 20, 30])
    a, b = build_entity_index(ids, 2, seed=1), build_entity_index(ids, 2, seed=1)
    assert [a.names(p).tolist() for p in range(2)] == [b.names(p).tolist() for p in range(2)]
    c = build_entity_index(ids, 1, seed=2)
    assert sorted(c.names(0).tolist()) == [10, 20, 30, 40, 50]
    assert len(a.names(0)) == 3 and len(a.names(1)) == 2  # dealt round-robin
    with pytest.raises(ValueError, match="missing"):
        a.lookup(np.array([10, 99]))


def test_holdout_is_independent_of_order_and_batching():
    rng = np.random.default_rng(0)
    citing, cited = rng.integers(0, 10**9, 100_000), rng.integers(0, 10**9, 100_000)
    mask = holdout_mask(citing, cited, 0.01, seed=3)
    assert 0.008 < mask.mean() < 0.012
    perm = rng.permutation(len(citing))
    assert np.array_equal(holdout_mask(citing[perm], cited[perm], 0.01, seed=3), mask[perm])
    assert not np.array_equal(holdout_mask(citing, cited, 0.01, seed=4), mask)


def test_the_stage_s_import_runs_in_a_child_with_the_same_result(tmp_path):
    from citeflow.models.pbg.importer import import_in_subprocess

    rng = np.random.default_rng(3)
    edges = sorted({(int(a), int(b)) for a, b in rng.integers(1, 200, size=(800, 2)) if a != b})
    src = write_citations(tmp_path / "citations", edges)
    here = import_citations(src, tmp_path / "here", num_partitions=2, holdout=0.1, seed=4)
    child = import_in_subprocess(
        src, tmp_path / "child", num_partitions=2, holdout=0.1, seed=4, log_path=tmp_path / "import.log"
    )
    assert child == here and not (tmp_path / "child" / "import.json").exists()
    for name in ("edges_all/edges_0_1.h5", "edges_train/edges_1_0.h5", "entities/entity_names_paper_1.json"):
        digests = [hashlib.sha256((tmp_path / d / name).read_bytes()).hexdigest() for d in ("here", "child")]
        assert digests[0] == digests[1], name


def test_a_child_import_that_meets_a_full_disk_raises_that_errno_not_a_crash(tmp_path, monkeypatch):
    import errno

    from citeflow.models.pbg import importer as pbg_import

    # the child's exit status is the errno of the machine's state (what HDF5 reports as 'errno = 28')
    assert pbg_import._environment_errno(RuntimeError("file write failed: errno = 28, error message = 'No'")) == 28
    assert pbg_import._environment_errno(OSError(errno.ENOSPC, "full")) == errno.ENOSPC
    assert pbg_import._environment_errno(ValueError("bad")) is None
    monkeypatch.setattr("citeflow.process.run_child", lambda *a, **k: errno.ENOSPC)
    with pytest.raises(OSError) as raised:
        pbg_import.import_in_subprocess(
            "c", tmp_path / "out", num_partitions=1, holdout=0.0, seed=0, log_path=tmp_path / "l"
        )
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(tmp_path / "out")
