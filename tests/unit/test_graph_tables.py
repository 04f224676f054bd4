"""citeflow/graph_tables.py on a few hand-made rows: rows dropped and added, degrees looked up, text flags."""

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from citeflow import graph_tables as GT

SCHEMA = pa.schema(
    [
        pa.field("corpus_id", pa.int64()),
        pa.field("title", pa.string()),
        pa.field("abstract", pa.string()),
        pa.field("out_degree", pa.int32(), nullable=False),
        pa.field("in_degree", pa.int32(), nullable=False),
    ]
)


def test_patch_drops_adds_and_gives_every_row_its_new_degrees(tmp_path):
    src = tmp_path / "base"
    src.mkdir()
    old = [(1, "a", "x", 9, 9), (2, None, "y", 9, 9), (3, "c", None, 9, 9), (4, None, None, 9, 9)]
    pq.write_table(
        pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in old], SCHEMA), src / "p.parquet"
    )
    added = pa.table({"corpus_id": [5], "title": ["e"], "abstract": [None]})
    edges = pa.table(
        {"citing": [1, 1, 5], "cited": [3, 5, 3]}, schema=pa.schema([("citing", pa.int64()), ("cited", pa.int64())])
    )
    flags = GT.patch_papers(
        pafs.LocalFileSystem(),
        [str(src / "p.parquet")],
        added,
        str(tmp_path / "new"),
        drop=pa.array([2], pa.int64()),
        degrees=GT.Degrees(edges),
        schema=SCHEMA,
    )
    got = sorted(tuple(r.values()) for r in pq.read_table(tmp_path / "new").to_pylist())
    assert got == [(1, "a", "x", 2, 0), (3, "c", None, 0, 2), (4, None, None, 0, 0), (5, "e", None, 1, 1)]
    assert flags == {"rows": 4, "papers_without_title": 1, "papers_without_abstract": 3, "papers_without_text": 1}
    assert pq.read_schema(next((tmp_path / "new").iterdir())).field("out_degree").type == pa.int32()


def test_filter_edges_drops_both_ends(tmp_path):
    src = tmp_path / "c.parquet"
    pq.write_table(pa.table({"citing": [1, 2, 3], "cited": [2, 3, 1]}), src)
    kept = GT.filter_edges(pafs.LocalFileSystem(), [str(src)], str(tmp_path / "out"), drop=pa.array([2], pa.int64()))
    assert kept.to_pylist() == [{"citing": 3, "cited": 1}]
    assert pq.read_table(tmp_path / "out").to_pylist() == [{"citing": 3, "cited": 1}]
