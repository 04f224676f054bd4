"""The leakage audit every stage after filter_leakage runs on what it uses.

    from citeflow.leakage import audit_no_benchmark_papers
    audit_no_benchmark_papers(triplet_paper_ids, leakage_manifest, what="training triplets")

It reads the `benchmark_ids` table of a filter_leakage version and checks a
set of corpus ids against every mapped benchmark paper. In `exclude` mode a
hit is an error that names the count and a few examples; in `report_only`
mode (replicating "with leakage" numbers on purpose) hits are counted and
returned, and the mode travels in every downstream manifest.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from citeflow.artifacts import Manifest
from citeflow.errors import CiteflowError
from citeflow.text import fold_titles

log = logging.getLogger("citeflow")


class LeakageError(CiteflowError):
    """Benchmark papers were found where none may be."""


def benchmark_corpus_ids(manifest: Manifest) -> pa.Array:
    """Distinct corpus ids of every mapped benchmark paper of a filter_leakage version."""
    table = pq.read_table(manifest.table_path("benchmark_ids"), columns=["corpus_id"])
    return pc.unique(table.column("corpus_id").combine_chunks().drop_null())


def audit_no_benchmark_papers(
    ids: Iterable[int] | np.ndarray | pa.Array | pa.ChunkedArray, manifest: Manifest, *, what: str
) -> dict[str, Any]:
    """Check `ids` (corpus ids) against the benchmark papers; raise on a hit in exclude mode."""
    mode = manifest.metrics.get("mode", "exclude")
    if isinstance(ids, (pa.Array, pa.ChunkedArray)):
        values = ids.cast(pa.int64())
    else:
        values = pa.array(np.fromiter(ids, dtype=np.int64) if not isinstance(ids, np.ndarray) else ids.astype(np.int64))
    hits = pc.unique(values.filter(pc.is_in(values, value_set=benchmark_corpus_ids(manifest))))
    result = {
        "what": what,
        "checked": len(values),
        "benchmark_hits": len(hits),
        "mode": mode,
        "filter_leakage_version": manifest.version,
    }
    if len(hits) and mode == "exclude":
        examples = ", ".join(str(x) for x in hits[:5].to_pylist())
        raise LeakageError(
            f"leakage: {len(hits)} benchmark paper(s) found in {what} (e.g. corpus ids {examples}); "
            f"filter_leakage version {manifest.version} excluded them, so an input of this stage bypassed it"
        )
    if len(hits):
        log.warning("%s contain %d benchmark papers (filter_leakage mode report_only)", what, len(hits))
    return result


# The mapping cascade's methods, in the order they are tried (spark/leakage.py).
METHODS = ("corpus_id", "sha", "doi", "pubmed", "arxiv", "title")


def distinct_ids(bench: pa.Table) -> pa.Table:
    """One row per benchmark id (`evaluation.benchmark_ids.collect` rows) with the first non-null title and
    external ids stated for it, in the order the rows come, and `folded_title`, the title's `fold_title`:
    the input of the mapping cascade.

    The titles are folded here, in the driver that holds them (0.3 s for SciDocs' 159k ids): in Spark the
    non-ASCII ones went through Python workers, whose start kept the cores idle for 2 s (issue 21)."""
    stated = ["title", "doi", "pubmed_id", "arxiv_id"]
    firsts = bench.group_by("id", use_threads=False).aggregate([(c, "first") for c in stated])
    firsts = firsts.rename_columns(["id", *stated])
    return firsts.append_column("folded_title", fold_titles(firsts["title"]))


# `spark.leakage.sha_lookup`'s rows that count paper-ids lines have keys starting with COUNTED (a sha, 40 hex
# digits, never does): COUNTED + USABLE for the lines with a pair for a sha no benchmark id has, COUNTED + a
# reason for the lines without a pair (`spark.readers.parse_lines`' reasons, or NO_PAIR: the line parsed, but
# its sha is not 40 hex digits or its corpusid not an integer).
COUNTED = "!"
USABLE = "usable"
NO_PAIR = "no_sha_or_corpus_id"


def paper_ids_counts(lookup: pa.Table) -> dict[str, Any]:
    """The manifest's account of the paper-ids lines, from a `spark.leakage.sha_lookup` table (key, lines):
    every line, the lines that gave a (sha, corpus id) pair, and the others by reason (no line uncounted)."""
    counted = pc.starts_with(lookup["key"], COUNTED)
    found = int(pc.sum(lookup.filter(pc.invert(counted))["lines"]).as_py() or 0)
    rows = {
        r["key"][len(COUNTED) :]: int(r["lines"]) for r in lookup.filter(counted).select(["key", "lines"]).to_pylist()
    }
    pairs = found + rows.pop(USABLE, 0)
    unusable = dict(sorted(rows.items()))
    return {"lines": pairs + sum(unusable.values()), "pairs": pairs, "unusable": unusable}


def looked_up_shas(lookup: pa.Table) -> pa.Table:
    """(sha, corpus_id) of a `spark.leakage.sha_lookup` table: each wanted sha the paper-ids table knows, with
    its least corpus id."""
    found = lookup.filter(pc.invert(pc.starts_with(lookup["key"], COUNTED)))
    return pa.table({"sha": found["key"], "corpus_id": found["corpus_id"]})


# `spark.leakage.id_steps`' corpus-id rule as Spark evaluates it: the id, its spaces trimmed (Spark's `trim`),
# matches `^[0-9]{1,18}$` (Java's `$` also matches before a final line break) and casts to a long (which
# accepts \n, \r\n and \r after the digits, not Java's other line breaks).
_CORPUS_ID_SPELLING = r"^(?P<digits>[0-9]{1,18})(?:\n|\r\n|\r)?$"


def first_steps(ids: pa.Table, by_sha: pa.Table | None) -> pa.Table:
    """(id, corpus_id, method) of every id for the cascade's two steps that read no papers, made in the
    driver that holds the ids: `spark.leakage.id_steps`' rows (tests/unit/spark/test_leakage.py compares
    the two), with the sha lookup already done in Spark (`by_sha`: `looked_up_shas`, None without a
    paper-ids table). Spark's plan for these few hundred thousand rows cost a query of its own (issue 21)."""
    trimmed = pc.utf8_trim(ids["id"], " ")
    digits = pc.struct_field(pc.extract_regex(trimmed, _CORPUS_ID_SPELLING), "digits")
    by_id = pc.cast(digits, pa.int64())  # null where the pattern does not match
    table = pa.table({"id": ids["id"], "_cid": by_id, "_sha": pc.utf8_lower(trimmed)})
    if by_sha is None:
        by_sha = pa.table({"sha": pa.array([], pa.string()), "corpus_id": pa.array([], pa.int64())})
    joined = table.join(
        by_sha.rename_columns(["_sha", "_by_sha"]), keys="_sha", join_type="left outer", use_threads=False
    )
    cid, sha = joined["_cid"], joined["_by_sha"]
    method = pc.if_else(
        pc.is_valid(cid),
        pa.scalar("corpus_id"),
        pc.if_else(pc.is_valid(sha), pa.scalar("sha"), pa.scalar(None, pa.string())),
    )
    return pa.table({"id": joined["id"], "corpus_id": pc.coalesce(cid, sha), "method": method})


