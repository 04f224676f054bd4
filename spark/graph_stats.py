"""A citation graph's statistics for its manifest: the papers without text or holding U+FFFD (`text_counts`), the
papers with an edge (`graph_nodes`), and the degree histogram with the node, edge and degree figures drawn from it
(`histogram_summary`).

The counts are read from light columns only: `lossy_mask` is noted in the pass that parses the text
(`graph.stage_papers`), and a build from a release diff updates its base's counts and histogram with the rows it
changes (jobs/build_graph_diff.py).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from citeflow.spark import readers as R

# The papers' string fields (every attribute but the year), which `lossy_text` counts: Spark decodes each corpus
# line as UTF-8, leaving U+FFFD in place of every byte that is not UTF-8, and keeps the record.
LOSSY_FIELDS = tuple(name for name in R.PAPER_ATTRIBUTES if name != "year")
REPLACEMENT = "\ufffd"


def holds_replacement(field: str) -> Column:
    """Whether a papers row's `field` (a string, or `fields_of_study`'s list) holds U+FFFD; null where null."""
    if field == "fields_of_study":
        return F.exists(F.col(field), lambda v: v.contains(REPLACEMENT))
    return F.col(field).contains(REPLACEMENT)


def lossy_mask(columns: list[str]) -> Column:
    """An int whose bit i is set where the row's `LOSSY_FIELDS[i]` holds U+FFFD (fields not in `columns`: 0).

    One light column, so that the pass that parses the text can note it and the counts read no text again."""
    bits = [
        F.when(holds_replacement(f), F.lit(1 << i)).otherwise(F.lit(0))
        for i, f in enumerate(LOSSY_FIELDS)
        if f in columns
    ]
    return sum(bits[1:], bits[0]) if bits else F.lit(0)


TEXT_COUNTS = ("papers_without_title", "papers_without_abstract", "papers_without_text")
# The text counts' papers per field of `LOSSY_FIELDS` holding U+FFFD, fields with none left out.
LOSSY_TEXT = "lossy_text"


def text_counts(text: DataFrame) -> dict[str, Any]:
    """`TEXT_COUNTS` and `LOSSY_TEXT` of `text` (one row per paper with `no_title` and `no_abstract`, booleans,
    and `lossy`, a `lossy_mask`), in one aggregation."""
    lossy = [F.sum((F.col("lossy").bitwiseAND(1 << i) != 0).cast("int")).alias(f) for i, f in enumerate(LOSSY_FIELDS)]
    row = text.agg(
        F.sum(F.col("no_title").cast("int")).alias(TEXT_COUNTS[0]),
        F.sum(F.col("no_abstract").cast("int")).alias(TEXT_COUNTS[1]),
        F.sum((F.col("no_title") & F.col("no_abstract")).cast("int")).alias(TEXT_COUNTS[2]),
        *lossy,
    ).first()
    assert row is not None  # an aggregation without groups has one row
    counts: dict[str, Any] = {k: int(row[k] or 0) for k in TEXT_COUNTS}
    counts[LOSSY_TEXT] = {f: int(row[f]) for f in LOSSY_FIELDS if row[f]}
    return counts


def graph_nodes(degrees: DataFrame) -> int:
    """How many papers of `degrees` (one row per paper, `out_degree` and `in_degree`) have an edge."""
    row = degrees.agg(F.count_if((F.col("out_degree") + F.col("in_degree")) > 0).alias("n")).first()
    assert row is not None  # an aggregation without groups has one row
    return int(row["n"] or 0)


DEGREE_QUANTILES = (0.5, 0.9, 0.99)


def histogram_summary(histogram, nodes: int, text: dict[str, Any]) -> dict[str, Any]:
    """The manifest's node, edge and degree statistics from a degree histogram (`degree_histogram` rows, a
    pyarrow table), `nodes`: how many papers have an edge (`graph_nodes`), and the `text_counts`: papers and citations
    counted from the out-degrees, the largest degrees, and `DEGREE_QUANTILES` of each direction, exact
    (`degree_quantiles`). A build of a release from a diff updates its base's histogram with the rows it changes
    (jobs/build_graph_diff.py), with the same result as a full build's."""
    rows = histogram.to_pydict()
    by_direction: dict[str, list[tuple[int, int]]] = {"out": [], "in": []}
    for direction, degree, papers in zip(rows["direction"], rows["degree"], rows["papers"], strict=True):
        by_direction[direction].append((int(degree), int(papers)))
    out, into = sorted(by_direction["out"]), sorted(by_direction["in"])
    papers = sum(n for _, n in out)
    edges = sum(d * n for d, n in out)
    return {
        "papers": papers,
        "citations": edges,
        "graph_nodes": nodes,
        "isolated_papers": papers - nodes,
        "mean_out_degree": round(edges / papers, 4) if papers else 0.0,
        "max_out_degree": out[-1][0] if out else 0,
        "max_in_degree": into[-1][0] if into else 0,
        "out_degree_p50_p90_p99": degree_quantiles(out, DEGREE_QUANTILES),
        "in_degree_p50_p90_p99": degree_quantiles(into, DEGREE_QUANTILES),
        **{k: int(text[k]) for k in TEXT_COUNTS},
    }


def degree_quantiles(counts: list[tuple[int, int]], quantiles) -> list[int]:
    """Of papers counted by degree (`counts`: (degree, papers), ascending degrees), per quantile `q` the least
    degree that at least `ceil(q * papers)` papers (at least one) have at most: the papers' degrees sorted, the
    one at that rank. Spark's `percentile_approx` gives the same where it is exact (tests/unit/spark/
    test_graph.py); on a corpus past its accuracy it may not, and the histogram a release from a diff updates
    gives these exactly. 0 for no papers."""
    import math
    from bisect import bisect_left
    from itertools import accumulate

    at_most = list(accumulate(n for _, n in counts))  # papers of each degree or less
    if not at_most or not at_most[-1]:
        return [0 for _ in quantiles]
    return [counts[bisect_left(at_most, max(1, math.ceil(q * at_most[-1])))][0] for q in quantiles]


def summary_stats(papers: DataFrame) -> DataFrame:
    """`text_counts`' input from a papers table."""
    return papers.select(
        F.col("title").isNull().alias("no_title"),
        F.col("abstract").isNull().alias("no_abstract"),
        lossy_mask(papers.columns).alias("lossy"),
    )


def degree_histogram(papers_with_degrees: DataFrame) -> DataFrame:
    """(direction, degree, papers): how many papers have each in- and out-degree."""
    out_h = (
        papers_with_degrees.groupBy(F.col("out_degree").alias("degree")).count().withColumn("direction", F.lit("out"))
    )
    in_h = papers_with_degrees.groupBy(F.col("in_degree").alias("degree")).count().withColumn("direction", F.lit("in"))
    return out_h.unionByName(in_h).select("direction", "degree", F.col("count").alias("papers"))
