"""Where a strategy's positives and negatives lie in the graph-embedding space: exact neighbour ranks.

mine_triplets ranks, for a sample of queries, every positive and negative
among all pool papers (1 = nearest, the query excluded) and bins the ranks in
powers of two, so that SciNCL's windows and SPECTER's citations can be
compared on one scale. Pure functions of arrays; the stage writes the
`rank_histogram` table and its plot.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from citeflow.models.triplets.knn import exact_ranks


def rank_bins(pool_size: int):
    """Bin edges 1, 2, 4, ... up to the first power of two above the pool size."""
    top = int(np.ceil(np.log2(max(pool_size, 2))))
    return np.array([2**i for i in range(top + 1)] + [2 ** (top + 1)], dtype=np.int64)


def sample_ranks(vectors, sample):
    """Exact neighbour ranks of the sampled queries' positives and negatives, per kind."""
    query, positive, negative, hard = sample
    if not len(query):
        return {"positive": np.zeros(0, np.int64), "hard": np.zeros(0, np.int64), "easy": np.zeros(0, np.int64)}
    order = np.argsort(query, kind="stable")
    query, positive, negative, hard = query[order], positive[order], negative[order], hard[order]
    rows = np.unique(query)
    per_query = len(query) // len(rows)
    targets = np.concatenate([positive.reshape(len(rows), per_query), negative.reshape(len(rows), per_query)], axis=1)
    ranks = exact_ranks(vectors, rows, targets)
    pos_ranks, neg_ranks = ranks[:, :per_query].ravel(), ranks[:, per_query:].ravel()
    return {"positive": pos_ranks, "hard": neg_ranks[hard], "easy": neg_ranks[~hard]}


def rank_histogram(ranks, pool_size: int):
    """(kind, bin_low, bin_high, papers) rows over log2 rank bins that cover the pool."""
    bins = rank_bins(pool_size)
    rows = {"kind": [], "bin_low": [], "bin_high": [], "papers": []}
    for kind, values in ranks.items():
        counts, _ = np.histogram(values, bins=bins)
        rows["kind"] += [kind] * len(counts)
        rows["bin_low"] += bins[:-1].tolist()
        rows["bin_high"] += (bins[1:] - 1).tolist()
        rows["papers"] += counts.tolist()
    return pa.table(
        {
            "kind": pa.array(rows["kind"], pa.string()),
            "bin_low": pa.array(rows["bin_low"], pa.int64()),
            "bin_high": pa.array(rows["bin_high"], pa.int64()),
            "papers": pa.array(rows["papers"], pa.int64()),
        }
    )


def rank_summary(ranks) -> dict[str, Any]:
    out = {}
    for kind, values in ranks.items():
        if len(values):
            out[kind] = {
                "n": int(len(values)),
                "median": float(np.median(values)),
                "min": int(values.min()),
                "max": int(values.max()),
            }
    return out
