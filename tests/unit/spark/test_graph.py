"""Spark transforms on a few hand-written rows; expected values worked out by hand."""

import json

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from citeflow.spark import graph as G
from citeflow.spark import graph_stats as GS
from citeflow.spark import readers as R


def lines(spark, records):
    rows = [(r if isinstance(r, str) else json.dumps(r), "shard_0.jsonl") for r in records]
    return spark.createDataFrame(rows, "value string, source string")


def s2orc(spark, records, citations_from="outbound"):
    return R.s2orc_papers(R.parse_lines(lines(spark, records), R.s2orc_schema(citations_from)), citations_from)


def list_entries(papers, citations_from):
    """The oracle of label_s2orc_edges: one candidate edge per entry of each paper's list, labelled apart by
    label_edges (the general path of S2AG's citation rows)."""
    exploded = papers.select("corpus_id", "source", F.explode("refs").alias("other"))
    other, me = F.trim(F.col("other")), F.col("corpus_id").cast("string")
    if citations_from == "outbound":
        return exploded.select(me.alias("citing_raw"), other.alias("cited_raw"), "source")
    return exploded.select(other.alias("citing_raw"), me.alias("cited_raw"), "source")


def dedupe(papers, broadcast=True):
    staged = G.stage_papers(papers).localCheckpoint()  # as the stage reads its staging copy: computed once
    duplicates = G.duplicate_rows(staged)
    return G.kept_papers(staged, duplicates, broadcast=broadcast), G.rejected_papers(
        staged, duplicates, broadcast=broadcast
    )


def test_parse_errors_are_classified(spark):
    df = R.parse_lines(
        lines(
            spark,
            [
                {"paper_id": "1", "title": "ok"},
                '{"paper_id": "2", "title": "cut',
                "not json at all",
                "   ",
                {"paper_id": "3", "outbound_citations": "should be a list"},
                {"paper_id": 4, "year": 1999.0},
                "",
                "\t",
                "{}",
            ],
        ),
        R.S2ORC_SCHEMA,
    )
    got = [r["parse_error"] for r in df.select("parse_error").collect()]
    # a blank line is empty or spaces (Spark's trim); a tab is not blank, and not JSON either
    blank, malformed = "blank_line", "malformed_json"
    assert got == [None, malformed, malformed, blank, "bad_field_type", None, blank, malformed, None]


def test_nonblank_trims_and_nulls_empty_strings(spark):
    df = spark.createDataFrame([("  x y ",), ("   ",), ("",), (None,), ("\tz",)], "s string")
    got = [r[0] for r in df.select(R.nonblank(F.col("s"))).collect()]
    assert got == ["x y", None, None, None, "\tz"]


def test_only_the_citation_list_in_use_is_parsed(spark):
    # a wrong type in the list the stage reads rejects the line; in the other list it is never looked at
    records = [
        {"paper_id": "1", "outbound_citations": ["2"], "inbound_citations": "not a list"},
        {"paper_id": "2", "outbound_citations": "not a list", "inbound_citations": ["1"]},
    ]
    for citations_from, expected in (("outbound", [None, "bad_field_type"]), ("inbound", ["bad_field_type", None])):
        df = R.parse_lines(lines(spark, records), R.s2orc_schema(citations_from))
        assert [r["parse_error"] for r in df.select("parse_error").collect()] == expected
    assert {f.name for f in R.S2ORC_SCHEMA.fields} - {f.name for f in R.s2orc_schema("outbound").fields} == {
        "inbound_citations"
    }


def test_fields_are_normalised(spark):
    (row,) = s2orc(
        spark,
        [
            {
                "paper_id": " 17 ",
                "title": "  ",
                "abstract": "An abstract.",
                "year": "2001",
                "venue": "",
                "journal": "J. Tests",
                "doi": "10.1/x",
                "mag_field_of_study": None,
                "outbound_citations": [5, "6"],
            }
        ],
    ).collect()
    assert row["id_raw"] == "17"
    assert row["title"] is None  # blank title is no title
    assert row["year"] == 2001 and row["venue"] == "J. Tests"
    assert row["fields_of_study"] == [] and row["refs"] == ["5", "6"]


