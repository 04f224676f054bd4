"""The mapping cascade, the report and the removal, on hand-made rows with hand-worked answers."""

import random

import pytest

from citeflow.jobs.filter_leakage import id_mapping as M
from citeflow.jobs.filter_leakage import transforms as L
from citeflow.jobs.filter_leakage.mapping import (
    METHODS,
    benchmark_id_rows,
    distinct_ids,
    leakage_report,
    title_conflicts,
)

SHA_A, SHA_B, SHA_C, SHA_D, SHA_E, SHA_F = (c * 40 for c in "abcdef")
# (corpus_id, method, in_snapshot, unmapped_reason) of each paper an id of the `bench` fixture maps to, worked
# out by hand
CASCADE_ANSWERS = {
    "2": {(2, "corpus_id", True, None)},
    SHA_A: {(1, "sha", True, None)},
    SHA_B: {(99, "sha", False, None)},
    SHA_C: {(2, "title", True, None)},
    SHA_D: {(3, "title_shared", True, None), (4, "title_shared", True, None)},  # a title papers 3 and 4 share
    SHA_E: {(5, "doi", True, None)},
    SHA_F: {(None, None, False, "no_match")},
    "x" * 40: {(6, "pubmed", True, None)},
}


def by_id(rows, columns=("corpus_id", "method", "in_snapshot", "unmapped_reason")) -> dict:
    """Rows (Spark's or pyarrow's) as {id: {(column values), ...}}: an id maps to a set of papers."""
    found: dict = {}
    for r in rows:
        found.setdefault(r["id"], set()).add(tuple(r[c] for c in columns))
    return found


def ids_of(bench):
    """The cascade's input as filter_leakage makes it: `distinct_ids` of the benchmark rows (pyarrow)."""
    return bench.sparkSession.createDataFrame(distinct_ids(bench.toArrow()))


@pytest.fixture
def papers(spark):
    return spark.createDataFrame(
        [
            (1, "Deep Learning for Cats", None, None, None),
            (2, "Café au lait", None, None, None),
            (3, "Same Title", None, None, None),
            (4, "Same title.", None, None, None),
            (5, "Something else", "10.1/ABC", None, None),
            (6, "Sixth", None, "123456", None),
        ],
        "corpus_id long, title string, doi string, pubmed_id string, arxiv_id string",
    )


@pytest.fixture
def bench(spark):
    rows = [
        ("scidocs", "2", "cite", "test", None, None, None, None),  # already a corpus id
        ("scidocs", SHA_A, "cite", "test", "ignored title", None, None, None),  # sha -> 1
        ("scidocs", SHA_A, "mag", "train", None, None, None, None),  # same id, another task
        ("scidocs", SHA_B, "cite", "val", None, None, None, None),  # sha -> 99, not in the snapshot
        ("scidocs", SHA_C, "cocite", "test", "CAFE AU LAIT!", None, None, None),  # title -> 2
        ("scidocs", SHA_D, "cocite", "test", "same title", None, None, None),  # ambiguous title (3 and 4)
        ("scidocs", SHA_E, "mesh", "test", None, "10.1/abc", None, None),  # DOI, case-folded -> 5
        ("scidocs", SHA_F, "mesh", "test", None, None, None, None),  # nothing to go by
        ("scidocs", "x" * 40, "mesh", "test", None, None, "123456", None),  # PubMed -> 6
        ("beir", "2", "scifact", "corpus", None, None, None, None),  # corpus id 2 in another suite too
    ]
    return spark.createDataFrame(
        rows,
        "suite string, id string, task string, split string, title string, doi string, pubmed_id string, "
        "arxiv_id string",
    )


def test_cascade_takes_the_first_method_that_finds_each_id(spark, papers, bench):
    paper_ids = spark.createDataFrame([(SHA_A, 1), (SHA_B, 99), ("0" * 40, 3)], "sha string, corpus_id long")
    assert by_id(M.map_ids(ids_of(bench), papers, paper_ids).collect()) == CASCADE_ANSWERS


