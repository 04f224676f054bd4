"""A table folder whose rows are its data files less the rows its deletion file names (merge-on-read).

A committed table is a folder of Parquet data files. build_graph's build from a release diff (issue 19) does
not rewrite every row of `papers`, `citations`, `degrees` and `rejected`: it hard-links the base version's data
files into the new table folder, writes the rows it changed or added as new files beside them, and lists the
base rows the new release no longer holds in `_deleted/` (Parquet, one row per removed row: `file_name`, the
data file's name, and `row_index`, the row's position in that file counted from 0). filter_leakage's `papers`
links the graph's files and lists the benchmark's papers there. The table's rows are every data file's rows
except those. This is how Delta Lake's deletion vectors and Iceberg's position deletes describe a table
(`deletion vectors` in the Delta protocol, `PROTOCOL.md`; Iceberg's `spec.md`, "Position Delete Files"), kept
to one folder so that the version stays one self-contained folder of the artifact store.

`_deleted/` starts with `_`, so Spark's and pyarrow's own Parquet readers skip it: a table that has one must
be read through `read_table` or `batches` here (pyarrow) or `spark.readers.read_table` (Spark), which apply
it; a plain Parquet reader of such a folder would also return the removed rows. `table_stats` (citeflow/artifacts.py)
counts the rows as these readers do, so a manifest's `rows` is the table's true row count.

A linked file is the base's file, not a copy: the store never modifies a committed file in place, and
deleting or moving the base version leaves the link whole (`link_file`). On a store without hard links
(object stores) the file is copied.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

DELETED = "_deleted"
FILE_NAME, ROW_INDEX = "file_name", "row_index"
DELETED_SCHEMA = pa.schema([(FILE_NAME, pa.string()), (ROW_INDEX, pa.int64())])
IGNORED = [".", "_"]  # names Spark and pyarrow skip in a table folder


def deleted_path(table: str) -> str:
    return posixpath.join(table, DELETED)


def has_deleted(fs: pafs.FileSystem, table: str) -> bool:
    """Whether the table folder at `table` names removed rows (a `_deleted/` folder)."""
    return fs.get_file_info(deleted_path(table)).type == pafs.FileType.Directory


def data_files(fs: pafs.FileSystem, table: str) -> list[pafs.FileInfo]:
    """The table's data files (names Spark and pyarrow read), by name."""
    if fs.get_file_info(table).type != pafs.FileType.Directory:
        return []
    found = fs.get_file_info(pafs.FileSelector(table, recursive=False))
    return sorted((i for i in found if i.is_file and not i.base_name.startswith(tuple(IGNORED))), key=lambda i: i.path)


def deleted_files(fs: pafs.FileSystem, table: str) -> list[str]:
    """The Parquet files of the table's deletion file (none when it has none), by name."""
    if not has_deleted(fs, table):
        return []
    return [i.path for i in data_files(fs, deleted_path(table))]


def read_deleted(fs: pafs.FileSystem, table: str) -> pa.Table:
    """The (`file_name`, `row_index`) rows the table's deletion file names; none when it has none."""
    parts = [pq.read_table(p, filesystem=fs, columns=[FILE_NAME, ROW_INDEX]) for p in deleted_files(fs, table)]
    return pa.concat_tables(parts).cast(DELETED_SCHEMA) if parts else DELETED_SCHEMA.empty_table()


def removed_by_file(fs: pafs.FileSystem, table: str) -> dict[str, np.ndarray]:
    """Data file name -> sorted positions of its removed rows."""
    deleted = read_deleted(fs, table)
    if deleted.num_rows == 0:
        return {}
    names = deleted[FILE_NAME].to_numpy(zero_copy_only=False)
    rows = deleted[ROW_INDEX].to_numpy()
    order = np.lexsort((rows, names))
    names, rows = names[order], rows[order]
    cuts = np.flatnonzero(names[1:] != names[:-1]) + 1
    return {str(part[0]): r for part, r in zip(np.split(names, cuts), np.split(rows, cuts), strict=True)}


def footer_rows(fs: pafs.FileSystem, paths: list[str]) -> int:
    """The rows of the Parquet files at `paths`, from their footers."""
    return sum(pq.ParquetFile(fs.open_input_file(p)).metadata.num_rows for p in paths)


