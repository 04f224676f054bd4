"""The graph's papers keyed and matched as the mapping cascade compares them, and the benchmark's papers taken
out of the graph, in Spark.

Keys: each external id lower-cased and trimmed (`cascade_key`), the title folded (`with_folded_title`: Spark's
own functions on ASCII titles, `fold_title_udf`, a pandas UDF, on the others); `paper_key_rows` and
`sharing_keys` find the papers that share a key with the benchmark's ids (the cascade itself:
`id_mapping.py`). Removal: `remove_papers`, the edges and neighbours that go with them (`reach`) and the degrees
left (`filtered_degrees`). Transforms only (docs/reference.md §2).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from citeflow.jobs.filter_leakage.mapping import EXTERNAL_STEPS, key_column
from citeflow.text import fold_title


# pyspark's stub has no overload for the one-argument form its own documentation uses (types from the hints)
@F.pandas_udf(T.StringType())  # pyright: ignore[reportCallIssue]
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


def _edges_per_level(groups: DataFrame, edges: DataFrame, name: str, small) -> DataFrame:
    """Per report level (`mapping.REPORT_LEVELS`, "all" where a level sums up), `name`: the distinct edges of
    `edges` with a paper of the group at either end, as |citing end in the group| + |cited end in the group| -
    |both ends in the group|, each a plain count of join rows: the edges are distinct and none cites its own
    paper (build_graph's graph), and each paper is once in each group of a level (`distinct` per level). No
    edge is compared with another, so what is shuffled is one partial count per group and task, where a
    distinct count over (edge, group) rows shuffled every such row."""
    from functools import reduce

    from citeflow.jobs.filter_leakage.mapping import REPORT_LEVELS

    keys = ["suite", "task", "split"]
    parts = []
    for level in REPORT_LEVELS:
        group = groups.select("corpus_id", *level).distinct()
        at = lambda end, g=group: edges.join(small(g.withColumnRenamed("corpus_id", end)), end)  # noqa: E731
        other = small(group.select(F.col("corpus_id").alias("_end"), *(F.col(k).alias(f"_{k}") for k in level)))
        citing = at("citing")
        same = reduce(lambda a, b: a & b, (F.col(k).eqNullSafe(F.col(f"_{k}")) for k in level), F.lit(True))
        both = citing.join(other, (F.col("cited") == F.col("_end")) & same)
        out = [F.coalesce(F.col(k), F.lit("all")).alias(k) if k in level else F.lit("all").alias(k) for k in keys]
        for frame, sign in ((citing, 1), (at("cited"), 1), (both, -1)):
            parts.append(frame.select(*out, F.lit(sign).alias("_rows")))
    rows = reduce(DataFrame.unionByName, parts)
    return rows.groupBy(*keys).agg(F.sum("_rows").cast("long").alias(name))


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

    counts = _edges_per_level(members, ends, "removed_edges", small)
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
    papers = _levels(near_members, F.count_distinct("corpus_id"), "one_hop_papers")
    edges = _edges_per_level(near_members, clean, "one_hop_edges", small)
    counts = counts.join(papers, keys, "full_outer").join(edges, keys, "full_outer").fillna(0)
    return counts, near.select("corpus_id").distinct()


def filtered_degrees(
    degrees: DataFrame, citations: DataFrame, excluded: DataFrame, *, broadcast: bool = False
) -> DataFrame:
    """(corpus_id, out_degree, in_degree) of every paper of the graph but those in `excluded`, counted on the
    edges `remove_papers` keeps: the graph's own `degrees` rows (`degrees`, counted on its `citations`), less,
    for each edge with one end excluded, one at its other end (out at a citing paper, in at a cited one).

    A kept paper's kept edges are its graph edges less those whose other end is excluded (the graph holds no
    self-citation), so this equals counting the kept edges (`citeflow.spark.output.write_degrees` on the filtered
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