def test_split_unparseable_rejects_bad_ids_with_the_raw_line(spark):
    papers = s2orc(spark, [{"paper_id": "1"}, {"paper_id": None, "title": "x"}, {"paper_id": "abc"}, "{broken"])
    good, bad = G.split_unparseable(papers)
    kept, rejected = dedupe(papers)  # label_papers applies the same checks to paper lines
    assert sorted((r["reason"], r["raw"]) for r in rejected.collect()) == sorted(
        (r["reason"], r["raw"]) for r in bad.collect()
    )
    assert [r["id_raw"] for r in good.collect()] == ["1"]
    got = sorted((r["reason"], bytes(r["raw"])) for r in bad.collect())
    assert got == [
        ("invalid_id", json.dumps({"paper_id": "abc"}).encode()),
        ("malformed_json", b"{broken"),
        ("missing_id", json.dumps({"paper_id": None, "title": "x"}).encode()),
    ]


def test_dedupe_keeps_the_most_complete_record(spark):
    papers = s2orc(
        spark,
        [
            {"paper_id": "1", "title": "short"},  # 1 field
            {"paper_id": "1", "title": "full", "abstract": "a", "year": 2000},  # 3 fields: kept
            {"paper_id": "1", "title": "mid", "abstract": "b"},  # 2 fields
            {"paper_id": "2", "title": "only"},
        ],
    )
    kept, dropped = dedupe(papers)
    assert sorted((r["corpus_id"], r["title"]) for r in kept.collect()) == [(1, "full"), (2, "only")]
    assert sorted(r["id"] for r in dropped.collect()) == ["1", "1"]
    assert {r["reason"] for r in dropped.collect()} == {"duplicate_paper"}


def test_dedupe_is_independent_of_input_order(spark):
    a = {"paper_id": "9", "title": "A", "outbound_citations": ["1"]}
    b = {"paper_id": "9", "title": "B", "outbound_citations": ["2"]}
    first = dedupe(s2orc(spark, [a, b]))[0].select("title").collect()
    second = dedupe(s2orc(spark, [b, a]))[0].select("title").collect()
    assert first == second


@pytest.mark.parametrize("broadcast", [False, True])
def test_clean_edges_drops_and_counts_each_kind_of_bad_edge(spark, broadcast):
    corpus = spark.createDataFrame([(1,), (2,), (3,)], "corpus_id long")
    candidates = spark.createDataFrame(
        [
            ("1", "2"),
            ("1", "2"),
            ("1", "2"),  # one edge, two duplicates
            ("1", "1"),  # self-citation
            ("2", "99"),  # cited outside the corpus
            ("98", "3"),  # citing outside the corpus
            ("2", None),  # null id (S2AG)
            ("2", "x7"),  # not a corpus id
            ("3", "1"),
            ("2", "3"),
        ],
        "citing_raw string, cited_raw string",
    ).withColumn("source", F.lit("f"))
    labelled = G.label_edges(candidates, corpus, broadcast=broadcast)
    edges, rejected = G.kept_edges(labelled), G.rejected_edges(labelled)
    assertDataFrameEqual(edges, spark.createDataFrame([(1, 2), (3, 1), (2, 3)], "citing long, cited long"))
    counts = {r["reason"]: r["count"] for r in rejected.groupBy("reason").count().collect()}
    assert counts == {
        "duplicate_citation": 2,
        "self_citation": 1,
        "cited_not_in_corpus": 1,
        "citing_not_in_corpus": 1,
        "null_id": 1,
        "invalid_id": 1,
    }


