"""Citation-graph transforms: deduplicate papers, clean edges, count degrees.

Every function is `DataFrame(s) -> DataFrame(s)`; nothing here reads or
writes files. Cleaning follows SciNCL (SPEC §2): directed edges citing ->
cited, no self-loops, no duplicates, both ends in the corpus. Each dropped
row or edge comes back in a `rejected` frame with its reason so the stage can
count and keep it (quarantine, never a silent drop).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark import readers as R

PAPERS_COLUMNS = [
    "corpus_id",
    "title",
    "abstract",
    "year",
    "venue",
    "fields_of_study",
    "doi",
    "pubmed_id",
    "pmc_id",
    "arxiv_id",
    "acl_id",
    "mag_id",
    "dblp_id",
]
# What `label_papers` keeps of every input line (written once to staging).
STAGED_COLUMNS = ["id_raw", *PAPERS_COLUMNS, "refs", "source", "reason", "raw"]


def unusable_reason() -> Column:
    """Why a parsed row cannot be used (parse error, then id error), or null."""
    return F.coalesce(F.col("parse_error"), R.id_error(F.col("id_raw")))


def split_unparseable(papers: DataFrame, kind: str = "paper") -> tuple[DataFrame, DataFrame]:
    """(rows with a valid corpus id, rejected rows: malformed JSON, bad types, bad ids)."""
    reason = unusable_reason()
    good = papers.where(reason.isNull())
    bad = R.rejected_rows(
        papers.where(reason.isNotNull()), kind=kind, reason=reason, id_col=F.col("id_raw"), raw=F.col("value")
    )
    return good, bad


def completeness(df: DataFrame) -> DataFrame:
    """How complete a paper record is: one point per filled field, plus citations."""
    filled = [
        F.col(c).isNotNull().cast("int")
        for c in ("title", "abstract", "year", "venue", "doi", "pubmed_id", "arxiv_id", "mag_id")
    ]
    score = sum(filled[1:], filled[0]) + (F.size("fields_of_study") > 0).cast("int") + (F.size("refs") > 0).cast("int")
    return df.withColumn("_score", score)


def label_papers(papers: DataFrame) -> DataFrame:
    """One row per input line: the normalised paper and, when it is not kept, why.

    Adds `corpus_id`, `reason` (null for the kept record of each corpus id) and
    `raw` (the input line, for rejected rows only). Among records of the same
    id the most complete is kept; ties break on more citations, then on a hash
    of the raw line, so the choice depends on neither file order nor
    partitioning. Labelling in one frame lets the stage write it once and
    derive papers and rejected rows from that, instead of caching or parsing
    the corpus twice.
    """
    labelled = papers.withColumn("_unusable", unusable_reason())
    good = completeness(
        labelled.where(F.col("_unusable").isNull()).withColumn("corpus_id", F.col("id_raw").try_cast("long"))
    )
    ranked = good.withColumn(
        "_rank",
        F.row_number().over(
            Window.partitionBy("corpus_id").orderBy(
                F.col("_score").desc(), F.size("refs").desc(), F.xxhash64("value"), F.col("value")
            )
        ),
    )
    duplicate = F.col("_rank") > 1
    kept_or_duplicate = ranked.select(
        *[c for c in STAGED_COLUMNS if c not in ("reason", "raw")],
        F.when(duplicate, F.lit(R.DUPLICATE_PAPER)).alias("reason"),
        F.when(duplicate, F.col("value")).alias("raw"),
    )
    bad = labelled.where(F.col("_unusable").isNotNull()).select(
        *[
            F.lit(None).cast("long").alias(c) if c == "corpus_id" else F.col(c)
            for c in STAGED_COLUMNS
            if c not in ("reason", "raw")
        ],
        F.col("_unusable").alias("reason"),
        F.col("value").alias("raw"),
    )
    return kept_or_duplicate.unionByName(bad)


def kept_papers(labelled: DataFrame) -> DataFrame:
    return labelled.where(F.col("reason").isNull()).drop("reason", "raw")


def rejected_papers(labelled: DataFrame) -> DataFrame:
    rows = labelled.where(F.col("reason").isNotNull())
    return R.rejected_rows(rows, kind="paper", reason=F.col("reason"), id_col=F.col("id_raw"), raw=F.col("raw"))


def attach_abstracts(papers: DataFrame, abstracts: DataFrame) -> tuple[DataFrame, DataFrame]:
    """S2AG: join the `abstracts` dataset onto papers by corpus id.

    Returns (papers with `abstract`, rejected abstract rows: duplicates beyond
    the longest abstract of an id, and abstracts of ids not among the papers).
    """
    ranked = abstracts.withColumn("corpus_id", F.col("id_raw").try_cast("long")).withColumn(
        "_rank",
        F.row_number().over(
            Window.partitionBy("corpus_id").orderBy(
                F.length("abstract").desc_nulls_last(), F.xxhash64("value"), F.col("value")
            )
        ),
    )
    duplicates = R.rejected_rows(
        ranked.where(F.col("_rank") > 1),
        kind="abstract",
        reason=F.lit(R.DUPLICATE_ABSTRACT),
        id_col=F.col("corpus_id"),
        raw=F.col("value"),
    )
    best = ranked.where(F.col("_rank") == 1).select(
        "corpus_id", F.col("abstract").alias("_abstract"), "source", "value"
    )
    orphans = R.rejected_rows(
        best.join(papers.select("corpus_id"), "corpus_id", "left_anti"),
        kind="abstract",
        reason=F.lit(R.ABSTRACT_WITHOUT_PAPER),
        id_col=F.col("corpus_id"),
        raw=F.col("value"),
    )
    joined = (
        papers.drop("abstract")
        .join(best.select("corpus_id", "_abstract"), "corpus_id", "left")
        .withColumnRenamed("_abstract", "abstract")
    )
    return joined, duplicates.unionByName(orphans)


def s2orc_edge_candidates(papers: DataFrame, citations_from: str) -> DataFrame:
    """One row per entry of each kept paper's citation list: (citing_raw, cited_raw, source)."""
    exploded = papers.select("corpus_id", "source", F.explode("refs").alias("other"))
    other = F.trim(F.col("other"))
    me = F.col("corpus_id").cast("string")
    if citations_from == "outbound":
        return exploded.select(me.alias("citing_raw"), other.alias("cited_raw"), "source")
    return exploded.select(other.alias("citing_raw"), me.alias("cited_raw"), "source")


