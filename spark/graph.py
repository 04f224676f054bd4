"""Citation-graph transforms: deduplicate papers, clean edges, count degrees.

Every function is `DataFrame(s) -> DataFrame(s)`; nothing here reads or
writes files. Cleaning follows SciNCL (docs/reference.md §2): directed edges citing ->
cited, no self-loops, no duplicates, both ends in the corpus. Each dropped
row or edge comes back in a `rejected` frame with its reason so the stage can
count and keep it (quarantine, never a silent drop). The graph's statistics for the
manifest are spark/graph_stats.py's.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from citeflow.spark import readers as R
from citeflow.spark.graph_stats import lossy_mask

PAPERS_COLUMNS = ["corpus_id", *R.PAPER_ATTRIBUTES]
# What `stage_papers` keeps of every input line (written once to staging, before any shuffle).
STAGED_COLUMNS = ["id_raw", *PAPERS_COLUMNS, "refs", "source", "reason", "raw"]
# Light columns the deduplication ranks on (the staging's heavy text columns are never shuffled).
RANK_COLUMNS = ["_row", "corpus_id", "_score", "_refs", "_hash"]


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


def key_reads() -> Column:
    """Whether a parsed line's corpus id reads, whatever else is wrong with it (`bad_field_type`: a field of the
    wrong type). Such a line names its key in a release diff (spark/incremental.py): the new release's record of
    that key is this line, so a full build of the release holds no usable record of it from this line either."""
    return R.id_error(F.col("id_raw")).isNull()


def split_keyed(lines: DataFrame, kind: str) -> tuple[DataFrame, DataFrame]:
    """(delete lines whose corpus id reads, with `corpus_id`; rejected rows of the others). A delete line needs
    its key only: a field of the wrong type beside it changes nothing of what it deletes."""
    keyed = key_reads()
    bad = R.rejected_rows(
        lines.where(~keyed), kind=kind, reason=unusable_reason(), id_col=F.col("id_raw"), raw=F.col("value")
    )
    return lines.where(keyed).withColumn("corpus_id", F.col("id_raw").try_cast("long")), bad


def completeness(df: DataFrame) -> DataFrame:
    """How complete a paper record is: one point per filled field, plus citations."""
    filled = [
        F.col(c).isNotNull().cast("int")
        for c in ("title", "abstract", "year", "venue", "doi", "pubmed_id", "arxiv_id", "mag_id")
    ]
    score = sum(filled[1:], filled[0]) + (F.size("fields_of_study") > 0).cast("int") + (F.size("refs") > 0).cast("int")
    return df.withColumn("_score", score)


def stage_papers(papers: DataFrame) -> DataFrame:
    """One row per input line, computed in the pass that parses it: no shuffle.

    `STAGED_COLUMNS` plus what deduplication ranks on (`RANK_COLUMNS`: a row
    number `_row` unique in this staging, the completeness `_score`, the
    citation count `_refs` and `_hash`, a 64-bit hash of the raw line) and
    `_no_title` / `_no_abstract` / `_lossy` (`graph_stats.lossy_mask`) for the manifest. `reason` is set for lines
    that are unusable (parse or id errors; `corpus_id` null); `raw` keeps every
    line's text, since which records are duplicates is known only after all
    lines are read.
    """
    reason = unusable_reason()
    return completeness(papers).select(
        *[c for c in STAGED_COLUMNS if c not in ("corpus_id", "reason", "raw")],
        F.when(reason.isNull(), F.col("id_raw").try_cast("long")).alias("corpus_id"),
        reason.alias("reason"),
        F.col("value").alias("raw"),
        F.monotonically_increasing_id().alias("_row"),
        "_score",
        F.size("refs").alias("_refs"),
        F.xxhash64("value").alias("_hash"),
        F.col("title").isNull().alias("_no_title"),
        F.col("abstract").isNull().alias("_no_abstract"),
        lossy_mask(papers.columns).alias("_lossy"),
    )


def duplicate_rows(staged: DataFrame) -> DataFrame:
    """`_row` and `corpus_id` of every usable record that another record of its id beats.

    Among records of the same id the most complete is kept; ties break on
    more citations, then on the hash of the raw line, so the choice depends
    on neither file order nor partitioning (byte-identical lines are
    interchangeable). Only the light `RANK_COLUMNS` are shuffled.
    """
    ranked = (
        staged.where(F.col("reason").isNull())
        .select(*RANK_COLUMNS)
        .withColumn(
            "_rank",
            F.row_number().over(
                Window.partitionBy("corpus_id").orderBy(
                    F.col("_score").desc(), F.col("_refs").desc(), F.col("_hash"), F.col("_row")
                )
            ),
        )
    )
    return ranked.where(F.col("_rank") > 1).select("_row", "corpus_id")


def kept_papers(staged: DataFrame, duplicates: DataFrame, *, broadcast: bool = True) -> DataFrame:
    """The kept record of every corpus id (staging columns, `reason` and `raw` dropped)."""
    losers = F.broadcast(duplicates.select("_row")) if broadcast else duplicates.select("_row")
    usable = staged.where(F.col("reason").isNull())
    return usable.join(losers, "_row", "left_anti").drop("reason", "raw")


def rejected_papers(staged: DataFrame, duplicates: DataFrame, *, broadcast: bool = True) -> DataFrame:
    """Unusable lines and beaten duplicates, in the `rejected` layout with the raw line."""
    losers = duplicates.select("_row", F.lit(R.DUPLICATE_PAPER).alias("_duplicate"))
    rows = staged.join(F.broadcast(losers) if broadcast else losers, "_row", "left").where(
        F.col("reason").isNotNull() | F.col("_duplicate").isNotNull()
    )
    return R.rejected_rows(
        rows,
        kind="paper",
        reason=F.coalesce(F.col("reason"), F.col("_duplicate")),
        id_col=F.col("id_raw"),
        raw=F.col("raw"),
    )


# What became of each S2AG abstract line (`stage_abstracts`).
BEST_ABSTRACT, UNUSABLE_ABSTRACT = "best", "unusable"


def abstract_order() -> list[Column]:
    """The order that ranks one id's abstracts: the longest first, then by a hash of the line, then the line."""
    return [F.length("abstract").desc_nulls_last(), F.xxhash64("value"), F.col("value")]


