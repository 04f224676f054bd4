"""Merge a previous build_graph version's tables with an S2AG release diff (citeflow/diffs.py).

Every function is `DataFrame(s) -> DataFrame(s)`; the stage (jobs/build_graph.py `build_from_diff`) reads the
base version's tables and the diff's lines and writes the result. The rules make the merged tables equal those
of a full build of the new release (tests/e2e/test_incremental.py holds them to it):

- Keys: papers and abstracts by corpus id, citations by the (citing, cited) id pair as written. A diff's
  steps apply in order; a key's records in the new release are those of the *last* step that names it (its
  update lines, or none when that step deletes it; within a step the delete files apply after the update files,
  as in the Datasets API's example code, so a key a step both updates and deletes is deleted:
  `citeflow.diffs.APPLY_RULES`). Keys no step names keep
  the base's decisions: its kept paper, its abstract, its quarantined duplicates.
- The update lines of a touched key are ranked like shard lines (spark/graph.py: most complete paper, longest
  abstract, then line hashes), so the kept record and the quarantined duplicates are those a full build
  would choose from the same lines.
- Every citation candidate (the base's kept edges, its rejected edges, the diff's lines) is labelled again
  against the new corpus ids: an edge whose cited paper arrives (or leaves) changes its label.
- Dirt in diff files (malformed lines, bad ids) is quarantined with its reason and source file, like shard
  dirt; rows of the base's `rejected` table that have no key (malformed lines) are carried over unchanged.
  A line whose key reads but whose record does not (`bad_field_type`, `graph.key_reads`) names its key: an
  update line of that kind is quarantined and leaves its key no record from this step (as a full build holds
  none from it), a delete line deletes its key, and the base's rejected row of such a line goes when the diff
  names its key (`carried_rejected`).

Limits, by construction: a paper deleted while its abstract stays leaves an `abstract_without_paper` row
with no `raw` (the base kept the abstract, not its line); a base edge kept and later rejected names its ids
as numbers, not as the line spelled them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark import graph as G
from spark import readers as R

# Edge reasons decided by label_edges (recomputed on every merge); other citation rows are parse errors.
EDGE_REASONS = (
    R.NULL_ID,
    R.INVALID_ID,
    R.SELF_CITATION,
    R.CITING_NOT_IN_CORPUS,
    R.CITED_NOT_IN_CORPUS,
    R.DUPLICATE_CITATION,
)
NULL_KEY = "\u0000"  # stands for a null id in an edge key, so that keys with null ends still match


def last_steps(updates: DataFrame, deletes: DataFrame, key: list[str]) -> DataFrame:
    """Per key named by the diff: `_last` (the last step naming it) and `_updated` (whether that step
    updates it; False: deleted, also when the step updates it too: its delete files apply last, as the Datasets
    API's `diffs` documentation applies `update_files`, then `delete_files`). `updates` and `deletes` hold `key`
    columns and `_step`."""
    named = updates.select(*key, "_step", F.lit(False).alias("_del")).unionByName(
        deletes.select(*key, "_step", F.lit(True).alias("_del"))
    )
    return named.groupBy(*key).agg(
        F.max("_step").alias("_last"),
        (~F.max(F.struct("_step", "_del"))["_del"]).alias("_updated"),
    )


def final_updates(updates: DataFrame, steps: DataFrame, key: list[str]) -> DataFrame:
    """The update lines of each key's last step (the key's records in the new release)."""
    last = steps.where("_updated").select(*key, F.col("_last").alias("_step"))
    return updates.join(last, [*key, "_step"], "left_semi")


def edge_key(df: DataFrame) -> DataFrame:
    """`_k1`, `_k2`: the (citing, cited) ids as written, nulls as NULL_KEY."""
    return df.withColumn("_k1", F.coalesce("citing_raw", F.lit(NULL_KEY))).withColumn(
        "_k2", F.coalesce("cited_raw", F.lit(NULL_KEY))
    )


def keys_named(lines: DataFrame) -> DataFrame:
    """`corpus_id`, `_step` of every paper or abstract update line (parsed, with `_step`) whose key reads
    (`graph.key_reads`): the keys the lines name, their records usable or not."""
    return lines.where(G.key_reads()).select(F.col("id_raw").try_cast("long").alias("corpus_id"), "_step")


def merge_papers(
    base_papers: DataFrame,
    staged_updates: DataFrame,
    deletes: DataFrame,
    *,
    broadcast: bool = True,
    steps: DataFrame | None = None,
    materialize: Callable[[DataFrame, str], DataFrame] = lambda df, name: df,
) -> tuple[DataFrame, DataFrame, DataFrame, DataFrame]:
    """(papers, keys the diff names, rejected rows of the diff's paper lines, the diff's kept records).

    `staged_updates`: the update lines through `graph.stage_papers`, plus `_step`; `deletes`: `corpus_id`,
    `_step` of usable delete lines; `steps`: their `last_steps` where the caller has them. Returned papers have
    `PAPERS_COLUMNS`: untouched rows as the base wrote them, the diff's records with a null abstract
    (merge_abstracts fills it). `materialize(frame, name)` computes the duplicates' ranking once for the plans
    of the papers and of the rejected rows.
    """
    usable = staged_updates.where(F.col("reason").isNull())
    if steps is None:
        steps = last_steps(keys_named(staged_updates), deletes, ["corpus_id"])
    final = final_updates(usable, steps, ["corpus_id"])
    duplicates = materialize(G.duplicate_rows(final), "paper_duplicates")
    kept = G.kept_papers(final, duplicates, broadcast=broadcast).select(*G.PAPERS_COLUMNS)
    touched = steps.select("corpus_id")
    untouched = base_papers.join(F.broadcast(touched) if broadcast else touched, "corpus_id", "left_anti")
    papers = untouched.select(*G.PAPERS_COLUMNS).unionByName(kept)
    rejected = G.rejected_papers(final, duplicates, broadcast=broadcast).unionByName(
        R.rejected_rows(
            staged_updates.where(F.col("reason").isNotNull()),
            kind="paper",
            reason=F.col("reason"),
            id_col=F.col("id_raw"),
            raw=F.col("raw"),
        )
    )
    return papers, steps, rejected, kept


def carried_rejected(
    base_rejected: DataFrame,
    paper_keys: DataFrame,
    abstract_keys: DataFrame,
    edge_keys: DataFrame,
) -> tuple[DataFrame, DataFrame]:
    """(base rejected rows that stay as they were, base rejected rows the merge decides again or removes).

    Stay: paper rows (malformed lines, bad ids, duplicates of keys the diff does not name) and abstract and
    citation rows that no key governs (parse errors). Decided again: duplicates of keys the papers diff
    names, and the abstract duplicates and orphans (`merge_abstracts`). Removed: the `bad_field_type` rows of
    keys the diff names (`paper_keys` `corpus_id`, `abstract_keys` `corpus_id`, `edge_keys` `_k1`, `_k2`):
    the new release's lines of those keys are the diff's. Edge labels (the rest of the citation rows) are
    neither: `split_edges` carries or drops them. Both frames keep the rows' `POSITION` columns when
    `base_rejected` has them (`readers.read_table`)."""
    id_long = F.col("id").try_cast("long")
    kind, reason = F.col("kind"), F.col("reason")
    typed = reason == R.BAD_FIELD_TYPE
    named = paper_keys.select(F.col("corpus_id").alias("_key"), F.lit(True).alias("_named"))
    abstracts = abstract_keys.select(F.col("corpus_id").alias("_akey"), F.lit(True).alias("_anamed"))
    edges = edge_keys.select(F.col("_k1").alias("_e1"), F.col("_k2").alias("_e2"), F.lit(True).alias("_enamed"))
    ends = (F.coalesce("id", F.lit(NULL_KEY)) == F.col("_e1")) & (
        F.coalesce("cited_id", F.lit(NULL_KEY)) == F.col("_e2")
    )
    flagged = (
        base_rejected.join(named, (kind == "paper") & (id_long == F.col("_key")), "left")
        .join(abstracts, (kind == "abstract") & typed & (id_long == F.col("_akey")), "left")
        .join(edges, (kind == "citation") & typed & ends, "left")
    )
    gone = F.col("_anamed").isNotNull() | F.col("_enamed").isNotNull()
    keyed_abstracts = (R.DUPLICATE_ABSTRACT, R.ABSTRACT_WITHOUT_PAPER)
    paper_named = (kind == "paper") & F.col("_named").isNotNull()
    decided_again = (
        (paper_named & ((reason == R.DUPLICATE_PAPER) | typed))
        | ((kind == "abstract") & reason.isin(*keyed_abstracts))
        | gone
    )
    edge_label = (kind == "citation") & reason.isin(*EDGE_REASONS)
    keep = [*R.REJECTED_SCHEMA.fieldNames(), *R.positions(base_rejected)]
    return flagged.where(~decided_again & ~edge_label).select(*keep), flagged.where(decided_again).select(*keep)


def _abstract_rank(winner_first: Column) -> Column:
    """A full build's order (`graph.abstract_order`: longest, then line hash, then line), after
    `winner_first` for base rows."""
    return F.row_number().over(Window.partitionBy("corpus_id").orderBy(winner_first, *G.abstract_order()))


class AbstractInputs(NamedTuple):
    """What the abstracts' merge reads (`abstract_inputs`), made once for `touched_papers` and
    `merge_abstracts`."""

    good: DataFrame  # usable update lines with `corpus_id`
    steps: DataFrame  # the last step naming each key (`last_steps`)
    base_lines: DataFrame  # the base's quarantined abstract lines, parsed again
    bad: DataFrame  # rejected rows of unparseable diff lines


def abstract_inputs(
    base_rejected: DataFrame,
    updates: DataFrame,
    deletes: DataFrame,
    materialize: Callable[[DataFrame, str], DataFrame] = lambda df, name: df,
) -> AbstractInputs:
    """The abstracts diff's lines (`updates`, `deletes`: parsed lines plus `_step`) and the base's quarantined
    abstract lines, ready for the merge. `materialize(frame, name)` computes each once for the plans that read
    it (three: the touched keys, the merged rows, the rejected rows), so neither the diff's files nor the
    base's quarantined lines are parsed again by each."""
    good, bad_updates = G.split_unparseable(updates, kind="abstract")
    good_deletes, bad_deletes = G.split_keyed(deletes, kind="abstract")
    good = materialize(good.withColumn("corpus_id", F.col("id_raw").try_cast("long")), "abstract_updates")
    steps = materialize(last_steps(keys_named(updates), good_deletes, ["corpus_id"]), "abstract_steps")
    quarantined = base_rejected.where(
        (F.col("kind") == "abstract") & F.col("reason").isin(R.DUPLICATE_ABSTRACT, R.ABSTRACT_WITHOUT_PAPER)
    )
    parsed = R.parse_lines(
        quarantined.select(
            F.col("raw").cast("string").alias("value"),
            "source",
            (F.col("reason") == R.DUPLICATE_ABSTRACT).alias("_loser"),
        ),
        R.S2AG_ABSTRACTS_SCHEMA,
    )
    base_lines = parsed.select(
        F.trim(F.col("rec.corpusid")).try_cast("long").alias("corpus_id"),
        R.nonblank(F.col("rec.abstract")).alias("abstract"),
        "value",
        "source",
        "_loser",
    )
    base_lines = materialize(base_lines, "abstract_base_lines")
    return AbstractInputs(good, steps, base_lines, bad_updates.unionByName(bad_deletes))


