"""The mapping's and the report's table side (pyarrow, in the driver): which benchmark ids the cascade maps by
which method, the `benchmark_ids` rows and the `leakage_report`. The Spark side that finds the matches in the
graph is `id_mapping.py` (the cascade) and `transforms.py` (the keys matched, the papers removed).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from citeflow.text import fold_titles

# The mapping cascade's methods, in the order they are tried (jobs/filter_leakage/id_mapping.py).
METHODS = ("corpus_id", "sha", "doi", "pubmed", "arxiv", "title")


def distinct_ids(bench: pa.Table) -> pa.Table:
    """One row per benchmark id (`citeflow.jobs.filter_leakage.benchmark_ids.collect` rows) with the first non-null
    title and
    external ids stated for it, in the order the rows come, and `folded_title`, the title's `fold_title`:
    the input of the mapping cascade.

    The titles are folded here, in the driver that holds them: in Spark the non-ASCII ones would go through
    Python workers, whose start keeps the cores idle."""
    stated = ["title", "doi", "pubmed_id", "arxiv_id"]
    firsts = bench.group_by("id", use_threads=False).aggregate([(c, "first") for c in stated])
    firsts = firsts.rename_columns(["id", *stated])
    return firsts.append_column("folded_title", fold_titles(firsts["title"]))


# `id_mapping.sha_lookup`'s rows that count paper-ids lines have keys starting with COUNTED (a sha, 40 hex
# digits, never does): COUNTED + USABLE for the lines with a pair for a sha no benchmark id has, COUNTED + a
# reason for the lines without a pair (`citeflow.spark.readers.parse_lines`' reasons, or NO_PAIR: the line parsed, but
# its sha is not 40 hex digits or its corpusid not an integer).
COUNTED = "!"
USABLE = "usable"
NO_PAIR = "no_sha_or_corpus_id"


def paper_ids_counts(lookup: pa.Table) -> dict[str, Any]:
    """The manifest's account of the paper-ids lines, from an `id_mapping.sha_lookup` table (key, lines):
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
    """(sha, corpus_id) of an `id_mapping.sha_lookup` table: each wanted sha the paper-ids table knows, with
    its least corpus id."""
    found = lookup.filter(pc.invert(pc.starts_with(lookup["key"], COUNTED)))
    return pa.table({"sha": found["key"], "corpus_id": found["corpus_id"]})


# `id_mapping.id_steps`' corpus-id rule as Spark evaluates it: the id, its spaces trimmed (Spark's `trim`),
# matches `^[0-9]{1,18}$` (Java's `$` also matches before a final line break) and casts to a long (which
# accepts \n, \r\n and \r after the digits, not Java's other line breaks).
_CORPUS_ID_SPELLING = r"^(?P<digits>[0-9]{1,18})(?:\n|\r\n|\r)?$"


def first_steps(ids: pa.Table, by_sha: pa.Table | None) -> pa.Table:
    """(id, corpus_id, method) of every id for the cascade's two steps that read no papers, made in the
    driver that holds the ids: `id_mapping.id_steps`' rows (tests/unit/spark/test_leakage.py compares
    the two), with the sha lookup already done in Spark (`by_sha`: `looked_up_shas`, None without a
    paper-ids table). Spark's plan for these few hundred thousand rows costs a query of its own."""
    trimmed = pc.utf8_trim(ids["id"], " ")
    digits = pc.struct_field(pc.extract_regex(trimmed, _CORPUS_ID_SPELLING), "digits")
    by_id = pc.cast(digits, pa.int64())  # null where the pattern does not match
    table = pa.table({"id": ids["id"], "_cid": by_id, "_sha": pc.utf8_lower(trimmed)})
    if by_sha is None:
        by_sha = pa.table({"sha": pa.array([], pa.string()), "corpus_id": pa.array([], pa.int64())})
    assert by_sha is not None  # pyarrow is compiled: a checker cannot see that pa.table returns a table
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


# The external ids the cascade matches after the sha step: (method, the ids' and papers' column), in order.
EXTERNAL_STEPS = (("doi", "doi"), ("pubmed", "pubmed_id"), ("arxiv", "arxiv_id"))
AMBIGUOUS_TITLE = "ambiguous_title"
NO_MATCH = "no_match"


