"""citeflow/tables.py: a committed table is a folder of plain Parquet data files that every reader reads whole."""

import os

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from citeflow import tables as T
from citeflow.artifacts import ArtifactStore, table_stats

FS = pafs.LocalFileSystem()


def make_table(folder, files: dict[str, list[int]], side_files: bool = False) -> str:
    """A table folder of Parquet files `name -> ids` (each row's `text` is "t<id>"), with a committer's side
    files (stand-ins: no reader may read them) when `side_files`."""
    folder.mkdir(parents=True)
    for name, ids in files.items():
        pq.write_table(
            pa.table({"id": pa.array(ids, pa.int64()), "text": [f"t{i}" for i in ids]}),
            folder / name,
            row_group_size=2,  # several row groups a file
        )
        if side_files:
            (folder / f".{name}.crc").write_bytes(b"crc")
    if side_files:
        (folder / "_SUCCESS").write_bytes(b"")
    return str(folder)


def test_batches_stream_every_row_file_by_file_in_name_order(tmp_path):
    table = make_table(tmp_path / "papers", {"part-b.parquet": [20, 21, 22], "part-a.parquet": list(range(10, 15))})
    for size in (1, 2, 3, 100):
        got = list(T.batches(FS, table, ["id"], batch_size=size))
        assert all(0 < b.num_rows <= size for b in got)
        assert [i for b in got for i in b.column("id").to_pylist()] == [10, 11, 12, 13, 14, 20, 21, 22]
        assert got[0].schema.names == ["id"]
    whole = pa.Table.from_batches(list(T.batches(FS, table)))
    assert whole.sort_by("id").equals(T.read_table(FS, table).sort_by("id"))
    assert T.read_table(FS, table).sort_by("id").equals(pq.read_table(table).sort_by("id"))


def test_the_head_of_a_table_reads_on_into_the_next_file(tmp_path):
    table = make_table(tmp_path / "papers", {"part-a.parquet": [1, 2, 3], "part-b.parquet": [4, 5, 6]})
    assert T.head(FS, table, 1)["id"].to_pylist() == [1]
    assert T.head(FS, table, 4)["id"].to_pylist() == [1, 2, 3, 4]
    assert T.head(FS, table, 10)["id"].to_pylist() == [1, 2, 3, 4, 5, 6]


def test_tidy_leaves_data_files_only(tmp_path):
    table = make_table(tmp_path / "papers", {"part-a.parquet": [1], "part-b.parquet": [2]}, side_files=True)
    (tmp_path / "papers" / "notes.txt").write_text("a file the stage wrote on purpose")
    assert T.tidy(FS, table) == [".part-a.parquet.crc", ".part-b.parquet.crc", "_SUCCESS"]
    assert sorted(os.listdir(table)) == ["notes.txt", "part-a.parquet", "part-b.parquet"]
    assert T.tidy(FS, table) == []
    assert T.tidy(FS, str(tmp_path / "absent")) == []


def test_table_stats_count_the_rows_any_reader_gets(tmp_path):
    store = ArtifactStore(str(tmp_path))
    table = make_table(tmp_path / "papers", {"part-a.parquet": [1, 2, 3], "part-b.parquet": [4, 5]})
    stats = table_stats(store, table)
    assert (stats["rows"], stats["files"]) == (5, 2)
    assert [f["name"] for f in stats["schema"]] == ["id", "text"]
    assert stats["rows"] == pq.read_table(table).num_rows


def test_linked_data_files_are_the_base_files_and_never_replace_one(tmp_path):
    base = make_table(tmp_path / "base", {"part-a.parquet": [1, 2], "part-b.parquet": [3]}, side_files=True)
    target = tmp_path / "new"
    target.mkdir()
    assert T.link_data_files(FS, True, base, str(target), {"part-b.parquet"}) == ["part-b.parquet"]
    assert T.link_data_files(FS, True, base, str(target), {"part-a.parquet"}) == ["part-a.parquet"]
    for name in ("part-a.parquet", "part-b.parquet"):
        assert os.stat(target / name).st_ino == os.stat(tmp_path / "base" / name).st_ino
    assert sorted(os.listdir(target)) == ["part-a.parquet", "part-b.parquet"]  # data files only
    with pytest.raises(FileExistsError, match="part-a.parquet exists"):
        T.link_data_files(FS, True, base, str(target))
    copied = tmp_path / "copied"
    copied.mkdir()
    T.link_data_files(FS, False, base, str(copied))  # a store without links: copies
    assert os.stat(copied / "part-a.parquet").st_ino != os.stat(tmp_path / "base" / "part-a.parquet").st_ino
    assert pq.read_table(copied / "part-a.parquet").equals(pq.read_table(tmp_path / "base" / "part-a.parquet"))


def test_a_listing_names_the_tables_that_hold_an_old_deletion_folder():
    listing = ["papers/part-a.parquet", "papers/_deleted/part-0.parquet", "citations/part-a.parquet", "x_deleted/a"]
    assert T.legacy_deletions(listing) == ["papers"]
    assert T.legacy_deletions(["papers/part-a.parquet"]) == []


def test_a_written_table_is_one_zstd_file_any_reader_reads_whole(tmp_path):
    import duckdb

    table = pa.table({"corpus_id": pa.array([3, 1, 2], pa.int64()), "title": ["c", "a", None]})
    path = T.write_table(table, tmp_path / "v" / "papers", row_group_size=2)

    assert os.listdir(tmp_path / "v" / "papers") == ["part-0.parquet"] and path.endswith("papers/part-0.parquet")
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups == 2 and meta.row_group(0).column(0).compression == "ZSTD"
    assert T.read_table(pafs.LocalFileSystem(), str(tmp_path / "v" / "papers")).equals(table)
    got = duckdb.sql(f"select * from read_parquet('{tmp_path / 'v' / 'papers'}/*')").fetchall()
    assert got == [(3, "c"), (1, "a"), (2, None)]
