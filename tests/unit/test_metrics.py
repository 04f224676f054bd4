"""Benchmark metrics against values computed by hand (docs/reference.md §6-7)."""

import json
import math

import numpy as np
import pytest

from citeflow.evaluation import scidocs as S
from citeflow.evaluation import scirepeval as R
from citeflow.ranking import average_precision, evaluate_run, measure, ndcg, precision_at, rank


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
    assert (result["map"], result["ndcg"], result["queries"]) == (pytest.approx(0.5), pytest.approx(0.5), 2)
    assert result["per_query"]["map"] == {"q1": 1.0, "q2": 0.0}


def test_cutoff_measures_by_hand():
    ranking = ["a", "b", "c", "d"]
    qrels = {"a": 0, "b": 2, "c": 0, "d": 1, "z": 1}
    assert measure("P_2", ranking, qrels) == pytest.approx(1 / 2)
    assert measure("recall_2", ranking, qrels) == pytest.approx(1 / 3)  # 3 relevant judged, one in the top 2
    assert measure("recip_rank", ranking, qrels) == pytest.approx(1 / 2)
    # top 2: gain 2 at rank 2 -> 2/log2(3); ideal top 2: 2, 1 -> 2 + 1/log2(3)
    assert measure("ndcg_cut_2", ranking, qrels) == pytest.approx((2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert measure("map_cut_2", ranking, qrels) == pytest.approx((1 / 2) / 3)
    with pytest.raises(ValueError):
        measure("P@5", ranking, qrels)


def test_l2_run_drops_what_has_no_embedding_and_rounds_to_5_decimals():
    vectors = {
        "q": np.array([0.0, 0.0]),
        "x": np.array([1.0, 0.0]),
        "y": np.array([0.0, 2.0]),
        "w": np.array([0.0, 1.0000000001]),  # distance 1.0000000001 rounds to 1.0: a tie with x
        "lonely": np.array([5.0, 5.0]),
    }
    qrels = {"q": {"x": 0, "y": 1, "z": 1, "w": 1}, "nobody": {"x": 1}, "lonely": {"z": 1}}
    run, dropped = S.l2_run(qrels, vectors)
    assert run == {"q": {"x": -1.0, "y": -2.0, "w": -1.0}}  # z has no embedding: dropped, not ranked last
    assert sorted(dropped["queries_skipped"]) == ["lonely", "nobody"]
    assert dropped["candidates_without_embedding"] == 2  # z under q and under lonely
    # tie of w and x at -1.0 broken by id descending: x, w, y; relevant w at 2 and y at 3, z never retrieved:
    # AP = (1/2 + 2/3) / 3
    assert rank(run["q"]) == ["x", "w", "y"]
    assert evaluate_run(run, qrels)["map"] == pytest.approx((1 / 2 + 2 / 3) / 3)


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
    assert by["mag", "f1"]["details"]["zero_vectors_eval"] == 1
    assert by["mag", "f1"]["value"] > 90  # well separated, one zero vector
    assert by["cite", "map"]["value"] == pytest.approx(100.0)  # p3 shares p0's centre
    assert by["mesh", "f1"]["status"] == "missing" and by["coview", "ndcg"]["status"] == "missing"
    assert by["recomm", "adj-ndcg"]["status"] == "missing"
    average = S.average(rows)
    assert average["of"] == 3 and average["label"] == "mean of 3 of 12" and average["value"] is None
    assert average["partial"] == pytest.approx(np.mean([by["mag", "f1"]["value"], 100.0, 100.0]))


def test_macro_f1_of_the_svm_by_hand():
    # without an intercept the SVM's boundary passes through 0: on [x, 1] features (the bias as a feature) it splits
    # at ~0.55, so test papers (0.0: a, 0.05: b, 1.0: b) are predicted a, a, b:
    # F1(a) = 2 * (1/2 * 1) / (1/2 + 1) = 2/3, F1(b) = 2 * (1 * 1/2) / (1 + 1/2) = 2/3, macro = 2/3
    from sklearn.metrics import f1_score

    from citeflow.evaluation.svm import fit_classifier

    x = np.array([[0.0, 1], [0.1, 1], [1.0, 1], [1.1, 1], [0.05, 1], [1.05, 1]])
    model, c = fit_classifier(x, ["a", "a", "b", "b", "a", "b"], grid=[10.0])
    predicted = model.predict(np.array([[0.0, 1], [0.05, 1], [1.0, 1]]))
    assert 100 * f1_score(["a", "b", "b"], predicted, average="macro") == pytest.approx(100 * 2 / 3) and c == 10.0
    assert model.best_estimator_.intercept_ == 0.0  # no intercept, as lightning's LinearSVC


def test_randomized_cross_check_against_pytrec_eval():
    """The oracle is pytrec_eval (trec_eval's C code): random runs with ties, graded relevance, queries without a
    relevant document, judged documents the run never returns and queries the run leaves out."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(14)
    measures = ["map", "ndcg", "P_5", "P_10", "recall_10", "ndcg_cut_10", "recip_rank"]
    run, qrels = {}, {}
    for q in range(2000):
        qid = f"q{q}"
        docs = [f"d{int(i)}" for i in rng.choice(60, size=int(rng.integers(1, 40)), replace=False)]
        grades = rng.choice([0, 0, 0, 1, 2], size=len(docs)) if q % 7 else np.zeros(len(docs), dtype=int)
        qrels[qid] = {d: int(g) for d, g in zip(docs, grades, strict=True)}
        if q % 11 == 0:
            continue  # judged, not in the run
        returned = [d for d in docs if rng.random() < 0.85] + [f"x{int(i)}" for i in rng.choice(9, 3, replace=False)]
        # few distinct scores: many ties, broken by document id
        run[qid] = {d: float(rng.integers(0, 6)) / 4 for d in returned}
    ours = evaluate_run(run, qrels, measures)
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {"map", "ndcg", "P.5,10", "recall.10", "ndcg_cut.10", "recip_rank"}
    )
    theirs = evaluator.evaluate(run)
    assert set(theirs) == set(ours["per_query"]["map"]) and ours["queries"] == len(theirs)
    for m in measures:
        worst = max(abs(ours["per_query"][m][q] - theirs[q][m]) for q in theirs)
        assert worst < 1e-12, m
        mean = pytrec_eval.compute_aggregated_measure(m, [theirs[q][m] for q in theirs])
        assert ours[m] == pytest.approx(mean, abs=1e-12), m


def fake_embed(records, fields):
    """Vectors from words: 'alpha' papers point one way, 'beta' papers the other."""
    out = {}
    for record in records:
        text = " ".join(str(record.get(f) or "") for f in fields)
        out[record["doc_id"]] = np.array([text.count("alpha"), text.count("beta"), 0.1], dtype=np.float32)
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
        },
        # the same query again: its candidates join the first row's, a repeated pair keeps its first score
        {"query": {"corpus_id": 9, "title": "beta"}, "candidates": [{"corpus_id": 2, "title": "beta", "score": 0}]},
    ]
    (tmp_path / "prox.json").write_text(json.dumps(prox))
    (tmp_path / "specter_triplets.json").write_text(json.dumps([{"query": {}, "pos": {}, "neg": {}}]))
    found = {t.name: t for t in R.discover([str(tmp_path)])}
    assert sorted(found) == ["cites", "fos", "prox", "search"]
    rows = {name: R.evaluate_task(task, {}, fake_embed)[0] for name, task in found.items()}
    assert rows["fos"]["metric"] == "f1_macro" and rows["fos"]["value"] == pytest.approx(100.0)
    assert len(rows["fos"]["details"]["chosen_C"]) == 3  # one C per label (A, B, C)
    assert rows["cites"]["metric"] == "kendalltau" and rows["cites"]["value"] > 90
    assert rows["search"]["metric"] == "ndcg" and rows["search"]["value"] == pytest.approx(100.0)
    # beta query: beta candidate (relevant) first, then 'alpha' (not) closer than 'alpha alpha' (relevant)
    assert rows["prox"]["metric"] == "map" and rows["prox"]["value"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    # without a model, search cannot embed its queries; the others have no vectors to score
    assert R.evaluate_task(found["search"], {}, None)[0]["status"] == "missing"