def stage_abstracts(abstracts: DataFrame, corpus_ids: DataFrame, *, broadcast: bool = True) -> DataFrame:
    """S2AG: every parsed abstract line (`readers.s2ag_abstracts`) with what becomes of it, decided in the
    pass that parses it, for the stage to write once to staging, so that the rejected rows need not parse
    the lines again.

    `_fate` is `best` (the first of its id in `abstract_order`, the id among `corpus_ids`: the paper's
    abstract), `unusable` (parse or id error, `reason`), `duplicate_abstract` (ranked below another of its
    id) or `abstract_without_paper` (ranked first, its id not a paper). Only a best row keeps `abstract`,
    only a rejected one keeps `value` (the raw line). `broadcast` ships the corpus ids to the abstracts.
    """
    reason = unusable_reason()
    rows = abstracts.withColumn("reason", reason).withColumn(
        "corpus_id", F.when(reason.isNull(), F.col("id_raw").try_cast("long"))
    )
    usable = F.col("reason").isNull()
    # One key ranks and looks up: a usable row's corpus id (never negative, `CORPUS_ID_PATTERN`); an unusable row,
    # which has no id and no use for a rank, a negative number from its line's hash, so that it meets no id and is
    # spread over the window's partitions rather than gathered in one (a shard of garbage would be one task).
    # Without a broadcast, the look-up joins on the key the window is partitioned by, so Spark moves only the
    # corpus ids to the abstracts: joined on the corpus id instead, every abstract's text was shuffled a second
    # time, and above `spark.broadcast_rows` that second shuffle and its sort cost as much as the ranking.
    key = F.coalesce(F.col("corpus_id"), -(F.xxhash64("value").bitwiseAND(F.lit(2**63 - 1))) - 1)
    group = Window.partitionBy("_key").orderBy(*abstract_order())
    ranked = rows.withColumn("_key", key).withColumn("_rank", F.row_number().over(group))
    known = corpus_ids.select(F.col("corpus_id").alias("_key"), F.lit(True).alias("_known"))
    joined = ranked.join(F.broadcast(known) if broadcast else known, "_key", "left")
    fate = (
        F.when(~usable, F.lit(UNUSABLE_ABSTRACT))
        .when(F.col("_rank") > 1, F.lit(R.DUPLICATE_ABSTRACT))
        .when(F.col("_known").isNull(), F.lit(R.ABSTRACT_WITHOUT_PAPER))
        .otherwise(F.lit(BEST_ABSTRACT))
    )
    best = fate == BEST_ABSTRACT
    return joined.select(
        "corpus_id",
        "id_raw",
        F.when(best, F.col("abstract")).alias("abstract"),
        "source",
        F.when(~best, F.col("value")).alias("value"),
        "reason",
        fate.alias("_fate"),
    )


