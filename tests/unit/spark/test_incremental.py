"""spark/incremental.py and spark/incremental_edges.py on frames of a few rows: which step decides a key, and how
edges are relabelled."""

from citeflow.spark import incremental as I
from citeflow.spark import incremental_edges as E
from citeflow.spark import readers as R


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
    candidates, bad, named = E.merge_edges(base_citations, rejected, updates, deletes)
    got = sorted((r["citing_raw"], r["cited_raw"], r["source"]) for r in candidates.collect())
    assert got == [("1", "2", None), ("1", "9", "citations_0.jsonl.gz"), ("5", "1", "updates_0.jsonl.gz")]
    assert [(r["kind"], r["reason"], r["source"], r["raw"]) for r in bad.collect()] == [
        ("citation", R.MALFORMED, "deletes_0.jsonl.gz", b"[1, 2]")
    ]
    assert named.count() == 4


def test_a_line_whose_key_reads_but_record_does_not_names_its_key(spark):
    """A `bad_field_type` update line is quarantined and names its key (the key has no record from that step),
    and a delete line of that kind deletes its key: a full build of the new release, whose line of that key is
    this one, holds no record of it either. Lines without a readable key name nothing."""
    from pyspark.sql import functions as F

    from citeflow.spark import graph as G

    lines = "id_raw string, parse_error string, source string, value string, _step int"
    updates = spark.createDataFrame(
        [
            ("1", R.BAD_FIELD_TYPE, "u0", '{"corpusid": "1", "externalids": "x"}', 0),  # names 1, no record
            ("2", None, "u0", '{"corpusid": "2"}', 0),
            ("3", R.BAD_FIELD_TYPE, "u0", '{"corpusid": "3", "externalids": "x"}', 0),  # beside a usable line
            ("3", None, "u0", '{"corpusid": "3"}', 0),
            (None, R.MALFORMED, "u0", "{x", 0),  # no key
        ],
        lines,
    )
    deletes = spark.createDataFrame(
        [("4", R.BAD_FIELD_TYPE, "d0", '{"corpusid": "4", "externalids": "x"}', 0), ("x", None, "d0", "{}", 0)],
        lines,
    )
    keyed, bad = G.split_keyed(deletes, kind="paper")
    assert [(r["corpus_id"], r["_step"]) for r in keyed.collect()] == [(4, 0)]
    assert [(r["reason"], r["id"]) for r in bad.collect()] == [(R.INVALID_ID, "x")]
    staged = updates.withColumn("corpus_id", F.when(F.col("parse_error").isNull(), F.col("id_raw").cast("long")))
    steps = I.last_steps(I.keys_named(staged), keyed.select("corpus_id", "_step"), ["corpus_id"])
    assert sorted((r["corpus_id"], r["_updated"]) for r in steps.collect()) == [
        (1, True),
        (2, True),
        (3, True),
        (4, False),
    ]
    usable = staged.where(F.col("parse_error").isNull())
    assert sorted(r["corpus_id"] for r in I.final_updates(usable, steps, ["corpus_id"]).collect()) == [2, 3]

    # citations: the pair of a bad_field_type update line is named (its base edge goes), the line quarantined
    base_citations = spark.createDataFrame([(1, 2), (1, 3)], "citing long, cited long")
    no_rejected = spark.createDataFrame([], R.REJECTED_SCHEMA)
    edge_lines = "citing_raw string, cited_raw string, parse_error string, source string, value string, _step int"
    edge_updates = spark.createDataFrame([("1", "2", R.BAD_FIELD_TYPE, "updates_0", "{}", 0)], edge_lines)
    edge_deletes = spark.createDataFrame([("1", "3", R.BAD_FIELD_TYPE, "deletes_0", "{}", 0)], edge_lines)
    candidates, bad_edges, named = E.merge_edges(base_citations, no_rejected, edge_updates, edge_deletes)
    assert candidates.count() == 0  # (1, 2) named without a record, (1, 3) deleted
    assert sorted((r["_k1"], r["_k2"]) for r in named.collect()) == [("1", "2"), ("1", "3")]
    assert [(r["reason"], r["source"]) for r in bad_edges.collect()] == [(R.BAD_FIELD_TYPE, "updates_0")]
