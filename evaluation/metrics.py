"""Ranking and classification metrics, exactly as the benchmarks compute them (SPEC §6-7).

Ranking follows trec_eval (what pytrec_eval wraps, and what SciDocs and
SciRepEval call):
- a run is ranked by score, highest first; ties are broken by document id in
  *descending* string order (trec_eval's rule), so results never depend on
  input order;
- `average_precision`: the sum of precision@k over the ranks k of relevant
  documents, divided by the number of relevant documents in the judgments
  (relevance > 0); a query with no relevant document scores 0;
- `ndcg`: DCG = Σ rel_i / log2(i + 1) over the whole ranking (no cut-off; gains
  are the judged relevance values), divided by the DCG of the judgments sorted
  by relevance; 0 when no document is relevant.
Every query of the judgments counts in the mean, including those with no
relevant document (they score 0), as trec_eval's `-c` convention would not
hide them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def rank(scores: dict[str, float]) -> list[str]:
    """Document ids by score (highest first), ties by id descending (trec_eval)."""
    return sorted(scores, key=lambda doc: (-scores[doc], _Desc(doc)))


class _Desc:
    """Sort key that orders strings descending inside an ascending sort."""

    __slots__ = ("value",)

    def __init__(self, value: str):
        self.value = value

    def __lt__(self, other: _Desc) -> bool:
        return self.value > other.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.value == other.value


def average_precision(ranking: Sequence[str], qrels: dict[str, int]) -> float:
    relevant = sum(1 for r in qrels.values() if r > 0)
    if relevant == 0:
        return 0.0
    hits, total = 0, 0.0
    for k, doc in enumerate(ranking, 1):
        if qrels.get(doc, 0) > 0:
            hits += 1
            total += hits / k
    return total / relevant


def ndcg(ranking: Sequence[str], qrels: dict[str, int]) -> float:
    ideal_gains = sorted((r for r in qrels.values() if r > 0), reverse=True)
    if not ideal_gains:
        return 0.0
    dcg = sum(max(qrels.get(doc, 0), 0) / math.log2(k + 1) for k, doc in enumerate(ranking, 1))
    ideal = sum(g / math.log2(k + 1) for k, g in enumerate(ideal_gains, 1))
    return dcg / ideal


def precision_at(ranking: Sequence[str], qrels: dict[str, int], k: int) -> float:
    return sum(1 for doc in ranking[:k] if qrels.get(doc, 0) > 0) / k


def evaluate_run(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """Mean AP and nDCG over the queries of `qrels` present in `run` (both in [0, 1])."""
    queries = [q for q in qrels if q in run]
    if not queries:
        return {"map": float("nan"), "ndcg": float("nan"), "queries": 0}
    aps, ndcgs = [], []
    for q in queries:
        ranking = rank(run[q])
        aps.append(average_precision(ranking, qrels[q]))
        ndcgs.append(ndcg(ranking, qrels[q]))
    return {"map": sum(aps) / len(aps), "ndcg": sum(ndcgs) / len(ndcgs), "queries": len(queries)}
