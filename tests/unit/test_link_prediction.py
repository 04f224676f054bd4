import numpy as np
import pytest

from citeflow.evaluation.link_prediction import link_prediction


def test_a_query_that_ties_with_every_entity_has_a_known_rank_whatever_the_draw():
    # A zero query vector scores 0 against everything: each of the N negatives ties with the positive, so
    # rank = 1 + N / 2 and AUC = 1/2 exactly, for any negatives drawn.
    vectors = np.array([[0.0], [2.0], [3.0], [-1.0]])
    for seed in range(3):
        metrics = link_prediction(vectors, np.array([0]), np.array([1]), num_negatives=8, seed=seed)
        assert metrics == {"mrr": 1 / 5, "hits@1": 0.0, "hits@10": 1.0, "auc": 0.5, "edges": 1}


def test_hand_computed_expectation_over_many_draws():
    # 1-d embeddings, so scores are products. Entities 0:1, 1:2, 2:3, 3:-1; the edge 0 -> 1 scores 2.
    # Against a negative drawn uniformly: entity 2 (3) is higher, entity 1 (2) ties, entities 0 and 3 are
    # lower. So AUC -> 2/4 + 1/2 * 1/4 = 0.625 and rank -> 1 + N/4 + 1/2 * N/4 = 1 + 3N/8 as N grows.
    vectors = np.array([[1.0], [2.0], [3.0], [-1.0]])
    n = 200_000
    metrics = link_prediction(vectors, np.array([0]), np.array([1]), num_negatives=n, seed=0)
    assert metrics["auc"] == pytest.approx(0.625, abs=0.005)
    assert metrics["mrr"] == pytest.approx(1 / (1 + 3 * n / 8), rel=0.01)
    assert metrics["hits@10"] == 0.0


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