@pytest.mark.parametrize("broadcast_keys", [False, True])
def test_the_narrow_mapping_gives_the_cascades_answers(spark, papers, bench, broadcast_keys):
    """map_ids_narrow (filter_leakage's mapping) against the hand-worked answers of the cascade above, plus a
    DOI two papers share (one spelled with spaces and capitals): its id maps to both, and the cascade stops there
    (its title would have named one of them)."""
    more = spark.createDataFrame(
        [(7, "Shared DOI one", "10.2/dup", None, None), (8, "Shared DOI two", " 10.2/DUP ", None, None)],
        papers.schema,
    )
    extra = spark.createDataFrame(
        [("scidocs", "y" * 40, "mesh", "test", "shared doi TWO", "10.2/Dup", None, None)], bench.schema
    )  # DOI shared by 7 and 8 -> both
    paper_ids = spark.createDataFrame([(SHA_A, 1), (SHA_B, 99), ("0" * 40, 3)], "sha string, corpus_id long")
    # each step materialised, as filter_leakage does (to Parquet there): one unbroken plan of the whole
    # cascade ran 47 Spark jobs over these few rows and took 7 to 18 s, this takes 3
    steps = []

    def materialize(frame, name):
        steps.append(name)
        return frame.localCheckpoint()

    mapped = by_id(
        M.map_ids_narrow(
            ids_of(bench.unionByName(extra)),
            papers.unionByName(more),
            paper_ids,
            broadcast_keys=broadcast_keys,
            materialize=materialize,
        ).collect()
    )
    assert mapped == {**CASCADE_ANSWERS, "y" * 40: {(7, "doi_shared", True, None), (8, "doi_shared", True, None)}}
    assert "first" in steps and "sharing_papers" in steps and len(steps) == len(set(steps))  # names never clash
    without = by_id(M.map_ids_narrow(ids_of(bench), papers, None, materialize=materialize).collect(), ["method"])
    assert (without[SHA_A], without[SHA_C], without[SHA_E]) == ({(None,)}, {("title",)}, {("doi",)})


@pytest.mark.parametrize("match_titles, most_shared", [(True, 5), (True, 40), (False, 5)])
def test_the_narrow_mapping_equals_the_whole_cascade_on_colliding_keys(spark, match_titles, most_shared):
    """map_ids_narrow, whose later steps run in the driver (`citeflow.jobs.filter_leakage.mapping.later_steps`), against
    map_ids (every step in Spark) on random papers and ids that share DOIs, PubMed and arXiv ids (spelled
    with spaces and capitals) and titles, with several methods mapping one id to different papers, ids the
    benchmark gives several titles, a sha the paper-ids table gives two corpus ids, and keys shared by more papers
    than `most_shared` and by fewer."""
    from pyspark.sql import functions as F

    rng = random.Random(11)
    pick = lambda pool, p: rng.choice(pool) if rng.random() < p else None  # noqa: E731
    # each key either the paper's own (unique) or from a small pool several papers share
    dois = ["10.1/a", " 10.1/A", "10.1/b ", "10.3/É", "10.3/é", ""]
    titles = ["Same Title", "same title.", "Café", "CAFE", "Ünique one", None]
    rows = []
    for cid in range(1, 120):
        own = rng.random() < 0.5
        rows.append(
            (
                cid,
                f"Title number {cid}" if own else pick(titles, 0.9),
                f"10.5/{cid}" if rng.random() < 0.3 else pick(dois, 0.4),
                str(1000 + cid) if rng.random() < 0.2 else pick(["1", "2", " 3"], 0.3),
                f"2101.{cid:05d}" if rng.random() < 0.2 else pick(["x.1", "X.1", "y.2"], 0.3),
            )
        )
    papers = spark.createDataFrame(rows, "corpus_id long, title string, doi string, pubmed_id string, arxiv_id string")
    vary = lambda v: v if v is None else rng.choice([v, v.upper(), f" {v} "])  # noqa: E731
    bench = []
    for i in range(150):
        paper = rng.choice(rows)
        bench.append(
            (
                rng.choice([f"{i:040x}", "a" * 40, str(rng.choice([5, 70, 500]))]) if i % 10 == 0 else f"{i:040x}",
                rng.choice(["cite", "mesh"]),
                rng.choice(["test", "val"]),
                vary(paper[1]) if rng.random() < 0.7 else pick(["nothing like it", "SAME TITLE"], 0.5),
                vary(paper[2]) if rng.random() < 0.5 else None,
                vary(paper[3]) if rng.random() < 0.4 else None,
                vary(paper[4]) if rng.random() < 0.4 else None,
            )
        )
    bench = spark.createDataFrame(
        bench, "id string, task string, split string, title string, doi string, pubmed_id string, arxiv_id string"
    )
    paper_ids = spark.createDataFrame(
        [("a" * 40, 3), ("b" * 40, 200), (f"{11:040x}", 4), (f"{11:040x}", 5)], "sha string, corpus_id long"
    )
    columns = ["id", "corpus_id", "method", "in_snapshot", "unmapped_reason"]
    conflicts = title_conflicts(bench.withColumn("suite", F.lit("s")).toArrow())
    assert conflicts.num_rows > 0
    doubt = {"conflicts": conflicts, "most_shared": most_shared}
    whole = M.map_ids(
        ids_of(bench),
        papers,
        paper_ids,
        match_titles=match_titles,
        conflicts=spark.createDataFrame(conflicts),
        most_shared=most_shared,
    )
    whole = whole.select(columns).collect()
    narrow = M.map_ids_narrow(
        ids_of(bench),
        papers,
        paper_ids,
        match_titles=match_titles,
        materialize=lambda f, name: f.localCheckpoint(),
        **doubt,
    )
    narrow = narrow.select(columns).collect()
    assert sorted(narrow) == sorted(whole)
    # filter_leakage's way: the papers' keys made (and stored) first, every title folded (match_titles or not)
    checkpoint = lambda f, name: f.localCheckpoint()  # noqa: E731
    keyed = M.map_ids_narrow(
        ids_of(bench),
        papers,
        paper_ids,
        match_titles=match_titles,
        materialize=checkpoint,
        paper_keys=L.paper_key_rows(papers, checkpoint).localCheckpoint(),
        **doubt,
    )
    assert sorted(keyed.select(columns).collect()) == sorted(whole)
    methods = {r["method"] for r in whole}
    reasons = {r["unmapped_reason"] for r in whole}
    assert {"doi", "pubmed", "arxiv", "sha_conflict"} <= methods and (("title" in methods) == match_titles)
    assert ("title_conflict" in methods) == match_titles
    # the pools' DOIs and titles: too common for 5 papers, each shared by fewer than 40
    assert ("title_too_common" in reasons) == (match_titles and most_shared == 5)
    assert ("doi_too_common" in reasons) == (most_shared == 5)
    assert ("title_shared" in methods) == (match_titles and most_shared == 40)


