"""Map benchmark paper ids to corpus ids and take benchmark papers out of the graph.

Transforms only (docs/reference.md §2). The mapping is a cascade; each id takes the first
method that finds it, and the method is recorded:

1. `corpus_id`: the id is already a corpus id (digits).
2. `sha`: a 40-hex Semantic Scholar id found in the `paper-ids` table.
3. `doi`, `pubmed`, `arxiv`: external ids the benchmark states, matched
   against the snapshot's papers (DOIs case-insensitively).
4. `title`: the folded title (accents, case, punctuation, white space)
   equals exactly one snapshot paper's folded title. A title shared by
   several papers is ambiguous and never mapped (`unmapped_reason`
   `ambiguous_title`).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from citeflow.text import fold_title
from jobs.filter_leakage.mapping import (
    AMBIGUOUS_TITLE,
    COUNTED,
    EXTERNAL_STEPS,
    METHODS,
    NO_MATCH,
    NO_PAIR,
    USABLE,
    key_column,
    later_steps,
    mapped_rows,
)

PAPER_IDS_SCHEMA = T.StructType(
    [
        T.StructField("sha", T.StringType()),
        T.StructField("corpusid", T.StringType()),
        T.StructField("primary", T.BooleanType()),
        T.StructField("_corrupt_record", T.StringType()),
    ]
)


@F.pandas_udf(T.StringType())
def fold_title_udf(titles):  # pandas Series -> Series; the fold the generator's truth uses too
    return titles.map(fold_title, na_action="ignore")


def with_folded_title(df: DataFrame, title: str = "title", out: str = "_folded") -> DataFrame:
    """`df` (rows with a non-null `title`) plus `out`: `citeflow.text.fold_title` of the title.

    ASCII titles (nearly all) are folded by Spark's own functions, the rest by the Python UDF: on ASCII
    the fold is lower case, every run of characters outside [a-z0-9] one space, trimmed, empty to null
    (the equivalence `citeflow.text.fold_titles` uses too). The two kinds are split into two frames,
    since Spark evaluates a Python UDF on every row of its input whatever condition surrounds it.
    """
    col = F.col(title)
    native = df.where(is_ascii(col)).withColumn(out, ascii_fold(col))
    other = df.where(~is_ascii(col)).withColumn(out, fold_title_udf(col))
    return native.unionByName(other)


def is_ascii(col: Column) -> Column:
    return F.length(col) == F.octet_length(col)


def ascii_fold(col: Column) -> Column:
    """`fold_title` of an ASCII title in Spark's own functions (null when nothing is left).

    `nullif` evaluates the fold once, where `when(folded != "", folded)` would run the regular expression
    twice per title."""
    folded = F.trim(F.regexp_replace(F.lower(col), "[^a-z0-9]+", " "))
    return F.nullif(folded, F.lit(""))


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
      the least corpus id the table gives it, as `id_steps` groups them (`mapping.first_steps`
      takes these);
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
    return (
        rows.join(wanted, "sha", "left")
        .groupBy(key.alias("key"))
        .agg(F.min("corpus_id").alias("corpus_id"), F.count("*").alias("lines"))
    )


def cascade_key(column: str) -> Column:
    """An external id as the cascade compares it: lower-cased, spaces trimmed (DOIs case-insensitively)."""
    return F.lower(F.trim(F.col(column)))


def key_columns() -> list[Column]:
    """Each external id's `cascade_key`, named as `mapping.later_steps` reads it (`key_column`)."""
    return [cascade_key(c).alias(key_column(c)) for _, c in EXTERNAL_STEPS]


def with_keys(frame: DataFrame) -> DataFrame:
    """`frame` with each external id's `cascade_key` beside it (`key_columns`), for the steps that
    `mapping.later_steps` takes in the driver."""
    return frame.select("*", *key_columns())