def attach_staged_abstracts(papers: DataFrame, staged: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(papers with their abstract, rejected abstract rows) from `stage_abstracts`' rows: each id's best
    abstract joined onto its paper; unusable lines, duplicates and abstracts without a paper rejected
    with the raw line."""
    best = staged.where(F.col("_fate") == BEST_ABSTRACT).select("corpus_id", F.col("abstract").alias("_abstract"))
    joined = papers.drop("abstract").join(best, "corpus_id", "left").withColumnRenamed("_abstract", "abstract")
    rejected = staged.where(F.col("_fate") != BEST_ABSTRACT)
    unusable = F.col("_fate") == UNUSABLE_ABSTRACT
    return joined, R.rejected_rows(
        rejected,
        kind="abstract",
        reason=F.when(unusable, F.col("reason")).otherwise(F.col("_fate")),
        id_col=F.when(unusable, F.col("id_raw")).otherwise(F.col("corpus_id").cast("string")),
        raw=F.col("value"),
    )


def best_abstracts(ranked: DataFrame, papers: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(papers with the abstract ranked first for their id, rejected rows): abstracts ranked below first
    (`_rank` > 1) and first-ranked abstracts of ids not among `papers`. `ranked` has `corpus_id`,
    `abstract`, `source`, `value` and `_rank` (spark/incremental.py; a full build decides the same in
    `stage_abstracts`)."""
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


def _with_id_checks(edges: DataFrame) -> DataFrame:
    """`citing`, `cited` (longs) and `_reason`: the first of null id, invalid id, self-citation that applies."""
    citing, cited = F.col("citing_raw"), F.col("cited_raw")
    return (
        edges.withColumn(
            "_reason",
            F.when(citing.isNull() | cited.isNull() | (citing == "") | (cited == ""), F.lit(R.NULL_ID))
            .when(~R.is_corpus_id(citing) | ~R.is_corpus_id(cited), F.lit(R.INVALID_ID))
            .when(citing.try_cast("long") == cited.try_cast("long"), F.lit(R.SELF_CITATION)),
        )
        .withColumn("citing", citing.try_cast("long"))
        .withColumn("cited", cited.try_cast("long"))
    )


def label_edges(candidates: DataFrame, corpus_ids: DataFrame, *, broadcast: bool = False) -> DataFrame:
    """Each candidate edge with `citing`, `cited` (longs) and `reason` (null = kept).

    Checks run in a fixed order and each edge gets the first reason that
    applies: null id, invalid id, self-citation, citing paper not in corpus,
    cited paper not in corpus, duplicate of an edge already kept. `broadcast`
    looks the ends up in a broadcast copy of `corpus_ids` instead of shuffling
    both sides.
    """
    df = _with_id_checks(candidates)
    for end in ("citing", "cited"):
        ids = corpus_ids.select(F.col("corpus_id").alias(end), F.lit(True).alias(f"_{end}_in"))
        df = df.join(F.broadcast(ids) if broadcast else ids, end, "left")
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


def label_s2orc_edges(
    papers: DataFrame, corpus_ids: DataFrame, citations_from: str, *, broadcast: bool = False
) -> DataFrame:
    """`label_edges` for S2ORC's per-paper citation lists, without a shuffle (when `broadcast`).

    One end of every candidate edge is the kept paper whose list it comes from, and each corpus id has
    one kept paper, so all copies of an edge come from the same list: the first copy in list order is
    kept and later ones are duplicates, decided inside the row (SciNCL's cleaning, docs/reference.md §2, in the order
    of `label_edges`: null id, invalid id, self-citation, other end not in the corpus, duplicate). Only
    the other end's membership in `corpus_ids` is looked up, in a broadcast copy when `broadcast`.
    """
    other_id = lambda r: F.when(R.is_corpus_id(F.trim(r)), F.trim(r).try_cast("long"))  # noqa: E731
    with_firsts = papers.select("corpus_id", "source", "refs", F.transform("refs", other_id).alias("_ids")).select(
        "corpus_id",
        "source",
        F.arrays_zip(
            F.col("refs"), F.transform("_ids", lambda x, i: F.array_position("_ids", x) == i + 1).alias("_first")
        ).alias("_entries"),
    )
    exploded = with_firsts.select("corpus_id", "source", F.explode("_entries").alias("_e"))
    other, me = F.trim(F.col("_e.refs")), F.col("corpus_id").cast("string")
    outbound = citations_from == "outbound"
    edges = exploded.select(
        (me if outbound else other).alias("citing_raw"),
        (other if outbound else me).alias("cited_raw"),
        "source",
        F.col("_e._first").alias("_first"),
    )
    edges = _with_id_checks(edges)
    end = "cited" if outbound else "citing"
    ids = corpus_ids.select(F.col("corpus_id").alias(end), F.lit(True).alias("_in"))
    edges = edges.join(F.broadcast(ids) if broadcast else ids, end, "left")
    missing = R.CITED_NOT_IN_CORPUS if outbound else R.CITING_NOT_IN_CORPUS
    reason = (
        F.when(F.col("_reason").isNotNull(), F.col("_reason"))
        .when(F.col("_in").isNull(), F.lit(missing))
        .when(~F.col("_first"), F.lit(R.DUPLICATE_CITATION))
    )
    return edges.select("citing", "cited", "citing_raw", "cited_raw", "source", reason.alias("reason"))


def light_labels(labelled: DataFrame) -> DataFrame:
    """Labelled edges with what `rejected_edges` needs (raw ids, source) kept for rejected edges only."""
    rejected = F.col("reason").isNotNull()
    return labelled.select(
        "citing",
        "cited",
        *[F.when(rejected, F.col(c)).alias(c) for c in ("citing_raw", "cited_raw", "source")],
        "reason",
    )


def kept_edges(labelled: DataFrame) -> DataFrame:
    return labelled.where(F.col("reason").isNull()).select("citing", "cited")


def rejected_edges(labelled: DataFrame) -> DataFrame:
    rows = labelled.where(F.col("reason").isNotNull())
    return R.rejected_rows(
        rows, kind="citation", reason=F.col("reason"), id_col=F.col("citing_raw"), cited=F.col("cited_raw")
    )


def degrees(edges: DataFrame) -> DataFrame:
    """(corpus_id, out_degree, in_degree) of every paper with an edge, in one aggregation."""
    ends = edges.select(F.col("citing").alias("corpus_id"), F.lit(1).alias("_out"), F.lit(0).alias("_in")).unionByName(
        edges.select(F.col("cited").alias("corpus_id"), F.lit(0).alias("_out"), F.lit(1).alias("_in"))
    )
    return ends.groupBy("corpus_id").agg(
        F.sum("_out").cast("int").alias("out_degree"), F.sum("_in").cast("int").alias("in_degree")
    )


def with_degrees(papers: DataFrame, edges: DataFrame, *, broadcast: bool = False) -> DataFrame:
    """Add `out_degree` and `in_degree` (0 for isolated papers) to papers.

    `broadcast` ships the degrees (one light row per paper with an edge) to the papers instead of
    shuffling the papers' text to the degrees.
    """
    deg = degrees(edges)
    return papers.join(F.broadcast(deg) if broadcast else deg, "corpus_id", "left").fillna(
        0, subset=["out_degree", "in_degree"]
    )
