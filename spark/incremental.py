"""Merge a previous build_graph version's tables with an S2AG release diff (citeflow/diffs.py).

Every function is `DataFrame(s) -> DataFrame(s)`; the stage (jobs/build_graph.py `build_from_diff`) reads the
base version's tables and the diff's lines and writes the result. This module merges the papers and abstracts and
holds what every kind's merge shares (`last_steps`, `final_updates`, `carried_rejected`); the citations' merge
and the `degrees` rows it changes are in spark/incremental_edges.py. The rules make the merged tables equal those
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

from citeflow.spark import graph as G
from citeflow.spark import readers as R
from citeflow.spark import scans as S

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
    `base_rejected` has them (`scans.read_table`)."""
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
    keep = [*R.REJECTED_SCHEMA.fieldNames(), *S.positions(base_rejected)]
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