def _redo(steps: DataFrame, paper_keys: DataFrame, base_lines: DataFrame) -> DataFrame:
    return (
        steps.select("corpus_id")
        .unionByName(paper_keys.select("corpus_id"))
        .unionByName(base_lines.select("corpus_id"))
        .where(F.col("corpus_id").isNotNull())
        .distinct()
    )


def touched_papers(abstracts: AbstractInputs, paper_keys: DataFrame) -> DataFrame:
    """`corpus_id` of every paper whose row the merge decides again (`merge_abstracts`' redo set): keys either
    diff names and keys whose abstract the base quarantined. Every other paper keeps its base row (its
    degrees aside), so `merge_papers` and `merge_abstracts` given only these base rows return exactly the
    new rows of these keys."""
    return _redo(abstracts.steps, paper_keys, abstracts.base_lines)


def merge_abstracts(
    base_papers: DataFrame,
    abstracts: AbstractInputs,
    papers: DataFrame,
    paper_keys: DataFrame,
    materialize: Callable[[DataFrame, str], DataFrame] = lambda df, name: df,
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(papers with `abstract`, rejected abstract rows, keys the abstracts diff names).

    `abstracts`: `abstract_inputs` of the abstracts diff's parsed update and delete lines (`s2ag_abstracts`
    columns plus `_step`) and the base's rejected rows; `papers`: the merged papers, whose untouched rows
    carry the base's abstract; `paper_keys`: corpus ids the papers diff names; `materialize(frame, name)`
    computes the ranked abstracts once for the plans of the papers and of the rejected rows. Only the
    abstracts of a small set of keys are decided again (`touched_papers`): those either diff names and those
    the base quarantined (duplicates, orphans, which a new paper may adopt). The base's abstracts are its
    papers' (already chosen) and its quarantined lines; for keys the abstracts diff names, the last step's
    lines are ranked as in a full build. The rest keep their abstract without a shuffle of the abstracts' text.
    """
    good, steps, base_lines, bad = abstracts
    named = steps.select("corpus_id")
    from_diff = final_updates(good, steps, ["corpus_id"]).select(
        "corpus_id", "abstract", "value", "source", F.lit(False).alias("_loser")
    )
    base_kept = base_papers.where(F.col("abstract").isNotNull()).select(
        "corpus_id",
        "abstract",
        F.lit(None).cast("string").alias("value"),
        F.lit(None).cast("string").alias("source"),
        F.lit(False).alias("_loser"),
    )
    redo_b = F.broadcast(_redo(steps, paper_keys, base_lines))
    base_kept = base_kept.join(redo_b, "corpus_id", "left_semi")
    base = base_kept.unionByName(base_lines).join(named, "corpus_id", "left_anti")
    ranked = materialize(
        base.unionByName(from_diff).withColumn("_rank", _abstract_rank(F.col("_loser"))), "abstract_ranks"
    )
    redone, rejected = G.best_abstracts(ranked, papers.join(redo_b, "corpus_id", "left_semi"))
    redone = redone.select(*G.PAPERS_COLUMNS)
    joined = papers.join(redo_b, "corpus_id", "left_anti").select(*G.PAPERS_COLUMNS).unionByName(redone)
    return joined, rejected.unionByName(bad), named


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
    position = R.positions(base_rejected) or R.positions(base_citations)

    def positions_of(frame: DataFrame) -> list[Column]:
        """`frame`'s own POSITION columns, or nulls where it has none and the other table has them."""
        have = R.positions(frame)
        return [F.col(c) if c in have else F.lit(None).cast(R.POSITION_TYPES[c]).alias(c) for c in position]

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
    return base.drop("reason", "_c1", "_c2", *R.POSITION).unionByName(from_diff), bad, named


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
        F.col("_c1").alias("citing"), F.col("_c2").alias("cited"), *R.positions(base_citations)
    )

    def as_rejected(rows: DataFrame) -> DataFrame:
        return R.rejected_rows(
            rows.where(F.col("reason").isNotNull()),
            kind="citation",
            reason=F.col("reason"),
            id_col=F.col("citing_raw"),
            cited=F.col("cited_raw"),
            keep=R.positions(base_rejected),
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