def test_without_paper_ids_or_titles_shas_stay_unmapped(spark, papers, bench):
    mapped = by_id(M.map_ids(ids_of(bench), papers, None, match_titles=False).collect(), ["method"])
    assert mapped[SHA_A] == mapped[SHA_C] == {(None,)} and mapped["2"] == {("corpus_id",)}


def test_report_counts_per_suite_task_split_and_overall(spark, papers, bench):
    paper_ids = spark.createDataFrame([(SHA_A, 1), (SHA_B, 99)], "sha string, corpus_id long")
    mapped = M.map_ids(ids_of(bench), papers, paper_ids)
    rows = benchmark_id_rows(bench.toArrow(), mapped.toArrow())
    # a row per (suite, id, task, split) and paper: SHA_D's two papers
    assert rows.num_rows == bench.select("suite", "id", "task", "split").distinct().count() + 1
    keys = ["suite", "task", "split", "id"]
    assert rows.select(keys).to_pylist() == sorted(rows.select(keys).to_pylist(), key=lambda r: [r[k] for k in keys])
    report = {(r["suite"], r["task"], r["split"]): r for r in leakage_report(rows).to_pylist()}
    overall = report[("all", "all", "all")]
    assert overall["total"] == 8  # the 8 distinct ids: "2" of two suites once
    assert (
        overall["mapped_corpus_id"],
        overall["mapped_sha"],
        overall["mapped_title"],
        overall["mapped_doi"],
        overall["mapped_pubmed"],
        overall["mapped_arxiv"],
    ) == (1, 2, 1, 1, 1, 0)
    assert overall["unmapped"] == 1 and overall["in_snapshot"] == 6 and overall["mapped_title_shared"] == 1
    # ids 2, SHA_A, SHA_C (-> 2 as well), SHA_D, SHA_E, x: papers 2, 1, 3, 4, 5, 6 of the graph
    assert overall["removed_papers"] == 6
    assert report[("scidocs", "all", "all")]["total"] == 8 and report[("beir", "all", "all")]["total"] == 1
    assert report[("beir", "scifact", "corpus")]["removed_papers"] == 1
    assert report[("scidocs", "mesh", "test")]["total"] == 3 and report[("scidocs", "mesh", "test")]["unmapped"] == 1
    assert report[("scidocs", "cite", "test")]["total"] == 2 and report[("scidocs", "mag", "train")]["mapped_sha"] == 1
    assert report[("scidocs", "cocite", "test")]["removed_papers"] == 3  # SHA_C -> 2; SHA_D -> 3 and 4
    assert all(r["removed_edges"] == r["one_hop_papers"] == r["one_hop_edges"] == 0 for r in report.values())
    assert list(report)[-3:] == [("scidocs", "mesh", "test"), ("scidocs", "all", "all"), ("all", "all", "all")]


