"""spark/incremental.py on frames of a few rows: which step decides a key, and how edges are relabelled."""

from spark import incremental as I
from spark import readers as R


def test_the_last_step_naming_a_key_decides_it_and_its_deletes_apply_after_its_updates(spark):
    """Within a step the Datasets API's example code (`GET /diffs/...` documentation) upserts every record
    of the update files, then deletes every key of the delete files: a key both updated and deleted in one
    step is gone (`citeflow.diffs.APPLY_RULES` 2; before, the update won)."""
    updates = spark.createDataFrame(
        [(1, 0), (2, 0), (2, 1), (3, 1), (4, 0), (6, 0), (6, 1)], "corpus_id long, _step int"
    )  # 2 updated twice; 3 updated and deleted in step 1; 4 updated, then deleted; 6 as 3 in step 0, then updated
    deletes = spark.createDataFrame([(3, 1), (4, 1), (5, 0), (6, 0)], "corpus_id long, _step int")
    steps = {
        r["corpus_id"]: (r["_last"], r["_updated"]) for r in I.last_steps(updates, deletes, ["corpus_id"]).collect()
    }
    assert steps == {1: (0, True), 2: (1, True), 3: (1, False), 4: (1, False), 5: (0, False), 6: (1, True)}
    final = I.final_updates(updates, I.last_steps(updates, deletes, ["corpus_id"]), ["corpus_id"])
    assert sorted((r["corpus_id"], r["_step"]) for r in final.collect()) == [(1, 0), (2, 1), (6, 1)]


def test_edges_named_by_the_diff_replace_the_bases_and_null_ends_still_match(spark):
    base_citations = spark.createDataFrame([(1, 2), (1, 3)], "citing long, cited long")
    rejected = spark.createDataFrame(
        [
            ("citation", R.CITED_NOT_IN_CORPUS, "1", "9", "citations_0.jsonl.gz", None),
            ("citation", R.NULL_ID, "4", None, "citations_0.jsonl.gz", None),
            ("citation", R.MALFORMED, None, None, "citations_1.jsonl.gz", b"{x"),  # no key: carried elsewhere
        ],
        R.REJECTED_SCHEMA,
    )
    lines = "citing_raw string, cited_raw string, parse_error string, source string, value string, _step int"
    updates = spark.createDataFrame(
        [("5", "1", None, "updates_0.jsonl.gz", '{"citingcorpusid":"5","citedcorpusid":"1"}', 0)], lines
    )
    deletes = spark.createDataFrame(
        [
            ("1", "3", None, "deletes_0.jsonl.gz", "", 0),
            # keys are compared as written: "01" is not the kept edge (1, 2)'s spelling, which stays
            ("01", "2", None, "deletes_0.jsonl.gz", "", 0),
            ("4", None, None, "deletes_0.jsonl.gz", "", 0),
            (None, None, R.MALFORMED, "deletes_0.jsonl.gz", "[1, 2]", 0),
        ],
        lines,
    )
    candidates, bad, named = I.merge_edges(base_citations, rejected, updates, deletes)
    got = sorted((r["citing_raw"], r["cited_raw"], r["source"]) for r in candidates.collect())
    assert got == [("1", "2", None), ("1", "9", "citations_0.jsonl.gz"), ("5", "1", "updates_0.jsonl.gz")]
    assert [(r["kind"], r["reason"], r["source"], r["raw"]) for r in bad.collect()] == [
        ("citation", R.MALFORMED, "deletes_0.jsonl.gz", b"[1, 2]")
    ]
    assert named.count() == 4
