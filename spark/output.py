"""Writing a citation graph's tables (`citations`, `papers`) into a stage's version folder, and a stage's
staging files.

Reads the citations it has just written back (so the degrees count exactly the written edges) and writes
through whatever filesystem Spark was given the paths on. Used by build_graph, build_graph's diff path and
filter_leakage.
"""

from __future__ import annotations

from spark import graph as G
from spark import readers as R


def write_graph(spark, papers, edges, out, files: int, broadcast: bool) -> None:
    """Write `citations`, then `papers` with the degrees of the written edges, each in at most `files` files.
    Every stage that outputs a graph writes it this way. No global sort: no reader needs one, and it would
    cost a sampling pass and a shuffle of the papers' text. `broadcast` joins the degrees (one light row per
    paper with an edge) onto the papers without shuffling the papers."""
    edges.coalesce(files).write.mode("error").parquet(out("citations"))
    written_edges = spark.read.parquet(out("citations"))
    papers_with_degrees = G.with_degrees(papers, written_edges, broadcast=broadcast)
    papers_with_degrees.coalesce(files).write.mode("error").options(**R.TEXT_OPTIONS).parquet(out("papers"))


def write_staging(frame, uri: str) -> None:
    """Write `frame` at `uri` (a folder that must not exist yet, in the stage's `_staging`) as staging files:
    Parquet cheap to write and read back within the run (`readers.STAGING_OPTIONS`)."""
    frame.write.mode("error").options(**R.STAGING_OPTIONS).parquet(uri)


def stage(spark, frame, uri: str):
    """`frame` written as staging files at `uri` (`write_staging`) and read back: the plans that read it
    read those files instead of computing the frame again, once per use."""
    write_staging(frame, uri)
    return spark.read.parquet(uri)
