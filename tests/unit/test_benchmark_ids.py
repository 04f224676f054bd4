import json

import pyarrow.compute as pc
import pytest

from citeflow.errors import CiteflowError
from citeflow.jobs.filter_leakage.benchmark_ids import Collecting, collect

A, B, C, D = ("a" * 40, "b" * 40, "c" * 40, "d" * 40)


def test_real_beir_sample_ids(shared_data):
    table, layouts, _ = collect(str(shared_data / "scidocs_beir"))
    assert list(layouts.values()) == ["beir"]
    # 1,000 queries and 25,657 judged papers, disjoint: 26,657 distinct ids
    assert pc.count_distinct(table["id"]).as_py() == 26_657
    queries = table.filter(pc.equal(table["split"], "queries"))
    assert queries.num_rows == 1000
    assert (
        queries["title"][0].as_py()
        == "A Direct Search Method to solve Economic Dispatch Problem with Valve-Point Effect"
    )
    judged = table.filter(pc.equal(table["split"], "metadata"))
    assert pc.count_distinct(judged["id"]).as_py() == 25_657


def test_original_layout_any_subset(tmp_path):
    (tmp_path / "paper_metadata_mag_mesh.json").write_text(
        json.dumps({A: {"paper_id": A, "title": "T a", "abstract": None}})
    )
    (tmp_path / "mag").mkdir()
    (tmp_path / "mag" / "train.csv").write_text(f"pid,class_label\n{A},3\n{B},4\n")
    (tmp_path / "cite").mkdir()
    (tmp_path / "cite" / "test.qrel").write_text(f"{C} 0 {D} 1\n{C} 0 {B} 0\n\n")
    (tmp_path / "recomm").mkdir()
    (tmp_path / "recomm" / "train.csv").write_text(f"q,clicked\n{D},{'e' * 40}\n")
    table, layouts, _ = collect(str(tmp_path))
    assert list(layouts.values()) == ["original"]
    assert set(table["suite"].to_pylist()) == {"scidocs"}
    rows = sorted(zip(table["id"].to_pylist(), table["task"].to_pylist(), table["split"].to_pylist(), strict=True))
    assert rows == sorted(
        [
            (A, "mag_mesh", "metadata"),
            (A, "mag", "train"),
            (B, "mag", "train"),
            (C, "cite", "test"),
            (D, "cite", "test"),
            (C, "cite", "test"),
            (B, "cite", "test"),
            (D, "recomm", "train"),
            ("e" * 40, "recomm", "train"),
        ]
    )
    assert pc.count_distinct(table["id"]).as_py() == 5


def test_extra_id_lists(tmp_path):
    plain = tmp_path / "scirepeval_test.txt"
    plain.write_text("# SciRepEval test papers\n123\n456  # trailing comment\n\n")
    lines = tmp_path / "more.jsonl"
    lines.write_text(json.dumps({"corpus_id": 789, "title": "X", "split": "test"}) + "\n")
    table, _, _ = collect(None, (str(plain), str(lines)))
    assert set(table["suite"].to_pylist()) == {"id_list"}
    assert table.to_pydict()["id"] == ["123", "456", "789"]
    assert table.to_pydict()["task"] == ["scirepeval_test", "scirepeval_test", "more"]


