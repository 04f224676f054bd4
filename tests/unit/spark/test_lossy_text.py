"""Bytes that are not UTF-8 inside a field of a valid JSON line: the record is kept with U+FFFD in their place,
and the papers holding it are counted per field (`graph_stats.text_counts`' `lossy_text`), never silently."""

import logging

from pyspark.sql import functions as F

from citeflow.spark import graph as G
from citeflow.spark import graph_stats as GS
from citeflow.spark import readers as R

# paper 1: one bad byte in its title, two in its venue; paper 2: two in its abstract, one in a field of study;
# paper 3: clean; paper 1 again, less complete and so a rejected duplicate, with a bad byte in its title; a line
# that is not JSON, rejected as bytes
CORPUS = b"\n".join(
    [
        b'{"paper_id": "1", "title": "Caf\xff au lait", "abstract": "Milk.", "venue": "V\xfe\xfe", "year": 2001}',
        b'{"paper_id": "2", "title": "Two", "abstract": "ab\xff\xfecd", "mag_field_of_study": ["Bio\xfflogy", "Art"]}',
        b'{"paper_id": "3", "title": "Three", "abstract": "Clean.", "venue": "ACL"}',
        b'{"paper_id": "1", "title": "Dup\xff"}',
        b'{"paper_id": "4", "title": "cut \xff',
    ]
)


def staged_corpus(spark, tmp_path):
    path = tmp_path / "metadata.jsonl"
    path.write_bytes(CORPUS + b"\n")
    lines = R.read_lines(spark, [str(path)], [path.stat().st_size])
    papers = R.s2orc_papers(R.parse_lines(lines, R.s2orc_schema("outbound")), "outbound")
    return G.stage_papers(papers).localCheckpoint()  # as the stage reads its staging copy: computed once


def test_invalid_utf8_in_a_kept_record_is_replaced_and_counted_per_field(spark, tmp_path):
    staged = staged_corpus(spark, tmp_path)
    duplicates = G.duplicate_rows(staged)
    kept = G.kept_papers(staged, duplicates)
    rows = {r["corpus_id"]: r for r in kept.collect()}
    assert sorted(rows) == [1, 2, 3]  # every record with a bad byte is kept
    assert (rows[1]["title"], rows[1]["venue"]) == ("Caf\ufffd au lait", "V\ufffd\ufffd")
    assert rows[2]["abstract"] == "ab\ufffd\ufffdcd" and rows[2]["fields_of_study"] == ["Bio\ufffdlogy", "Art"]
    rejected = sorted((r["reason"], r["id"]) for r in G.rejected_papers(staged, duplicates).collect())
    assert rejected == [("duplicate_paper", "1"), ("malformed_json", None)]

    expected = {"title": 1, "abstract": 1, "venue": 1, "fields_of_study": 1}  # papers, not bytes
    # S2ORC: the flags noted in pass 1 (jobs/build_graph.py); S2AG and a diff: the papers table read back
    noted = kept.select(
        F.col("_no_title").alias("no_title"), F.col("_no_abstract").alias("no_abstract"), F.col("_lossy").alias("lossy")
    )
    assert GS.text_counts(noted)[GS.LOSSY_TEXT] == expected
    counts = GS.text_counts(GS.summary_stats(kept.select(*G.PAPERS_COLUMNS)))
    assert counts[GS.LOSSY_TEXT] == expected
    assert counts["papers_without_abstract"] == 0 and counts["papers_without_title"] == 0


def test_a_clean_corpus_counts_no_lossy_text(spark):
    papers = spark.createDataFrame([(1, "t", "a"), (2, None, None)], "corpus_id long, title string, abstract string")
    assert GS.text_counts(GS.summary_stats(papers))[GS.LOSSY_TEXT] == {}


def test_the_warning_names_the_counts_and_a_diff_counts_the_whole_table(caplog):
    from citeflow.jobs.build_graph_diff import lossy_after
    from citeflow.jobs.graph_summary import warn_lossy

    with caplog.at_level(logging.WARNING, logger="citeflow"):
        warn_lossy({})
        assert caplog.records == []
        warn_lossy({"title": 1, "abstract": 1234})
    (record,) = caplog.records
    assert record.getMessage() == (
        "build_graph: bytes that are not UTF-8 were replaced by U+FFFD in kept papers "
        "(papers per field: title 1, abstract 1,234; metrics lossy_text)"
    )
    # the base's, less the replaced base rows', plus the written rows'
    assert lossy_after({"title": 2, "venue": 1}, {"venue": 1}, {"abstract": 3}) == {"title": 2, "abstract": 3}
