"""spark/scans.py names each row where it is stored; spark/output.py writes a table over a committed one as plain
Parquet, and the degrees of what it holds; spark/incremental.py and spark/incremental_edges.py say which base
rejected rows a merge carries and which it removes."""

import os

import pyarrow.fs as pafs
from pyspark.sql import functions as F

from citeflow import tables as T
from citeflow.spark import incremental as I
from citeflow.spark import incremental_edges as E
from citeflow.spark import readers as R
from citeflow.spark import scans as S
from tests.unit.test_tables import make_table

FS = pafs.LocalFileSystem()


def test_positions_name_each_row_where_it_is_stored_even_when_a_file_is_split_over_tasks(spark, tmp_path):
    ids = {"part-a.parquet": list(range(100, 140)), "part-b.parquet": list(range(200, 230))}
    table = make_table(tmp_path / "papers", ids)
    key = "spark.sql.files.maxPartitionBytes"
    before = spark.conf.get(key)
    spark.conf.set(key, "200")  # a task per row group or so: row indexes must still count from the file's start
    try:
        frame = S.read_table(spark, "file://" + table, [100], with_position=True)
        assert frame.rdd.getNumPartitions() > 2
        got = sorted((r["id"], r["_file_name"], r["_row_index"]) for r in frame.collect())
    finally:
        spark.conf.set(key, before)
    want = [(i, "part-a.parquet", n) for n, i in enumerate(ids["part-a.parquet"])]
    want += [(i, "part-b.parquet", n) for n, i in enumerate(ids["part-b.parquet"])]
    assert got == want
    assert S.read_table(spark, "file://" + table, [100]).columns == ["id", "text"]


def test_every_base_rejected_row_is_carried_or_removed_never_both(spark, tmp_path):
    """The merge's rejected table keeps a base row in place or names it removed: the rows `carried_rejected`
    and `split_edges` carry and those they remove are disjoint and cover the base, and the removed ones are
    the rows the merge decides again (worked out by hand below)."""
    base_rejected = spark.createDataFrame(
        [
            ("paper", R.DUPLICATE_PAPER, "1", None, "papers_0", b"{}", "f", 0),  # key 1 named by the diff: removed
            ("paper", R.DUPLICATE_PAPER, "2", None, "papers_0", b"{}", "f", 1),  # key 2 not named: carried
            ("paper", R.MALFORMED, None, None, "papers_0", b"{x", "f", 2),  # no key: carried
            ("abstract", R.ABSTRACT_WITHOUT_PAPER, "3", None, "abstracts_0", b"{}", "f", 3),  # decided again
            ("abstract", R.MALFORMED, None, None, "abstracts_0", b"{", "f", 4),  # carried
            ("citation", R.CITED_NOT_IN_CORPUS, "2", "9", "citations_0", None, "f", 5),  # 9 arrives: relabelled
            ("citation", R.CITED_NOT_IN_CORPUS, "2", "8", "citations_0", None, "f", 6),  # stays
            ("citation", R.SELF_CITATION, "9", "9", "citations_0", None, "f", 7),  # intrinsic: stays
            ("citation", R.DUPLICATE_CITATION, "2", "5", "citations_0", None, "f", 8),  # pair named: removed
            ("citation", R.MALFORMED, None, None, "citations_0", b"[", "f", 9),  # parse error: carried
        ],
        "kind string, reason string, id string, cited_id string, source string, raw binary, "
        "_file_name string, _row_index long",
    )
    paper_keys = spark.createDataFrame([(1,), (9,)], "corpus_id long")
    no_keys = spark.createDataFrame([], "corpus_id long")
    no_edges = spark.createDataFrame([], "_k1 string, _k2 string")
    carried, again = I.carried_rejected(base_rejected, paper_keys, no_keys, no_edges)
    lines = "citing_raw string, cited_raw string, parse_error string, source string, value string, _step int"
    deletes = spark.createDataFrame([("2", "5", None, "deletes_0", "", 0)], lines)
    updates = spark.createDataFrame([], lines)
    base_citations = spark.createDataFrame(
        [
            (2, 5, "c", 0),  # deleted by the diff: goes, not labelled again
            (4, 2, "c", 1),  # 4 leaves: goes, labelled again
            (3, 2, "c", 2),  # stays where it is
        ],
        "citing long, cited long, _file_name string, _row_index long",
    )
    moved = spark.createDataFrame([(9,), (4,)], "corpus_id long")
    staged = []
    split = E.split_edges(
        base_citations, base_rejected, updates, deletes, moved, materialize=lambda df, name: staged.append(name) or df
    )
    index = lambda df: sorted(r["_row_index"] for r in df.select("_row_index").collect())  # noqa: E731
    assert index(carried) == [1, 2, 4, 9]
    assert index(again) == [0, 3]
    assert index(split.stays) == [6, 7]
    assert index(split.gone) == [5, 8]
    assert sorted((r["citing_raw"], r["cited_raw"]) for r in split.to_label.collect()) == [("2", "9"), ("4", "2")]
    assert [tuple(r) for r in split.kept.collect()] == [(3, 2)]
    assert sorted(tuple(r) for r in split.gone_kept.collect()) == [(2, 5, "c", 0), (4, 2, "c", 1)]
    assert split.stays.columns == [*R.REJECTED_SCHEMA.fieldNames(), *S.POSITION]
    assert staged == ["leaving_edges"]  # the rows that go, computed once for the three frames read from them


