"""citeflow.evaluation.paired: per-query scores read from a `scores` table as the benchmark stage writes its rows, and
the paired bootstrap interval of every kind of number, on values whose answer is known without it."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from citeflow.evaluation.paired import (
    Interval,
    average_gain,
    cell,
    macro_f1_statistic,
    paired_bootstrap,
    paired_interval,
    per_query,
    ratio_statistic,
    row_gain,
)


def test_per_query_keeps_the_ranking_numbers_that_scored_with_their_queries(tmp_path):
    def row(model, split, task, metric, status="ok", details=None):
        return {"model": model, "split": split, "task": task, "metric": metric, "status": status, "value": 0.5,
                "details": json.dumps(details) if details is not None else None}  # fmt: skip

    rows = [
        row("base", "test", "cite", "map", details={"per_query": {"q1": 0.5, "q2": 1.0}}),
        row("trained", "test", "cite", "map", details={"per_query": {"q1": 0.75}}),
        row("base", "test", "cite", "ndcg", details={}),  # scored, no per-query values
        row("base", "test", "mag", "f1", details={"per_query": {"q1": 1.0}}),  # not a ranking number
        row("base", "test", "cocite", "map", status="failed", details={"per_query": {"q1": 1.0}}),
    ]
    folder = tmp_path / "scores"
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), folder / "part-0.parquet")

    assert per_query(folder) == {
        ("base", "test", "cite", "map"): {"q1": 0.5, "q2": 1.0},
        ("trained", "test", "cite", "map"): {"q1": 0.75},
        ("base", "test", "cite", "ndcg"): {},
    }
    assert list(per_query(folder, numbers=[("cite", "ndcg")])) == [("base", "test", "cite", "ndcg")]


def test_paired_interval_reads_the_difference_over_shared_queries_in_points():
    base = {"a": 0.5, "b": 0.25, "c": 1.0, "only_base": 0.0}
    # the same gain on every shared query: every resample has that mean, so the interval is a point
    gained = {"a": 0.6, "b": 0.35, "c": 1.1, "only_trained": 1.0}
    assert paired_interval(base, gained) == pytest.approx((10.0, 10.0, 10.0))
    # a gain on one query of two: the mean is half of it and the interval spans no gain to all of it
    mean, low, high = paired_interval({"a": 0.0, "b": 0.0}, {"a": 0.2, "b": 0.0})
    assert math.isclose(mean, 10.0) and math.isclose(low, 0.0) and math.isclose(high, 20.0)
    # the draws are seeded: the same inputs give the same interval
    before, after = {str(i): (i % 7) / 10 for i in range(50)}, {str(i): (i % 5) / 10 for i in range(50)}
    mean, low, high = paired_interval(before, after)
    assert low < mean < high and (mean, low, high) == paired_interval(before, after)
    assert paired_interval(before, after, seed=1) != (mean, low, high)
    assert all(math.isnan(v) for v in paired_interval({"a": 1.0}, {"b": 1.0}))


def test_macro_f1_on_a_draw_is_scikit_learns():
    """The resampled macro F1 (vectorised over draws) against scikit-learn's own on the same drawn papers."""
    import numpy as np
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(3)
    true = rng.choice(["a", "b", "c", "d"], size=60)
    predicted = np.where(rng.random(60) < 0.6, true, rng.choice(["a", "b", "c", "e"], size=60))
    draws = rng.integers(0, 60, size=(25, 60))
    ours = macro_f1_statistic(true, predicted)(draws)
    theirs = [100 * f1_score(true[d], predicted[d], average="macro") for d in draws]
    assert ours == pytest.approx(theirs, abs=1e-9)


def test_the_ratio_of_a_weighted_sum_is_recomms_adjusted_metric():
    import numpy as np

    gains, weights = np.array([1.0, 0.5, 0.0]), np.array([2.0, 1.0, 1.0])
    # every unit once: (2 x 1 + 1 x 0.5 + 0) / 4
    assert ratio_statistic(gains, weights)(np.arange(3)[None, :]) == pytest.approx([62.5])
    # the first unit three times: its value
    assert ratio_statistic(gains, weights)(np.zeros((1, 3), dtype=int)) == pytest.approx([100.0])


