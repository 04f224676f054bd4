"""A graph's `papers` table rewritten file by file with pyarrow: rows dropped, rows added, degrees replaced.

Used where a new version's papers are an earlier version's papers with a few rows changed (build_graph from a
release diff, jobs/build_graph.py `build_from_diff`): every other row is carried over as its file holds it, and
only the degree columns are looked up again, since an edge that arrives or leaves changes the degree of a paper
the diff does not name (so no file of the earlier version can be reused whole, and none is linked). Streaming
the files through pyarrow (C++ decoding and zstd, no Spark rows) costs a fraction of a Spark rewrite of the
papers' text; the rows, columns and types written are those `spark/output.py` writes.

Reads and writes through any pyarrow filesystem (the artifact store's `fs`): local or remote roots alike.
Layer: the core (pyarrow only).
"""

from __future__ import annotations

import posixpath
import uuid
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

# Published text columns get no dictionary attempt, as in Spark's writes (spark/readers.py TEXT_COLUMNS).
TEXT_COLUMNS = ("title", "abstract", "raw")
BATCH_ROWS = 131_072
DEGREE_COLUMNS = ("out_degree", "in_degree")


def parquet_files(fs: pafs.FileSystem, folder: str) -> list[str]:
    """The Parquet files of a table folder, as the readers see them (names starting with `_` or `.` skipped)."""
    found = fs.get_file_info(pafs.FileSelector(folder, recursive=True))
    return sorted(
        i.path
        for i in found
        if i.type == pafs.FileType.File
        and not any(p.startswith(("_", ".")) for p in posixpath.relpath(i.path, folder).split("/"))
    )


def read_columns(fs: pafs.FileSystem, folder: str, columns: list[str]) -> pa.Table:
    return ds.dataset(parquet_files(fs, folder), filesystem=fs, format="parquet").to_table(columns=columns)


class Degrees:
    """Out- and in-degree of every paper with an edge in a `citations` table (citing, cited)."""

    def __init__(self, citations: pa.Table):
        out = citations.group_by("citing").aggregate([("citing", "count")])
        inn = citations.group_by("cited").aggregate([("cited", "count")])
        self._out_ids, self._out = out.column("citing").combine_chunks(), out.column("citing_count").combine_chunks()
        self._in_ids, self._in = inn.column("cited").combine_chunks(), inn.column("cited_count").combine_chunks()

    def of(self, ids: pa.Array) -> tuple[pa.Array, pa.Array]:
        """(out_degree, in_degree) as int32 for `ids`, 0 for a paper without edges."""

        def lookup(keys: pa.Array, counts: pa.Array) -> pa.Array:
            found = pc.take(counts, pc.index_in(ids, value_set=keys))
            return pc.fill_null(found, 0).cast(pa.int32())

        return lookup(self._out_ids, self._out), lookup(self._in_ids, self._in)


def _with_degrees(batch: pa.RecordBatch | pa.Table, degrees: Degrees, schema: pa.Schema) -> pa.Table:
    table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
    table = table.drop_columns([c for c in DEGREE_COLUMNS if c in table.column_names])
    out, inn = degrees.of(table.column("corpus_id").combine_chunks())
    table = table.append_column("out_degree", out).append_column("in_degree", inn)
    return table.select(schema.names).cast(schema)


def _text_flags(table: pa.Table) -> tuple[int, int, int]:
    no_title, no_abstract = pc.is_null(table.column("title")), pc.is_null(table.column("abstract"))
    both = pc.and_(no_title, no_abstract)
    count = lambda mask: int(pc.sum(mask.cast(pa.int64())).as_py() or 0)  # noqa: E731
    return count(no_title), count(no_abstract), count(both)


def patch_papers(
    fs: pafs.FileSystem,
    sources: list[str],
    added: pa.Table,
    dest: str,
    *,
    drop: pa.Array,
    degrees: Degrees,
    schema: pa.Schema,
) -> dict[str, int]:
    """Write `dest` (a papers table folder): the rows of `sources` (Parquet files) whose corpus id is not in
    `drop`, plus `added` (papers columns, degrees absent or ignored), every row with its degrees from
    `degrees`, in `schema` (the earlier table's). One output file per source file plus one for `added`; an
    empty table still gets one file, so that it has a schema. Returns rows and the manifest's text flags
    (`papers_without_title`, `papers_without_abstract`, `papers_without_text`)."""
    fs.create_dir(dest, recursive=True)
    run = uuid.uuid4().hex[:8]
    dictionary = [f.name for f in schema if f.name not in TEXT_COLUMNS]

    def write(index: int, tables) -> tuple[int, int, int, int]:
        target = posixpath.join(dest, f"part-{index:05d}-{run}.zstd.parquet")
        totals = [0, 0, 0, 0]
        writer = None
        try:
            for table in tables:
                if table.num_rows == 0 and writer is not None:  # the first batch opens the file, even empty
                    continue
                if writer is None:
                    writer = pq.ParquetWriter(
                        target, schema, filesystem=fs, compression="zstd", use_dictionary=dictionary
                    )
                writer.write_table(table)
                flags = _text_flags(table)
                totals = [totals[0] + table.num_rows, *(t + f for t, f in zip(totals[1:], flags, strict=True))]
        finally:
            if writer is not None:
                writer.close()
        return tuple(totals)

    def carried(source: str):
        with fs.open_input_file(source) as fh:
            for batch in pq.ParquetFile(fh).iter_batches(batch_size=BATCH_ROWS):
                keep = pc.invert(pc.is_in(batch.column("corpus_id"), value_set=drop))
                yield _with_degrees(batch.filter(keep), degrees, schema)

    jobs = [(i, carried(s)) for i, s in enumerate(sources)]
    if added.num_rows or not sources:
        jobs.append((len(sources), iter([_with_degrees(added, degrees, schema)])))
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda job: write(*job), jobs))
    rows, no_title, no_abstract, no_text = (sum(r[i] for r in results) for i in range(4))
    return {
        "rows": rows,
        "papers_without_title": no_title,
        "papers_without_abstract": no_abstract,
        "papers_without_text": no_text,
    }


def filter_edges(fs: pafs.FileSystem, sources: list[str], dest: str, *, drop: pa.Array) -> pa.Table:
    """Write `dest` (a citations table folder): the edges of `sources` with neither end in `drop`, one file per
    source file (an empty one too, so that the table has a schema); returns them (citing, cited)."""
    fs.create_dir(dest, recursive=True)
    run = uuid.uuid4().hex[:8]
    kept = []
    for i, source in enumerate(sources):
        with fs.open_input_file(source) as fh:
            table = pq.read_table(fh)
        gone = pc.or_(*(pc.is_in(table.column(end), value_set=drop) for end in ("citing", "cited")))
        table = table.filter(pc.invert(gone))
        target = posixpath.join(dest, f"part-{i:05d}-{run}.zstd.parquet")
        pq.write_table(table, target, filesystem=fs, compression="zstd")
        kept.append(table.select(["citing", "cited"]))
    return pa.concat_tables(kept)
