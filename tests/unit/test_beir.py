"""The BEIR-folder reader (evaluation/beir.py) and the input checks of the MTEB retrieval scorer, on tiny folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from citeflow.errors import CiteflowError
from citeflow.evaluation.beir import read_beir, split_ids
from citeflow.evaluation.mteb_retrieval import TASKS, RetrievalTask, mrr, retrieval_scores

HEADER = "query-id\tcorpus-id\tscore\n"


def write_folder(root: Path, corpus=None, queries=None, qrels=None) -> Path:
    corpus = corpus if corpus is not None else [{"_id": "d1", "title": "A", "text": "a"}, {"_id": 7, "text": "b"}]
    queries = queries if queries is not None else [{"_id": "q1", "text": "A title"}, {"_id": "q2", "text": "B"}]
    qrels = qrels if qrels is not None else {"test": HEADER + "q1\td1\t1\nq1\td9\t2\nq2\t7\t0\n"}
    root.mkdir(parents=True, exist_ok=True)
    for name, records in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        if isinstance(records, str):
            (root / name).write_text(records)
        else:
            (root / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    (root / "qrels").mkdir(exist_ok=True)
    for split, text in qrels.items():
        (root / "qrels" / f"{split}.tsv").write_text(text)
    return root


def test_reads_corpus_queries_and_qrels_in_file_order(tmp_path):
    folder = read_beir(
        write_folder(tmp_path / "b", qrels={"test": HEADER + "q1\td1\t1\n\nq1\td1\t2\n", "dev": HEADER + "q2\t7\t1\n"})
    )
    assert folder.corpus.ids == ("d1", "7")  # an integer id is read as a string
    assert folder.corpus.titles == ("A", "") and folder.corpus.texts == ("a", "b")
    assert folder.queries.ids == ("q1", "q2") and folder.queries.texts == ("A title", "B")
    assert folder.qrels == {"dev": {"q2": {"7": 1}}, "test": {"q1": {"d1": 2}}}  # a pair judged twice: the last


def test_split_ids_names_every_id_of_each_split(tmp_path):
    root = write_folder(tmp_path / "b", qrels={"test": HEADER + "q1\td1\t1\nq1\td9\t0\n", "dev": HEADER + "q2\t7\t1\n"})
    ids = split_ids(root)
    assert ids["test"] == {"queries": {"q1"}, "judged": {"d1", "d9"}, "corpus": {"d1", "7"}}
    assert ids["dev"] == {"queries": {"q2"}, "judged": {"7"}, "corpus": {"d1", "7"}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"corpus": '{"_id": "d1"}\nnot json\n'}, "corpus.jsonl:2: not JSON"),
        ({"corpus": [{"title": "no id"}]}, "corpus.jsonl:1: expected a JSON object with '_id'"),
        ({"corpus": [{"_id": "d1"}, {"_id": "d1"}]}, "corpus.jsonl:2: '_id' 'd1' appears twice"),
        ({"corpus": [{"_id": "d1", "title": 3}]}, "corpus.jsonl:1: 'title' must be a string"),
        ({"corpus": [{"_id": ""}]}, "corpus.jsonl:1: '_id' must be a non-empty string"),
        ({"corpus": ""}, "corpus.jsonl holds no records"),
        ({"queries": [{"_id": "q1"}]}, "queries.jsonl:1: query 'q1' has no 'text'"),
        ({"qrels": {"test": "q1\td1\t1\n"}}, "test.tsv:1: expected the header"),
        ({"qrels": {"test": HEADER + "q1\td1\n"}}, "test.tsv:2: expected 'query-id<TAB>corpus-id<TAB>score'"),
        ({"qrels": {"test": HEADER + "q1 d1 1\n"}}, "test.tsv:2: expected"),
        ({"qrels": {"test": HEADER + "q1\td1\t1\nq1\td2\thigh\n"}}, "test.tsv:3: the score must be an integer"),
        ({"qrels": {"test": HEADER + "q1\td1\t0.5\n"}}, "test.tsv:2: the score must be an integer"),
        ({"qrels": {"test": HEADER}}, "test.tsv holds no judgments"),
        ({"qrels": {}}, "has no qrels/<split>.tsv"),
    ],
)
def test_a_malformed_folder_is_a_one_line_error_naming_file_and_line(tmp_path, change, message):
    root = write_folder(tmp_path / "b", **change)
    with pytest.raises(CiteflowError) as caught:
        read_beir(root)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_missing_files_and_splits_are_named(tmp_path):
    with pytest.raises(CiteflowError, match="does not exist"):
        read_beir(tmp_path / "nowhere")
    root = write_folder(tmp_path / "b")
    with pytest.raises(CiteflowError, match=r"no qrels/dev\.tsv; splits there: test"):
        read_beir(root, ("dev",))
    (root / "queries.jsonl").unlink()
    with pytest.raises(CiteflowError, match=r"queries\.jsonl does not exist"):
        read_beir(root)
    with pytest.raises(CiteflowError, match=r"queries\.jsonl does not exist"):
        split_ids(root)


def test_mrr_is_the_first_document_judged_above_zero_within_k():
    ranking = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
    assert mrr(ranking, {"a": 0, "c": 2}, (1, 2, 3)) == {"mrr_at_1": 0.0, "mrr_at_2": 0.0, "mrr_at_3": 1 / 3}
    assert mrr(ranking, {"z": 1}, (1, 10)) == {"mrr_at_1": 0.0, "mrr_at_10": 0.0}


def test_missing_or_bad_vectors_are_one_line_errors(tmp_path):
    folder = read_beir(write_folder(tmp_path / "b"))
    docs = {"d1": np.ones(4), "7": np.ones(4)}
    queries = {"q1": np.ones(4), "q2": np.ones(4)}
    with pytest.raises(CiteflowError, match=r"1 of 2 corpus documents have no vector \(first: '7'\)"):
        retrieval_scores(TASKS["SCIDOCS"], folder, {"d1": np.ones(4)}, queries)
    with pytest.raises(CiteflowError, match="1 of 2 test queries have no vector"):
        retrieval_scores(TASKS["SCIDOCS"], folder, docs, {"q1": np.ones(4)})
    with pytest.raises(CiteflowError, match="query vectors have 3 dimensions, document vectors 4"):
        retrieval_scores(TASKS["SCIDOCS"], folder, docs, {"q1": np.ones(3), "q2": np.ones(3)})
    with pytest.raises(CiteflowError, match="not vectors of one length"):
        retrieval_scores(TASKS["SCIDOCS"], folder, {"d1": np.ones(4), "7": np.ones(5)}, queries)
    with pytest.raises(CiteflowError, match="NaN or infinity"):
        retrieval_scores(TASKS["SCIDOCS"], folder, {"d1": np.ones(4), "7": np.full(4, np.nan)}, queries)


def test_task_settings_are_checked():
    assert TASKS["SCIDOCS"].top_k == 1000 and TASKS["SCIDOCS"].similarity == "cosine"
    assert TASKS["SCIDOCS"].ignore_identical_ids is False and TASKS["SCIDOCS"].split == "test"
    with pytest.raises(CiteflowError, match="similarity must be one of cosine, dot"):
        RetrievalTask(name="X", similarity="euclidean")
    with pytest.raises(CiteflowError, match="k_values must be increasing positive integers from 1"):
        RetrievalTask(name="X", k_values=(10, 1))
    with pytest.raises(CiteflowError, match="is not one of the task's scores"):
        RetrievalTask(name="X", main_score="ndcg_at_7")
