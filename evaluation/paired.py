"""Two models scored on the same units (queries, papers, clicks): their difference, and the noise it is read against.

    from citeflow.evaluation.paired import paired_interval, row_gain, average_gain
    mean, low, high = paired_interval(base_per_query, trained_per_query)  # points, 95% paired bootstrap
    gain = row_gain(base_row, trained_row)      # any score row whose details keep its units (None otherwise)
    gain = average_gain([(base_row, trained_row), ...])  # the mean of several numbers, each task resampled apart

A paired bootstrap (Efron & Tibshirani 1993, ch. 16; the way MTEB's and BEIR's papers compare models on the same
queries): the units both models scored are drawn with replacement `RESAMPLES` times with a generator seeded by
`SEED`, each number is recomputed for both models on each draw, and the 2.5th and 97.5th percentiles of the
differences are the 95% interval. A difference whose interval holds 0 is not shown by these units. Which units
a number has, and how it is recomputed, depends on the number: a ranking task's MAP or nDCG is a mean over its
queries (`per_query`), SciDocs' classification a macro F1 over its test papers (`per_paper`: true and predicted
label), recomm's Adj-nDCG and Adj-P@1 a propensity-weighted ratio over its clicks (`per_click`). A score row keeps
its units in its `details` (the benchmark stage writes them); one without them gets no interval.

The benchmark stage puts each trained number's gain over its base into the scores table, the reports and the
model card (`citeflow.jobs.benchmark`); the real-encoder bench and its CI test judge a model by it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

RESAMPLES = 2000
SEED = 0
LEVEL = 0.95
# The ranking numbers a trained model is judged on in the bench and its CI test: (task, metric).
RANKING_NUMBERS = (("cite", "map"), ("cite", "ndcg"), ("cocite", "map"), ("cocite", "ndcg"))
# A resample's statistic: (resamples, units) indices into the units -> (resamples,) values, in points.
Statistic = Callable[[np.ndarray], np.ndarray]


class Interval(NamedTuple):
    """b − a in points (× 100 of a 0–1 number), with its paired bootstrap interval."""

    mean: float
    low: float
    high: float

    @property
    def shown(self) -> bool:
        """Whether the interval leaves 0 out: a difference these units show, not noise."""
        return bool(self.low > 0 or self.high < 0)


NAN = Interval(float("nan"), float("nan"), float("nan"))


def bootstrap_settings() -> dict[str, Any]:
    """What a manifest records of the intervals it holds."""
    return {"method": "paired bootstrap, percentile", "resamples": RESAMPLES, "seed": SEED, "level": LEVEL}


def _percentiles(deltas: np.ndarray) -> tuple[float, float]:
    tail = 100 * (1 - LEVEL) / 2
    return float(np.percentile(deltas, tail)), float(np.percentile(deltas, 100 - tail))


def paired_bootstrap(
    groups: Sequence[tuple[int, Sequence[tuple[Statistic, Statistic]]]], resamples: int = RESAMPLES, seed: int = SEED
) -> Interval:
    """The mean over numbers of (statistic b − statistic a), with its interval. `groups`: (units, [(a, b) per
    number]) per set of units: the numbers of one group (a task's MAP and nDCG over its queries) are recomputed on
    the same draws, each group is drawn apart (stratified), one draw after another from one seeded generator."""
    rng = np.random.default_rng(seed)
    numbers = sum(len(pairs) for _, pairs in groups)
    if not numbers or any(units == 0 for units, _ in groups):
        return NAN
    point = 0.0
    deltas = np.zeros(resamples)
    for units, pairs in groups:
        everything = np.arange(units)[None, :]
        draws = rng.integers(0, units, size=(resamples, units))
        for a, b in pairs:
            point += float((b(everything) - a(everything))[0])
            deltas += b(draws) - a(draws)
    low, high = _percentiles(deltas / numbers)
    return Interval(point / numbers, low, high)


def mean_statistic(values: ArrayLike) -> Statistic:
    """The mean of per-unit values (0–1), in points."""
    values = 100 * np.asarray(values, dtype=np.float64)
    return lambda draws: values[draws].mean(axis=1)


def macro_f1_statistic(true: np.ndarray, predicted: np.ndarray) -> Statistic:
    """Macro F1 (scikit-learn's `average="macro"`: the mean over the labels present in the truth or the
    predictions of the drawn units), in points."""
    labels, coded = np.unique(np.concatenate([true, predicted]), return_inverse=True)
    t, p = coded[: len(true)], coded[len(true) :]
    k = len(labels)

    def f1(draws: np.ndarray) -> np.ndarray:
        rows = np.arange(len(draws))[:, None] * k

        def count(codes, mask=None):
            weights = None if mask is None else mask.ravel().astype(np.float64)
            return np.bincount((rows + codes[draws]).ravel(), weights=weights, minlength=len(draws) * k).reshape(-1, k)

        hit = count(t, t[draws] == p[draws])
        true_n, predicted_n = count(t), count(p)
        present = (true_n + predicted_n) > 0
        scores = np.divide(2 * hit, true_n + predicted_n, out=np.zeros_like(hit), where=present)
        return 100 * scores.sum(axis=1) / present.sum(axis=1)

    return f1


def ratio_statistic(numerator: np.ndarray, weights: np.ndarray) -> Statistic:
    """Σ weight × value / Σ weight over the drawn units (recomm's propensity-adjusted metrics), in points."""
    numerator, weights = np.asarray(numerator, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    return lambda draws: 100 * (numerator * weights)[draws].sum(axis=1) / weights[draws].sum(axis=1)


def paired_interval(a: dict[str, float], b: dict[str, float], resamples: int = RESAMPLES, seed: int = SEED) -> Interval:
    """Mean of b − a over the queries both score, in points, with its 95% paired bootstrap interval; NaNs where
    they share no query."""
    shared = sorted(set(a) & set(b))
    if not shared:
        return NAN
    return paired_bootstrap(
        [(len(shared), [(mean_statistic([a[q] for q in shared]), mean_statistic([b[q] for q in shared]))])],
        resamples,
        seed,
    )


def _units(row: dict[str, Any]) -> tuple[str, Any] | None:
    details = row.get("details") or {}
    if isinstance(details, str):
        details = json.loads(details or "{}")
    for kind in ("per_query", "per_paper", "per_click"):
        if details.get(kind):
            return kind, details[kind]
    return None


def _statistics(a: dict[str, Any], b: dict[str, Any]) -> tuple[int, Statistic, Statistic] | None:
    """(units, statistic of a, statistic of b) of two score rows of the same number, over the units both kept;
    None where either kept none, or they kept different kinds."""
    units_a, units_b = _units(a), _units(b)
    if units_a is None or units_b is None or units_a[0] != units_b[0]:
        return None
    kind, ua = units_a
    ub = units_b[1]
    if kind == "per_click":  # the same test clicks in the same order for every model
        if len(ua) != len(ub) or not ua:
            return None
        weights = np.array([c[0] for c in ua], dtype=np.float64)
        column = 2 if a["metric"].endswith("p@1") else 1
        return (
            len(ua),
            ratio_statistic(np.array([c[column] for c in ua]), weights),
            ratio_statistic(np.array([c[column] for c in ub]), weights),
        )
    shared = sorted(set(ua) & set(ub))
    if not shared:
        return None
    if kind == "per_query":
        return len(shared), mean_statistic([ua[u] for u in shared]), mean_statistic([ub[u] for u in shared])
    true = np.array([str(ua[u][0]) for u in shared])
    return (
        len(shared),
        macro_f1_statistic(true, np.array([str(ua[u][1]) for u in shared])),
        macro_f1_statistic(true, np.array([str(ub[u][1]) for u in shared])),
    )


def row_gain(a: dict[str, Any], b: dict[str, Any]) -> Interval | None:
    """b − a of two score rows of one number (e.g. a base's and its trained model's), with its interval; None
    where the rows keep no units both share."""
    found = _statistics(a, b)
    if found is None:
        return None
    units, stat_a, stat_b = found
    return paired_bootstrap([(units, [(stat_a, stat_b)])])


def average_gain(pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> Interval | None:
    """The change of the mean of several numbers (SciDocs' average of 12, or the mean of those there are), each
    number's units drawn apart; a task's numbers (MAP and nDCG) on the same draws. None where a number lacks its
    units."""
    groups: dict[str, tuple[int, list[tuple[Statistic, Statistic]]]] = {}
    for a, b in pairs:
        found = _statistics(a, b)
        if found is None:
            return None
        units, stat_a, stat_b = found
        key = f"{a['task']}/{a['split']}"
        groups.setdefault(key, (units, []))[1].append((stat_a, stat_b))
    return paired_bootstrap(list(groups.values())) if groups else None


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


# The mark every report puts beside a change whose interval holds 0: a change these units do not show.
NOT_SHOWN = "○"


def crosses_zero(low: float | None, high: float | None) -> bool:
    return low is not None and high is not None and low <= 0 <= high


def delta_cell(delta: float | None, low: float | None = None, high: float | None = None) -> str:
    """'+1.75 [+1.15, +2.37]', marked NOT_SHOWN where the interval holds 0; the change alone without an
    interval; '–' without a change."""
    if delta is None or not np.isfinite(delta):
        return "–"
    if low is None or high is None or not np.isfinite(low):
        return f"{delta:+.2f}"
    return f"{delta:+.2f} [{low:+.2f}, {high:+.2f}]" + (f" {NOT_SHOWN}" if crosses_zero(low, high) else "")


def cell(gain: Interval | None) -> str:
    """`delta_cell` of an interval."""
    return "–" if gain is None else delta_cell(gain.mean, gain.low, gain.high)
