"""Table folders: what a committed table is on disk, and the one way citeflow reads one with pyarrow.

A committed table is a folder of plain Parquet data files and nothing else: every Parquet reader (pyarrow,
pandas, DuckDB, Spark, Hugging Face `datasets`) reads exactly the rows the version's manifest counts. No
table relies on a side file to drop rows. A release built from a diff rewrites each data file that holds a
row the release removes and links the files whose every row stays (spark/output.py `write_over`), so the
untouched files of the base version are shared, not copied.

The committers' side files (`_SUCCESS`, Hadoop's `.<name>.crc` checksums) are removed before a version is
committed (`tidy`): DuckDB's `read_parquet('<table>/*')` reads every file of a folder and would stop at them.
Versions written by citeflow 0.x before this layout may hold a `_deleted/` folder (a deletion file only
citeflow's own readers applied); `legacy_deletions` finds it, and the store refuses such a version with one
line (citeflow/artifacts.py `check_files`).

A linked file is the base's file, not a copy: the store never modifies a committed file in place, and
deleting or moving the base version leaves the link whole (`link_file`). On a store without hard links
(object stores) the file is copied.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

IGNORED = [".", "_"]  # names Spark and pyarrow skip in a table folder
LEGACY_DELETED = "_deleted"  # the deletion folder of tables written before every table was plain Parquet
SIDE_FILES = ("_SUCCESS",)  # a committer's marker files, besides Hadoop's `.<name>.crc` checksums


def write_table(table: pa.Table, folder: str | os.PathLike, fs: pafs.FileSystem | None = None, **options) -> str:
    """A local stage's one way to write a table of its version: the folder (new) holding one zstd Parquet file;
    `options` go to `pyarrow.parquet.write_table` (`row_group_size`). Returns the file's path."""
    fs = fs or pafs.LocalFileSystem()
    path = _new_table_file(fs, folder)
    pq.write_table(table, path, filesystem=fs, compression="zstd", **options)
    return path


@contextlib.contextmanager
def table_writer(
    folder: str | os.PathLike, schema: pa.Schema, fs: pafs.FileSystem | None = None
) -> Iterator[pq.ParquetWriter]:
    """`write_table`'s streaming form, for a stage that writes its table batch by batch: the same folder and file,
    a `pyarrow.parquet.ParquetWriter` to call `write_table` on, closed (footer written) on leaving."""
    fs = fs or pafs.LocalFileSystem()
    with pq.ParquetWriter(_new_table_file(fs, folder), schema, filesystem=fs, compression="zstd") as writer:
        yield writer


def _new_table_file(fs: pafs.FileSystem, folder: str | os.PathLike) -> str:
    folder = os.fspath(folder)
    fs.create_dir(folder)
    return posixpath.join(folder, "part-0.parquet")


def data_files(fs: pafs.FileSystem, table: str) -> list[pafs.FileInfo]:
    """The table's data files (names Spark and pyarrow read), by name."""
    if fs.get_file_info(table).type != pafs.FileType.Directory:
        return []
    found = fs.get_file_info(pafs.FileSelector(table, recursive=False))
    return sorted((i for i in found if i.is_file and not i.base_name.startswith(tuple(IGNORED))), key=lambda i: i.path)


def tidy(fs: pafs.FileSystem, table: str) -> list[str]:
    """Remove the committers' side files from the table folder (`_SUCCESS`, `.<name>.crc`); their names. A
    folder of data files only reads whole with a reader that takes every file of a folder (DuckDB's `*`)."""
    if fs.get_file_info(table).type != pafs.FileType.Directory:
        return []
    removed = []
    for info in fs.get_file_info(pafs.FileSelector(table, recursive=False)):
        name = info.base_name
        if info.is_file and (name in SIDE_FILES or (name.startswith(".") and name.endswith(".crc"))):
            fs.delete_file(info.path)
            removed.append(name)
    return sorted(removed)


def legacy_deletions(listing: dict[str, int] | list[str]) -> list[str]:
    """The tables of a version's file listing (paths relative to the version) that hold a `_deleted/` folder."""
    return sorted({rel.split("/")[0] for rel in listing if f"/{LEGACY_DELETED}/" in f"/{rel}"})


def footer_rows(fs: pafs.FileSystem, paths: list[str]) -> int:
    """The rows of the Parquet files at `paths`, from their footers."""
    return sum(pq.ParquetFile(fs.open_input_file(p)).metadata.num_rows for p in paths)


def _dataset(fs: pafs.FileSystem, table: str) -> ds.Dataset:
    return ds.dataset(table, filesystem=fs, format="parquet", ignore_prefixes=IGNORED)


def read_table(fs: pafs.FileSystem, table: str, columns: list[str] | None = None) -> pa.Table:
    """The table's rows, `columns` only when given."""
    return _dataset(fs, table).to_table(columns=columns)


def batches(
    fs: pafs.FileSystem, table: str, columns: list[str] | None = None, batch_size: int = 1 << 16
) -> Iterator[pa.RecordBatch]:
    """The table's rows as record batches of at most `batch_size` rows, file by file in name order: a reader
    that streams the table holds one batch at a time."""
    dataset = _dataset(fs, table)
    for fragment in sorted(dataset.get_fragments(), key=lambda f: f.path):
        for batch in fragment.to_batches(columns=columns, schema=dataset.schema, batch_size=batch_size):
            if batch.num_rows:
                yield batch


def head(fs: pafs.FileSystem, table: str, rows: int) -> pa.Table:
    """The table's first `rows` rows in file order, reading no more of each file than they need."""
    dataset = _dataset(fs, table)
    parts, left = [], rows
    for fragment in sorted(dataset.get_fragments(), key=lambda f: f.path):
        if left <= 0:
            break
        part = fragment.head(left)
        parts.append(part)
        left -= part.num_rows
    return pa.concat_tables(parts) if parts else dataset.schema.empty_table()


def link_file(fs: pafs.FileSystem, local: bool, source: str, target: str) -> None:
    """`target` becomes `source`'s content: a hard link on a local store, else a copy."""
    if local:
        try:
            os.link(source, target)
            return
        except OSError:  # another device, or a filesystem without hard links
            pass
    fs.copy_file(source, target)


def link_data_files(fs: pafs.FileSystem, local: bool, source_table: str, target_table: str, names=None) -> list[str]:
    """Link the data files of `source_table` (those named in `names`, or all) into the existing folder
    `target_table`; their names."""
    linked = []
    for info in data_files(fs, source_table):
        if names is not None and info.base_name not in names:
            continue
        target = posixpath.join(target_table, info.base_name)
        if fs.get_file_info(target).type != pafs.FileType.NotFound:
            raise FileExistsError(f"{target} exists: a linked data file would replace it")
        link_file(fs, local, info.path, target)
        linked.append(info.base_name)
    return linked