def label_edges(candidates: DataFrame, corpus_ids: DataFrame) -> DataFrame:
    """Each candidate edge with `citing`, `cited` (longs) and `reason` (null = kept).

    Checks run in a fixed order and each edge gets the first reason that
    applies: null id, invalid id, self-citation, citing paper not in corpus,
    cited paper not in corpus, duplicate of an edge already kept.
    """
    citing, cited = F.col("citing_raw"), F.col("cited_raw")
    df = (
        candidates.withColumn(
            "_reason",
            F.when(citing.isNull() | cited.isNull() | (citing == "") | (cited == ""), F.lit(R.NULL_ID))
            .when(~R.is_corpus_id(citing) | ~R.is_corpus_id(cited), F.lit(R.INVALID_ID))
            .when(citing.try_cast("long") == cited.try_cast("long"), F.lit(R.SELF_CITATION)),
        )
        .withColumn("citing", citing.try_cast("long"))
        .withColumn("cited", cited.try_cast("long"))
    )
    known_citing = corpus_ids.select(F.col("corpus_id").alias("citing"), F.lit(True).alias("_citing_in"))
    known_cited = corpus_ids.select(F.col("corpus_id").alias("cited"), F.lit(True).alias("_cited_in"))
    df = df.join(known_citing, "citing", "left").join(known_cited, "cited", "left")
    df = df.withColumn(
        "_reason",
        F.when(F.col("_reason").isNotNull(), F.col("_reason"))
        .when(F.col("_citing_in").isNull(), F.lit(R.CITING_NOT_IN_CORPUS))
        .when(F.col("_cited_in").isNull(), F.lit(R.CITED_NOT_IN_CORPUS)),
    )
    # Among the copies of a valid edge the first is kept; the rest are duplicates.
    copy = F.row_number().over(Window.partitionBy("citing", "cited", "_reason").orderBy("source"))
    df = df.withColumn("_copy", copy)
    reason = F.when(F.col("_reason").isNotNull(), F.col("_reason")).when(
        F.col("_copy") > 1, F.lit(R.DUPLICATE_CITATION)
    )
    return df.select("citing", "cited", "citing_raw", "cited_raw", "source", reason.alias("reason"))


