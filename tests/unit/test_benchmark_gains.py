"""The benchmark stage's gains (jobs/benchmark.py `with_gains`): each trained number's change over its base with its
interval in the scores rows, the average's in the manifest, and from there in the Airflow Asset event's extra."""

from __future__ import annotations

import pytest

from citeflow.cockpit.orchestration import headline
from citeflow.jobs.benchmark import scores_schema, table_rows, with_gains


def rows_of(model: str, values: dict[tuple[str, str], dict[str, float]]) -> list[dict]:
    rows = [
        {"task": t, "split": "test", "metric": m, "suite": "scidocs", "status": "ok", "model": model}
        | {"value": 100 * sum(per.values()) / len(per), "details": {"per_query": per}}
        for (t, m), per in values.items()
    ]
    rows.append({"task": "average", "split": "test", "metric": "avg", "suite": "scidocs", "model": model}
                | {"status": "partial", "value": None, "details": {}})  # fmt: skip
    return rows


def test_each_trained_number_gets_its_change_and_interval_and_the_manifest_the_averages():
    flat = {"q1": 0.5, "q2": 0.5}
    base = rows_of("base", {("cite", "map"): flat, ("cocite", "map"): flat})
    # cite MAP gains 10 points on both queries (a point interval); co-cite MAP 20 on one of two ([0, 20])
    trained = rows_of("trained", {("cite", "map"): {"q1": 0.6, "q2": 0.6}, ("cocite", "map"): {"q1": 0.7, "q2": 0.5}})
    rows = trained + base
    metrics = with_gains(rows)
    cite, cocite, average = rows[:3]
    assert (cite["delta"], cite["delta_low"], cite["delta_high"]) == pytest.approx((10.0, 10.0, 10.0))
    assert (cocite["delta"], cocite["delta_low"], cocite["delta_high"]) == pytest.approx((10.0, 0.0, 20.0))
    # the mean of the two: cite is 10 on every draw, co-cite 0 to 20: 5 to 15
    assert (average["delta"], average["delta_low"], average["delta_high"]) == pytest.approx((10.0, 5.0, 15.0))
    assert all(r["delta"] is None for r in base)  # the base's rows carry no change
    assert metrics["gain"] == {"measure": "mean of 2 of 12", "mean": 10.0, "low": 5.0, "high": 15.0, "shown": True}
    assert metrics["gains"] == {"cite map": "+10.00 [+10.00, +10.00]", "cocite map": "+10.00 [+0.00, +20.00] ○"}
    assert metrics["bootstrap"]["resamples"] == 2000 and metrics["bootstrap"]["seed"] == 0
    # the table holds them as columns, and the Asset event's extra carries the average's first
    import pyarrow as pa

    table = pa.Table.from_pylist(table_rows(rows), schema=scores_schema())
    assert table.column("delta_low").to_pylist()[:3] == pytest.approx([10.0, 0.0, 5.0])
    extra = headline({"strategy": "scincl", "trained": {"mean": 60.0}, "base": {"mean": 50.0}, **metrics})
    assert [k for k in extra if k.startswith("gain.")] == [
        "gain.measure",
        "gain.mean",
        "gain.low",
        "gain.high",
        "gain.shown",
    ]
    assert (extra["gain.low"], extra["gain.high"], extra["gain.shown"]) == (5.0, 15.0, True)


def test_without_a_base_nothing_is_compared():
    rows = rows_of("trained", {("cite", "map"): {"q1": 0.6}})
    assert with_gains(rows) == {} and all(r["delta"] is None for r in rows)
