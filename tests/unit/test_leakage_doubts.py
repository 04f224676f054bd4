"""When the benchmark's inputs leave an id in doubt, the mapping errs toward exclusion: each kind of doubt on
hand-made rows with hand-worked answers (pyarrow only: the driver side of filter_leakage; the Spark side is held
to it by tests/unit/spark/test_leakage.py)."""

import pyarrow as pa

from citeflow.jobs.filter_leakage.mapping import (
    METHODS,
    benchmark_id_rows,
    doubts,
    first_steps,
    later_steps,
    leakage_report,
    mapped_rows,
    title_conflicts,
)

S = pa.string()


def bench_rows(rows: list[tuple]) -> pa.Table:
    """`collect` rows from (suite, id, title) triples."""
    suite, ids, titles = zip(*rows, strict=True)
    n = len(rows)
    return pa.table(
        {
            "suite": list(suite),
            "id": list(ids),
            "task": ["t"] * n,
            "split": ["test"] * n,
            "title": pa.array(titles, S),
            "doi": pa.nulls(n, S),
            "pubmed_id": pa.nulls(n, S),
            "arxiv_id": pa.nulls(n, S),
        }
    )


def test_an_id_has_several_titles_only_when_they_fold_apart():
    """Titles that differ in case, accents, Unicode form (NFD against NFC, a ligature, full-width letters, a
    non-breaking space) or punctuation are one title; titles of two suites for one id that differ in words are
    two."""
    bench = bench_rows(
        [
            ("scidocs", "p", "Deep Nets"),
            ("scirepeval", "p", "Shallow Nets"),  # another suite, another title
            ("scidocs", "p", "deep nets!"),  # the first again
            ("scidocs", "q", "Café au lait"),
            ("scidocs", "q", "Cafe\u0301 AU LAIT"),  # NFD
            ("beir", "q", "ｃａｆｅ\u00a0au lait"),  # full-width, a non-breaking space
            ("scidocs", "r", "The ﬁnal word"),  # a ligature
            ("scidocs", "r", "the final word"),
            ("scidocs", "s", "Alone"),
            ("scidocs", "s", None),
            ("scidocs", "u", "One"),
            ("scidocs", "u", "Two"),
            ("scidocs", "u", "Three"),
        ]
    )
    got = title_conflicts(bench).to_pylist()
    assert got == [
        {"id": "p", "folded_title": "deep nets"},
        {"id": "p", "folded_title": "shallow nets"},
        {"id": "u", "folded_title": "one"},
        {"id": "u", "folded_title": "three"},
        {"id": "u", "folded_title": "two"},
    ]


def test_a_sha_with_several_corpus_ids_maps_to_every_one():
    ids = pa.table({"id": ["a" * 40, "b" * 40, "12", "c" * 40]})
    by_sha = pa.table({"sha": ["a" * 40, "a" * 40, "b" * 40], "corpus_id": pa.array([7, 3, 9], pa.int64())})
    got = sorted((r["id"], r["corpus_id"], r["method"]) for r in first_steps(ids, by_sha).to_pylist())
    assert got == [
        ("12", 12, "corpus_id"),
        ("a" * 40, 3, "sha_conflict"),
        ("a" * 40, 7, "sha_conflict"),
        ("b" * 40, 9, "sha"),
        ("c" * 40, None, None),
    ]


# the papers that share a key with the benchmark's ids (`sharing_keys` rows): corpus id, DOI, folded title
SHARING = [
    (1, None, "unique title"),
    (2, None, "twice"),
    (3, None, "twice"),
    *[(10 + i, None, "editorial") for i in range(6)],  # 6 papers: more than 5
    (20, "10.1/dup", "doi paper one"),
    (21, "10.1/dup", "doi paper two"),
    *[(30 + i, "10.9/common", None) for i in range(6)],
    (40, None, "first title"),
    (41, None, "second title"),
    (42, None, "second title"),
]


def sharing(rows=SHARING) -> pa.Table:
    cid, doi, title = zip(*rows, strict=True)
    n = len(rows)
    return pa.table(
        {
            "corpus_id": pa.array(cid, pa.int64()),
            "_key_doi": pa.array(doi, S),
            "_key_pubmed_id": pa.nulls(n, S),
            "_key_arxiv_id": pa.nulls(n, S),
            "_folded": pa.array(title, S),
        }
    )


def unmapped_ids(rows: list[tuple]) -> pa.Table:
    """`distinct_ids` rows with their keys, as the steps after the sha step get them: (id, DOI key, folded title)."""
    ids, doi, title = zip(*rows, strict=True)
    n = len(rows)
    return pa.table(
        {
            "id": list(ids),
            "_key_doi": pa.array(doi, S),
            "_key_pubmed_id": pa.nulls(n, S),
            "_key_arxiv_id": pa.nulls(n, S),
            "folded_title": pa.array(title, S),
        }
    )