def sha_candidates(ids: pa.Table) -> pa.Table:
    """`sha`: each distinct id lower-cased with its spaces trimmed, the spellings the sha step
    (`spark.leakage.id_steps`) looks up, made here where the ids are. A sha is 40 ASCII hex digits (and, by
    Java's `$`, an optional final line break), on which Spark's `lower` and `trim` and these agree; the
    ids' other spellings match no sha either way."""
    spelled = pc.utf8_lower(pc.utf8_trim(ids["id"], " "))
    return pa.table({"sha": pc.unique(spelled)})


def benchmark_id_rows(bench: pa.Table, mapped: pa.Table) -> pa.Table:
    """filter_leakage's `benchmark_ids` table: one row per distinct (id, task, split) of `bench` with its
    id's mapping from `mapped` (one row per id: corpus_id, method, in_snapshot, unmapped_reason), ordered
    by task, split, id.

    The benchmark's side of the stage (hundreds of thousands of rows, bounded by the benchmark, not the
    corpus) is joined and sorted here, in the driver that already holds the benchmark's rows: Spark's plans
    for so few rows cost more than the work (README, issue 21).
    """
    keys = ["id", "task", "split"]
    rows = bench.select(keys).group_by(keys, use_threads=False).aggregate([])
    columns = ["corpus_id", "method", "in_snapshot", "unmapped_reason"]
    joined = rows.join(mapped.select(["id", *columns]), keys="id", join_type="left outer", use_threads=False)
    # nulls first, as Spark orders them
    order = [(key, "ascending", "at_start") for key in ("task", "split", "id")]
    return joined.select([*keys, *columns]).sort_by(order)


def leakage_report(rows: pa.Table) -> pa.Table:
    """Per task and split, then `all`/`all`: total ids, ids mapped by each method, unmapped ids, ids in the
    snapshot; ordered by task and split. `rows` is a `benchmark_id_rows` table (an id's mapping is the same
    in each of its rows, so the overall row counts each id once)."""
    flags = {f"mapped_{m}": pc.cast(pc.fill_null(pc.equal(rows["method"], m), False), pa.int64()) for m in METHODS}
    flags["unmapped"] = pc.cast(pc.is_null(rows["method"]), pa.int64())
    flags["in_snapshot"] = pc.cast(pc.fill_null(rows["in_snapshot"], False), pa.int64())
    counted = pa.table({"id": rows["id"], "task": rows["task"], "split": rows["split"], **flags})
    sums = [(name, "sum") for name in flags]
    names = ["task", "split", "id_count_distinct", *(f"{name}_sum" for name in flags)]
    per_split = counted.group_by(["task", "split"], use_threads=False).aggregate([("id", "count_distinct"), *sums])
    per_split = per_split.select(names)
    per_id = counted.group_by("id", use_threads=False).aggregate([(name, "max") for name in flags])
    overall = {f"{name}_sum": [pc.sum(per_id[f"{name}_max"]).as_py() or 0] for name in flags}
    overall_table = pa.table({"task": ["all"], "split": ["all"], "id_count_distinct": [per_id.num_rows], **overall})
    both = pa.concat_tables([per_split, overall_table.select(names).cast(per_split.schema)])
    report = both.rename_columns(["task", "split", "total", *flags])
    return report.sort_by([("task", "ascending", "at_start"), ("split", "ascending", "at_start")])
