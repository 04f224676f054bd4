"""Two models' per-query SciDocs scores side by side, and the noise against which their difference is read.

    from tests.support.paired import per_query, paired_interval
    scores = per_query(manifest.table_path("scores"))  # {(model, split, task, metric): {query: value}}
    mean, low, high = paired_interval(scores[("base", "test", "cite", "map")], scores[("trained", ...)])

The benchmark stage keeps each ranking task's per-query values in a score row's `details`
(`citeflow.jobs.benchmark`); the real-encoder bench and its CI test both judge a trained model against its
untrained base on them.
"""

from __future__ import annotations

import json
from pathlib import Path

# The ranking numbers a trained model is judged on: (task, metric).
RANKING_NUMBERS = (("cite", "map"), ("cite", "ndcg"), ("cocite", "map"), ("cocite", "ndcg"))


def per_query(scores: str | Path, numbers=RANKING_NUMBERS) -> dict[tuple[str, str, str, str], dict[str, float]]:
    """{(model, split, task, metric): {query: value}} of a benchmark version's `scores` table (its folder), for the
    (task, metric) pairs of `numbers` that scored ("ok")."""
    import pyarrow.parquet as pq

    out: dict[tuple[str, str, str, str], dict[str, float]] = {}
    for r in pq.read_table(str(scores)).to_pylist():
        if (r["task"], r["metric"]) in numbers and r["status"] == "ok":
            values = json.loads(r["details"] or "{}").get("per_query") or {}
            out[(r["model"], r["split"], r["task"], r["metric"])] = values
    return out


def paired_interval(
    a: dict[str, float], b: dict[str, float], resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of b - a over the queries both score, in points, with its 95% paired bootstrap interval (queries
    drawn with replacement, seeded); NaNs where they share no query."""
    import numpy as np

    queries = sorted(set(a) & set(b))
    if not queries:
        return float("nan"), float("nan"), float("nan")
    delta = 100 * np.array([b[q] - a[q] for q in queries])
    draws = np.random.default_rng(seed).integers(0, len(delta), size=(resamples, len(delta)))
    means = delta[draws].mean(axis=1)
    return float(delta.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))