def test_every_column_of_every_layout_is_read_row_by_row(tmp_path):
    """Titles and external ids as each layout states them (top level, in an external-ids object, absent, an
    entry that is no object), splits per line, rows in the order the files give them."""
    original = tmp_path / "original"
    original.mkdir()
    (original / "paper_metadata_recomm.json").write_text(
        json.dumps(
            {
                A: {"title": "T a", "doi": "10.1/a", "externalids": {"ArXiv": "2101.00001", "PubMed": ""}},
                B: {"title": "T b", "pmid": 77, "external_ids": {"DOI": "10.1/b2"}},
                C: "not an object",
            }
        )
    )
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "qrels_test.tsv").write_text(f"query-id\tcorpus-id\tscore\n{C}\t{D}\t1\n\n{A}\t{B}\t0\n")
    (beir / "corpus.jsonl").write_text(
        json.dumps({"_id": D, "title": "T d", "metadata": {"DOI": "10.1/d"}}) + "\n" + json.dumps({"_id": A}) + "\n"
    )
    listed = tmp_path / "listed.jsonl"
    listed.write_text(
        "\n".join(
            json.dumps(entry)
            for entry in (
                {"corpusid": 5, "split": "test", "externalids": {"ArXiv": "x5"}},
                {"paper_id": "p6", "title": "T 6"},
                {"id": 7, "split": "test", "pubmed_id": "pm7"},
            )
        )
    )
    columns = ["id", "task", "split", "title", "doi", "pubmed_id", "arxiv_id"]
    rows = lambda table: list(zip(*(table[c].to_pylist() for c in columns), strict=True))  # noqa: E731
    assert rows(collect(str(original))[0]) == [
        (A, "recomm", "metadata", "T a", "10.1/a", None, "2101.00001"),
        (B, "recomm", "metadata", "T b", "10.1/b2", "77", None),
        (C, "recomm", "metadata", None, None, None, None),
    ]
    assert rows(collect(str(beir))[0]) == [
        (C, "beir", "test:query", None, None, None, None),
        (D, "beir", "test:corpus", None, None, None, None),
        (A, "beir", "test:query", None, None, None, None),
        (B, "beir", "test:corpus", None, None, None, None),
        (D, "beir", "corpus", "T d", "10.1/d", None, None),
        (A, "beir", "corpus", None, None, None, None),
    ]
    assert rows(collect(None, (str(listed),))[0]) == [
        ("5", "listed", "test", None, None, None, "x5"),
        ("p6", "listed", "list", "T 6", None, None, None),
        ("7", "listed", "test", None, None, "pm7", None),
    ]


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda p: None, "neither the original SciDocs layout"),
        (
            lambda p: (p / "cite").mkdir() or (p / "cite" / "test.qrel").write_text("only three fields\n"),
            "expected 'qid 0 pid rel'",
        ),
        (
            lambda p: (p / "mag").mkdir() or (p / "mag" / "test.csv").write_text("paper,label\nx,1\n"),
            "header 'pid,class_label'",
        ),
        (
            lambda p: (p / "queries.jsonl").write_text('{"_id": "q1"}\n\n{"text": "no id"}\n'),
            "queries.jsonl:3: no '_id'",
        ),
        (
            lambda p: (p / "queries.jsonl").write_text('{"_id": "q1"}\n[1, 2]\n'),
            "queries.jsonl:2: expected a JSON object",
        ),
    ],
)
def test_bad_inputs_are_explained(tmp_path, setup, message):
    setup(tmp_path)
    with pytest.raises(CiteflowError, match=message):
        collect(str(tmp_path))


def test_nothing_to_read_is_an_error(tmp_path):
    with pytest.raises(CiteflowError, match="does not exist"):
        collect(str(tmp_path / "missing"))
    with pytest.raises(CiteflowError, match="no benchmark ids"):
        collect(None, ())


def test_a_child_process_reads_what_collect_reads(tmp_path, monkeypatch):
    """`Collecting` (filter_leakage reads its benchmark in a child process while the JVM starts) gives
    collect's table and layouts, every column and the schema, and a user's mistake as the same one line."""
    scidocs = tmp_path / "scidocs"
    (scidocs / "cite").mkdir(parents=True)
    (scidocs / "paper_metadata_view_cite_read.json").write_text(
        json.dumps({A: {"title": "Tité", "doi": "10.1/X"}, B: {"title": None, "externalids": {"ArXiv": "1.2"}}})
    )
    (scidocs / "cite" / "val.qrel").write_text(f"{A} 0 {C} 1\n{A} 0 {D} 0\n")
    extra = tmp_path / "list.txt"
    extra.write_text("123\n")
    monkeypatch.chdir(tmp_path)  # the child finds the project wherever the stage runs
    child = Collecting(str(scidocs), (str(extra),))
    table, layouts, unaudited = child.result()
    stopped = []
    monkeypatch.setattr("citeflow.process.stop_guarded", stopped.append)
    child.cancel()  # filter_leakage cancels on its way out: nothing to stop once the child has answered
    assert stopped == []
    expected, expected_layouts, expected_unaudited = collect(str(scidocs), (str(extra),))
    assert table.equals(expected) and table.schema == expected.schema
    assert (layouts, unaudited) == (expected_layouts, expected_unaudited)

    (scidocs / "cite" / "test.qrel").write_text("only three fields\n")
    with pytest.raises(CiteflowError) as in_child:
        Collecting(str(scidocs)).result()
    with pytest.raises(CiteflowError) as here:
        collect(str(scidocs))
    assert str(in_child.value) == str(here.value)
    with pytest.raises(CiteflowError, match="does not exist"):
        Collecting(str(tmp_path / "missing")).result()

    # a stage that fails before it asks for the ids stops the child
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    running = Collecting(str(scidocs), (str(extra),))
    running.cancel()
    assert running._proc.returncode is not None
    running.cancel()  # once