@pytest.mark.parametrize("citations_from", ["outbound", "inbound"])
@pytest.mark.parametrize("broadcast", [False, True])
def test_s2orc_lists_are_labelled_in_the_row_as_label_edges_labels_them(spark, citations_from, broadcast):
    """label_s2orc_edges (no shuffle) against label_edges (the general cascade) on every kind of entry."""
    refs = ["2", " 2 ", "2", "1", "77", "x7", "", None, "3", "007", "7", "3"]
    kept, _ = dedupe(
        s2orc(
            spark,
            [
                {"paper_id": "1", "outbound_citations": refs, "inbound_citations": refs},
                {"paper_id": "2", "outbound_citations": ["1", "1"], "inbound_citations": ["1", "1"]},
                {"paper_id": "3"},
                {"paper_id": "7", "outbound_citations": ["7"], "inbound_citations": ["7"]},
            ],
            citations_from,
        )
    )
    ids = kept.select("corpus_id")
    general = G.label_edges(list_entries(kept, citations_from), ids)
    in_row = G.label_s2orc_edges(kept, ids, citations_from, broadcast=broadcast)
    key = lambda r: (str(r["citing_raw"]), str(r["cited_raw"]), str(r["reason"]))  # noqa: E731

    # which of 007 and 7 (one paper) label_edges keeps is up to its shuffle; the list order decides in the row
    def spelled(rows):
        return sorted(key(r) for r in rows if {r["citing_raw"], r["cited_raw"]}.isdisjoint({"007", "7"}))

    assert spelled(in_row.collect()) == spelled(general.collect())
    other = "cited_raw" if citations_from == "outbound" else "citing_raw"
    sevens = {r[other]: r["reason"] for r in in_row.collect() if r[other] in ("007", "7") and r["citing"] != r["cited"]}
    assert sevens == {"007": None, "7": "duplicate_citation"}
    reasons = sorted(r["reason"] or "kept" for r in in_row.collect())
    missing = "cited_not_in_corpus" if citations_from == "outbound" else "citing_not_in_corpus"
    # paper 1: 2 kept, two copies of it, self, 77 outside, x7 invalid, "" and null ids, 3 kept and a copy,
    # 007 and 7 the same paper (kept once); paper 2: 1 kept and a copy; paper 7: self
    assert reasons == sorted(
        ["kept", "duplicate_citation", "duplicate_citation", "self_citation", missing, "invalid_id"]
        + ["null_id", "null_id", "kept", "duplicate_citation", "kept", "duplicate_citation"]
        + ["kept", "duplicate_citation", "self_citation"]
    )


def test_inbound_lists_give_edges_pointing_at_the_paper(spark):
    records = [{"paper_id": "5", "inbound_citations": ["7"], "outbound_citations": ["8"]}, {"paper_id": "7"}]
    kept, _ = dedupe(s2orc(spark, records, "inbound"))
    labelled = G.label_s2orc_edges(kept, kept.select("corpus_id"), "inbound")
    got = [(r["citing_raw"], r["cited_raw"], r["citing"], r["cited"], r["reason"]) for r in labelled.collect()]
    assert got == [("7", "5", 7, 5, None)]


def test_degrees_and_summary(spark):
    papers = spark.createDataFrame(
        [(1, "t", None), (2, "t", "a"), (3, None, None), (4, "t", "a")], "corpus_id long, title string, abstract string"
    )
    edges = spark.createDataFrame([(1, 2), (1, 3), (2, 3)], "citing long, cited long")
    with_deg = G.with_degrees(papers, edges)
    got = {r["corpus_id"]: (r["out_degree"], r["in_degree"]) for r in with_deg.collect()}
    assert got == {1: (2, 0), 2: (1, 1), 3: (0, 2), 4: (0, 0)}
    shipped = G.with_degrees(papers, edges, broadcast=True).collect()
    assert {r["corpus_id"]: (r["out_degree"], r["in_degree"]) for r in shipped} == got
    histogram = GS.degree_histogram(with_deg).toArrow()
    summary = GS.histogram_summary(histogram, GS.graph_nodes(with_deg), GS.text_counts(GS.summary_stats(with_deg)))
    assert summary["papers"] == 4 and summary["citations"] == 3
    assert summary["graph_nodes"] == 3 and summary["isolated_papers"] == 1
    assert summary["max_out_degree"] == 2 and summary["max_in_degree"] == 2
    assert summary["mean_out_degree"] == 0.75
    assert summary["papers_without_title"] == 1 and summary["papers_without_abstract"] == 2
    assert summary["papers_without_text"] == 1
    assert summary["out_degree_p50_p90_p99"] == [0, 2, 2] and summary["in_degree_p50_p90_p99"] == [0, 2, 2]
    hist = {(r["direction"], r["degree"]): r["papers"] for r in histogram.to_pylist()}
    assert hist == {("out", 0): 2, ("out", 1): 1, ("out", 2): 1, ("in", 0): 2, ("in", 1): 1, ("in", 2): 1}