def answers(table: pa.Table) -> dict:
    found: dict = {}
    for r in table.to_pylist():
        found.setdefault(r["id"], set()).add((r["corpus_id"], r["method"], r["unmapped_reason"]))
    return found


def test_each_doubt_maps_to_every_paper_it_names_up_to_the_cap():
    ids = unmapped_ids(
        [
            ("unique", None, "unique title"),
            ("shared", None, "twice"),
            ("common", None, "editorial"),
            ("doi", "10.1/dup", "doi paper one"),  # the DOI two papers share decides, before the title
            ("doi-common", "10.9/common", "unique title"),  # too common a DOI: the title maps it
            ("both-common", "10.9/common", "editorial"),  # the DOI's reason, the first step's
            ("none", None, "nothing like it"),
            ("several", None, "first title"),  # and "second title": every paper of both
        ]
    )
    conflicts = pa.table(
        {
            "id": ["several", "several", "mapped-before", "mapped-before"],
            "folded_title": ["first title", "second title", "unique title", "editorial"],
        }
    )
    got = answers(later_steps(ids, sharing(), conflicts=conflicts, most_shared=5))
    assert got == {
        "unique": {(1, "title", None)},
        "shared": {(2, "title_shared", None), (3, "title_shared", None)},
        "common": {(None, None, "title_too_common")},
        "doi": {(20, "doi_shared", None), (21, "doi_shared", None)},
        "doi-common": {(1, "title", None)},
        "both-common": {(None, None, "doi_too_common")},
        "none": {(None, None, "no_match")},
        "several": {(40, "title_conflict", None), (41, "title_conflict", None), (42, "title_conflict", None)},
        # an id the first steps mapped: its titles' papers join it (the editorial title is too common to name any)
        "mapped-before": {(1, "title_conflict", None)},
    }
    # a cap of one: every shared key is too common, the rule before doubts were resolved
    strict = answers(later_steps(ids, sharing(), conflicts=None, most_shared=1))
    assert strict["shared"] == {(None, None, "title_too_common")}
    assert strict["doi"] == {(20, "title", None)}  # past its DOI, too common now, to its title
    assert strict["several"] == {(40, "title", None)}  # without its second title


def test_the_mapping_names_each_paper_once_and_counts_each_doubt():
    ids = unmapped_ids([("x", None, "twice"), ("y", None, "editorial")])
    conflicts = pa.table({"id": ["m", "m"], "folded_title": ["unique title", "first title"]})
    later = later_steps(ids, sharing(), conflicts=conflicts, most_shared=5)
    first = pa.table(
        {
            "id": ["m", "s", "s", "n"],
            "corpus_id": pa.array([1, 7, 8, None], pa.int64()),
            "method": ["sha", "sha_conflict", "sha_conflict", None],
        }
    )
    mapped = mapped_rows(first, later, [pa.chunked_array([pa.array([1, 2, 3, 7, 40], pa.int64())])])
    rows = {(r["id"], r["corpus_id"]): (r["method"], r["in_snapshot"]) for r in mapped.to_pylist()}
    # m: the sha's paper 1 once (its title names it too), and its other title's paper 40
    assert {k: v for k, v in rows.items() if k[0] == "m"} == {
        ("m", 1): ("sha", True),
        ("m", 40): ("title_conflict", True),
    }
    assert rows[("s", 7)] == ("sha_conflict", True) and rows[("s", 8)] == ("sha_conflict", False)
    found = doubts(mapped, conflicts)
    assert found == {
        "sha_conflict": {"ids": 1, "papers": 1, "examples": ["s"]},
        "title_shared": {"ids": 1, "papers": 2, "examples": ["x"]},
        "title_conflict": {"ids": 1, "matched": 1, "papers": 1, "examples": ["m"]},
        "title_too_common": {"ids": 1, "examples": ["y"]},
    }
    bench = pa.table(
        {
            "suite": ["scidocs"] * 5,
            "id": ["m", "s", "x", "y", "n"],
            "task": ["cite"] * 5,
            "split": ["test"] * 5,
        }
    )
    report = leakage_report(benchmark_id_rows(bench, mapped)).to_pylist()[-1]
    assert (report["suite"], report["total"], report["unmapped"], report["too_common"]) == ("all", 5, 2, 1)
    counted = {m: report[f"mapped_{m}"] for m in METHODS if report[f"mapped_{m}"]}
    # m counts under sha and title_conflict: an id counts under each method of its rows
    assert counted == {"sha": 1, "sha_conflict": 1, "title_shared": 1, "title_conflict": 1}
    assert report["removed_papers"] == 5  # 1, 40, 7, 2, 3: each paper of the snapshot once