def id_steps(ids: DataFrame, paper_ids: DataFrame | None, shas: DataFrame | None = None) -> DataFrame:
    """(id, corpus_id, method) of every id for the cascade's two steps that read no papers: `corpus_id` (the
    id is digits), else `sha` (the id is a sha the `paper-ids` pairs know; None: no table); method and
    corpus_id are null for the ids neither maps.

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
    # One corpus id per sha: the table is a function sha -> corpusid, but dirt happens. Only the shas the
    # ids can be are grouped (the whole table was shuffled before: a release's every paper).
    if shas is None:
        shas = frame.where(F.col("_cid").isNull()).select(F.col("_sha").alias("sha")).distinct()
    by_sha = paper_ids.join(shas, "sha", "left_semi").groupBy("sha").agg(F.min("corpus_id").alias("_by_sha"))
    return frame.join(by_sha, frame._sha == by_sha.sha, "left").select(
        "id",
        F.coalesce("_cid", "_by_sha").alias("corpus_id"),
        by_id.when(F.col("_by_sha").isNotNull(), F.lit("sha")).alias("method"),
    )


def map_ids(
    ids: DataFrame,
    papers: DataFrame,
    paper_ids: DataFrame | None,
    *,
    match_titles: bool = True,
    materialize: Callable[[DataFrame, str], DataFrame] = lambda df, name: df,
) -> DataFrame:
    """Add `corpus_id`, `method` and `unmapped_reason` to distinct benchmark ids
    (`mapping.distinct_ids` rows: titles folded there).

    `papers` is the snapshot's papers table (with a `_folded` column, the
    titles' fold is taken from it); `paper_ids` is (sha, corpus_id)
    pairs or None when no table is given. Every step of the cascade reads the
    ids (give a table, not a plan to recompute), and the title matches feed
    two steps: `materialize(frame, name)` (the stage writes the frame to its
    staging folder and reads it back) computes them once instead of once per
    use.
    """
    steps = [id_steps(ids, paper_ids).where(F.col("method").isNotNull())]

    for method, column in EXTERNAL_STEPS:  # the benchmark's and the papers' columns have the same names
        key = cascade_key(column)
        unique = (
            papers.where(F.col(column).isNotNull())
            .groupBy(key.alias("_key"))
            .agg(F.min("corpus_id").alias("corpus_id"), F.count("*").alias("_n"))
            .where("_n = 1")
        )
        bench_key = ids.where(F.col(column).isNotNull()).select("id", cascade_key(column).alias("_key"))
        steps.append(bench_key.join(unique, "_key").select("id", "corpus_id", F.lit(method).alias("method")))

    title_counts = None
    bench_titles = ids.where(F.col("folded_title").isNotNull()).select("id", F.col("folded_title").alias("_folded"))
    if match_titles:
        if "_folded" in papers.columns:  # folded already (`papers_sharing_keys`)
            folded_papers = papers.select("corpus_id", "_folded")
        else:
            titled = papers.where(F.col("title").isNotNull()).select("corpus_id", "title")
            folded_papers = with_folded_title(titled).drop("title")
        title_counts = (
            folded_papers.where(F.col("_folded").isNotNull())
            .groupBy("_folded")
            .agg(F.min("corpus_id").alias("corpus_id"), F.count("*").alias("_n"))
        )
        matched = materialize(bench_titles.join(title_counts, "_folded").select("id", "corpus_id", "_n"), "titles")
        steps.append(matched.where("_n = 1").select("id", "corpus_id", F.lit("title").alias("method")))

    candidates = steps[0]
    for step in steps[1:]:
        candidates = candidates.unionByName(step)
    order = F.array_position(F.array(*[F.lit(m) for m in METHODS]), F.col("method"))
    best = (
        candidates.withColumn("_order", order)
        .withColumn("_rank", F.row_number().over(Window.partitionBy("id").orderBy("_order", "corpus_id")))
        .where("_rank = 1")
        .select("id", "corpus_id", "method")
    )

    mapped = ids.select("id", "title").join(best, "id", "left")
    if title_counts is not None:
        ambiguous = matched.where("_n > 1").select("id", F.lit(True).alias("_amb"))  # ids are distinct
        mapped = mapped.join(ambiguous, "id", "left")
    else:
        mapped = mapped.withColumn("_amb", F.lit(None).cast("boolean"))
    known = papers.select(F.col("corpus_id").alias("_cid"), F.lit(True).alias("in_snapshot"))
    return mapped.join(known, mapped.corpus_id == known._cid, "left").select(
        "id",
        "corpus_id",
        "method",
        F.coalesce("in_snapshot", F.lit(False)).alias("in_snapshot"),
        F.when(
            F.col("method").isNull(), F.when(F.col("_amb"), F.lit(AMBIGUOUS_TITLE)).otherwise(F.lit(NO_MATCH))
        ).alias("unmapped_reason"),
    )


def remove_papers(
    papers: DataFrame, citations: DataFrame, excluded: DataFrame, *, broadcast: bool = False
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(kept papers, kept citations, removed papers): the graph without any paper in `excluded` (a `corpus_id`
    column), and the rows of `papers` it took out (with whatever columns `papers` has: a stage that keeps the
    papers' files names the removed rows by their positions).

    `broadcast` ships `excluded` (a benchmark's papers: small) to the graph instead of shuffling the graph.
    """
    ex = excluded.select("corpus_id").distinct()
    small = F.broadcast if broadcast else (lambda df: df)
    kept_papers = papers.join(small(ex), "corpus_id", "left_anti")
    removed_papers = papers.join(small(ex), "corpus_id", "left_semi")
    kept = citations.join(small(ex.withColumnRenamed("corpus_id", "citing")), "citing", "left_anti").join(
        small(ex.withColumnRenamed("corpus_id", "cited")), "cited", "left_anti"
    )
    return kept_papers, kept.select("citing", "cited"), removed_papers