def test_remove_papers_drops_every_edge_touching_them(spark):
    papers = spark.createDataFrame([(i, 10 * i) for i in range(1, 6)], "corpus_id long, _row_index long")
    citations = spark.createDataFrame([(1, 2), (2, 3), (3, 4), (4, 5), (5, 1)], "citing long, cited long")
    excluded = spark.createDataFrame([(2,), (2,), (None,), (9,)], "corpus_id long")
    kept_papers, kept_edges, removed = L.remove_papers(papers, citations, excluded)
    assert sorted(r[0] for r in kept_papers.collect()) == [1, 3, 4, 5]
    assert sorted(tuple(r) for r in kept_edges.collect()) == [(3, 4), (4, 5), (5, 1)]
    assert [tuple(r) for r in removed.collect()] == [(2, 20)]  # once, with the columns the papers had


@pytest.mark.parametrize("broadcast", [True, False])
def test_the_filtered_degrees_equal_the_degrees_counted_on_the_kept_graph(spark, broadcast):
    """`filtered_degrees` (the graph's degrees less the edges that go) against counting the kept edges of the
    kept papers, as `citeflow.spark.output.write_degrees` counts them: isolated papers, papers whose every edge goes,
    edges between two excluded papers, an excluded paper without edges, an id excluded but not in the graph."""
    from citeflow.spark import graph as G

    rng = random.Random(19)
    ids = list(range(1, 301))
    pairs = {(rng.choice(ids[:250]), rng.choice(ids[:250])) for _ in range(1500)}  # 251..300 isolated
    edges = spark.createDataFrame(sorted((a, b) for a, b in pairs if a != b), "citing long, cited long")
    papers = spark.createDataFrame([(i,) for i in ids], "corpus_id long")
    excluded_ids = [*rng.sample(ids[:250], 40), 260, 9999]
    excluded = spark.createDataFrame([(i,) for i in excluded_ids], "corpus_id long")
    graph_degrees = G.with_degrees(papers, edges)
    kept_papers, kept_edges, _ = L.remove_papers(papers, edges, excluded)
    want = sorted(G.with_degrees(kept_papers, kept_edges).collect())
    got = sorted(L.filtered_degrees(graph_degrees, edges, excluded, broadcast=broadcast).collect())
    assert got == want
    assert len(got) == 300 - 41 and any(r.out_degree == 0 and r.in_degree == 0 for r in got)
    assert {type(r.out_degree) for r in got} == {int}


def test_paper_id_pairs_skip_unusable_lines(spark):
    from citeflow.spark import readers as R

    lines = spark.createDataFrame(
        [
            (f'{{"sha": "{SHA_A.upper()}", "corpusid": 7, "primary": true}}', "f"),
            ('{"sha": "short", "corpusid": 8}', "f"),
            ("{broken", "f"),
            (f'{{"sha": "{SHA_B}", "corpusid": null}}', "f"),
        ],
        "value string, source string",
    )
    pairs = M.paper_id_pairs(R.parse_lines(lines, M.PAPER_IDS_SCHEMA))
    assert [(r["sha"], r["corpus_id"]) for r in pairs.collect()] == [(SHA_A, 7)]


