import numpy as np
import pytest

from evaluation.link_prediction import link_prediction


def test_hand_computed_ranks():
    # 1-d embeddings: scores are products. Entities: 0:1, 1:2, 2:3, 3:-1
    vectors = np.array([[1.0], [2.0], [3.0], [-1.0]])
    # With one query (0 -> 1, score 2) and all four entities as negatives:
    # negative scores 1, 2, 3, -1 -> one higher (3), one tie (2) -> rank 1 + 1 + 0.5 = 2.5
    metrics = link_prediction(vectors, np.array([0]), np.array([1]), num_negatives=4, seed=0)
    # negatives are drawn at random; recompute the expectation from the same draw
    draw = np.random.default_rng(0).integers(0, 4, size=4)
    scores = vectors[draw, 0] * 1.0
    higher, ties = (scores > 2).sum(), (scores == 2).sum()
    rank = 1 + higher + 0.5 * ties
    assert metrics["mrr"] == pytest.approx(1 / rank)
    assert metrics["auc"] == pytest.approx((4 - higher - 0.5 * ties) / 4)
    assert metrics["hits@10"] == 1.0


def test_perfect_and_random_embeddings():
    rng = np.random.default_rng(1)
    n, d = 500, 16
    vectors = rng.normal(size=(n, d))
    lhs = np.arange(0, n, 2)
    rhs = lhs + 1
    vectors[rhs] = vectors[lhs] * 10  # the true partner always scores highest
    good = link_prediction(vectors, lhs, rhs, num_negatives=100, comparator="cos", seed=2)
    # only ties with a sampled copy of the pair (cos = 1) keep the rank above 1
    assert good["hits@10"] == 1.0 and good["mrr"] > 0.85 and good["auc"] > 0.99
    noise = link_prediction(rng.normal(size=(n, d)), lhs, rhs, num_negatives=100, comparator="cos", seed=2)
    assert noise["mrr"] < 0.15 and 0.4 < noise["auc"] < 0.6
    assert good["edges"] == noise["edges"] == len(lhs)