def kept_edges(labelled: DataFrame) -> DataFrame:
    return labelled.where(F.col("reason").isNull()).select("citing", "cited")


def rejected_edges(labelled: DataFrame) -> DataFrame:
    rows = labelled.where(F.col("reason").isNotNull())
    return R.rejected_rows(
        rows, kind="citation", reason=F.col("reason"), id_col=F.col("citing_raw"), cited=F.col("cited_raw")
    )


def with_degrees(papers: DataFrame, edges: DataFrame) -> DataFrame:
    """Add `out_degree` and `in_degree` (0 for isolated papers) to papers."""
    out_deg = edges.groupBy(F.col("citing").alias("corpus_id")).agg(F.count("*").cast("int").alias("out_degree"))
    in_deg = edges.groupBy(F.col("cited").alias("corpus_id")).agg(F.count("*").cast("int").alias("in_degree"))
    return (
        papers.join(out_deg, "corpus_id", "left")
        .join(in_deg, "corpus_id", "left")
        .fillna(0, subset=["out_degree", "in_degree"])
    )


def degree_summary(papers_with_degrees: DataFrame) -> dict[str, float]:
    """Node, edge and degree statistics for the manifest (one small aggregation)."""
    deg = papers_with_degrees
    row = deg.agg(
        F.count("*").alias("papers"),
        F.sum("out_degree").alias("edges"),
        F.sum(((F.col("out_degree") + F.col("in_degree")) > 0).cast("int")).alias("graph_nodes"),
        F.max("out_degree").alias("max_out_degree"),
        F.max("in_degree").alias("max_in_degree"),
        F.percentile_approx("out_degree", [0.5, 0.9, 0.99], 10000).alias("out_q"),
        F.percentile_approx("in_degree", [0.5, 0.9, 0.99], 10000).alias("in_q"),
        F.sum(F.col("title").isNull().cast("int")).alias("papers_without_title"),
        F.sum(F.col("abstract").isNull().cast("int")).alias("papers_without_abstract"),
        F.sum((F.col("title").isNull() & F.col("abstract").isNull()).cast("int")).alias("papers_without_text"),
    ).first()
    papers = int(row["papers"] or 0)
    edges = int(row["edges"] or 0)
    out_q, in_q = row["out_q"] or [0, 0, 0], row["in_q"] or [0, 0, 0]
    return {
        "papers": papers,
        "citations": edges,
        "graph_nodes": int(row["graph_nodes"] or 0),
        "isolated_papers": papers - int(row["graph_nodes"] or 0),
        "mean_out_degree": round(edges / papers, 4) if papers else 0.0,
        "max_out_degree": int(row["max_out_degree"] or 0),
        "max_in_degree": int(row["max_in_degree"] or 0),
        "out_degree_p50_p90_p99": [int(x) for x in out_q],
        "in_degree_p50_p90_p99": [int(x) for x in in_q],
        "papers_without_title": int(row["papers_without_title"] or 0),
        "papers_without_abstract": int(row["papers_without_abstract"] or 0),
        "papers_without_text": int(row["papers_without_text"] or 0),
    }


def degree_histogram(papers_with_degrees: DataFrame) -> DataFrame:
    """(direction, degree, papers): how many papers have each in- and out-degree."""
    out_h = (
        papers_with_degrees.groupBy(F.col("out_degree").alias("degree")).count().withColumn("direction", F.lit("out"))
    )
    in_h = papers_with_degrees.groupBy(F.col("in_degree").alias("degree")).count().withColumn("direction", F.lit("in"))
    return out_h.unionByName(in_h).select("direction", "degree", F.col("count").alias("papers"))