def test_degree_quantiles_from_the_histogram_are_sparks_percentile_approx_where_it_is_exact(spark):
    """`graph_stats.degree_quantiles` (what the manifest's p50/p90/p99 are, computed from the degree histogram so that
    a build from a diff can update them) against Spark's own `percentile_approx` on columns small enough for its
    accuracy to make it exact: counts where `q * n` is a whole number, ties, one value, skewed degrees."""
    import random
    from collections import Counter

    rng = random.Random(7)
    columns = [[0] * 7 + [1, 1, 3], list(range(1, 11)), [5], [0, 0, 0, 0], list(range(100)), list(range(200))]
    columns += [[int(rng.paretovariate(1.2)) for _ in range(n)] for n in (17, 250, 1000, 3001)]
    for values in columns:
        counts = Counter(values)
        frame = spark.createDataFrame([(v,) for v in values], "d int")
        want = frame.agg(F.percentile_approx("d", list(GS.DEGREE_QUANTILES), 10000).alias("q")).first()["q"]
        assert GS.degree_quantiles(sorted(counts.items()), GS.DEGREE_QUANTILES) == want, values[:20]
    assert GS.degree_quantiles([], GS.DEGREE_QUANTILES) == [0, 0, 0]


def test_s2ag_abstracts_are_attached_and_orphans_rejected(spark):
    papers = R.s2ag_papers(
        R.parse_lines(
            lines(
                spark,
                [
                    {
                        "corpusid": 10,
                        "title": "P",
                        "s2fieldsofstudy": [
                            {"category": "Physics", "source": "external"},
                            {"category": "Biology", "source": "s2"},
                            {"category": "Physics", "source": "s2"},
                        ],
                        "externalids": {"DOI": "10.1/p", "ArXiv": None},
                        "venue": "",
                        "journal": {"name": "J"},
                    },
                ],
            ),
            R.S2AG_PAPERS_SCHEMA,
        )
    )
    kept, _ = dedupe(papers)
    abstracts = R.s2ag_abstracts(
        R.parse_lines(
            lines(
                spark,
                [
                    {"corpusid": 10, "abstract": "short"},
                    {"corpusid": "10", "abstract": "the longer one"},
                    {"corpusid": 11, "abstract": "nobody's"},
                    {"corpusid": "x1", "abstract": "a bad id"},
                    '{"corpusid": 10, "abstract": ',
                ],
            ),
            R.S2AG_ABSTRACTS_SCHEMA,
        )
    )
    staged = G.stage_abstracts(abstracts, kept.select("corpus_id")).localCheckpoint()
    # only the paper's abstract keeps its text, only a rejected line its raw line
    fates = {(r["_fate"], r["abstract"], r["value"] is not None) for r in staged.collect()}
    assert fates == {
        ("best", "the longer one", False),
        ("duplicate_abstract", None, True),
        ("abstract_without_paper", None, True),
        ("unusable", None, True),
    }
    joined, rejected = G.attach_staged_abstracts(kept, staged)
    (row,) = joined.collect()
    assert row["abstract"] == "the longer one"
    assert row["fields_of_study"] == ["Biology", "Physics"]
    assert row["doi"] == "10.1/p" and row["arxiv_id"] is None and row["venue"] == "J"
    assert sorted((r["reason"], r["id"], r["raw"].decode()) for r in rejected.collect()) == [
        ("abstract_without_paper", "11", '{"corpusid": 11, "abstract": "nobody\'s"}'),
        ("duplicate_abstract", "10", '{"corpusid": 10, "abstract": "short"}'),
        ("invalid_id", "x1", '{"corpusid": "x1", "abstract": "a bad id"}'),
        ("malformed_json", None, '{"corpusid": 10, "abstract": '),
    ]