def test_a_base_line_whose_key_reads_but_record_does_not_goes_when_the_diff_names_its_key(spark):
    """A `bad_field_type` row of the base's rejected table is a line of its key in the base release: when the
    diff names that key, the new release's lines of it are the diff's, so the row goes (a full build of the new
    release never read it); other keys' rows of that kind stay (worked out by hand below)."""
    base_rejected = spark.createDataFrame(
        [
            ("paper", R.BAD_FIELD_TYPE, "1", None, "papers_0", b"{}", "f", 0),  # paper key 1 named: goes
            ("paper", R.BAD_FIELD_TYPE, "2", None, "papers_0", b"{}", "f", 1),  # key 2 not named: stays
            ("abstract", R.BAD_FIELD_TYPE, "3", None, "abstracts_0", b"{}", "f", 2),  # abstract key 3 named: goes
            ("abstract", R.BAD_FIELD_TYPE, "1", None, "abstracts_0", b"{}", "f", 3),  # 1 is a paper key: stays
            ("citation", R.BAD_FIELD_TYPE, "2", "5", "citations_0", b"{}", "f", 4),  # pair (2, 5) named: goes
            ("citation", R.BAD_FIELD_TYPE, None, "5", "citations_0", b"{}", "f", 5),  # pair (null, 5) named: goes
            ("citation", R.BAD_FIELD_TYPE, "5", "2", "citations_0", b"{}", "f", 6),  # (5, 2) not named: stays
            ("citation", R.MALFORMED, "2", "5", "citations_0", b"[", "f", 7),  # no record at all: stays
        ],
        "kind string, reason string, id string, cited_id string, source string, raw binary, "
        "_file_name string, _row_index long",
    )
    paper_keys = spark.createDataFrame([(1,)], "corpus_id long")
    abstract_keys = spark.createDataFrame([(3,)], "corpus_id long")
    edge_keys = spark.createDataFrame([("2", "5"), (I.NULL_KEY, "5")], "_k1 string, _k2 string")
    carried, gone = I.carried_rejected(base_rejected, paper_keys, abstract_keys, edge_keys)
    index = lambda df: sorted(r["_row_index"] for r in df.select("_row_index").collect())  # noqa: E731
    assert index(carried) == [1, 3, 6, 7]
    assert index(gone) == [0, 2, 4, 5]


def test_a_merge_rewrites_the_degrees_of_the_papers_it_touches_only(spark):
    """`incremental_edges.changed_degrees`: the base rows of the papers whose row was replaced or whose edges arrived
    or left go, with new rows for those the release still holds; the base rows and the new ones together are
    `graph.with_degrees` of the new papers and edges (worked out by hand below)."""
    from citeflow.spark import graph as G

    # base edges (1,2) (2,3) (3,1) (4,1) (8,7); papers 1-5, 7, 8
    base = spark.createDataFrame(
        [(1, 1, 2, 0), (2, 1, 1, 1), (3, 1, 1, 2), (4, 1, 0, 3), (5, 0, 0, 4), (7, 0, 1, 5), (8, 1, 0, 6)],
        "corpus_id long, out_degree int, in_degree int, _row_index long",
    ).withColumn("_file_name", F.lit("d"))
    # paper 4 leaves (its edge with it), 3 is replaced, 6 arrives; (2,3) is deleted; (6,2) and (5,6) arrive
    removed = spark.createDataFrame([(3,), (4,)], "corpus_id long")
    added = spark.createDataFrame([(3,), (6,)], "corpus_id long")
    new_edges = spark.createDataFrame([(6, 2), (5, 6)], "citing long, cited long")
    gone_edges = spark.createDataFrame([(4, 1), (2, 3)], "citing long, cited long")
    rows, gone = E.changed_degrees(base, new_edges, gone_edges, removed, added)
    assert index_of(gone) == [0, 1, 2, 3, 4]  # papers 7 and 8 keep their rows
    got = sorted(tuple(r) for r in rows.collect())
    assert got == [(1, 1, 1), (2, 0, 2), (3, 1, 0), (5, 1, 0), (6, 1, 1)]
    assert rows.schema["out_degree"].dataType.simpleString() == "int"
    kept = base.join(gone, ["_file_name", "_row_index"], "left_anti").select("corpus_id", "out_degree", "in_degree")
    papers = spark.createDataFrame([(i,) for i in (1, 2, 3, 5, 6, 7, 8)], "corpus_id long")
    edges = spark.createDataFrame([(1, 2), (3, 1), (6, 2), (5, 6), (8, 7)], "citing long, cited long")
    want = sorted(tuple(r) for r in G.with_degrees(papers, edges).collect())
    assert sorted(tuple(r) for r in kept.unionByName(rows).collect()) == want


