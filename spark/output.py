"""Writing a citation graph's tables (`citations`, `papers`) into a stage's version folder.

Reads the citations it has just written back (so the degrees count exactly the written edges) and writes
through whatever filesystem Spark was given the paths on. Used by build_graph and filter_leakage.
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