def test_the_sha_lookup_finds_what_the_pairs_find_and_counts_every_line(spark, tmp_path):
    """`sha_lookup` (filter_leakage's one pass over the paper-ids table) gives `id_steps` the same answers as
    the pairs do, and accounts for every line: the ones with a pair, and the others by reason."""
    import pyarrow as pa

    from citeflow.jobs.filter_leakage.mapping import first_steps, looked_up_shas, paper_ids_counts, sha_candidates
    from citeflow.spark import readers as R

    lines = [
        f'{{"sha": "{SHA_A.upper()} ", "corpusid": 7, "primary": true}}',  # -> SHA_A 7
        f'{{"sha": "{SHA_A}", "corpusid": "3"}}',  # a second corpus id for SHA_A: both are named
        f'{{"sha": "{SHA_A}", "corpusid": 3}}',  # the same pair again: no third
        f'{{"sha": "{SHA_B}", "corpusid": 8, "primary": "yes"}}',  # a bad field beside a usable pair: a pair
        f'{{"sha": "{SHA_E}", "corpusid": 9}}',  # a pair no benchmark id asks for
        '{"sha": "short", "corpusid": 10}',  # no_sha_or_corpus_id
        f'{{"sha": "{SHA_C}", "corpusid": "x"}}',  # no_sha_or_corpus_id, though the benchmark asks for SHA_C
        f'{{"sha": "{SHA_D}", "corpusid": [11]}}',  # no_sha_or_corpus_id
        "{broken",  # malformed_json
        "[1, 2]",  # malformed_json
        "",  # blank_line
        f'{{"sha": "{SHA_F}", "corpusid": 12, "primary": [1]}}',  # bad_field_type, with a usable pair
    ]
    path = tmp_path / "paper-ids.jsonl"
    path.write_text("\n".join(lines) + "\n")
    parsed = R.parse_lines(spark.read.text(str(path)), M.PAPER_IDS_SCHEMA)
    ids = spark.createDataFrame([(SHA_A,), (SHA_B + " ",), (SHA_C,), (SHA_F.upper(),), ("12",), ("nope",)], "id string")
    shas = spark.createDataFrame(sha_candidates(pa.table({"id": [r["id"] for r in ids.collect()]})))
    stored = M.paper_id_lines(parsed)
    assert stored._jdf.queryExecution().executedPlan().toString().count("from_json") == 1
    # every line's key is its sha as written (what a diff names), whatever else the line holds; none without JSON
    assert [r["key"] for r in stored.collect()] == [
        f"{SHA_A.upper()} ",
        SHA_A,
        SHA_A,
        SHA_B,
        SHA_E,
        "short",
        SHA_C,
        SHA_D,
        None,
        None,
        None,
        SHA_F,
    ]
    lookup = M.sha_lookup(stored.localCheckpoint(), shas).localCheckpoint()
    table = lookup.toArrow()

    first = first_steps(pa.table({"id": [r["id"] for r in ids.collect()]}), looked_up_shas(table))
    by_lookup = by_id(first.to_pylist(), ["corpus_id", "method"])
    assert by_lookup == by_id(M.id_steps(ids, M.paper_id_pairs(parsed)).collect(), ["corpus_id", "method"])
    assert by_lookup[SHA_A] == {(3, "sha_conflict"), (7, "sha_conflict")}
    assert by_lookup[SHA_F.upper()] == {(12, "sha")} and by_lookup[SHA_C] == {(None, None)}

    counts = paper_ids_counts(table)
    assert counts == {
        "lines": len(lines),
        "pairs": 6,
        "unusable": {"blank_line": 1, "malformed_json": 2, "no_sha_or_corpus_id": 3},
        "conflicts": {"shas": 1, "lines": 3},
    }


# Spellings on which Spark's trim, regular expressions, cast and lower case could part from pyarrow's
TRICKY_IDS = [
    *[f"12{end}" for end in ("", "\n", "\r\n", "\r", "\x85", "\u2028", "\u2029", "\n\n", " \n", "\x0b", "\x00")],
    *[" 12 ", "\t12", "\n12", " 12\n ", "007", "+12", "-12", "1" * 18, "1" * 19, "\u0661\u0662", "12a", ""],
    *[f"{sha}{end}" for sha in (SHA_A, SHA_B.upper()) for end in ("", "\n", "\r\n", "\r", "\u2028", "\t", " ")],
    *[" " + SHA_A.upper() + " ", "1" * 40, SHA_A[:39], SHA_A + "0", "\u212a" + SHA_A[1:]],
]


def test_the_first_steps_in_the_driver_are_the_first_steps_in_spark(spark):
    """`citeflow.jobs.filter_leakage.mapping.first_steps` (pyarrow, filter_leakage's driver) gives `id_steps`' rows
    (Spark) on
    spellings where the two engines' string functions could part: line breaks Java's `$` lets through and
    the cast does or does not, tabs and other control characters, non-ASCII digits and letters."""
    import pyarrow as pa

    from citeflow.jobs.filter_leakage.mapping import first_steps

    pairs = [(SHA_A, 1), (SHA_B, 2), ("1" * 40, 3), (SHA_A + "\n", 4), (SHA_B + "\r\n", 5), (SHA_A + "\u2028", 6)]
    paper_ids = spark.createDataFrame(pairs, "sha string, corpus_id long")
    ids = spark.createDataFrame([(i,) for i in TRICKY_IDS], "id string")
    in_spark = by_id(M.id_steps(ids, paper_ids).collect(), ["corpus_id", "method"])
    by_sha = pa.table({"sha": [p[0] for p in pairs], "corpus_id": pa.array([p[1] for p in pairs], pa.int64())})
    in_driver = by_id(first_steps(pa.table({"id": TRICKY_IDS}), by_sha).to_pylist(), ["corpus_id", "method"])
    assert in_driver == in_spark
    assert in_spark["12\r\n"] == {(12, "corpus_id")} and in_spark["12\u2028"] == {(None, None)}
    no_table = by_id(first_steps(pa.table({"id": TRICKY_IDS}), None).to_pylist(), ["method"])
    assert no_table == by_id(M.id_steps(ids, None).collect(), ["method"])


