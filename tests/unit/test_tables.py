"""citeflow/tables.py: a table folder's rows are its data files' rows less those its deletion file names."""

import os

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from citeflow import tables as T
from citeflow.artifacts import ArtifactStore, table_stats

FS = pafs.LocalFileSystem()


def make_table(folder, files: dict[str, list[int]], deleted: list[tuple[str, int]] | None = None) -> str:
    """A table folder of Parquet files `name -> ids` (each row's `text` is "t<id>"), and a deletion file."""
    folder.mkdir(parents=True)
    for name, ids in files.items():
        pq.write_table(
            pa.table({"id": pa.array(ids, pa.int64()), "text": [f"t{i}" for i in ids]}),
            folder / name,
            row_group_size=2,  # several row groups a file: positions count across them
        )
    if deleted is not None:
        (folder / T.DELETED).mkdir()
        names, rows = zip(*deleted, strict=True) if deleted else ((), ())
        pq.write_table(
            pa.table({T.FILE_NAME: pa.array(names, pa.string()), T.ROW_INDEX: pa.array(rows, pa.int64())}),
            folder / T.DELETED / "part-00000.parquet",
        )
    (folder / "_SUCCESS").write_bytes(b"")
    return str(folder)


def test_the_rows_named_by_the_deletion_file_are_not_read(tmp_path):
    table = make_table(
        tmp_path / "papers",
        {"part-a.parquet": [10, 11, 12, 13, 14], "part-b.parquet": [20, 21, 22]},
        [("part-a.parquet", 0), ("part-a.parquet", 3), ("part-b.parquet", 2)],  # ids 10, 13 and 22
    )
    assert T.has_deleted(FS, table)
    got = T.read_table(FS, table)
    assert sorted(got["id"].to_pylist()) == [11, 12, 14, 20, 21]
    assert sorted(got["text"].to_pylist()) == ["t11", "t12", "t14", "t20", "t21"]  # rows stay whole
    assert T.read_table(FS, table, columns=["text"]).column_names == ["text"]
    assert (T.read_table(FS, table).num_rows, T.deleted_rows(FS, table)) == (5, 3)


def test_batches_stream_the_rows_read_table_reads(tmp_path):
    # positions fall at batch edges, inside batches, in every batch of a file, in an unnamed file
    table = make_table(
        tmp_path / "papers",
        {"part-a.parquet": list(range(10, 17)), "part-b.parquet": [20, 21, 22], "part-c.parquet": [30]},
        [("part-a.parquet", p) for p in (0, 2, 3, 6)] + [("part-b.parquet", p) for p in (0, 1, 2)],
    )
    for size in (1, 2, 3, 100):
        got = list(T.batches(FS, table, ["id"], batch_size=size))
        assert all(0 < b.num_rows <= size for b in got)  # no empty batch
        assert [i for b in got for i in b.column("id").to_pylist()] == [11, 14, 15, 30]
        assert got[0].schema.names == ["id"]
    whole = pa.Table.from_batches(list(T.batches(FS, table)))
    assert whole.sort_by("id").equals(T.read_table(FS, table).sort_by("id"))
    plain = make_table(tmp_path / "plain", {"part-a.parquet": [1, 2, 3]})
    assert [i for b in T.batches(FS, plain, ["id"], 2) for i in b.column("id").to_pylist()] == [1, 2, 3]


def test_a_table_without_a_deletion_file_reads_as_parquet_reads_it(tmp_path):
    table = make_table(tmp_path / "papers", {"part-a.parquet": [1, 2, 3], "part-b.parquet": [4]})
    assert not T.has_deleted(FS, table)
    assert T.read_table(FS, table).sort_by("id").equals(pq.read_table(table).sort_by("id"))
    assert (T.read_table(FS, table).num_rows, T.deleted_rows(FS, table)) == (4, 0)


def test_removals_of_a_file_the_table_does_not_hold_remove_nothing_else(tmp_path):
    table = make_table(tmp_path / "papers", {"part-a.parquet": [1, 2]}, [("part-gone.parquet", 0)])
    assert sorted(T.read_table(FS, table)["id"].to_pylist()) == [1, 2]


