"""tests/support/paired.py: per-query scores read from a `scores` table as the benchmark stage writes its rows, and
the paired bootstrap interval, on values whose answer is known without it."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.paired import paired_interval, per_query


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
