"""Ranking metrics as trec_eval computes them (what pytrec_eval wraps, and what SciDocs and SciRepEval call), and
SciDocs' -L2 run. In the core, so the benchmark (`citeflow.evaluation`) and the val scores while training
(`citeflow.models.training.evaluate`) rank with one code.

    evaluate_run(run, qrels, ("map", "ndcg", "P_5"))  # {"map": mean, ..., "queries": n, "per_query": {m: {qid: v}}}

trec_eval's rules, kept exactly (checked against pytrec_eval itself on random runs: tests/unit/test_metrics.py):
- a query's run is ranked by score, highest first; ties by document id in *descending* string order (trec_eval's
  `comp_sim_docno`), so results never depend on input order;
- a document is relevant when its judged relevance is >= 1; gains for nDCG are the judged relevance values;
- `map`: the sum of precision@k over the ranks k of relevant retrieved documents, divided by the number of
  relevant documents in the judgments (a relevant document the run never returns still counts); `map_cut_K` the
  same over the top K;
- `ndcg`: DCG = sum of gain_i / log2(i + 1) over the whole ranking, divided by the DCG of the judged gains sorted
  descending; `ndcg_cut_K` both cut at K;
- `P_K`: relevant documents in the top K divided by K; `recall_K`: divided by the number relevant; `recip_rank`:
  1 / rank of the first relevant document;
- every measure of a query without a relevant judgment is 0;
- the mean runs over the queries that are both judged and in the run (pytrec_eval returns nothing for the others:
  a query left out of the run does not count as 0).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

MEASURE = re.compile(r"^(map|ndcg|recip_rank)$|^(P|recall|ndcg_cut|map_cut)_(\d+)$")


def rank(scores: dict[str, float]) -> list[str]:
    """Document ids by score (highest first), ties by id descending (trec_eval)."""
    by_id = sorted(scores, reverse=True)  # a stable sort on score then keeps the descending ids within a tie
    return sorted(by_id, key=lambda doc: -scores[doc])


def check_measures(measures: Iterable[str]) -> list[str]:
    measures = list(measures)
    unknown = [m for m in measures if not MEASURE.match(m)]
    if unknown:
        raise ValueError(
            f"unknown ranking measure(s) {', '.join(unknown)}; known: map, ndcg, recip_rank, P_K, recall_K, "
            "ndcg_cut_K, map_cut_K"
        )
    return measures


def average_precision(ranking: Sequence[str], qrels: dict[str, int], cutoff: int | None = None) -> float:
    relevant = sum(1 for r in qrels.values() if r >= 1)
    if relevant == 0:
        return 0.0
    hits, total = 0, 0.0
    for k, doc in enumerate(ranking[:cutoff] if cutoff else ranking, 1):
        if qrels.get(doc, 0) >= 1:
            hits += 1
            total += hits / k
    return total / relevant


def ndcg(ranking: Sequence[str], qrels: dict[str, int], cutoff: int | None = None) -> float:
    ideal_gains = sorted((r for r in qrels.values() if r > 0), reverse=True)
    if not any(r >= 1 for r in qrels.values()):
        return 0.0
    shown = ranking[:cutoff] if cutoff else ranking
    dcg = sum(max(qrels.get(doc, 0), 0) / math.log2(k + 1) for k, doc in enumerate(shown, 1))
    ideal = sum(g / math.log2(k + 1) for k, g in enumerate(ideal_gains[:cutoff] if cutoff else ideal_gains, 1))
    return dcg / ideal if ideal > 0 else 0.0


def precision_at(ranking: Sequence[str], qrels: dict[str, int], k: int) -> float:
    return sum(1 for doc in ranking[:k] if qrels.get(doc, 0) >= 1) / k


def recall_at(ranking: Sequence[str], qrels: dict[str, int], k: int) -> float:
    relevant = sum(1 for r in qrels.values() if r >= 1)
    return precision_at(ranking, qrels, k) * k / relevant if relevant else 0.0


def reciprocal_rank(ranking: Sequence[str], qrels: dict[str, int]) -> float:
    return next((1 / k for k, doc in enumerate(ranking, 1) if qrels.get(doc, 0) >= 1), 0.0)


def measure(name: str, ranking: Sequence[str], qrels: dict[str, int]) -> float:
    match = MEASURE.match(name)
    if not match:
        raise ValueError(f"unknown ranking measure {name!r}")
    if match.group(1):
        return {"map": average_precision, "ndcg": ndcg, "recip_rank": reciprocal_rank}[name](ranking, qrels)
    kind, k = match.group(2), int(match.group(3))
    if kind == "P":
        return precision_at(ranking, qrels, k)
    if kind == "recall":
        return recall_at(ranking, qrels, k)
    if kind == "ndcg_cut":
        return ndcg(ranking, qrels, k)
    return average_precision(ranking, qrels, k)


def evaluate_run(
    run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]], measures: Iterable[str] = ("map", "ndcg")
) -> dict:
    """Mean of each measure (0-1) over the queries judged in `qrels` that the run scores, and the per-query values."""
    measures = check_measures(measures)
    queries = [q for q in qrels if run.get(q)]
    per_query: dict[str, dict[str, float]] = {m: {} for m in measures}
    for q in queries:
        ranking = rank(run[q])
        for m in measures:
            per_query[m][q] = measure(m, ranking, qrels[q])
    result: dict = {m: (math.fsum(per_query[m].values()) / len(queries) if queries else float("nan")) for m in measures}
    # pytrec_eval averages with np.mean (pairwise sums); the two orders differ by < 1e-15
    result["queries"] = len(queries)
    result["per_query"] = per_query
    return result


def l2_run(qrels: dict[str, dict[str, int]], embeddings: Mapping[str, np.ndarray]) -> tuple[dict, dict]:
    """The reference's run: -L2 distance (float64) rounded to 5 decimals, for the candidates with an embedding."""
    run: dict[str, dict[str, float]] = {}
    skipped: list[str] = []
    unembedded = 0
    for qid, candidates in qrels.items():
        query = embeddings.get(qid)
        if query is None or len(query) == 0:
            skipped.append(qid)
            unembedded += sum(1 for pid in candidates if pid not in embeddings)
            continue
        query = np.asarray(query, dtype=np.float64)
        scores = {}
        for pid in candidates:
            vector = embeddings.get(pid)
            if vector is None:
                unembedded += 1
                continue
            difference = query - np.asarray(vector, dtype=np.float64)
            # np.linalg.norm of a vector is sqrt(dot(x, x)); np.round as the reference, before str() and parsing
            scores[pid] = float(np.round(-math.sqrt(difference.dot(difference)), 5))
        if scores:
            run[qid] = scores
        else:
            skipped.append(qid)
    return run, {"queries_skipped": skipped, "candidates_without_embedding": unembedded}
