"""The citations' half of a release diff's merge (spark/incremental.py holds the papers' and the abstracts'): the
edge candidates of the new release, which of them are labelled again, and the `degrees` rows the merge changes.

Every function is `DataFrame(s) -> DataFrame(s)`, under the rules of spark/incremental.py: a citation's key is
its (citing, cited) id pair as written (`edge_key`), the last step naming a key decides it, and an edge whose
label can change (its pair named, an end arriving or leaving the corpus) is labelled again with all its copies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from citeflow.spark import readers as R
from citeflow.spark import scans as S
from citeflow.spark.incremental import EDGE_REASONS, NULL_KEY, final_updates, last_steps


def edge_key(df: DataFrame) -> DataFrame:
    """`_k1`, `_k2`: the (citing, cited) ids as written, nulls as NULL_KEY."""
    return df.withColumn("_k1", F.coalesce("citing_raw", F.lit(NULL_KEY))).withColumn(
        "_k2", F.coalesce("cited_raw", F.lit(NULL_KEY))
    )


def _edge_inputs(
    base_citations: DataFrame,
    base_rejected: DataFrame,
    updates: DataFrame,
    deletes: DataFrame,
    *,
    flag_named: bool = False,
) -> tuple[DataFrame, DataFrame, DataFrame, DataFrame]:
    """(the base's edge candidates the diff does not name, with their base `reason` (null: kept), the diff's
    final candidates, rejected rows of unparseable diff lines, keys the diff names). With `flag_named` the
    candidates the diff names stay, flagged by `_named` (true). Each base candidate keeps its `POSITION` in the
    table it comes from (`base_citations` for a kept edge, `base_rejected` for a rejected one) when that table
    has them; null where its table has none. Base candidates carry their ids as numbers too (`_c1`, `_c2`:
    null where the id is none), which `graph.label_edges` reads."""

    error = F.col("parse_error")
    keyed = error.isNull() | (error == R.BAD_FIELD_TYPE)  # its ids read (a field beside them may not)

    def rejected(lines: DataFrame) -> DataFrame:
        return R.rejected_rows(
            lines,
            kind="citation",
            reason=error,
            id_col=F.col("citing_raw"),
            cited=F.col("cited_raw"),
            raw=F.col("value"),
        )

    # an update line names its pair if its ids read, and is a record only if it parsed; a delete line needs its
    # ids only
    good = edge_key(updates.where(error.isNull()))
    bad_updates = rejected(updates.where(error.isNotNull()))
    good_deletes = edge_key(deletes.where(keyed))
    bad_deletes = rejected(deletes.where(~keyed))
    steps = last_steps(edge_key(updates.where(keyed)), good_deletes, ["_k1", "_k2"])
    from_diff = final_updates(good, steps, ["_k1", "_k2"]).select("citing_raw", "cited_raw", "source")
    keys = steps.select("_k1", "_k2")
    base = _base_edges(base_citations, base_rejected, keys, flag_named=flag_named)
    return base, from_diff, bad_updates.unionByName(bad_deletes), keys


def _base_edges(base_citations: DataFrame, base_rejected: DataFrame, keys: DataFrame, *, flag_named: bool) -> DataFrame:
    """The base's edge candidates (kept edges and edges rejected for an edge reason) the diff's `keys` do not
    name (with `flag_named`: all of them, flagged by `_named`), each with its base `reason`, its `POSITION`
    where its table has them, and its ids as numbers (`_c1`, `_c2`)."""
    position = S.positions(base_rejected) or S.positions(base_citations)

    def positions_of(frame: DataFrame) -> list[Column]:
        """`frame`'s own POSITION columns, or nulls where it has none and the other table has them."""
        have = S.positions(frame)
        return [F.col(c) if c in have else F.lit(None).cast(S.POSITION_TYPES[c]).alias(c) for c in position]

    # The base's kept edges (every edge of the graph) keep their ids as numbers: they match the keys the diff
    # names that are written as a number's own spelling (`cast(id as string)`, which a kept edge's raw ids are),
    # so no id of the whole table goes to a string and back.
    kept = base_citations.select(
        F.col("citing").alias("_c1"),
        F.col("cited").alias("_c2"),
        F.lit(None).cast("string").alias("source"),
        F.lit(None).cast("string").alias("reason"),
        *positions_of(base_citations),
    )
    labelled = base_rejected.where((F.col("kind") == "citation") & F.col("reason").isin(*EDGE_REASONS)).select(
        F.col("id").alias("citing_raw"),
        F.col("cited_id").alias("cited_raw"),
        "source",
        "reason",
        *positions_of(base_rejected),
    )
    as_numbers = keys.select(
        F.col("_k1").try_cast("long").alias("_c1"), F.col("_k2").try_cast("long").alias("_c2"), "_k1", "_k2"
    )
    number_keys = as_numbers.where(
        (F.col("_c1").cast("string") == F.col("_k1")) & (F.col("_c2").cast("string") == F.col("_k2"))
    ).select("_c1", "_c2")
    labelled = edge_key(labelled)
    if flag_named:
        kept = kept.join(number_keys.withColumn("_named", F.lit(True)), ["_c1", "_c2"], "left")
        labelled = labelled.join(keys.withColumn("_named", F.lit(True)), ["_k1", "_k2"], "left")
    else:
        kept = kept.join(number_keys, ["_c1", "_c2"], "left_anti")
        labelled = labelled.join(keys, ["_k1", "_k2"], "left_anti")
    kept = kept.withColumn("citing_raw", F.col("_c1").cast("string")).withColumn(
        "cited_raw", F.col("_c2").cast("string")
    )
    labelled = (
        labelled.drop("_k1", "_k2")
        .withColumn("_c1", F.col("citing_raw").try_cast("long"))
        .withColumn("_c2", F.col("cited_raw").try_cast("long"))
    )
    base = kept.unionByName(labelled)
    if flag_named:
        base = base.fillna(False, ["_named"])
    return base