def _levels(frame: DataFrame, value: Column, name: str) -> DataFrame:
    """`value` (an aggregate) of `frame` (rows with suite, task, split) per split of each task, per suite and
    overall (`mapping.REPORT_LEVELS`), `all` where a level sums up."""
    rolled = frame.rollup("suite", "task", "split").agg(value.alias(name), F.grouping_id().alias("_level"))
    # grouping_id: 0 every key, 3 the suite alone, 7 none (1, the suite and task, is no level of the report)
    keep = rolled.where(F.col("_level").isin(0, 3, 7))
    return keep.select(*(F.coalesce(F.col(k), F.lit("all")).alias(k) for k in ("suite", "task", "split")), name)


def reach(
    citations: DataFrame, members: DataFrame, *, strict: bool = False, broadcast: bool = False
) -> tuple[DataFrame, DataFrame | None]:
    """(counts, neighbours): the leakage report's edge counts and, with `strict`, the papers one citation away.

    `members`: (corpus_id, suite, task, split) of the benchmark papers the graph holds (`mapping.members`).
    `counts` has per report level (`_levels`) `removed_edges`, the distinct edges with a benchmark paper of the
    group at either end, and with `strict` `one_hop_papers`, the papers that cite or are cited by one of the
    group's papers and are no benchmark paper themselves, and `one_hop_edges`, the edges those neighbours have
    with no benchmark paper at either end (what strict removes besides). `neighbours`: the corpus ids of every
    such paper (None without `strict`). `broadcast` ships `members` to the edges' tasks."""
    small = F.broadcast if broadcast else (lambda df: df)
    ends = citations.select("citing", "cited")
    keys = ["suite", "task", "split"]

    def touching(groups: DataFrame, edges: DataFrame) -> DataFrame:
        """`edges` with the groups of a paper of `groups` at either end, one row per end that has one."""
        at = lambda end: edges.join(small(groups.withColumnRenamed("corpus_id", end)), end)  # noqa: E731
        return at("citing").select("citing", "cited", *keys).unionByName(at("cited").select("citing", "cited", *keys))

    pair = F.countDistinct("citing", "cited")
    counts = _levels(touching(members, ends), pair, "removed_edges")
    if not strict:
        return counts, None
    bench = members.select("corpus_id").distinct()
    hop = lambda end, other: ends.join(small(bench.withColumnRenamed("corpus_id", end)), end).select(  # noqa: E731
        F.col(other).alias("corpus_id"), F.col(end).alias("_from")
    )
    near = hop("citing", "cited").unionByName(hop("cited", "citing")).join(small(bench), "corpus_id", "left_anti")
    near_members = (
        near.join(small(members.withColumnRenamed("corpus_id", "_from")), "_from").select("corpus_id", *keys).distinct()
    )
    clean = ends.join(small(bench.withColumnRenamed("corpus_id", "citing")), "citing", "left_anti").join(
        small(bench.withColumnRenamed("corpus_id", "cited")), "cited", "left_anti"
    )
    papers = _levels(near_members, F.countDistinct("corpus_id"), "one_hop_papers")
    edges = _levels(touching(near_members, clean), pair, "one_hop_edges")
    counts = counts.join(papers, keys, "full_outer").join(edges, keys, "full_outer").fillna(0)
    return counts, near.select("corpus_id").distinct()