def test_report_counts_zero_for_a_split_with_no_mapped_id():
    import pyarrow as pa

    bench = pa.table(
        {"suite": ["s"] * 4, "id": ["a", "a", "b", "c"], "task": ["t", "t", "t", "u"], "split": ["x", "x", "y", "y"]}
    )
    mapped = pa.table(
        {
            "id": ["a", "b", "c"],
            "corpus_id": pa.array([None, 7, None], pa.int64()),
            "method": [None, "sha", None],
            "in_snapshot": [False, True, False],
            "unmapped_reason": ["no_match", None, "title_too_common"],
        }
    )
    rows = benchmark_id_rows(bench, mapped)
    assert rows.column_names == [
        "suite",
        "id",
        "task",
        "split",
        "corpus_id",
        "method",
        "in_snapshot",
        "unmapped_reason",
    ]
    assert [(r["task"], r["split"], r["id"]) for r in rows.to_pylist()] == [
        ("t", "x", "a"),
        ("t", "y", "b"),
        ("u", "y", "c"),
    ]
    report = leakage_report(rows).to_pylist()
    assert [(r["suite"], r["task"], r["split"]) for r in report] == [
        ("s", "t", "x"),
        ("s", "t", "y"),
        ("s", "u", "y"),
        ("s", "all", "all"),
        ("all", "all", "all"),
    ]
    assert report[0] == {
        "suite": "s",
        "task": "t",
        "split": "x",
        "total": 1,
        **{f"mapped_{m}": 0 for m in METHODS},
        "unmapped": 1,
        "too_common": 0,
        "in_snapshot": 0,
        "removed_papers": 0,
        "removed_edges": 0,
        "one_hop_papers": 0,
        "one_hop_edges": 0,
    }
    overall = report[-1]
    assert (overall["total"], overall["mapped_sha"], overall["unmapped"], overall["too_common"]) == (3, 1, 2, 1)
    assert overall["in_snapshot"] == 1


def test_the_steps_without_papers_take_ids_as_the_cascade_did(spark):
    """`id_steps` on ids at the edges of the corpus_id and sha rules: spaces trimmed (spaces only), 18 digits
    and no more, a sha in any case, 40 digits (a sha, not a corpus id), a corpus id that is also a known
    sha string never asks the sha step."""
    paper_ids = spark.createDataFrame(
        [(SHA_A, 1), ("1" * 40, 7), (SHA_B, 9), (SHA_B, 8)], "sha string, corpus_id long"
    )  # SHA_B twice: both
    ids = spark.createDataFrame(
        [
            (" 12 ",),
            ("\t12",),
            ("1" * 18,),
            ("1" * 19,),
            ("1" * 40,),
            (SHA_A.upper() + " ",),
            (SHA_B,),
            (SHA_C,),
            ("",),
        ],
        "id string",
    )
    got = by_id(M.id_steps(ids, paper_ids).collect(), ["corpus_id", "method"])
    assert got == {
        " 12 ": {(12, "corpus_id")},
        "\t12": {(None, None)},
        "1" * 18: {(int("1" * 18), "corpus_id")},
        "1" * 19: {(None, None)},
        "1" * 40: {(7, "sha")},
        SHA_A.upper() + " ": {(1, "sha")},
        SHA_B: {(8, "sha_conflict"), (9, "sha_conflict")},
        SHA_C: {(None, None)},
        "": {(None, None)},
    }
    without = by_id(M.id_steps(ids, None).collect(), ["method"])
    assert without[" 12 "] == {("corpus_id",)} and without["1" * 40] == without[SHA_A.upper() + " "] == {(None,)}


