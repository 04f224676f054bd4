"""Benchmark metrics against values computed by hand (SPEC §6-7)."""

import json
import math

import numpy as np
import pytest

from evaluation import scidocs as S
from evaluation import scirepeval as R
from evaluation.metrics import average_precision, evaluate_run, ndcg, precision_at, rank


def test_average_precision_by_hand():
    # relevant at ranks 2 and 4: (1/2 + 2/4) / 2
    assert average_precision(["a", "b", "c", "d"], {"a": 0, "b": 1, "c": 0, "d": 1}) == pytest.approx(0.5)
    # a relevant document the ranking never returns still counts in the denominator: (1/2) / 2
    assert average_precision(["a", "b"], {"b": 1, "z": 1}) == pytest.approx(0.25)
    assert average_precision(["a", "b"], {"a": 0, "b": 0}) == 0.0


def test_ndcg_by_hand():
    # binary: (1/log2 3 + 1/log2 5) / (1 + 1/log2 3)
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert ndcg(["a", "b", "c", "d"], {"b": 1, "d": 1}) == pytest.approx(expected) == pytest.approx(0.650921, abs=1e-6)
    # graded gains are the relevance values: (1 + 2/log2 3) / (2 + 1/log2 3)
    assert ndcg(["c", "a", "b"], {"a": 2, "b": 0, "c": 1}) == pytest.approx(0.859719, abs=1e-6)
    assert ndcg(["a"], {"a": 0}) == 0.0
    assert precision_at(["a", "b"], {"b": 1}, 1) == 0.0 and precision_at(["b", "a"], {"b": 1}, 1) == 1.0


def test_ties_follow_trec_eval_document_id_descending():
    assert rank({"a": 1.0, "b": 1.0, "c": 0.5}) == ["b", "a", "c"]
    assert rank({"c": 0.5, "b": 1.0, "a": 1.0}) == ["b", "a", "c"]  # input order never matters
    run = {"q": {"a": 1.0, "b": 1.0, "c": 0.5}}
    assert evaluate_run(run, {"q": {"a": 1, "b": 0, "c": 0}})["map"] == pytest.approx(0.5)


def test_queries_without_relevant_documents_count_as_zero():
    run = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"c": 1.0, "d": 0.0}, "q3": {"e": 1.0}}
    qrels = {"q1": {"a": 1, "b": 0}, "q2": {"c": 0, "d": 0}}  # q3 has no judgments: not a query
    result = evaluate_run(run, qrels)
    assert result == {"map": pytest.approx(0.5), "ndcg": pytest.approx(0.5), "queries": 2}


def test_l2_ranking_and_missing_embeddings():
    vectors = {"q": np.array([0.0, 0.0]), "x": np.array([1.0, 0.0]), "y": np.array([0.0, 2.0])}
    qrels = {"q": {"x": 0, "y": 1, "z": 1}, "nobody": {"x": 1}}
    run, skipped, unembedded = S.l2_run(qrels, vectors)
    assert (skipped, unembedded) == (1, 1) and rank(run["q"]) == ["x", "y", "z"]
    # relevant y at rank 2 and z (no embedding, ranked last) at rank 3: (1/2 + 2/3) / 2
    assert evaluate_run(run, qrels)["map"] == pytest.approx((1 / 2 + 2 / 3) / 2)


def write_scidocs(root, rng):
    (root / "mag").mkdir(parents=True)
    centres = {"0": np.array([5.0, 0, 0]), "1": np.array([0, 5.0, 0]), "2": np.array([0, 0, 5.0])}
    vectors, lines = {}, {"train": [], "test": []}
    for i in range(90):
        label = str(i % 3)
        pid = f"p{i}"
        vectors[pid] = (centres[label] + rng.normal(size=3)).astype(np.float32)
        lines["train" if i < 60 else "test"].append(f"{pid},{label}")
    lines["test"].append("unembedded,2")
    for split, rows in lines.items():
        (root / "mag" / f"{split}.csv").write_text("pid,class_label\n" + "\n".join(rows) + "\n")
    (root / "cite").mkdir()
    (root / "cite" / "test.qrel").write_text("p0 0 p3 1\np0 0 p1 0\np0 0 p2 0\n")
    return vectors