def key_column(column: str) -> str:
    """The name of `column`'s key as the cascade compares it (Spark's `lower(trim(column))`, made in Spark:
    `transforms.with_keys`)."""
    return f"_key_{column}"


def later_steps(ids: pa.Table, sharing: pa.Table, *, match_titles: bool = True) -> pa.Table:
    """(id, corpus_id, method, unmapped_reason) of `ids` (`distinct_ids` rows the corpus_id and sha steps
    leave unmapped, with their keys: `transforms.with_keys`) by the cascade's steps that read the papers,
    given the papers that share a key with them (`transforms.papers_sharing_keys`, with their keys).

    `id_mapping.map_ids`' steps on these rows, made in the driver: the rows are bounded by the benchmark
    and the papers that share its keys, and Spark's plan for them runs some fifteen stages of a few rows
    each. Every string the steps compare was made by Spark (the keys by
    `lower(trim(...))`, the papers' title folds), so the joins here compare bytes as Spark's do.
    tests/unit/spark/test_leakage.py checks this against `map_ids`. A DOI, PubMed id or arXiv id maps an id
    when exactly one paper has it; a folded title likewise, and a title several papers have leaves the id
    unmapped as `ambiguous_title`. An id several steps map takes the first step's paper (then the lowest
    corpus id).
    """
    candidates = [first_steps(ids.select(["id"]), None).filter(pc.is_valid(pc.field("method")))]
    ambiguous = pa.array([], pa.string())

    def unique_per_key(key: str, source: str) -> pa.Table:
        """(key, corpus_id, n) of `sharing`'s non-null `source` keys: the lowest corpus id and how many have it."""
        rows = sharing.filter(pc.is_valid(sharing[source])).select([source, "corpus_id"])
        counted = rows.group_by(source, use_threads=False).aggregate([("corpus_id", "min"), ("corpus_id", "count")])
        return counted.select([source, "corpus_id_min", "corpus_id_count"]).rename_columns([key, "corpus_id", "_n"])

    def matched(key: str, source: str) -> pa.Table:
        wanted = ids.filter(pc.is_valid(ids[key])).select(["id", key])
        return wanted.join(unique_per_key(key, source), keys=key, join_type="inner", use_threads=False)

    for method, column in EXTERNAL_STEPS:
        found = matched(key_column(column), key_column(column))
        found = found.filter(pc.equal(found["_n"], 1))
        candidates.append(_step_rows(found, method))
    if match_titles:
        found = (
            ids.filter(pc.is_valid(ids["folded_title"]))
            .select(["id", "folded_title"])
            .join(unique_per_key("folded_title", "_folded"), keys="folded_title", join_type="inner", use_threads=False)
        )
        candidates.append(_step_rows(found.filter(pc.equal(found["_n"], 1)), "title"))
        ambiguous = found.filter(pc.greater(found["_n"], 1))["id"].combine_chunks()

    rows = pa.concat_tables(candidates)
    rows = rows.append_column("_order", pc.index_in(rows["method"], pa.array(METHODS)))
    rows = rows.sort_by([("id", "ascending"), ("_order", "ascending"), ("corpus_id", "ascending")])
    if rows.num_rows > 1:  # the first row of each id: its first step's lowest corpus id
        later = pc.not_equal(rows["id"][1:], rows["id"][:-1]).combine_chunks()
        rows = rows.filter(pa.concat_arrays([pa.array([True]), later]))
    best = rows.select(["id", "corpus_id", "method"])
    mapped = ids.select(["id"]).join(best, keys="id", join_type="left outer", use_threads=False)
    unmapped = pc.is_null(mapped["method"])
    reason = pc.if_else(pc.is_in(mapped["id"], ambiguous), pa.scalar(AMBIGUOUS_TITLE), pa.scalar(NO_MATCH))
    return mapped.append_column("unmapped_reason", pc.if_else(unmapped, reason, pa.scalar(None, pa.string())))


MAPPED_SCHEMA = pa.schema(
    [("id", pa.string()), ("corpus_id", pa.int64()), ("method", pa.string()), ("unmapped_reason", pa.string())]
)