def filtered_degrees(
    degrees: DataFrame, citations: DataFrame, excluded: DataFrame, *, broadcast: bool = False
) -> DataFrame:
    """(corpus_id, out_degree, in_degree) of every paper of the graph but those in `excluded`, counted on the
    edges `remove_papers` keeps: the graph's own `degrees` rows (`degrees`, counted on its `citations`), less,
    for each edge with one end excluded, one at its other end (out at a citing paper, in at a cited one).

    A kept paper's kept edges are its graph edges less those whose other end is excluded (the graph holds no
    self-citation), so this equals counting the kept edges (`spark.output.write_degrees` on the filtered
    graph's tables; tests/unit/spark/test_leakage.py compares them) while it groups only the edges that go,
    not every edge that stays, and reads no paper row. `broadcast` ships `excluded` to the tasks."""
    ex = excluded.select("corpus_id").distinct()
    small = F.broadcast if broadcast else (lambda df: df)
    marked = (
        citations.select("citing", "cited")
        .join(small(ex.select(F.col("corpus_id").alias("citing"), F.lit(True).alias("_x_citing"))), "citing", "left")
        .join(small(ex.select(F.col("corpus_id").alias("cited"), F.lit(True).alias("_x_cited"))), "cited", "left")
    )
    x_citing, x_cited = F.col("_x_citing").isNotNull(), F.col("_x_cited").isNotNull()
    lost = (
        marked.where(x_citing != x_cited)  # one end excluded: the other end loses this edge
        .select(
            F.when(x_cited, F.col("citing")).otherwise(F.col("cited")).alias("corpus_id"),
            x_cited.cast("int").alias("_out"),
            x_citing.cast("int").alias("_in"),
        )
        .groupBy("corpus_id")
        .agg(F.sum("_out").alias("_lost_out"), F.sum("_in").alias("_lost_in"))
    )
    kept = degrees.select("corpus_id", "out_degree", "in_degree").join(small(ex), "corpus_id", "left_anti")
    return kept.join(lost, "corpus_id", "left").select(
        "corpus_id",
        (F.col("out_degree") - F.coalesce(F.col("_lost_out"), F.lit(0))).cast("int").alias("out_degree"),
        (F.col("in_degree") - F.coalesce(F.col("_lost_in"), F.lit(0))).cast("int").alias("in_degree"),
    )


def folded_other_titles(papers: DataFrame, materialize: Callable[[DataFrame, str], DataFrame]) -> DataFrame | None:
    """(`corpus_id`, `_folded`) of the papers whose title is not ASCII, folded by the Python fold
    (`fold_title_udf`); None when no title is, and then no Python worker starts.

    The non-ASCII titles are materialised first (`materialize(frame, name)`: written and read back by the
    stage) and folded only if there are any: Spark starts its Python workers for every task of a plan that
    holds the UDF, rows or none. The fold is materialised too, so that it runs once however many plans read
    it.
    """
    title = F.col("title")
    other = materialize(papers.where(title.isNotNull() & ~is_ascii(title)).select("corpus_id", "title"), "other_titles")
    if other.isEmpty():
        return None
    return materialize(other.select("corpus_id", fold_title_udf(title).alias("_folded")), "other_folded")


def paper_key_rows(
    papers: DataFrame,
    materialize: Callable[[DataFrame, str], DataFrame] = lambda df, name: df,
    *,
    titles: bool = True,
) -> DataFrame:
    """(`corpus_id`, `_key_doi`, `_key_pubmed_id`, `_key_arxiv_id`, `_folded`) of every paper: its keys as the
    cascade's steps after the sha step compare them (each external id's `cascade_key`; the title's fold: Spark's
    own functions on ASCII titles, the Python fold on the others, `folded_other_titles`, given `materialize`;
    null where a paper has no such key). Without `titles`, `_folded` is left out (no title is folded).

    filter_leakage writes these rows as its `paper_keys` table, so that the next release's build from a diff
    keys only the papers its diff wrote; `papers_sharing_keys` finds a benchmark's keys among them.
    """
    external = [column for _, column in EXTERNAL_STEPS]
    light = papers.select("corpus_id", "title", *external)
    keys = key_columns()
    if not titles:
        return light.select("corpus_id", *keys)
    title = F.col("title")
    # the fold of `with_folded_title` on ASCII titles, null (no key) for the others and for no title
    native_fold = F.when(is_ascii(title), ascii_fold(title))
    other = folded_other_titles(light, materialize)
    if other is None:
        return light.select("corpus_id", *keys, native_fold.alias("_folded"))
    return light.join(other.withColumnRenamed("_folded", "_other"), "corpus_id", "left").select(
        "corpus_id", *keys, F.coalesce(native_fold, F.col("_other")).alias("_folded")
    )