def test_each_line_is_parsed_once_and_each_title_folded_once(spark, papers, bench, tmp_path):
    """The plans run `from_json` once per paper-ids line (`paper_id_pairs`: a filter above the parse would
    be pushed below it with the parse copied in, three parses a line), and the Python fold once per
    non-ASCII title, in a step of its own that never runs when every title is ASCII (no Python worker
    starts)."""
    from citeflow.spark import readers as R
    from citeflow.text import fold_title

    path = tmp_path / "ids.jsonl"
    path.write_text(f'{{"sha": "{SHA_A}", "corpusid": 1}}\n[1, 2]\n{{"sha": "{SHA_B}", "corpusid": "x"}}\n')
    pairs = M.paper_id_pairs(R.parse_lines(R.with_source(spark.read.text(str(path))), M.PAPER_IDS_SCHEMA))
    assert pairs._jdf.queryExecution().executedPlan().toString().count("from_json") == 1
    assert [tuple(r) for r in pairs.collect()] == [(SHA_A, 1)]

    def python_folds(frame) -> int:
        return frame._jdf.queryExecution().executedPlan().toString().count("ArrowEvalPython")

    steps = {}

    def materialize(frame, name):
        steps[name] = python_folds(frame)
        return frame.localCheckpoint()

    titles = {r["corpus_id"]: r["title"] for r in papers.collect()}
    sharing = L.papers_sharing_keys(papers, ids_of(bench), broadcast=True, materialize=materialize)
    assert steps == {"other_titles": 0, "other_folded": 1, "paper_keys": 0} and python_folds(sharing) == 0
    rows = sharing.collect()
    assert sorted(r["corpus_id"] for r in rows) == [2, 3, 4, 5, 6]
    assert {r["corpus_id"]: r["_folded"] for r in rows} == {
        r["corpus_id"]: fold_title(titles[r["corpus_id"]]) for r in rows
    }

    steps.clear()
    ascii_only = papers.where("corpus_id != 2").unionByName(
        spark.createDataFrame([(9, None, "10.9/x", None, None)], papers.schema)
    )
    sharing = L.papers_sharing_keys(ascii_only, ids_of(bench), broadcast=False, materialize=materialize)
    assert steps == {"other_titles": 0, "paper_keys": 0} and python_folds(sharing) == 0
    rows = sharing.collect()
    assert sorted(r["corpus_id"] for r in rows) == [3, 4, 5, 6]
    assert {r["corpus_id"]: r["_folded"] for r in rows} == {
        r["corpus_id"]: fold_title(titles[r["corpus_id"]]) for r in rows
    }


def test_the_benchmark_titles_are_folded_as_fold_title_folds_them(spark, bench):
    from citeflow.text import fold_title

    extra = spark.createDataFrame([("scidocs", "z" * 40, "mesh", "test", " ...!? ", None, None, None)], bench.schema)
    ids = distinct_ids(bench.unionByName(extra).toArrow()).to_pylist()
    assert {r["id"]: r["folded_title"] for r in ids} == {r["id"]: fold_title(r["title"]) for r in ids}
    assert {r["id"]: r["folded_title"] for r in ids if r["title"]} == {
        SHA_A: "ignored title",
        SHA_C: "cafe au lait",
        SHA_D: "same title",
        "z" * 40: None,
    }


def test_the_driver_names_every_sha_spelling_spark_looks_up(spark, papers, bench):
    """`sha_candidates` (pyarrow) holds every spelling of an id that Spark's sha step can match (40 hex
    digits after Spark's `lower` and `trim`, by Java's `$` with an optional final line break), and the
    narrow mapping given them answers as the cascade does."""
    from pyspark.sql import functions as F

    from citeflow.jobs.filter_leakage.mapping import sha_candidates

    odd = [" " + SHA_A.upper() + "  ", SHA_B + "\n", SHA_C + "\u2028", "\t" + SHA_D, SHA_E + "\r\n ", "1" * 40]
    extra = spark.createDataFrame([("scidocs", i, "mesh", "test", None, None, None, None) for i in odd], bench.schema)
    table = distinct_ids(bench.unionByName(extra).toArrow())
    spark_spellings = {
        r["s"]
        for r in spark.createDataFrame(table)
        .select(F.lower(F.trim("id")).alias("s"))
        .where(F.col("s").rlike("^[0-9a-f]{40}$"))
        .collect()
    }
    candidates = set(sha_candidates(table)["sha"].to_pylist())
    assert len(spark_spellings) == 10 and spark_spellings <= candidates  # the 4 shas of the bench, 6 odd ones
    paper_ids = spark.createDataFrame([(SHA_A, 1), (SHA_B, 99), ("0" * 40, 3)], "sha string, corpus_id long")
    shas = spark.createDataFrame(sha_candidates(distinct_ids(bench.toArrow())))
    assert by_id(M.map_ids_narrow(ids_of(bench), papers, paper_ids, shas=shas).collect()) == CASCADE_ANSWERS


