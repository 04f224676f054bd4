"""Writing a citation graph's tables (`citations`, `papers`, `degrees`) into a stage's version folder, merge-on-read
tables over a committed version's files, and a stage's staging files.

Counts the degrees on the tables it has just written, read back (so they count exactly the written edges of exactly
the written papers), unless the caller gives degree rows made another way (filter_leakage's, from its graph's:
`spark.leakage.filtered_degrees`), and writes through whatever filesystem Spark was given the paths on. Used by
build_graph (its diff path writes every table with `write_merge_on_read`, `write_graph` only when it writes every
row again) and filter_leakage.
"""

from __future__ import annotations

import posixpath

from citeflow import tables as T
from citeflow.artifacts import ArtifactStore
from spark import graph as G
from spark import readers as R


def write_graph(
    spark,
    store: ArtifactStore,
    path: str,
    papers,
    edges,
    files: int,
    broadcast_rows: int,
    broadcast: bool,
    degrees=None,
) -> None:
    """Write `citations`, then `papers`, then `degrees` (`write_degrees`), each in at most `files` files.
    `papers` may instead be a function that writes the table itself (filter_leakage's merge-on-read table over
    the graph's): it runs beside the citations' write (`session.concurrently`), before the degrees. `degrees`,
    where given, are the degrees' rows, made without the written tables (filter_leakage's, from its graph's:
    `spark.leakage.filtered_degrees`): they are written beside the other two instead of counted after them.
    Every stage that outputs a graph in full writes it this way (a build from a diff that links its base's files
    writes its tables with `write_merge_on_read`). No global sort: no reader needs one, and it would cost a
    sampling pass and a shuffle of the papers' text."""
    from spark.session import concurrently

    out = lambda table: store.engine_uri(posixpath.join(path, table))  # noqa: E731
    write_edges = lambda: edges.coalesce(files).write.mode("error").parquet(out("citations"))  # noqa: E731

    def write_papers() -> None:
        if callable(papers):
            papers()
        else:
            papers.coalesce(files).write.mode("error").options(**R.TEXT_OPTIONS).parquet(out("papers"))

    if degrees is not None:
        write_rows = lambda: degrees.coalesce(files).write.mode("error").parquet(out("degrees"))  # noqa: E731
        concurrently(spark, write_edges, write_papers, write_rows)
        return
    if callable(papers):
        concurrently(spark, write_edges, write_papers)
    else:
        write_edges()
        write_papers()
    write_degrees(spark, store, path, files, broadcast_rows, broadcast)


def write_degrees(spark, store: ArtifactStore, path: str, files: int, broadcast_rows: int, broadcast: bool) -> None:
    """`degrees` of the version at `path`: (corpus_id, out_degree, in_degree) of every paper of its written `papers`
    (0 and 0 for a paper without edges), counted on its written `citations`: one light row per paper, apart from the
    papers' text, so that a release whose edges change rewrites no text (issue 19). Both tables are read as their
    readers read them (a deletion file applied, broadcast when it names at most `broadcast_rows` rows);
    `broadcast`: the papers are few enough that the degrees (one light row per paper with an edge) go to their ids
    by broadcast (the caller knows their count)."""
    read = lambda table: R.read_stored(spark, store, posixpath.join(path, table), broadcast_rows)  # noqa: E731
    degrees = G.with_degrees(read("papers").select("corpus_id"), read("citations"), broadcast=broadcast)
    degrees.coalesce(files).write.mode("error").parquet(store.engine_uri(posixpath.join(path, "degrees")))


def write_merge_on_read(
    spark, store: ArtifactStore, source: str, target: str, gone=None, new_rows=None, files: int = 1
) -> None:
    """The table folder `target` as a merge-on-read table over the committed table folder `source`
    (citeflow/tables.py): `new_rows` (if any) written as at most `files` new files, every data file of `source`
    linked beside them, and the removed rows written as the deletion file: `gone` (`readers.POSITION` columns:
    rows of `source`'s files, read from its live rows, so never one it already removes) and the rows `source`
    itself removes. With neither, `target` has no deletion file."""
    from pyspark.sql import functions as F

    uri = store.engine_uri(target)
    if new_rows is not None:
        new_rows.coalesce(files).write.mode("error").options(**R.TEXT_OPTIONS).parquet(uri)
    else:
        store.fs.create_dir(target)
    T.link_data_files(store.fs, store.local, source, target)
    earlier_files = T.deleted_files(store.fs, source)
    if earlier_files:
        earlier = R.deleted_positions(spark, [store.engine_uri(p) for p in earlier_files])
        gone = earlier if gone is None else gone.select(*R.POSITION).unionByName(earlier)
    if gone is None:
        return
    gone.select(F.col(R.POSITION[0]).alias(T.FILE_NAME), F.col(R.POSITION[1]).alias(T.ROW_INDEX)).coalesce(
        1
    ).write.mode("error").parquet(f"{uri}/{T.DELETED}")


def new_rows(spark, store: ArtifactStore, source: str, target: str):
    """The rows of the merge-on-read table `target` (`write_merge_on_read` over `source`) in its own data files, those
    it does not link from `source`, as a DataFrame; None when it has none."""
    linked = {info.base_name for info in T.data_files(store.fs, source)}
    own = [info.path for info in T.data_files(store.fs, target) if info.base_name not in linked]
    return spark.read.parquet(*[store.engine_uri(p) for p in own]) if own else None


def write_staging(frame, uri: str) -> None:
    """Write `frame` at `uri` (a folder that must not exist yet, in the stage's `_staging`) as staging files:
    Parquet cheap to write and read back within the run (`readers.STAGING_OPTIONS`)."""
    frame.write.mode("error").options(**R.STAGING_OPTIONS).parquet(uri)


def stage(spark, frame, uri: str):
    """`frame` written as staging files at `uri` (`write_staging`) and read back: the plans that read it
    read those files instead of computing the frame again, once per use."""
    write_staging(frame, uri)
    return spark.read.parquet(uri)