def test_scidocs_folder_with_some_tasks(tmp_path):
    vectors = write_scidocs(tmp_path, np.random.default_rng(0))
    rows = S.evaluate(tmp_path, vectors)
    by = {(r["task"], r["metric"]): r for r in rows}
    assert by["mag", "f1"]["status"] == "ok" and by["mag", "f1"]["missing"] == 1 and by["mag", "f1"]["n"] == 31
    assert by["mag", "f1"]["value"] > 90  # well separated, one zero vector
    assert by["cite", "map"]["value"] == pytest.approx(100.0)  # p3 shares p0's centre
    assert by["mesh", "f1"]["status"] == "missing" and by["coview", "ndcg"]["status"] == "missing"
    assert by["recomm", "ndcg"]["status"] == "missing"
    average = S.average(rows)
    assert average["of"] == 3 and average["label"] == "average of 3 of 12 (rest missing)"
    assert average["value"] == pytest.approx(np.mean([by["mag", "f1"]["value"], 100.0, 100.0]))


def test_macro_f1_of_the_svm_by_hand():
    # the SVM splits at ~0.55, so test papers (0.0: a, 0.05: b, 1.0: b) are predicted a, a, b:
    # F1(a) = 2 * (1/2 * 1) / (1/2 + 1) = 2/3, F1(b) = 2 * (1 * 1/2) / (1 + 1/2) = 2/3, macro = 2/3
    x = np.array([[0.0], [0.1], [1.0], [1.1]])
    f1, c = S.classify(x, ["a", "a", "b", "b"], np.array([[0.0], [0.05], [1.0]]), ["a", "b", "b"], grid=[1.0], folds=2)
    assert f1 == pytest.approx(100 * 2 / 3) and c == 1.0


def fake_embed(rows):
    """Vectors from words: 'alpha' papers point one way, 'beta' papers the other."""
    out = {}
    for pid, title, abstract in rows:
        text = f"{title or ''} {abstract or ''}"
        out[pid] = np.array([text.count("alpha"), text.count("beta"), 0.1], dtype=np.float32)
    return out


def test_scirepeval_formats(tmp_path):
    cls = [
        {
            "corpus_id": i,
            "title": "alpha" * (i % 2 + 1),
            "abstract": "beta" if i % 2 else "alpha",
            "labels": ["A"] if i % 2 == 0 else ["B", "C"],
        }
        for i in range(60)
    ]
    (tmp_path / "fos.json").write_text(json.dumps(cls))
    reg = [{"corpus_id": i, "title": "alpha " * i, "abstract": "", "score": float(i)} for i in range(40)]
    (tmp_path / "cites.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reg))
    search = [
        {
            "query": "alpha",
            "candidates": [
                {"corpus_id": 1, "title": "alpha", "score": 1},
                {"corpus_id": 2, "title": "beta", "score": 0},
            ],
        },
        {
            "query": "beta",
            "candidates": [
                {"corpus_id": 1, "title": "alpha", "score": 0},
                {"corpus_id": 2, "title": "beta", "score": 1},
            ],
        },
    ]
    (tmp_path / "search.jsonl").write_text("".join(json.dumps(r) + "\n" for r in search))
    prox = [
        {
            "query": {"corpus_id": 9, "title": "beta"},
            "candidates": [
                {"corpus_id": 1, "title": "alpha", "score": 0},
                {"corpus_id": 2, "title": "beta", "score": 1},
                {"corpus_id": 3, "title": "alpha alpha", "score": 1},
            ],
        }
    ]
    (tmp_path / "prox.json").write_text(json.dumps(prox))
    (tmp_path / "specter_triplets.json").write_text(json.dumps([{"query": {}, "pos": {}, "neg": {}}]))
    found = dict(R.discover([str(tmp_path)]))
    assert sorted(found) == ["cites", "fos", "prox", "search"]
    rows = {name: R.evaluate_task(name, path, fake_embed)[0] for name, path in found.items()}
    assert rows["fos"]["metric"] == "f1" and rows["fos"]["value"] == pytest.approx(100.0)
    assert rows["cites"]["metric"] == "kendall_tau" and rows["cites"]["value"] > 90
    assert rows["search"]["metric"] == "ndcg" and rows["search"]["value"] == pytest.approx(100.0)
    # beta query: beta candidate (relevant) first, then 'alpha' (not) closer than 'alpha alpha' (relevant)
    assert rows["prox"]["metric"] == "map" and rows["prox"]["value"] == pytest.approx(100 * (1 + 2 / 3) / 2)