def test_reach_counts_the_edges_and_one_hop_neighbours_of_each_group(spark):
    """`transforms.reach` on a hand-drawn graph. Benchmark papers: 1 (suite a, task t, split x) and 2 (suite a,
    task t, split y; and suite b). Edges: 1-2, 1-3, 3-4, 2-5, 5-6, 4-6, 7-8. Edges at a benchmark paper: 1-2, 1-3,
    2-5. Neighbours: 3 (of 1), 5 (of 2). Their other edges: 3-4 (of 3), 5-6 (of 5)."""
    from citeflow.jobs.filter_leakage.mapping import REACH_COLUMNS

    edges = spark.createDataFrame([(1, 2), (1, 3), (3, 4), (2, 5), (5, 6), (4, 6), (7, 8)], "citing long, cited long")
    groups = spark.createDataFrame(
        [(1, "a", "t", "x"), (2, "a", "t", "y"), (2, "b", "u", "test")],
        "corpus_id long, suite string, task string, split string",
    )
    counts, neighbours = L.reach(edges, groups, strict=True)
    got = {(r["suite"], r["task"], r["split"]): tuple(r[c] for c in REACH_COLUMNS) for r in counts.collect()}
    assert got == {
        ("a", "t", "x"): (2, 1, 1),  # 1-2, 1-3; neighbour 3; 3-4
        ("a", "t", "y"): (2, 1, 1),  # 1-2, 2-5; neighbour 5; 5-6
        ("b", "u", "test"): (2, 1, 1),
        ("a", "all", "all"): (3, 2, 2),
        ("b", "all", "all"): (2, 1, 1),
        ("all", "all", "all"): (3, 2, 2),
    }
    assert sorted(r["corpus_id"] for r in neighbours.collect()) == [3, 5]
    plain, none = L.reach(edges, groups, strict=False)
    assert none is None and plain.columns == ["suite", "task", "split", "removed_edges"]
    assert {(r["suite"], r["task"], r["split"]): r["removed_edges"] for r in plain.collect()}[
        ("all", "all", "all")
    ] == 3


@pytest.mark.parametrize("broadcast", [True, False])
def test_reach_equals_a_count_of_distinct_edges_per_group_on_a_random_graph(spark, broadcast):
    """The edge counts per level, counted without comparing edges, equal the distinct edges with a group's paper
    at either end counted in Python, on a random graph where papers sit in several tasks and suites (and edges
    join two papers of one group), strict and not."""
    from citeflow.jobs.filter_leakage.mapping import REPORT_LEVELS

    rng = random.Random(3)
    pairs = sorted({(a, b) for a, b in ((rng.randrange(60), rng.randrange(60)) for _ in range(400)) if a != b})
    tasks = [("a", "t", "x"), ("a", "t", "y"), ("a", "u", "x"), ("b", "v", "test")]
    rows = sorted({(p, *rng.choice(tasks)) for p in rng.sample(range(60), 25) for _ in range(rng.randrange(1, 3))})
    edges = spark.createDataFrame(pairs, "citing long, cited long")
    groups = spark.createDataFrame(rows, "corpus_id long, suite string, task string, split string")
    counts, _ = L.reach(edges, groups, strict=True, broadcast=broadcast)
    got = {(r["suite"], r["task"], r["split"]): (r["removed_edges"], r["one_hop_edges"]) for r in counts.collect()}
    bench = {r[0] for r in rows}
    near = {b for a, b in pairs if a in bench and b not in bench} | {
        a for a, b in pairs if b in bench and a not in bench
    }
    clean = [(a, b) for a, b in pairs if a not in bench and b not in bench]
    want: dict = {}
    for level in REPORT_LEVELS:
        index = [("suite", "task", "split").index(k) for k in level]
        for key in {tuple(r[1 + i] for i in index) for r in rows}:
            inside = {r[0] for r in rows if tuple(r[1 + i] for i in index) == key}
            hop = {n for a, b in pairs for n, m in ((b, a), (a, b)) if m in inside and n in near}
            name = (*key, *["all"] * (3 - len(key)))
            removed = sum(1 for a, b in pairs if a in inside or b in inside)
            want[name] = (removed, sum(1 for a, b in clean if a in hop or b in hop))
    plain, _ = L.reach(edges, groups, strict=False, broadcast=broadcast)
    assert got == want
    assert {(r["suite"], r["task"], r["split"]): r["removed_edges"] for r in plain.collect()} == {
        k: v[0] for k, v in want.items()
    }
