"""Map benchmark paper ids to corpus ids in Spark: the paper-ids table's lines parsed, looked up and counted, and
the mapping cascade over the graph's papers.

Transforms only (docs/reference.md §2). The mapping is a cascade; each id takes the first
method that finds it, and the method is recorded:

1. `corpus_id`: the id is already a corpus id (digits).
2. `sha`: a 40-hex Semantic Scholar id found in the `paper-ids` table.
3. `doi`, `pubmed`, `arxiv`: external ids the benchmark states, matched
   against the snapshot's papers (DOIs case-insensitively).
4. `title`: the folded title (accents, case, punctuation, white space)
   equals a snapshot paper's folded title.

Where the inputs leave an id in doubt it maps to every paper they name (`mapping.METHODS`): a sha the paper-ids
table gives several corpus ids (`sha_conflict`), a key 2 to `most_shared` papers share (`<step>_shared`), an id
with several titles (`title_conflict`, every title's papers); a key more papers share maps nothing
(`unmapped_reason` `<step>_too_common`).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from citeflow.jobs.filter_leakage.mapping import (
    COUNTED,
    EXTERNAL_STEPS,
    METHODS,
    NO_MATCH,
    NO_PAIR,
    SHA_CONFLICT,
    SHARED,
    STEP_OF,
    STEPS,
    TITLE_CONFLICT,
    USABLE,
    key_column,
    later_steps,
    mapped_rows,
    too_common,
)
from citeflow.jobs.filter_leakage.transforms import (
    cascade_key,
    papers_sharing_keys,
    sharing_keys,
    with_folded_title,
    with_keys,
)

PAPER_IDS_SCHEMA = T.StructType(
    [
        T.StructField("sha", T.StringType()),
        T.StructField("corpusid", T.StringType()),
        T.StructField("primary", T.BooleanType()),
        T.StructField("_corrupt_record", T.StringType()),
    ]
)


def paper_id_pairs(parsed: DataFrame) -> DataFrame:
    """(sha, corpus_id) from parsed `paper-ids` lines (`parse_lines` rows); a line without one gives no row
    (the stage's path: `paper_id_lines`, whose lines `sha_lookup` looks up and counts).

    A line gives its pair, or nothing, in one projection (a 1-element array or null, inlined): a filter
    above the parse would be pushed below it with `from_json` copied into it once per field it tests,
    parsing every line three times; a one-row generator between the two is slower.
    """
    sha, corpus_id, usable = _pair_parts()
    pair = F.struct(sha.alias("sha"), corpus_id.alias("corpus_id"))
    return parsed.select(F.inline(F.when(usable, F.array(pair))))  # a null array inlines to no row


def _pair_parts() -> tuple[Column, Column, Column]:
    """A parsed paper-ids line's sha (lower case, trimmed), corpus id (a long) and whether both are usable."""
    rec = F.col("rec")
    sha = F.lower(F.trim(rec.sha))
    corpus_id = F.trim(rec.corpusid).try_cast("long")
    return sha, corpus_id, sha.rlike("^[0-9a-f]{40}$") & corpus_id.isNotNull()


PAPER_ID_LINES_SCHEMA = "key string, corpus_id long, reason string"  # `paper_id_lines`' columns


def paper_id_lines(parsed: DataFrame) -> DataFrame:
    """One row per parsed paper-ids line (`parse_lines` rows), as filter_leakage stores them (its
    `paper_id_lines` table, which the next release's diff is applied to): `key` (the line's `sha` as written,
    its primary key, which a diff's records name; null for a line that is no JSON object), `corpus_id` (where
    the line gives a (sha, corpus id) pair, else null) and `reason` (null where it gives one; else
    `parse_lines`' blank_line, malformed_json, bad_field_type, or `NO_PAIR`). One projection from the parse:
    Spark keeps `from_json` in it once (a filter would copy it, see `paper_id_pairs`)."""
    _, corpus_id, usable = _pair_parts()
    ok = F.coalesce(usable, F.lit(False))
    return parsed.select(
        F.col("rec.sha").alias("key"),
        F.when(ok, corpus_id).alias("corpus_id"),
        F.when(~ok, F.coalesce(F.col("parse_error"), F.lit(NO_PAIR))).alias("reason"),
    )


def sha_lookup(lines: DataFrame, shas: DataFrame, *, broadcast: bool = True) -> DataFrame:
    """One pass over the paper-ids table's lines (`paper_id_lines` rows) that both looks up and counts: rows
    (`key`, `corpus_id`, `lines`).

    - `key` a sha of `shas` (the spellings the benchmark's ids can have, `mapping.sha_candidates`):
      one row per corpus id the table gives it, with its lines, as `id_steps` groups them (`mapping.first_steps`
      takes these; several rows are a conflict, `mapping.paper_ids_counts` counts them);
    - `key` `!usable`: how many other lines give a pair (shas no benchmark id has);
    - `key` `!<reason>`: how many lines give none, by reason (`parse_lines`' blank_line, malformed_json,
      bad_field_type, or `NO_PAIR`).

    So no paper-ids line is dropped uncounted (`mapping.paper_ids_counts` reads the counts): the
    lines a pair came from are looked up and grouped as `id_steps` groups them, and the others are counted in
    the same grouping. `broadcast` ships `shas` to the tasks.
    """
    rows = lines.select(F.lower(F.trim(F.col("key"))).alias("sha"), "corpus_id", F.col("reason").alias("_reason"))
    small = F.broadcast if broadcast else (lambda df: df)
    wanted = small(shas.select("sha", F.lit(True).alias("_wanted")))
    key = (
        F.when(F.col("_reason").isNotNull(), F.concat(F.lit(COUNTED), F.col("_reason")))
        .when(F.col("_wanted"), F.col("sha"))
        .otherwise(F.lit(COUNTED + USABLE))
    )
    corpus_id = F.when(F.col("_reason").isNull() & F.col("_wanted"), F.col("corpus_id"))
    return (
        rows.join(wanted, "sha", "left")
        .groupBy(key.alias("key"), corpus_id.alias("corpus_id"))
        .agg(F.count("*").alias("lines"))
    )


def id_steps(ids: DataFrame, paper_ids: DataFrame | None, shas: DataFrame | None = None) -> DataFrame:
    """(id, corpus_id, method) of every id for the cascade's two steps that read no papers: `corpus_id` (the
    id is digits), else `sha` (the id is a sha the `paper-ids` pairs know; None: no table), a row for each
    corpus id the pairs give the sha (`sha_conflict` where they give several); method and corpus_id are null
    for the ids neither maps.

    `shas` (a `sha` column) may name the shas to look up, any superset of the ids' lower-cased, trimmed
    spellings (`mapping.sha_candidates`, made in the driver); by default they are computed here.
    (filter_leakage takes these steps in its driver instead: `mapping.first_steps`.)
    """
    trimmed = F.trim("id")
    digits = F.when(trimmed.rlike("^[0-9]{1,18}$"), trimmed.try_cast("long"))
    frame = ids.select("id", digits.alias("_cid"), F.lower(trimmed).alias("_sha"))
    by_id = F.when(F.col("_cid").isNotNull(), F.lit("corpus_id"))
    if paper_ids is None:
        return frame.select("id", F.col("_cid").alias("corpus_id"), by_id.alias("method"))
    # The table should be a function sha -> corpusid, but dirt happens: a sha with several corpus ids names
    # them all. Only the shas the ids can be are grouped (the whole table was shuffled before: a release's
    # every paper).
    if shas is None:
        shas = frame.where(F.col("_cid").isNull()).select(F.col("_sha").alias("sha")).distinct()
    pairs = paper_ids.join(shas, "sha", "left_semi").select("sha", F.col("corpus_id").alias("_by_sha")).distinct()
    by_sha = pairs.join(pairs.groupBy("sha").agg(F.count("*").alias("_n")), "sha")
    return frame.join(by_sha, frame._sha == by_sha.sha, "left").select(
        "id",
        F.coalesce("_cid", "_by_sha").alias("corpus_id"),
        by_id.when(F.col("_n") > 1, F.lit(SHA_CONFLICT))
        .when(F.col("_by_sha").isNotNull(), F.lit("sha"))
        .alias("method"),
    )


def map_ids(
    ids: DataFrame,
    papers: DataFrame,
    paper_ids: DataFrame | None,
    *,
    match_titles: bool = True,
    conflicts: DataFrame | None = None,
    most_shared: int = 5,
    materialize: Callable[[DataFrame, str], DataFrame] = lambda df, name: df,
) -> DataFrame:
    """`corpus_id`, `method`, `in_snapshot` and `unmapped_reason` of distinct benchmark ids
    (`mapping.distinct_ids` rows: titles folded there), one row per id and paper it maps to (one row, corpus_id
    null, for an id it leaves unmapped): the whole cascade in Spark, the oracle `map_ids_narrow` is tested
    against (`mapping.later_steps` says what each step does).

    `papers` is the snapshot's papers table (with a `_folded` column, the
    titles' fold is taken from it); `paper_ids` is (sha, corpus_id)
    pairs or None when no table is given; `conflicts` the (id, folded_title) rows of the ids with several titles
    (`mapping.title_conflicts`). Every step of the cascade reads the
    ids (give a table, not a plan to recompute), and the title matches feed
    two steps: `materialize(frame, name)` (the stage writes the frame to its
    staging folder and reads it back) computes them once instead of once per
    use.
    """
    steps = [id_steps(ids, paper_ids).where(F.col("method").isNotNull())]
    unmatchable = []

    def step(keys: DataFrame, wanted: DataFrame, method: str) -> None:
        """Each id of `wanted` (id, _key) with every paper of `keys` (corpus_id, _key) that has its key."""
        counts = keys.groupBy("_key").agg(F.count("*").alias("_n"))
        found = materialize(wanted.join(keys, "_key").join(counts, "_key").select("id", "corpus_id", "_n"), method)
        named = F.when(F.col("_n") == 1, F.lit(method)).otherwise(F.lit(SHARED[method]))
        steps.append(found.where(F.col("_n") <= most_shared).select("id", "corpus_id", named.alias("method")))
        common = found.where(F.col("_n") > most_shared).select("id", F.lit(too_common(method)).alias("_reason"))
        unmatchable.append(common)

    for method, column in EXTERNAL_STEPS:  # the benchmark's and the papers' columns have the same names
        keys = papers.where(F.col(column).isNotNull()).select("corpus_id", cascade_key(column).alias("_key"))
        step(keys, ids.where(F.col(column).isNotNull()).select("id", cascade_key(column).alias("_key")), method)

    several = conflicts if conflicts is not None else ids.sparkSession.createDataFrame([], "id string")
    conflict_rows = None
    if match_titles:
        if "_folded" in papers.columns:  # folded already (`papers_sharing_keys`)
            folded_papers = papers.select("corpus_id", "_folded")
        else:
            titled = papers.where(F.col("title").isNotNull()).select("corpus_id", "title")
            folded_papers = with_folded_title(titled).drop("title")
        keys = folded_papers.where(F.col("_folded").isNotNull()).select("corpus_id", F.col("_folded").alias("_key"))
        single = ids.where(F.col("folded_title").isNotNull()).join(several.select("id"), "id", "left_anti")
        step(keys, single.select("id", F.col("folded_title").alias("_key")), "title")
        if conflicts is not None:
            counts = keys.groupBy("_key").agg(F.count("*").alias("_n"))
            found = conflicts.select("id", F.col("folded_title").alias("_key")).join(keys, "_key").join(counts, "_key")
            conflict_rows = found.where(F.col("_n") <= most_shared).select(
                "id", "corpus_id", F.lit(TITLE_CONFLICT).alias("method")
            )
            unmatchable.append(
                found.where(F.col("_n") > most_shared).select("id", F.lit(too_common("title")).alias("_reason"))
            )

    candidates = steps[0]
    for more in steps[1:]:
        candidates = candidates.unionByName(more)
    step_of = F.create_map(*[x for m in METHODS for x in (F.lit(m), F.lit(STEP_OF[m]))])
    order = F.array_position(F.array(*[F.lit(m) for m in METHODS]), F.col("method"))
    # every paper of each id's first step that maps it, then its titles' papers
    chosen = (
        candidates.withColumn("_step", step_of[F.col("method")])
        .withColumn("_first", F.min("_step").over(Window.partitionBy("id")))
        .where(F.col("_step") == F.col("_first"))
        .select("id", "corpus_id", "method")
    )
    if conflict_rows is not None:
        chosen = chosen.unionByName(conflict_rows)
    best = (
        chosen.withColumn("_rank", F.row_number().over(Window.partitionBy("id", "corpus_id").orderBy(order)))
        .where("_rank = 1")
        .select("id", "corpus_id", "method")
    )
    mapped = ids.select("id").join(best, "id", "left")
    reasons = None
    if unmatchable:
        rank = F.array_position(F.array(*[F.lit(too_common(step)) for step in STEPS]), F.col("_reason"))
        reasons = unmatchable[0]
        for more in unmatchable[1:]:
            reasons = reasons.unionByName(more)
        reasons = (
            reasons.withColumn("_rank", F.row_number().over(Window.partitionBy("id").orderBy(rank)))
            .where("_rank = 1")
            .select("id", "_reason")
        )
        mapped = mapped.join(reasons, "id", "left")
    else:
        mapped = mapped.withColumn("_reason", F.lit(None).cast("string"))
    known = papers.select(F.col("corpus_id").alias("_cid"), F.lit(True).alias("in_snapshot"))
    return mapped.join(known, mapped.corpus_id == known._cid, "left").select(
        "id",
        "corpus_id",
        "method",
        F.coalesce("in_snapshot", F.lit(False)).alias("in_snapshot"),
        F.when(F.col("method").isNull(), F.coalesce(F.col("_reason"), F.lit(NO_MATCH))).alias("unmapped_reason"),
    )


def map_ids_narrow(
    ids: DataFrame,
    papers: DataFrame,
    paper_ids: DataFrame | None,
    *,
    match_titles: bool = True,
    materialize: Callable[[DataFrame, str], DataFrame] = lambda df, name: df,
    broadcast_keys: bool = False,
    shas: DataFrame | None = None,
    first: DataFrame | None = None,
    from_arrow: Callable[[pa.Table, str], DataFrame] | None = None,
    paper_keys: DataFrame | None = None,
    conflicts: pa.Table | None = None,
    most_shared: int = 5,
) -> DataFrame:
    """`map_ids`, with the steps that read the papers run only where they can decide something (`shas`: see
    `id_steps`; `first`: those steps' rows, made already, `mapping.first_steps`; `paper_keys`: the
    papers' keys, made already, `paper_key_rows` of `papers`: filter_leakage's `paper_keys` table;
    `conflicts`: `mapping.title_conflicts` rows, the titles of the ids that have several).

    The cascade takes the first method that maps an id, and the first two (`corpus_id`, `sha`) read no papers: they
    run on every id first. The ids they leave unmapped go through the later steps, on only the papers that share a
    key with them (`papers_sharing_keys`): a key's uniqueness and a title's ambiguity are counted over all the
    papers that have that key, which are all there. Those rows (bounded by the benchmark) come to the driver, with
    their keys (the papers' by `paper_key_rows`, the ids' by `with_keys`), and `mapping.later_steps` takes
    the steps; `from_arrow(table, name)` hands its rows back to Spark (default: `createDataFrame`; the stage writes
    them to its staging folder). `in_snapshot` is then looked up among all papers. The result equals `map_ids(ids,
    papers, paper_ids, ...)` (tests/unit/spark/test_leakage.py), for the cost of a scan of the papers' light columns
    instead of groupings over every paper.
    """
    if from_arrow is None:
        from_arrow = lambda table, name: ids.sparkSession.createDataFrame(table)  # noqa: E731
    if first is None:
        first = materialize(id_steps(ids, paper_ids, shas), "first")
    # read by every branch of the key search and by the later steps: computed once
    rest = materialize(
        with_keys(ids.join(first.where(F.col("method").isNull()).select("id"), "id", "left_semi")), "unmapped"
    )
    # every title of the ids with several is looked up too, whatever the first steps found
    several = match_titles and conflicts is not None and conflicts.num_rows > 0
    titles = from_arrow(conflicts, "title_conflicts") if several else None
    if paper_keys is None:
        found = papers_sharing_keys(
            papers, rest, match_titles=match_titles, broadcast=broadcast_keys, materialize=materialize, titles=titles
        )
    else:
        found = sharing_keys(paper_keys, rest, match_titles=match_titles, broadcast=broadcast_keys, titles=titles)
    sharing = materialize(found, "sharing_papers")
    keys = [key_column(c) for _, c in EXTERNAL_STEPS]
    title = ["_folded"] if match_titles else []
    sharing_rows = sharing.select("corpus_id", *keys, *title).toArrow()
    later = later_steps(
        rest.select("id", *keys, "folded_title").toArrow(),
        sharing_rows,
        match_titles=match_titles,
        conflicts=conflicts,
        most_shared=most_shared,
    )
    # `in_snapshot`: the corpus ids the first steps name, looked up in the papers' id column (without
    # shuffling it when `broadcast_keys`), and the sharing papers, where the later steps find theirs
    small = F.broadcast if broadcast_keys else (lambda df: df)
    named = first.where(F.col("corpus_id").isNotNull()).select(F.col("corpus_id").alias("_cid"))
    found = papers.select(F.col("corpus_id").alias("_cid")).join(small(named), "_cid", "left_semi").toArrow()
    return from_arrow(mapped_rows(first.toArrow(), later, [found["_cid"], sharing_rows["corpus_id"]]), "mapped")