def index_of(positions) -> list[int]:
    return sorted(r["_row_index"] for r in positions.collect())


def test_a_table_over_a_committed_one_and_the_degrees_of_what_it_holds(spark, tmp_path):
    """`output.write_over` links the source's files that lose no row, writes the others again without the rows
    named, puts the new rows in files of their own, and leaves plain Parquet that pyarrow reads whole;
    `write_degrees` gives every paper the table holds one row, counted on the written citations (worked out by
    hand)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from citeflow.artifacts import ArtifactStore
    from citeflow.spark import output as O

    store = ArtifactStore(str(tmp_path))
    source = tmp_path / "v1" / "papers"
    source.mkdir(parents=True)
    files = {"part-a.parquet": [1, 2, 3, 4], "part-b.parquet": [5, 6], "part-c.parquet": [8]}
    for name, ids in files.items():
        pq.write_table(
            pa.table({"corpus_id": pa.array(ids, pa.int64()), "title": [f"t{i}" for i in ids]}), source / name
        )

    version = tmp_path / "v2"
    version.mkdir()
    live = S.read_stored(spark, store, str(source), with_position=True)
    gone = live.where("corpus_id in (2, 4, 8)")  # part-a rows 1 and 3, part-c row 0
    new = spark.createDataFrame([(7, "t7")], "corpus_id long, title string")
    edges = spark.createDataFrame([(1, 3), (3, 6), (6, 1), (1, 6)], "citing long, cited long")
    written = {}
    # the papers' write runs beside the citations', before the degrees (filter_leakage's way)
    papers = lambda: written.update(O.write_over(spark, store, str(source), str(version / "papers"), gone, new))  # noqa: E731
    O.write_graph(spark, store, str(version), papers, edges, 2, True)
    T.tidy(FS, str(version / "papers"))
    got = pq.read_table(version / "papers").sort_by("corpus_id").to_pydict()  # any reader: the rows, no more
    assert got == {"corpus_id": [1, 3, 5, 6, 7], "title": ["t1", "t3", "t5", "t6", "t7"]}
    assert written["linked"] == ["part-b.parquet"]
    assert (version / "papers" / "part-b.parquet").stat().st_ino == (source / "part-b.parquet").stat().st_ino
    assert len(written["kept"]) == 1 and len(written["new"]) == 1  # part-a's other rows; the new row apart
    kept = pq.read_table(version / "papers" / written["kept"][0])["corpus_id"].to_pylist()
    assert sorted(kept) == [1, 3]
    assert pq.read_table(version / "papers" / written["new"][0])["corpus_id"].to_pylist() == [7]
    assert sorted(os.listdir(version / "papers")) == sorted(written["linked"] + written["kept"] + written["new"])

    degrees = pq.read_table(version / "degrees").sort_by("corpus_id").to_pydict()
    assert degrees == {"corpus_id": [1, 3, 5, 6, 7], "out_degree": [2, 1, 0, 1, 0], "in_degree": [1, 1, 0, 2, 0]}
    assert pq.read_schema(next((version / "degrees").glob("*.parquet"))).field("out_degree").type == pa.int32()

    # no rows named and none new: every file linked, the rows are the source's
    O.write_over(spark, store, str(source), str(version / "copy"))
    assert sorted(os.listdir(version / "copy")) == sorted(files)
    assert pq.read_table(version / "copy").num_rows == 7