def test_rejected_raw_keeps_the_bytes_of_a_line_that_is_not_utf8(spark, tmp_path):
    """rejected.raw is binary: a line with invalid UTF-8 comes back byte for byte, and every Parquet reader
    (pyarrow included, which fails on invalid UTF-8 in a string column) reads the table."""
    import pyarrow.parquet as pq

    bad = b'{"paper_id": "9", "title": "caf\xe9"\n'  # not JSON (cut short) and not UTF-8
    source = tmp_path / "metadata_0.jsonl"
    source.write_bytes(b'{"paper_id": "1", "title": "ok"}\n' + bad + b"\xff\xfe\n")
    papers = R.s2orc_papers(R.parse_lines(R.with_source(spark.read.text(str(source))), R.S2ORC_SCHEMA), "outbound")
    _, rejected = dedupe(papers)
    rejected.write.parquet(str(tmp_path / "rejected"))
    table = pq.read_table(tmp_path / "rejected")
    assert table.schema.field("raw").type == "binary"
    assert sorted(zip(table.column("reason").to_pylist(), table.column("raw").to_pylist(), strict=True)) == [
        ("malformed_json", bad.rstrip(b"\n")),
        ("malformed_json", b"\xff\xfe"),
    ]


def test_a_valid_line_longer_than_20_mib_is_parsed_not_called_malformed(spark):
    abstract = "a" * (21 * 1024 * 1024)  # Jackson's default cap on one string is 20,000,000 characters
    (row,) = s2orc(spark, [{"paper_id": "5", "abstract": abstract}]).select("parse_error", "abstract").collect()
    assert row["parse_error"] is None and len(row["abstract"]) == len(abstract)


def test_a_spark_read_failure_names_the_file_in_one_line():
    message = (
        "An error occurred while calling o523.parquet.\n: org.apache.spark.SparkException: Job aborted.\n"
        "Caused by: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading "
        "file file:///data/s2orc/metadata/metadata_1.jsonl.gz.  SQLSTATE: KD001\n\tat org.apache.spark.x(X.scala:1)\n"
        "Caused by: java.io.EOFException: Unexpected end of input stream\n\tat y\n"
    )
    assert R.unreadable_file(RuntimeError(message)) == (
        "file:///data/s2orc/metadata/metadata_1.jsonl.gz",
        "java.io.EOFException: Unexpected end of input stream",
    )
    assert R.unreadable_file(RuntimeError("[DIVIDE_BY_ZERO] Division by zero")) is None


def test_an_input_that_vanishes_while_a_stage_reads_it_is_one_line(spark, tmp_path):
    from citeflow.errors import CiteflowError

    gone = tmp_path / "corpus" / "metadata"  # as if renamed after the stage's checks, before Spark listed it
    with pytest.raises(CiteflowError) as refused:
        R.explaining_unreadable_files(lambda: spark.read.json(str(gone)).count(), "corpus file")
    assert str(refused.value) == (
        f"corpus file {gone} vanished while the stage read it (moved or removed during the run); put it back and "
        "run again"
    )
    spark_said = "[PATH_NOT_FOUND] Path does not exist: file:/data/corpus/papers. SQLSTATE: 42K03"
    assert R.vanished_path(RuntimeError(spark_said)) == "/data/corpus/papers"
    jar = "java.io.FileNotFoundException: File file:/opt/missing.jar does not exist"  # a setting's, not an input
    assert R.vanished_path(RuntimeError(jar)) is None
    assert R.vanished_path(RuntimeError("[DIVIDE_BY_ZERO] Division by zero")) is None