def mapped_rows(first: pa.Table, later: pa.Table, known: list[pa.ChunkedArray]) -> pa.Table:
    """(id, corpus_id, method, in_snapshot, unmapped_reason) of every benchmark id: the ids the first steps
    map (`first`: `first_steps` rows) and the others as `later_steps` leaves them (`later`), `in_snapshot`
    where the corpus id is one of `known` (the snapshot's papers among those the steps name)."""
    done = first.filter(pc.is_valid(first["method"])).select(["id", "corpus_id", "method"])
    done = done.append_column("unmapped_reason", pa.nulls(done.num_rows, pa.string()))
    rows = pa.concat_tables([done.cast(MAPPED_SCHEMA), later.select(MAPPED_SCHEMA.names).cast(MAPPED_SCHEMA)])
    ids = pa.chunked_array([c for k in known for c in k.cast(pa.int64()).chunks], pa.int64())
    in_snapshot = pc.fill_null(pc.is_in(rows["corpus_id"], value_set=ids.combine_chunks()), False)
    return rows.add_column(3, "in_snapshot", in_snapshot)


def _step_rows(found: pa.Table, method: str) -> pa.Table:
    return pa.table(
        {"id": found["id"], "corpus_id": found["corpus_id"], "method": pa.array([method] * found.num_rows, pa.string())}
    )


def sha_candidates(ids: pa.Table) -> pa.Table:
    """`sha`: each distinct id lower-cased with its spaces trimmed, the spellings the sha step
    (`id_mapping.id_steps`) looks up, made here where the ids are. A sha is 40 ASCII hex digits (and, by
    Java's `$`, an optional final line break), on which Spark's `lower` and `trim` and these agree; the
    ids' other spellings match no sha either way."""
    spelled = pc.utf8_lower(pc.utf8_trim(ids["id"], " "))
    return pa.table({"sha": pc.unique(spelled)})


def benchmark_id_rows(bench: pa.Table, mapped: pa.Table) -> pa.Table:
    """filter_leakage's `benchmark_ids` table: one row per distinct (suite, id, task, split) of `bench` with its
    id's mapping from `mapped` (one row per id: corpus_id, method, in_snapshot, unmapped_reason), ordered
    by suite, task, split, id.

    The benchmark's side of the stage (hundreds of thousands of rows, bounded by the benchmark, not the
    corpus) is joined and sorted here, in the driver that already holds the benchmark's rows: Spark's plans
    for so few rows cost more than the work.
    """
    keys = ["suite", "id", "task", "split"]
    rows = bench.select(keys).group_by(keys, use_threads=False).aggregate([])
    columns = ["corpus_id", "method", "in_snapshot", "unmapped_reason"]
    joined = rows.join(mapped.select(["id", *columns]), keys="id", join_type="left outer", use_threads=False)
    # nulls first, as Spark orders them
    order = [(key, "ascending", "at_start") for key in ("suite", "task", "split", "id")]
    return joined.select([*keys, *columns]).sort_by(order)


def members(rows: pa.Table) -> pa.Table:
    """(corpus_id, suite, task, split) of every benchmark paper the graph holds, once per group: what Spark
    counts the edges of (`transforms.reach`)."""
    found = rows.filter(pc.fill_null(rows["in_snapshot"], False)).select(["corpus_id", "suite", "task", "split"])
    return found.group_by(found.column_names, use_threads=False).aggregate([])


# The levels of the leakage report: per split of a task, per suite, overall ("all" where a level sums up).
REPORT_LEVELS = (("suite", "task", "split"), ("suite",), ())
REACH_COLUMNS = ("removed_edges", "one_hop_papers", "one_hop_edges")