def deleted_rows(fs: pafs.FileSystem, table: str) -> int:
    """How many rows the table's deletion file names, from its Parquet footers."""
    return footer_rows(fs, deleted_files(fs, table))


def may_extend(stats: dict, share: float) -> bool:
    """Whether a new table may link the files of a committed table (`stats`: its manifest entry, `rows` and
    `deleted_rows`) and list more removed rows beside them: the rows it removes already are at most `share`
    of the rows its files store (`build_graph.max_deleted_share`; 0: never), so that reads do not slow down
    release after release."""
    removed = stats.get("deleted_rows", 0)
    return share > 0 and removed <= share * (stats["rows"] + removed)


def _without(part: pa.Table, gone: np.ndarray) -> pa.Table:
    """`part` (a data file's rows) less the rows at the positions `gone`."""
    if not len(gone):
        return part
    keep = np.ones(part.num_rows, dtype=bool)
    keep[gone] = False
    return part.filter(pa.array(keep))


def read_table(fs: pafs.FileSystem, table: str, columns: list[str] | None = None) -> pa.Table:
    """The table's rows (its deletion file applied), `columns` only when given."""
    dataset = ds.dataset(table, filesystem=fs, format="parquet", ignore_prefixes=IGNORED)
    removed = removed_by_file(fs, table)
    if not removed:
        return dataset.to_table(columns=columns)
    none = np.empty(0, dtype=np.int64)
    parts = [
        _without(f.to_table(columns=columns, schema=dataset.schema), removed.get(posixpath.basename(f.path), none))
        for f in dataset.get_fragments()
    ]
    if not parts:
        return dataset.to_table(columns=columns)
    return pa.concat_tables(parts)


def batches(
    fs: pafs.FileSystem, table: str, columns: list[str] | None = None, batch_size: int = 1 << 16
) -> Iterator[pa.RecordBatch]:
    """The table's rows (its deletion file applied) as record batches of at most `batch_size` rows, file by
    file in name order: a reader that streams the table holds one batch at a time."""
    dataset = ds.dataset(table, filesystem=fs, format="parquet", ignore_prefixes=IGNORED)
    removed = removed_by_file(fs, table)
    none = np.empty(0, dtype=np.int64)
    for fragment in sorted(dataset.get_fragments(), key=lambda f: f.path):
        gone, start = removed.get(posixpath.basename(fragment.path), none), 0
        for batch in fragment.to_batches(columns=columns, schema=dataset.schema, batch_size=batch_size):
            end = start + batch.num_rows
            lo, hi = np.searchsorted(gone, [start, end])
            if hi > lo:
                keep = np.ones(batch.num_rows, dtype=bool)
                keep[gone[lo:hi] - start] = False
                batch = batch.filter(pa.array(keep))
            start = end
            if batch.num_rows:
                yield batch


def head(fs: pafs.FileSystem, table: str, rows: int) -> pa.Table:
    """The table's first `rows` rows in file order (its deletion file applied), reading no more of each file
    than they need."""
    dataset = ds.dataset(table, filesystem=fs, format="parquet", ignore_prefixes=IGNORED)
    removed = removed_by_file(fs, table)
    parts, left = [], rows
    for fragment in dataset.get_fragments():
        if left <= 0:
            break
        gone = removed.get(posixpath.basename(fragment.path), np.empty(0, dtype=np.int64))
        part = fragment.head(left + len(gone))
        part = _without(part, gone[gone < part.num_rows]).slice(0, left)
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


def link_data_files(fs: pafs.FileSystem, local: bool, source_table: str, target_table: str) -> list[str]:
    """Link every data file of `source_table` into the existing folder `target_table`; their names."""
    names = []
    for info in data_files(fs, source_table):
        target = posixpath.join(target_table, info.base_name)
        if fs.get_file_info(target).type != pafs.FileType.NotFound:
            raise FileExistsError(f"{target} exists: a linked data file would replace it")
        link_file(fs, local, info.path, target)
        names.append(info.base_name)
        crc = posixpath.join(source_table, f".{info.base_name}.crc")  # Hadoop's checksums of a local file
        if local and os.path.isfile(crc):
            link_file(fs, local, crc, posixpath.join(target_table, f".{info.base_name}.crc"))
    return names