def test_table_stats_count_the_rows_a_reader_gets(tmp_path):
    store = ArtifactStore(str(tmp_path))
    table = make_table(
        tmp_path / "papers", {"part-a.parquet": [1, 2, 3], "part-b.parquet": [4, 5]}, [("part-b.parquet", 1)]
    )
    stats = table_stats(store, table)
    assert (stats["rows"], stats["deleted_rows"], stats["files"]) == (4, 1, 2)
    assert [f["name"] for f in stats["schema"]] == ["id", "text"]
    plain = table_stats(store, make_table(tmp_path / "other", {"part-a.parquet": [1, 2]}))
    assert plain["rows"] == 2 and "deleted_rows" not in plain


def test_linked_data_files_are_the_base_files_and_never_replace_one(tmp_path):
    base = make_table(tmp_path / "base", {"part-a.parquet": [1, 2], "part-b.parquet": [3]}, [("part-a.parquet", 0)])
    (tmp_path / "base" / ".part-a.parquet.crc").write_bytes(b"crc")
    target = tmp_path / "new"
    target.mkdir()
    assert T.link_data_files(FS, True, base, str(target)) == ["part-a.parquet", "part-b.parquet"]
    for name in ("part-a.parquet", "part-b.parquet", ".part-a.parquet.crc"):
        assert os.stat(target / name).st_ino == os.stat(tmp_path / "base" / name).st_ino
    assert not (target / T.DELETED).exists() and not (target / "_SUCCESS").exists()  # data files only
    with pytest.raises(FileExistsError, match="part-a.parquet exists"):
        T.link_data_files(FS, True, base, str(target))
    copied = tmp_path / "copied"
    copied.mkdir()
    T.link_data_files(FS, False, base, str(copied))  # a store without links: copies
    assert os.stat(copied / "part-a.parquet").st_ino != os.stat(tmp_path / "base" / "part-a.parquet").st_ino
    assert pq.read_table(copied / "part-a.parquet").equals(pq.read_table(tmp_path / "base" / "part-a.parquet"))


def test_the_head_of_a_table_skips_removed_rows_and_reads_on_into_the_next_file(tmp_path):
    table = make_table(
        tmp_path / "papers",
        {"part-a.parquet": [1, 2, 3], "part-b.parquet": [4, 5, 6]},
        [("part-a.parquet", 0), ("part-a.parquet", 2), ("part-b.parquet", 1)],
    )
    assert T.head(FS, table, 1)["id"].to_pylist() == [2]
    assert T.head(FS, table, 3)["id"].to_pylist() == [2, 4, 6]
    assert T.head(FS, table, 10)["id"].to_pylist() == [2, 4, 6]


def test_a_diff_links_the_base_files_until_their_removed_rows_pass_the_share():
    """jobs/build_graph_diff.py `_links_base` (`build_graph.max_deleted_share`): the removed share is of the
    rows the base's files store (its rows plus the rows it removes)."""
    from types import SimpleNamespace

    from jobs.build_graph_diff import _links_base

    def base(rows, deleted=None):
        stats = {"rows": rows} | ({"deleted_rows": deleted} if deleted is not None else {})
        return SimpleNamespace(tables={"papers": stats})

    assert _links_base(base(1000), "papers", 0.2)  # a full build removes nothing
    assert _links_base(base(800, 200), "papers", 0.2)  # 200 of 1,000 stored: at the share
    assert not _links_base(base(799, 201), "papers", 0.2)  # past it: this version writes every row
    assert not _links_base(base(1000), "papers", 0.0)  # 0: never link
    assert _links_base(base(0, 5), "papers", 1.0)  # 1: always


def test_the_deletion_files_are_listed_by_name(tmp_path):
    table = make_table(tmp_path / "papers", {"part-a.parquet": [1]}, [("part-a.parquet", 0)])
    assert T.deleted_files(FS, table) == [str(tmp_path / "papers" / T.DELETED / "part-00000.parquet")]
    assert T.deleted_files(FS, make_table(tmp_path / "plain", {"part-a.parquet": [1]})) == []