def leakage_report(rows: pa.Table, reach: pa.Table | None = None) -> pa.Table:
    """Per suite, task and split, then per suite (`<suite>`/`all`/`all`), then `all`/`all`/`all`: total ids,
    ids mapped by each method, unmapped ids, ids in the snapshot, `removed_papers` (the distinct papers of the
    graph they map to: removed in mode exclude), and from `reach` (`transforms.reach` rows, keyed the same
    way) the edges those papers have (`removed_edges`) and, with `filter_leakage.strict`, the papers one citation
    away from them that are not benchmark papers and those papers' other edges (`one_hop_*`); 0 without it.
    `rows` is a `benchmark_id_rows` table; an id (and a paper) counts once at every level, however many of its
    rows the level holds, so the levels do not sum: a paper in two suites counts in both."""
    flags = {f"mapped_{m}": pc.cast(pc.fill_null(pc.equal(rows["method"], m), False), pa.int64()) for m in METHODS}
    flags["unmapped"] = pc.cast(pc.is_null(rows["method"]), pa.int64())
    flags["in_snapshot"] = pc.cast(pc.fill_null(rows["in_snapshot"], False), pa.int64())
    in_graph = pc.if_else(pc.fill_null(rows["in_snapshot"], False), rows["corpus_id"], pa.scalar(None, pa.int64()))
    base = {"suite": rows["suite"], "task": rows["task"], "split": rows["split"], "id": rows["id"]}
    counted = pa.table({**base, **flags, "_paper": in_graph})
    names = ["suite", "task", "split", "total", *flags, "removed_papers"]
    parts = []
    for level in REPORT_LEVELS:
        # each id once per group (its flags are the same in all its rows), then summed
        per_id = counted.group_by([*level, "id"], use_threads=False).aggregate(
            [(name, "max") for name in flags] + [("_paper", "max")]
        )
        if level:
            summed = per_id.group_by(list(level), use_threads=False).aggregate(
                [("id", "count"), *((f"{name}_max", "sum") for name in flags), ("_paper_max", "count_distinct")]
            )
        else:
            summed = pa.table(
                {
                    "id_count": [per_id.num_rows],
                    **{f"{name}_max_sum": [pc.sum(per_id[f"{name}_max"]).as_py() or 0] for name in flags},
                    "_paper_max_count_distinct": [pc.count_distinct(per_id["_paper_max"]).as_py()],
                }
            )
        n = summed.num_rows
        filled = {
            key: summed[key] if key in level else pa.repeat(pa.scalar("all", pa.string()), n)
            for key in ("suite", "task", "split")
        }
        values = [summed["id_count"], *(summed[f"{name}_max_sum"] for name in flags)]
        values.append(summed["_paper_max_count_distinct"])
        parts.append(pa.table([*filled.values(), *(pc.cast(v, pa.int64()) for v in values)], names=names))
    report = pa.concat_tables(parts)
    keys = ["suite", "task", "split"]
    if reach is None:
        reach = pa.table(
            {**{k: pa.array([], pa.string()) for k in keys}, **{c: pa.array([], pa.int64()) for c in REACH_COLUMNS}}
        )
    assert reach is not None  # pyarrow is compiled: a checker cannot see that pa.table returns a table
    report = report.join(reach.select([*keys, *REACH_COLUMNS]), keys=keys, join_type="left outer", use_threads=False)
    report = pa.table(
        {n: pc.fill_null(report[n], 0) if n in REACH_COLUMNS else report[n] for n in [*names, *REACH_COLUMNS]}
    )
    # the groups of a suite, its own row, then the next suite; the overall row last
    last = lambda column: pc.equal(report[column], "all")  # noqa: E731
    order = pa.table(
        {"_o1": last("suite"), "_s": report["suite"], "_o2": last("task"), "_t": report["task"], "_sp": report["split"]}
    )
    index = pc.sort_indices(
        order,
        sort_keys=[
            ("_o1", "ascending"),
            ("_s", "ascending"),
            ("_o2", "ascending"),
            ("_t", "ascending"),
            ("_sp", "ascending"),
        ],
    )
    return report.take(index)


def suite_totals(report: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per suite (and `all`), from a `leakage_report`'s rows: ids, mapped, unmapped, removed papers and edges
    (and one-hop ones): the audit's totals a model card and a dataset card carry."""
    keep = ("total", "unmapped", "in_snapshot", "removed_papers", *REACH_COLUMNS)
    return {
        r["suite"]: {**{k: r[k] for k in keep}, "mapped": r["total"] - r["unmapped"]}
        for r in report
        if r["task"] == "all" and r["split"] == "all"
    }