def sharing_keys(
    paper_keys: DataFrame, ids: DataFrame, *, match_titles: bool = True, broadcast: bool = True
) -> DataFrame:
    """The rows of `paper_keys` (`paper_key_rows`) that share a DOI, PubMed id, arXiv id or, with
    `match_titles`, a folded title with one of `ids` (`mapping.distinct_ids` rows): every paper that
    `map_ids`' steps after the sha step can count or pick for these ids. `broadcast` ships the benchmark's keys
    and the papers found to the tasks instead of shuffling the papers' keys (the benchmark's side is small;
    without it, both sides are shuffled, as a cluster needs for a benchmark beyond `spark.broadcast_rows`).

    Every key of a paper becomes a (kind, key) row of one frame, matched against the benchmark's keys in one
    join; the keys are read once for that and once for the rows found."""
    small = F.broadcast if broadcast else (lambda df: df)
    external = [column for _, column in EXTERNAL_STEPS]
    kinds = [(column, key_column(column)) for column in external] + ([("title", "_folded")] if match_titles else [])
    pairs = [F.struct(F.lit(kind).alias("kind"), F.col(column).alias("key")) for kind, column in kinds]
    found = (
        paper_keys.select("corpus_id", F.explode(F.array(*pairs)).alias("k"))
        .select("corpus_id", "k.kind", "k.key")
        .where(F.col("key").isNotNull())
    )
    wanted = [ids.select(F.lit(column).alias("kind"), cascade_key(column).alias("key")) for column in external]
    if match_titles:
        wanted.append(ids.select(F.lit("title").alias("kind"), F.col("folded_title").alias("key")))
    bench_keys = wanted[0]
    for more in wanted[1:]:
        bench_keys = bench_keys.unionByName(more)
    bench_keys = bench_keys.where(F.col("key").isNotNull()).distinct()
    matched = found.join(small(bench_keys), ["kind", "key"], "left_semi").select("corpus_id").distinct()
    return paper_keys.join(small(matched), "corpus_id", "left_semi")


def papers_sharing_keys(
    papers: DataFrame,
    ids: DataFrame,
    *,
    match_titles: bool = True,
    broadcast: bool = True,
    materialize: Callable[[DataFrame, str], DataFrame] = lambda df, name: df,
) -> DataFrame:
    """`sharing_keys` on the keys of `papers` (`paper_key_rows`, materialised as `paper_keys`): the rows
    (`corpus_id`, the keys, `_folded` with `match_titles`) of the papers that share a key with one of `ids`."""
    keys = materialize(paper_key_rows(papers, materialize, titles=match_titles), "paper_keys")
    return sharing_keys(keys, ids, match_titles=match_titles, broadcast=broadcast)


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
) -> DataFrame:
    """`map_ids`, with the steps that read the papers run only where they can decide something (`shas`: see
    `id_steps`; `first`: those steps' rows, made already, `mapping.first_steps`; `paper_keys`: the
    papers' keys, made already, `paper_key_rows` of `papers`: filter_leakage's `paper_keys` table).

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
    if paper_keys is None:
        found = papers_sharing_keys(
            papers, rest, match_titles=match_titles, broadcast=broadcast_keys, materialize=materialize
        )
    else:
        found = sharing_keys(paper_keys, rest, match_titles=match_titles, broadcast=broadcast_keys)
    sharing = materialize(found, "sharing_papers")
    keys = [key_column(c) for _, c in EXTERNAL_STEPS]
    title = ["_folded"] if match_titles else []
    sharing_rows = sharing.select("corpus_id", *keys, *title).toArrow()
    later = later_steps(rest.select("id", *keys, "folded_title").toArrow(), sharing_rows, match_titles=match_titles)
    # `in_snapshot`: the corpus ids the first steps name, looked up in the papers' id column (without
    # shuffling it when `broadcast_keys`), and the sharing papers, where the later steps find theirs
    small = F.broadcast if broadcast_keys else (lambda df: df)
    named = first.where(F.col("corpus_id").isNotNull()).select(F.col("corpus_id").alias("_cid"))
    found = papers.select(F.col("corpus_id").alias("_cid")).join(small(named), "_cid", "left_semi").toArrow()
    return from_arrow(mapped_rows(first.toArrow(), later, [found["_cid"], sharing_rows["corpus_id"]]), "mapped")