def test_scirepeval_tasks_give_every_paper_they_score_by_split(tmp_path):
    """The reference layout (task list, labelled splits, qrels) and the flat layout, as the evaluator reads
    them: classification papers of both splits, proximity queries and candidates, search candidates only (a
    search query is text); a task on a Hugging Face dataset is listed as not audited."""
    tasks = tmp_path / "scirepeval"
    (tasks / "clf" / "test").mkdir(parents=True)
    (tasks / "prx" / "test").mkdir(parents=True)
    (tasks / "clf" / "test" / "train.csv").write_text("paper_id,label\n11,0\n12,1\n")
    (tasks / "clf" / "test" / "test.csv").write_text("paper_id,label\n13,1\n")
    (tasks / "meta.jsonl").write_text(json.dumps({"doc_id": "11", "title": "Eleven"}) + "\n")
    (tasks / "prx" / "test" / "test_qrel.jsonl").write_text(
        "\n".join(json.dumps({"query_id": "21", "cand_id": c, "score": 1}) for c in ("22", "23"))
    )
    (tasks / "scirepeval_tasks.jsonl").write_text(
        "\n".join(
            json.dumps(t)
            for t in (
                {
                    "name": "Clf",
                    "type": "classification",
                    "data": {"meta": "meta.jsonl", "test": "clf/test"},
                    "metrics": ["f1"],
                },
                {"name": "Prx", "type": "proximity", "data": {"test": "prx/test"}, "metrics": ["map"]},
                {
                    "name": "Hub",
                    "type": "classification",
                    "data": {
                        "meta": {"name": "allenai/scirepeval", "config": "x"},
                        "test": {"name": "t", "config": "x"},
                    },
                    "metrics": ["f1"],
                },
            )
        )
    )
    flat = tmp_path / "search_small.jsonl"
    flat.write_text(json.dumps({"query": "a search", "candidates": [{"corpus_id": 31, "title": "T", "score": 1}]}))
    table, layouts, unaudited = collect(None, scirepeval=(str(tasks), str(flat)))
    assert set(layouts.values()) == {"scirepeval"}
    assert list(unaudited) == ["Hub"] and "Hugging Face" in unaudited["Hub"]
    got = sorted(zip(*(table[c].to_pylist() for c in ("suite", "task", "split", "id", "title")), strict=True))
    assert got == [
        ("scirepeval", "Clf", "test", "13", None),
        ("scirepeval", "Clf", "train", "11", "Eleven"),
        ("scirepeval", "Clf", "train", "12", None),
        ("scirepeval", "Prx", "test", "21", None),
        ("scirepeval", "Prx", "test", "22", None),
        ("scirepeval", "Prx", "test", "23", None),
        ("scirepeval", "search_small", "test", "31", "T"),
    ]


def test_the_real_scirepeval_samples_and_reference_tasks_are_read(shared_data):
    """`shared/data/scirepeval/`'s flat samples (corpus ids) and the reference fixture's task list: every task
    with local data gives papers, the task list's Hugging Face tasks are named as not audited."""
    table, _, unaudited = collect(None, scirepeval=(str(shared_data / "scirepeval"),))
    tasks = set(table["task"].to_pylist())
    assert {"fos_small", "mesh_small", "search_small"} <= tasks, tasks
    assert "Biomimicry" in unaudited  # the benchmark's own task list names Hub datasets only
    fos = table.filter(pc.equal(table["task"], "fos_small"))
    records = json.loads((shared_data / "scirepeval" / "fos_small.json").read_text())
    assert sorted(fos["id"].to_pylist()) == sorted(str(r["corpus_id"]) for r in records)


def test_a_beir_folder_is_a_suite_of_its_own_named_by_the_folder(tmp_path):
    beir = tmp_path / "scifact"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "Doc one", "text": "x"}) + "\n")
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "Query one"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    table, layouts, _ = collect(None, beir=(str(beir),))
    assert list(layouts.values()) == ["beir"]
    got = sorted(zip(*(table[c].to_pylist() for c in ("suite", "task", "split", "id")), strict=True))
    assert got == [
        ("beir", "scifact", "corpus", "d1"),
        ("beir", "scifact", "queries", "q1"),
        ("beir", "scifact", "test:corpus", "d1"),
        ("beir", "scifact", "test:query", "q1"),
    ]
    with pytest.raises(CiteflowError, match="holds no corpus.jsonl or queries.jsonl"):
        collect(None, beir=(str(tmp_path),))