def merge_edges(
    base_citations: DataFrame, base_rejected: DataFrame, updates: DataFrame, deletes: DataFrame
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(edge candidates of the new release, rejected rows of unparseable diff lines, keys the diff names).

    `updates` / `deletes`: `s2ag_citation_pairs` of the diff's lines plus `_step`. Candidates have
    `citing_raw`, `cited_raw`, `source`; the base's kept edges come with a null source, which ranks them
    first among copies of an edge, as their first copy ranked in the base build.
    """
    base, from_diff, bad, named = _edge_inputs(base_citations, base_rejected, updates, deletes)
    return base.drop("reason", "_c1", "_c2", *S.POSITION).unionByName(from_diff), bad, named


# Labels an edge gets from its own ids whatever the corpus holds (label_edges' first checks).
INTRINSIC_REASONS = (R.NULL_ID, R.INVALID_ID, R.SELF_CITATION)


class EdgeSplit(NamedTuple):
    """`split_edges`' frames."""

    to_label: DataFrame  # candidates to label: `citing_raw`, `cited_raw`, `source`
    kept: DataFrame  # the base's kept edges that stay kept: `citing`, `cited`
    stays: DataFrame  # the base's rejected edge rows that stay as they are
    bad: DataFrame  # rejected rows of unparseable diff lines
    named: DataFrame  # the keys the diff names
    gone: DataFrame  # the base's rejected edge rows that do not stay
    gone_kept: DataFrame  # the base's kept edges that do not stay: `citing`, `cited` (and their `POSITION`)


def split_edges(
    base_citations: DataFrame,
    base_rejected: DataFrame,
    updates: DataFrame,
    deletes: DataFrame,
    moved: DataFrame,
    materialize: Callable[[DataFrame, str], DataFrame] = lambda df, name: df,
) -> EdgeSplit:
    """`merge_edges`, with only the edges whose label can change left to label (`EdgeSplit`).

    `moved`: `corpus_id` of papers that enter or leave the corpus. `label_edges` labels an edge from its ids
    (null, invalid, self-citation: never changes), then from whether its ends are in the corpus, then ranks
    the copies of one (citing, cited) pair. So a base edge keeps its label unless its pair is one the diff
    names or brings (the pair's copies change) or an end moved. Such pairs are labelled again with all their
    copies; every other base edge, kept or rejected, is carried over as the base labelled it. The base rows
    that do not stay, kept or rejected, keep their `POSITION` in their own table when it has them (the new
    version's table, written over the base's, leaves them out by it: spark/output.py `write_over`).
    `materialize(frame, name)` computes the rows that do not stay once (one scan of the base's edges) for the
    frames read from them: `to_label`, `gone`, `gone_kept`. `updates` and `deletes` are best staged by the
    caller: several plans read them.
    """
    base, from_diff, bad, named = _edge_inputs(base_citations, base_rejected, updates, deletes, flag_named=True)
    as_ids = lambda df, a, b: df.select(  # noqa: E731  the ids label_edges reads from the raw ends
        F.col(a).try_cast("long").alias("_c1"), F.col(b).try_cast("long").alias("_c2")
    )
    pairs = (
        as_ids(named, "_k1", "_k2")
        .unionByName(as_ids(from_diff, "citing_raw", "cited_raw"))
        .where(F.col("_c1").isNotNull() & F.col("_c2").isNotNull())
        .distinct()
        .withColumn("_pair", F.lit(True))
    )
    ends = moved.select("corpus_id").distinct()
    base = (
        base.join(F.broadcast(ends.select(F.col("corpus_id").alias("_c1"), F.lit(True).alias("_m1"))), "_c1", "left")
        .join(F.broadcast(ends.select(F.col("corpus_id").alias("_c2"), F.lit(True).alias("_m2"))), "_c2", "left")
        .join(F.broadcast(pairs), ["_c1", "_c2"], "left")
    )
    changes = F.coalesce(F.col("_m1"), F.col("_m2"), F.col("_pair"), F.lit(False)) & ~F.coalesce(
        F.col("reason").isin(*INTRINSIC_REASONS), F.lit(False)
    )
    # a pair the diff names is not the base's any more (its copies come from the diff); another edge is
    # labelled again when its label can change
    base = base.withColumn("_changes", ~F.col("_named") & changes)
    leaving = materialize(
        base.where(F.col("_named") | F.col("_changes")).drop("_m1", "_m2", "_pair", "_named"), "leaving_edges"
    )
    to_label = leaving.where("_changes").select("citing_raw", "cited_raw", "source").unionByName(from_diff)
    stays = base.where(~F.col("_named") & ~F.col("_changes"))
    kept = stays.where(F.col("reason").isNull()).select(F.col("_c1").alias("citing"), F.col("_c2").alias("cited"))
    gone_kept = leaving.where(F.col("reason").isNull()).select(
        F.col("_c1").alias("citing"), F.col("_c2").alias("cited"), *S.positions(base_citations)
    )

    def as_rejected(rows: DataFrame) -> DataFrame:
        return R.rejected_rows(
            rows.where(F.col("reason").isNotNull()),
            kind="citation",
            reason=F.col("reason"),
            id_col=F.col("citing_raw"),
            cited=F.col("cited_raw"),
            keep=S.positions(base_rejected),
        )

    return EdgeSplit(to_label, kept, as_rejected(stays), bad, named, as_rejected(leaving), gone_kept)


def changed_degrees(
    base_degrees: DataFrame,
    new_edges: DataFrame,
    gone_edges: DataFrame,
    removed: DataFrame,
    added: DataFrame,
    materialize: Callable[[DataFrame, str], DataFrame] = lambda df, name: df,
) -> tuple[DataFrame, DataFrame]:
    """The rows of `degrees` a merge changes: (the new rows, `corpus_id`, `out_degree`, `in_degree` as int; the
    base's rows that go, as they were, with their `POSITION`), so that the base's other rows stay where they are.

    `base_degrees`: the base's `degrees` (one row per base paper, read with `POSITION`); `new_edges` and
    `gone_edges` (`citing`, `cited`): the kept edges the new release adds and the base's kept edges it drops
    (every other kept edge is the base's, counted in its degrees); `removed`: `corpus_id` of the base papers
    whose rows the merge replaced or dropped; `added`: `corpus_id` of the papers it wrote (a paper of both
    stays, with its new row). A paper's degrees change only if an edge of it arrives or goes, or its row is
    replaced: such a paper's new degrees are its base degrees (0 for a paper new to the corpus, which has no
    base edge) plus its arriving edges less its departing ones, counted as `graph.degrees` counts them. Every
    other paper keeps its base row. The result equals `graph.with_degrees` of the new papers and edges
    (tests/e2e/test_incremental.py compares the tables with a full build's). `materialize(frame, name)`: the
    affected papers' base rows, read by both results, computed once."""

    def ends(edges: DataFrame, sign: int) -> DataFrame:
        return edges.select(
            F.col("citing").alias("corpus_id"), F.lit(sign).alias("_out"), F.lit(0).alias("_in")
        ).unionByName(edges.select(F.col("cited").alias("corpus_id"), F.lit(0).alias("_out"), F.lit(sign).alias("_in")))

    delta = (
        ends(new_edges, 1)
        .unionByName(ends(gone_edges, -1))
        .groupBy("corpus_id")
        .agg(F.sum("_out").alias("_dout"), F.sum("_in").alias("_din"))
    )
    ids = lambda df: df.select("corpus_id")  # noqa: E731
    affected = ids(delta).unionByName(ids(removed)).unionByName(ids(added)).distinct()
    # no broadcast hint: the affected papers grow with the diff, not the corpus, and adaptive execution ships
    # them to the base's tasks when they are few (its broadcast threshold), as at 1M papers and a 1% diff
    base_rows = materialize(base_degrees.join(affected, "corpus_id", "left_semi"), "base_degrees")
    # the papers of the new release among them: those written, and the base's that were neither replaced nor dropped
    live = ids(added).unionByName(ids(base_rows).join(ids(removed), "corpus_id", "left_anti"))
    rows = (
        live.join(base_rows.select("corpus_id", "out_degree", "in_degree"), "corpus_id", "left")
        .join(delta, "corpus_id", "left")
        .select(
            "corpus_id",
            *[
                (F.coalesce(F.col(c), F.lit(0)) + F.coalesce(F.col(d), F.lit(0))).cast("int").alias(c)
                for c, d in (("out_degree", "_dout"), ("in_degree", "_din"))
            ],
        )
    )
    return rows, base_rows
