"""SciDocs' recomm task (evaluation/recomm.py): metric arithmetic by hand, features by hand, the whole task on a
hand-built folder in the original layout."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from citeflow.evaluation import recomm


def test_click_metrics_by_hand():
    # propensities [2, 1, 1] rescaled to mean 1: [1.5, 0.75, 0.75]; weights 1/p: 2/3, 4/3, 4/3 (sum 10/3)
    # clicks (ranked_above, clicked position): (0, 1), (1.5, 2), (3, 3)
    # nDCG per click: 1, 1/log2(3.5) = 0.553295, 1/log2(5) = 0.430677
    # Adj-nDCG = (2/3 * 1 + 4/3 * 0.553295 + 4/3 * 0.430677) / (10/3) = 1.978630 / 3.333333 = 0.593589
    # Adj-P@1 = (2/3) / (10/3) = 0.2; plain nDCG = (1 + 0.553295 + 0.430677) / 3 = 0.661324; P@1 = 1/3
    # MRR = (1 + 1/2.5 + 1/4) / 3 = 0.55
    metrics = recomm.click_metrics([(0, 1), (1.5, 2), (3, 3)], [2.0, 1.0, 1.0])
    assert metrics["adj-ndcg"] == pytest.approx(0.593589, abs=1e-6)
    assert metrics["adj-p@1"] == pytest.approx(0.2, abs=1e-6)
    assert metrics["ndcg"] == pytest.approx(0.661324, abs=1e-6)
    assert metrics["p@1"] == pytest.approx(1 / 3)
    assert metrics["mrr"] == pytest.approx(0.55)


def test_ties_count_half():
    # two others above (0.7 and 0.9), two tied (0.5, 0.5), one below: 2 + 2 * 1/2
    assert recomm.ranked_above(0.5, [0.7, 0.5, 0.2, 0.5, 0.9]) == 3.0
    assert recomm.ranked_above(0.5, [0.1]) == 0.0


def test_click_lines_in_the_original_format(tmp_path):
    path = tmp_path / "test.csv"
    path.write_text('pid,clicked_pid,pids\nq1,b,"a,b,c"\nq2,z,"a,b"\nbroken line\nq3,a,"a"\n')
    clicks, skipped = recomm.read_clicks(path)
    # the header is dropped; q2's clicked paper is not among its candidates and the broken line has no fields
    assert clicks == [("q1", "b", ["a", "b", "c"], 2), ("q3", "a", ["a"], 1)] and skipped == 2


def test_features_by_hand():
    papers = {
        "q": {
            "title": "Deep nets, again",
            "authors": ["x", "y"],
            "references": ["r1", "r2"],
            "cited_by": ["c"],
            "year": 2010,
        },
        "c": {"title": "Deep trees", "authors": ["y"], "references": ["q", "r2"], "cited_by": [], "year": 2000},
    }
    vectors = {"q": np.array([1.0, 0.0]), "c": np.array([1.0, 1.0])}
    row = recomm.Features(papers, vectors).matrix([("q", "c"), ("q", "nowhere")]).numpy()
    expected = [
        1 / 2,  # authors {x, y} vs {y}
        0.0,  # position: zeroed by the reference reader
        1 / 5,  # title tokens {Deep, nets, ",", again} vs {Deep, trees}: 1 shared of 5
        1 / math.sqrt(2),  # cosine of (1, 0) and (1, 1)
        0.0,  # cited_by {c} vs {}
        1 / 3,  # references {r1, r2} vs {q, r2}
        1.0,  # c cites q (q's cited_by has c, c's references have q)
        0.0,  # q does not cite c
        1.0,  # oldness: (2020 - 2000) / 20 = 1
        0.5,  # relative oldness: (2010 - 2000) / 20
        0.0,  # log(0 + 1) / 10
    ]
    assert row[0] == pytest.approx(expected, abs=1e-6)
    # an unknown candidate without an embedding: every feature 0 but the title one ('<blank>' vs q's title)
    assert row[1][[0, 1, 3, 4, 5, 6, 7, 8, 9, 10]] == pytest.approx([0.0] * 10)


def write_recomm(root, rng, *, informative: bool, papers: int = 120, dim: int = 8):
    """A SciDocs folder with recomm/ in the original layout: the clicked paper of each line shares its query's
    topic; with informative=False the embeddings are random."""
    topics = rng.integers(0, 6, papers)
    centres = rng.normal(size=(6, dim))
    ids = [f"p{i:03d}" for i in range(papers)]
    vectors = {
        pid: (centres[t] + 0.3 * rng.normal(size=dim) if informative else rng.normal(size=dim)).astype(np.float32)
        for pid, t in zip(ids, topics, strict=True)
    }
    (root / "recomm").mkdir(parents=True)
    metadata = {
        pid: {
            "paper_id": pid,
            "title": f"Paper {pid}",
            "abstract": "",
            "authors": [],
            "references": [],
            "cited_by": [],
            "year": 2015,
        }
        for pid in ids
    }
    (root / "paper_metadata_recomm.json").write_text(json.dumps(metadata))
    (root / "recomm" / "propensity_scores.json").write_text(json.dumps({"scores": [1.0 / (k + 1) for k in range(10)]}))
    for split, lines in (("train", 300), ("val", 60), ("test", 150)):
        body = ["query_id,clicked_id,other_ids"]
        for _ in range(lines):
            q = int(rng.integers(papers))
            same = [i for i in range(papers) if topics[i] == topics[q] and i != q]
            others = [i for i in rng.choice(papers, 9, replace=False) if topics[i] != topics[q]]
            clicked = int(rng.choice(same))
            candidates = others[:]
            candidates.insert(int(rng.integers(len(candidates) + 1)), clicked)
            body.append(f'{ids[q]},{ids[clicked]},"{",".join(ids[i] for i in candidates)}"')
        (root / "recomm" / f"{split}.csv").write_text("\n".join(body) + "\n")
    return vectors


def test_the_task_learns_from_informative_embeddings_and_is_seeded(tmp_path):
    good = write_recomm(tmp_path / "good", np.random.default_rng(1), informative=True)
    bad = write_recomm(tmp_path / "bad", np.random.default_rng(1), informative=False)
    first = {r["metric"]: r for r in recomm.evaluate(tmp_path / "good", good)}
    again = {r["metric"]: r for r in recomm.evaluate(tmp_path / "good", good)}
    random_ = {r["metric"]: r for r in recomm.evaluate(tmp_path / "bad", bad)}
    assert first["adj-ndcg"]["status"] == "ok" and first["adj-ndcg"]["n"] == 150
    assert first["adj-ndcg"]["value"] == again["adj-ndcg"]["value"]  # seeded
    assert first["adj-p@1"]["value"] == again["adj-p@1"]["value"]
    # the clicked paper shares its query's topic: informative embeddings rank it first far more often
    assert first["adj-p@1"]["value"] > random_["adj-p@1"]["value"] + 20, (first, random_)
    assert first["adj-ndcg"]["value"] > random_["adj-ndcg"]["value"] + 10
    assert len(first["adj-ndcg"]["details"]["epochs"]) == 5


def test_a_folder_without_recomm_is_missing_not_an_error(tmp_path):
    rows = recomm.evaluate(tmp_path, {"a": np.zeros(2)})
    assert [r["status"] for r in rows] == ["missing", "missing"] and "recomm/train.csv" in rows[0]["reason"]
