"""Writing a citation graph's tables (`citations`, `papers`, `degrees`) into a stage's version folder, a table
built over a committed version's table (`write_over`), and a stage's staging files.

Counts the degrees on the tables it has just written, read back (so they count exactly the written edges of exactly
the written papers), unless the caller gives degree rows made another way (filter_leakage's, from its graph's:
its `transforms.filtered_degrees`), and writes through whatever filesystem Spark was given the paths on. Used by
build_graph (its diff path writes every table with `write_over`) and filter_leakage.
"""

from __future__ import annotations

import posixpath

from citeflow import tables as T
from citeflow.artifacts import ArtifactStore
from citeflow.spark import graph as G
from citeflow.spark import scans as S

# Parquet options of a stage's staging files (written once, read back within the run, then deleted):
# - Snappy, a codec cheap to write and read, unlike the zstd of the tables a stage publishes. Its codec is
#   native (snappy-java), while Parquet's LZ4_RAW is pure Java and writes the same bytes slower.
# - No dictionary encoding, which Parquet tries on every string column chunk before giving up on long
#   unique text.
# - None of the min/max and size statistics and page checksums a published table carries: no reader of a
#   staging file skips by them (its row counts are in the footer either way), and they cost a comparison
#   and a CRC over every value written.
STAGING_OPTIONS = {
    "compression": "snappy",
    "parquet.enable.dictionary": "false",
    "parquet.column.statistics.enabled": "false",
    "parquet.size.statistics.enabled": "false",
    "parquet.page.write-checksum.enabled": "false",
}
# Published tables: no dictionary attempt on columns of long unique text (titles, abstracts, raw lines).
TEXT_COLUMNS = ("title", "abstract", "raw")
TEXT_OPTIONS = {f"parquet.enable.dictionary#{c}": "false" for c in TEXT_COLUMNS}


def write_graph(
    spark,
    store: ArtifactStore,
    path: str,
    papers,
    edges,
    files: int,
    broadcast: bool,
    degrees=None,
) -> None:
    """Write `citations`, then `papers`, then `degrees` (`write_degrees`), each in at most `files` files.
    `papers` may instead be a function that writes the table itself (filter_leakage's, `write_over` the
    graph's): it runs beside the citations' write (`session.concurrently`), before the degrees. `degrees`,
    where given, are the degrees' rows, made without the written tables (filter_leakage's, from its graph's:
    its `transforms.filtered_degrees`): they are written beside the other two instead of counted after them.
    Every stage that outputs a graph in full writes it this way (a build from a diff writes its tables with
    `write_over`). No global sort: no reader needs one, and it would cost a sampling pass and a shuffle of the
    papers' text."""
    from citeflow.spark.engine.session import concurrently

    out = lambda table: store.engine_uri(posixpath.join(path, table))  # noqa: E731
    write_edges = lambda: edges.coalesce(files).write.mode("error").parquet(out("citations"))  # noqa: E731

    def write_papers() -> None:
        if callable(papers):
            papers()
        else:
            papers.coalesce(files).write.mode("error").options(**TEXT_OPTIONS).parquet(out("papers"))

    if degrees is not None:
        write_rows = lambda: degrees.coalesce(files).write.mode("error").parquet(out("degrees"))  # noqa: E731
        concurrently(spark, write_edges, write_papers, write_rows)
        return
    if callable(papers):
        concurrently(spark, write_edges, write_papers)
    else:
        write_edges()
        write_papers()
    write_degrees(spark, store, path, files, broadcast)


def write_degrees(spark, store: ArtifactStore, path: str, files: int, broadcast: bool) -> None:
    """`degrees` of the version at `path`: (corpus_id, out_degree, in_degree) of every paper of its written `papers`
    (0 and 0 for a paper without edges), counted on its written `citations`: one light row per paper, apart from the
    papers' text, so that a release whose edges change rewrites no text. `broadcast`: the papers are few enough
    that the degrees (one light row per paper with an edge) go to their ids by broadcast (the caller knows their
    count)."""
    read = lambda table: S.read_stored(spark, store, posixpath.join(path, table))  # noqa: E731
    degrees = G.with_degrees(read("papers").select("corpus_id"), read("citations"), broadcast=broadcast)
    degrees.coalesce(files).write.mode("error").parquet(store.engine_uri(posixpath.join(path, "degrees")))


def write_over(
    spark,
    store: ArtifactStore,
    source: str,
    target: str,
    gone=None,
    new_rows=None,
    *,
    files: int = 1,
    most: int | None = None,
    broadcast: bool = True,
) -> dict[str, list[str]]:
    """The table folder `target`: the rows of the committed table folder `source` less `gone`, plus `new_rows`,
    as plain Parquet (copy on write, one data file at a time). `gone`: rows of `source` by their
    `scans.POSITION` (read with `with_position`). Each data file of `source` that holds no row of `gone` is
    linked into `target` as it is; those that hold one are read again and their other rows written as at most
    as many new files (and at most `most`); `new_rows` go to at most `files` files of their own, so that a
    reader that wants the rows this version brings (filter_leakage's keys) finds them by file. `broadcast`:
    `gone` is small enough to ship to every task. Returns the data file names by how they came: `linked`,
    `kept` (the rewritten files' other rows) and `new`."""
    from pyspark.sql import functions as F

    uri = store.engine_uri(target)
    touched: list[str] = []
    if gone is not None:
        gone = gone.select(*S.POSITION)
        touched = sorted(r[0] for r in gone.select(S.POSITION[0]).distinct().collect())
    before: set[str] = set()
    wrote = False
    if new_rows is not None:
        new_rows.coalesce(files).write.mode("error").options(**TEXT_OPTIONS).parquet(uri)
        before, wrote = {i.base_name for i in T.data_files(store.fs, target)}, True
    if gone is not None and touched:
        by_name = {i.base_name: i for i in T.data_files(store.fs, source)}
        missing = [name for name in touched if name not in by_name]
        if missing:
            raise RuntimeError(f"{source} has no data file {missing[0]}: the rows that go were read elsewhere")
        scan = S.with_positions(spark.read.parquet(*[store.engine_uri(by_name[n].path) for n in touched]))
        stays = scan.join(F.broadcast(gone) if broadcast else gone, S.POSITION, "left_anti").drop(*S.POSITION)
        parts = min(len(touched), most) if most else len(touched)
        stays.coalesce(parts).write.mode("append" if wrote else "error").options(**TEXT_OPTIONS).parquet(uri)
        wrote = True
    if not wrote:
        store.fs.create_dir(target)
    own = {i.base_name for i in T.data_files(store.fs, target)}
    untouched = {i.base_name for i in T.data_files(store.fs, source)} - set(touched)
    clash = sorted(own & untouched)
    if clash:
        raise FileExistsError(f"{target}/{clash[0]} exists: a linked data file would replace it")
    linked = T.link_data_files(store.fs, store.local, source, target, untouched)
    return {"linked": sorted(linked), "kept": sorted(own - before), "new": sorted(before)}


def write_staging(frame, uri: str) -> None:
    """Write `frame` at `uri` (a folder that must not exist yet, in the stage's `_staging`) as staging files:
    Parquet cheap to write and read back within the run (`STAGING_OPTIONS`)."""
    frame.write.mode("error").options(**STAGING_OPTIONS).parquet(uri)


def stage(spark, frame, uri: str):
    """`frame` written as staging files at `uri` (`write_staging`) and read back: the plans that read it
    read those files instead of computing the frame again, once per use."""
    write_staging(frame, uri)
    return spark.read.parquet(uri)