def _row(task, metric, kind, units, split="test"):
    return {"task": task, "metric": metric, "split": split, "details": {kind: units}}


def test_row_gain_of_papers_and_clicks_has_the_known_answer():
    # the trained model labels every paper right, the base none: 100 points on every draw
    truth = {f"p{i}": "xyz"[i % 3] for i in range(30)}
    base = _row("mag", "f1", "per_paper", {p: [t, "w"] for p, t in truth.items()})
    trained = _row("mag", "f1", "per_paper", {p: [t, t] for p, t in truth.items()})
    assert row_gain(base, trained) == pytest.approx((100.0, 100.0, 100.0))
    assert row_gain(trained, trained) == pytest.approx((0.0, 0.0, 0.0))
    # the same clicks: weight, nDCG gain, hit at 1; the trained model gains 0.25 nDCG on every click
    clicks = [[1.0, 0.5, 0.0], [2.0, 0.25, 0.0]]
    better = [[1.0, 0.75, 1.0], [2.0, 0.5, 1.0]]
    assert row_gain(
        _row("recomm", "adj-ndcg", "per_click", clicks), _row("recomm", "adj-ndcg", "per_click", better)
    ) == (pytest.approx((25.0, 25.0, 25.0)))
    assert row_gain(_row("recomm", "adj-p@1", "per_click", clicks), _row("recomm", "adj-p@1", "per_click", better)) == (
        pytest.approx((100.0, 100.0, 100.0))
    )
    # no units kept, or none shared: no interval
    assert row_gain({"task": "mag", "metric": "f1", "details": {}}, trained) is None
    assert row_gain(_row("cite", "map", "per_query", {"a": 1.0}), _row("cite", "map", "per_query", {"b": 1.0})) is None


def test_the_average_draws_each_task_apart_and_a_tasks_numbers_together():
    # task A gains 10 points on every query; task B 20 on one query of two: its own interval is [0, 20]
    a = (_row("cite", "map", "per_query", {"q": 0.0, "r": 0.0}), _row("cite", "map", "per_query", {"q": 0.1, "r": 0.1}))
    b = (_row("mesh", "f1", "per_query", {"q": 0.0, "r": 0.0}), _row("mesh", "f1", "per_query", {"q": 0.2, "r": 0.0}))
    assert row_gain(*b) == pytest.approx((10.0, 0.0, 20.0))
    # the mean of the two: A is 10 on every draw, so the average's interval is half of B's around 10
    assert average_gain([a, b]) == pytest.approx((10.0, 5.0, 15.0))
    # MAP and nDCG of one task move together on a draw: their mean keeps B's whole spread
    b_ndcg = (
        _row("mesh", "ndcg", "per_query", {"q": 0.0, "r": 0.0}),
        _row("mesh", "ndcg", "per_query", {"q": 0.2, "r": 0.0}),
    )
    assert average_gain([b, b_ndcg]) == pytest.approx((10.0, 0.0, 20.0))
    assert average_gain([a, ({"task": "x", "split": "test", "metric": "m", "details": {}}, a[1])]) is None


def test_an_interval_says_whether_it_shows_a_difference_and_prints_with_its_sign():
    assert Interval(1.0, 0.2, 1.8).shown and Interval(-1.0, -1.8, -0.2).shown
    assert not Interval(0.5, -0.1, 1.1).shown
    assert cell(Interval(1.754, 1.15, 2.371)) == "+1.75 [+1.15, +2.37]"
    assert cell(None) == "–" and cell(paired_interval({}, {})) == "–"
    # one group drawn by the seeded generator: the same call, the same interval
    import numpy as np

    stat = lambda values: lambda draws: np.asarray(values)[draws].mean(axis=1)  # noqa: E731
    groups = [(3, [(stat([0.0, 1.0, 2.0]), stat([1.0, 1.0, 4.0]))])]
    assert paired_bootstrap(groups) == paired_bootstrap(groups)
