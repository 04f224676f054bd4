"""The mapping's and the report's table side (pyarrow, in the driver): which benchmark ids the cascade maps by
which method, the `benchmark_ids` rows and the `leakage_report`. The Spark side that finds the matches in the
graph is `id_mapping.py` (the cascade) and `transforms.py` (the keys matched, the papers removed).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from citeflow.text import fold_titles

# The mapping cascade's steps, in the order they are tried (jobs/filter_leakage/id_mapping.py).
STEPS = ("corpus_id", "sha", "doi", "pubmed", "arxiv", "title")
# Where the inputs leave an id in doubt, it maps to every paper they name ("when in doubt, leave it out": a
# training paper lost costs nothing measurable, a benchmark paper kept invalidates the numbers):
# - `sha_conflict`: the paper-ids table gives the id's sha several corpus ids;
# - `<step>_shared`: 2 to `filter_leakage.max_shared_matches` papers share the id's DOI, PubMed id, arXiv id or
#   folded title (the same paper held twice);
# - `title_conflict`: the benchmark gives the id several titles (across files, suites or layouts): every
#   title's papers, beside whatever an earlier step maps it to.
SHARED = {step: f"{step}_shared" for step in ("doi", "pubmed", "arxiv", "title")}
SHA_CONFLICT = "sha_conflict"
TITLE_CONFLICT = "title_conflict"
# Every method a `benchmark_ids` row can carry, in the cascade's order; each step's own method first.
METHODS = (
    "corpus_id",
    "sha",
    SHA_CONFLICT,
    "doi",
    SHARED["doi"],
    "pubmed",
    SHARED["pubmed"],
    "arxiv",
    SHARED["arxiv"],
    "title",
    SHARED["title"],
    TITLE_CONFLICT,
)
# the methods that say an id's inputs were in doubt (each counted and warned about: `doubts`)
DOUBTFUL = (SHA_CONFLICT, *SHARED.values(), TITLE_CONFLICT)
STEP_OF = {method: next(i for i, step in enumerate(STEPS) if method.startswith(step)) for method in METHODS}


def too_common(step: str) -> str:
    """The unmapped reason of an id whose `step` key more than `max_shared_matches` papers share."""
    return f"{step}_too_common"


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


def title_conflicts(bench: pa.Table) -> pa.Table:
    """(id, folded_title) of every id the benchmark gives several titles (`collect` rows: in one file or across
    files, suites and layouts), one row per distinct folded title: titles that fold alike (case, accents,
    punctuation, Unicode form) are one title. The mapping matches every one of them (`title_conflict`)."""
    titled = bench.filter(pc.is_valid(bench["title"])).select(["id", "title"])
    titled = titled.group_by(["id", "title"], use_threads=False).aggregate([])
    folded = pa.table({"id": titled["id"], "folded_title": fold_titles(titled["title"])})
    folded = folded.filter(pc.is_valid(folded["folded_title"]))
    folded = folded.group_by(["id", "folded_title"], use_threads=False).aggregate([])
    counts = folded.group_by("id", use_threads=False).aggregate([("folded_title", "count")])
    several = counts.filter(pc.greater(counts["folded_title_count"], 1))["id"]
    return folded.filter(pc.is_in(folded["id"], value_set=several.combine_chunks())).sort_by(
        [("id", "ascending"), ("folded_title", "ascending")]
    )


# `id_mapping.sha_lookup`'s rows that count paper-ids lines have keys starting with COUNTED (a sha, 40 hex
# digits, never does): COUNTED + USABLE for the lines with a pair for a sha no benchmark id has, COUNTED + a
# reason for the lines without a pair (`citeflow.spark.readers.parse_lines`' reasons, or NO_PAIR: the line parsed, but
# its sha is not 40 hex digits or its corpusid not an integer).
COUNTED = "!"
USABLE = "usable"
NO_PAIR = "no_sha_or_corpus_id"


def paper_ids_counts(lookup: pa.Table) -> dict[str, Any]:
    """The manifest's account of the paper-ids lines, from an `id_mapping.sha_lookup` table (key, corpus_id,
    lines): every line, the lines that gave a (sha, corpus id) pair, the others by reason (no line uncounted),
    and `conflicts`: the benchmark's shas that the table gives several corpus ids, and their lines."""
    counted = pc.starts_with(lookup["key"], COUNTED)
    found = lookup.filter(pc.invert(counted))
    rows = {
        r["key"][len(COUNTED) :]: int(r["lines"]) for r in lookup.filter(counted).select(["key", "lines"]).to_pylist()
    }
    pairs = int(pc.sum(found["lines"]).as_py() or 0) + rows.pop(USABLE, 0)
    unusable = dict(sorted(rows.items()))
    per_sha = found.group_by("key", use_threads=False).aggregate([("corpus_id", "count"), ("lines", "sum")])
    several = per_sha.filter(pc.greater(per_sha["corpus_id_count"], 1))
    conflicts = {"shas": several.num_rows, "lines": int(pc.sum(several["lines_sum"]).as_py() or 0)}
    return {"lines": pairs + sum(unusable.values()), "pairs": pairs, "unusable": unusable, "conflicts": conflicts}


def looked_up_shas(lookup: pa.Table) -> pa.Table:
    """(sha, corpus_id) of an `id_mapping.sha_lookup` table: each wanted sha the paper-ids table knows, once per
    corpus id it gives the sha (several: a conflict, every one of them named)."""
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
    paper-ids table). Spark's plan for these few hundred thousand rows costs a query of its own. An id whose
    sha the table gives several corpus ids has a row for each (`sha_conflict`); every other id has one row,
    method and corpus_id null where neither step maps it."""
    trimmed = pc.utf8_trim(ids["id"], " ")
    digits = pc.struct_field(pc.extract_regex(trimmed, _CORPUS_ID_SPELLING), "digits")
    by_id = pc.cast(digits, pa.int64())  # null where the pattern does not match
    table = pa.table({"id": ids["id"], "_cid": by_id, "_sha": pc.utf8_lower(trimmed)})
    if by_sha is None:
        by_sha = pa.table({"sha": pa.array([], pa.string()), "corpus_id": pa.array([], pa.int64())})
    assert by_sha is not None  # pyarrow is compiled: a checker cannot see that pa.table returns a table
    per_sha = by_sha.group_by("sha", use_threads=False).aggregate([("corpus_id", "count_distinct")])
    counted = by_sha.join(per_sha, keys="sha", use_threads=False).rename_columns(["_sha", "_by_sha", "_n"])
    joined = table.join(counted, keys="_sha", join_type="left outer", use_threads=False)
    cid, sha = joined["_cid"], joined["_by_sha"]
    by_sha_method = pc.if_else(pc.greater(joined["_n"], 1), pa.scalar(SHA_CONFLICT), pa.scalar("sha"))
    method = pc.if_else(
        pc.is_valid(cid),
        pa.scalar("corpus_id"),
        pc.if_else(pc.is_valid(sha), by_sha_method, pa.scalar(None, pa.string())),
    )
    return pa.table({"id": joined["id"], "corpus_id": pc.coalesce(cid, sha), "method": method})


# The external ids the cascade matches after the sha step: (method, the ids' and papers' column), in order.
EXTERNAL_STEPS = (("doi", "doi"), ("pubmed", "pubmed_id"), ("arxiv", "arxiv_id"))
NO_MATCH = "no_match"


def key_column(column: str) -> str:
    """The name of `column`'s key as the cascade compares it (Spark's `lower(trim(column))`, made in Spark:
    `transforms.with_keys`)."""
    return f"_key_{column}"


def later_steps(
    ids: pa.Table,
    sharing: pa.Table,
    *,
    match_titles: bool = True,
    conflicts: pa.Table | None = None,
    most_shared: int = 5,
) -> pa.Table:
    """(id, corpus_id, method, unmapped_reason) of `ids` (`distinct_ids` rows the corpus_id and sha steps
    leave unmapped, with their keys: `transforms.with_keys`) by the cascade's steps that read the papers,
    given the papers that share a key with them (`transforms.papers_sharing_keys`, with their keys), plus the
    `title_conflict` rows of every id of `conflicts` (`title_conflicts` rows, mapped before or not).

    `id_mapping.map_ids`' steps on these rows, made in the driver: the rows are bounded by the benchmark
    and the papers that share its keys, and Spark's plan for them runs some fifteen stages of a few rows
    each. Every string the steps compare was made by Spark (the keys by
    `lower(trim(...))`, the papers' title folds), so the joins here compare bytes as Spark's do.
    tests/unit/spark/test_leakage.py checks this against `map_ids`.

    Each step matches one key: a DOI, PubMed id, arXiv id, then (with `match_titles`) the folded title. A key
    one paper has maps the id to it (the step's method); a key 2 to `most_shared` papers share maps it to all
    of them (`<step>_shared`); a key more papers share maps nothing, and an id left unmapped says so
    (`<step>_too_common`, the first such step). An id takes every paper of the first step that maps it. An id
    with several titles matches each of its titles instead of its first (`title_conflict`: every paper of
    each title up to `most_shared`), and those rows join whatever an earlier step mapped it to.
    """
    parts = [first_steps(ids.select(["id"]), None).filter(pc.is_valid(pc.field("method")))]
    unmatchable = []  # (id, reason) of the ids whose key too many papers share
    several = pa.array([], pa.string()) if conflicts is None else conflicts["id"].combine_chunks()

    def matches(wanted: pa.Table, source: str) -> pa.Table:
        """(id, corpus_id, _n) of `wanted` (id, _key): each paper of `sharing` whose `source` is the key, and how
        many papers have that key."""
        rows = sharing.filter(pc.is_valid(sharing[source])).select([source, "corpus_id"])
        rows = rows.rename_columns(["_key", "corpus_id"])
        counts = rows.group_by("_key", use_threads=False).aggregate([("corpus_id", "count")])
        found = wanted.join(rows, keys="_key", join_type="inner", use_threads=False)
        found = found.join(counts.rename_columns(["_key", "_n"]), keys="_key", join_type="inner", use_threads=False)
        return found.select(["id", "corpus_id", "_n"])

    def step(wanted: pa.Table, source: str, method: str, shared: str) -> None:
        found = matches(wanted.rename_columns(["id", "_key"]), source)
        n = found["_n"]
        parts.append(_step_rows(found.filter(pc.equal(n, 1)), method))
        parts.append(_step_rows(found.filter(pc.and_(pc.greater(n, 1), pc.less_equal(n, most_shared))), shared))
        unmatchable.append(_reason_rows(found.filter(pc.greater(n, most_shared)), too_common(method)))

    for method, column in EXTERNAL_STEPS:
        key = key_column(column)
        step(ids.filter(pc.is_valid(ids[key])).select(["id", key]), key, method, SHARED[method])
    conflicting = []
    if match_titles:
        single = pc.and_(pc.is_valid(ids["folded_title"]), pc.invert(pc.is_in(ids["id"], value_set=several)))
        step(ids.filter(single).select(["id", "folded_title"]), "_folded", "title", SHARED["title"])
        if conflicts is not None:
            found = matches(conflicts.select(["id", "folded_title"]).rename_columns(["id", "_key"]), "_folded")
            conflicting.append(_step_rows(found.filter(pc.less_equal(found["_n"], most_shared)), TITLE_CONFLICT))
            unmatchable.append(_reason_rows(found.filter(pc.greater(found["_n"], most_shared)), too_common("title")))

    rows = _numbered(pa.concat_tables(parts))
    # every paper of each id's first step that maps it
    first = rows.group_by("id", use_threads=False).aggregate([("_step", "min")])
    rows = rows.join(first, keys="id", use_threads=False)
    rows = rows.filter(pc.equal(rows["_step"], rows["_step_min"])).select(["id", "corpus_id", "method"])
    rows = one_per_paper(pa.concat_tables([rows, *conflicting]))
    unmapped = ids.select(["id"]).filter(pc.invert(pc.is_in(ids["id"], value_set=rows["id"].combine_chunks())))
    reasons = _first_reasons(pa.concat_tables([_reason_rows(unmapped.slice(0, 0), NO_MATCH), *unmatchable]))
    reason = unmapped.join(reasons, keys="id", join_type="left outer", use_threads=False)
    reason = reason.append_column("unmapped_reason", pc.fill_null(reason["reason"], NO_MATCH)).select(
        ["id", "unmapped_reason"]
    )
    left = pa.table(
        {
            "id": reason["id"],
            "corpus_id": pa.nulls(reason.num_rows, pa.int64()),
            "method": pa.nulls(reason.num_rows, pa.string()),
            "unmapped_reason": reason["unmapped_reason"],
        }
    )
    done = rows.append_column("unmapped_reason", pa.nulls(rows.num_rows, pa.string()))
    return pa.concat_tables([done.cast(MAPPED_SCHEMA), left.cast(MAPPED_SCHEMA)])


MAPPED_SCHEMA = pa.schema(
    [("id", pa.string()), ("corpus_id", pa.int64()), ("method", pa.string()), ("unmapped_reason", pa.string())]
)


def _numbered(rows: pa.Table) -> pa.Table:
    """(id, corpus_id, method) rows with `_step` and `_order`: the cascade step and the place of their method."""
    order = pc.index_in(rows["method"], pa.array(METHODS))
    steps = pa.array([STEP_OF[m] for m in METHODS], pa.int32())
    return rows.append_column("_step", pc.take(steps, order)).append_column("_order", order)


def one_per_paper(rows: pa.Table) -> pa.Table:
    """(id, corpus_id, method) rows, one per (id, corpus id): the earliest method in the cascade's order (an id a
    step and its titles map to one paper names it once, by the step)."""
    if rows.num_rows <= 1:
        return rows.select(["id", "corpus_id", "method"])
    rows = _numbered(rows).sort_by([("id", "ascending"), ("corpus_id", "ascending"), ("_order", "ascending")])
    same = pc.and_(
        pc.equal(rows["id"][1:], rows["id"][:-1]),
        pc.fill_null(pc.equal(rows["corpus_id"][1:], rows["corpus_id"][:-1]), False),
    )
    keep = pa.concat_arrays([pa.array([True]), pc.invert(same).combine_chunks()])
    return rows.filter(keep).select(["id", "corpus_id", "method"])


def _reason_rows(found: pa.Table, reason: str) -> pa.Table:
    ids = pc.unique(found["id"])
    return pa.table({"id": ids, "reason": pa.array([reason] * len(ids), pa.string())})


def _first_reasons(reasons: pa.Table) -> pa.Table:
    """(id, reason): the first too-common step of each id, in the cascade's order."""
    if reasons.num_rows == 0:
        return reasons
    order = pc.index_in(reasons["reason"], pa.array([too_common(step) for step in STEPS]))
    ranked = reasons.append_column("_o", order).sort_by([("id", "ascending"), ("_o", "ascending")])
    keep = pa.concat_arrays([pa.array([True]), pc.not_equal(ranked["id"][1:], ranked["id"][:-1]).combine_chunks()])
    return ranked.filter(keep).select(["id", "reason"])


def mapped_rows(first: pa.Table, later: pa.Table, known: list[pa.ChunkedArray]) -> pa.Table:
    """(id, corpus_id, method, in_snapshot, unmapped_reason) of every benchmark id: the ids the first steps
    map (`first`: `first_steps` rows) and the others as `later_steps` leaves them (`later`, which also holds
    the `title_conflict` rows of ids the first steps map), one row per id and paper it maps to
    (`one_per_paper`), `in_snapshot` where the corpus id is one of `known` (the snapshot's papers among those
    the steps name)."""
    done = first.filter(pc.is_valid(first["method"])).select(["id", "corpus_id", "method"])
    named = later.filter(pc.is_valid(later["method"]))
    done = one_per_paper(pa.concat_tables([done.cast(MAPPED_SCHEMA.remove(3)), named.select(done.column_names)]))
    done = done.append_column("unmapped_reason", pa.nulls(done.num_rows, pa.string()))
    rows = pa.concat_tables([done.cast(MAPPED_SCHEMA), later.filter(pc.is_null(later["method"])).cast(MAPPED_SCHEMA)])
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
    """filter_leakage's `benchmark_ids` table: one row per distinct (suite, id, task, split) of `bench` and paper
    its id maps to, from `mapped` (`mapped_rows`: corpus_id, method, in_snapshot, unmapped_reason; one row for an
    id that maps to nothing), ordered by suite, task, split, id and corpus id.

    The benchmark's side of the stage (hundreds of thousands of rows, bounded by the benchmark, not the
    corpus) is joined and sorted here, in the driver that already holds the benchmark's rows: Spark's plans
    for so few rows cost more than the work.
    """
    keys = ["suite", "id", "task", "split"]
    rows = bench.select(keys).group_by(keys, use_threads=False).aggregate([])
    columns = ["corpus_id", "method", "in_snapshot", "unmapped_reason"]
    joined = rows.join(mapped.select(["id", *columns]), keys="id", join_type="left outer", use_threads=False)
    # nulls first, as Spark orders them; an id's papers by corpus id
    order = [(key, "ascending", "at_start") for key in ("suite", "task", "split", "id", "corpus_id")]
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
    ids mapped by each method (an id counts under each method of its rows: one with several titles under
    `title_conflict` beside the step that mapped it), unmapped ids and of those `too_common` (a key too many papers
    share), ids in the snapshot, `removed_papers` (the distinct papers of the
    graph they map to: removed in mode exclude), and from `reach` (`transforms.reach` rows, keyed the same
    way) the edges those papers have (`removed_edges`) and, with `filter_leakage.strict`, the papers one citation
    away from them that are not benchmark papers and those papers' other edges (`one_hop_*`); 0 without it.
    `rows` is a `benchmark_id_rows` table; an id (and a paper) counts once at every level, however many of its
    rows the level holds, so the levels do not sum: a paper in two suites counts in both."""
    flags = {f"mapped_{m}": pc.cast(pc.fill_null(pc.equal(rows["method"], m), False), pa.int64()) for m in METHODS}
    flags["unmapped"] = pc.cast(pc.is_null(rows["method"]), pa.int64())
    # of those, the ids whose key too many papers share (`<step>_too_common`)
    flags["too_common"] = pc.cast(pc.fill_null(pc.ends_with(rows["unmapped_reason"], "_too_common"), False), pa.int64())
    flags["in_snapshot"] = pc.cast(pc.fill_null(rows["in_snapshot"], False), pa.int64())
    in_graph = pc.if_else(pc.fill_null(rows["in_snapshot"], False), rows["corpus_id"], pa.scalar(None, pa.int64()))
    base = {"suite": rows["suite"], "task": rows["task"], "split": rows["split"], "id": rows["id"]}
    counted = pa.table({**base, **flags, "_paper": in_graph})
    names = ["suite", "task", "split", "total", *flags, "removed_papers"]
    parts = []
    for level in REPORT_LEVELS:
        # each id once per group (a flag of any of its rows: an id with several papers counts under each of
        # their methods), then summed; the papers counted apart, each once however many ids name it
        per_id = counted.group_by([*level, "id"], use_threads=False).aggregate([(name, "max") for name in flags])
        if level:
            summed = per_id.group_by(list(level), use_threads=False).aggregate(
                [("id", "count"), *((f"{name}_max", "sum") for name in flags)]
            )
            papers = counted.group_by(list(level), use_threads=False).aggregate([("_paper", "count_distinct")])
            summed = summed.join(papers, keys=list(level), use_threads=False)
        else:
            summed = pa.table(
                {
                    "id_count": [per_id.num_rows],
                    **{f"{name}_max_sum": [pc.sum(per_id[f"{name}_max"]).as_py() or 0] for name in flags},
                    "_paper_count_distinct": [pc.count_distinct(counted["_paper"]).as_py()],
                }
            )
        n = summed.num_rows
        filled = {
            key: summed[key] if key in level else pa.repeat(pa.scalar("all", pa.string()), n)
            for key in ("suite", "task", "split")
        }
        values = [summed["id_count"], *(summed[f"{name}_max_sum"] for name in flags)]
        values.append(summed["_paper_count_distinct"])
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


EXAMPLES = 5  # ids named per kind of doubt in the manifest and the warning


def doubts(mapped: pa.Table, conflicts: pa.Table) -> dict[str, dict[str, Any]]:
    """Per kind of doubt the inputs left (`DOUBTFUL` methods, and each `<step>_too_common` reason), from the
    mapping (`mapped_rows`) and the ids with several titles (`title_conflicts` rows): `ids` (distinct benchmark
    ids), `papers` (the distinct papers of the snapshot they map to) and `examples` (the first ids by name); for
    `title_conflict`, `ids` counts every id with several titles and `matched` those whose titles name a paper.
    Kinds no id has are left out. The manifest carries it (`doubts`), and the log says it."""
    found: dict[str, dict[str, Any]] = {}

    def first(ids: pa.Array) -> list[str]:
        return ids.sort()[:EXAMPLES].to_pylist()

    for method in DOUBTFUL:
        rows = mapped.filter(pc.fill_null(pc.equal(mapped["method"], method), False))
        ids = pc.unique(rows["id"])
        papers = len(pc.unique(rows.filter(rows["in_snapshot"])["corpus_id"]))
        if method == TITLE_CONFLICT:
            several = pc.unique(conflicts["id"])
            if len(several):
                found[method] = {"ids": len(several), "matched": len(ids), "papers": papers, "examples": first(several)}
        elif len(ids):
            found[method] = {"ids": len(ids), "papers": papers, "examples": first(ids)}
    for step in STEPS:
        reason = too_common(step)
        ids = pc.unique(mapped.filter(pc.fill_null(pc.equal(mapped["unmapped_reason"], reason), False))["id"])
        if len(ids):
            found[reason] = {"ids": len(ids), "examples": first(ids)}
    return found
