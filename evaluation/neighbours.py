"""How much two embeddings of the same papers agree on each paper's nearest neighbours.

embed_graph trains two PBG runs on one import: the mining run on every edge
and the link-prediction run without the held-out edges. `nearest` lists the
top-k cosine neighbours of sampled rows (FAISS exact search on L2-normalised
vectors, the query excluded: what mining searches), and `overlap` is the
mean share of those lists the two runs have in common, so the manifest says
how well the held-out run's MRR speaks for the vectors that are mined.
"""

from __future__ import annotations

import numpy as np


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise float32 rows in place (all-zero rows stay zero) and return the array."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.divide(vectors, norms, out=vectors, where=norms > 0)
    return vectors


def nearest(unit: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    """Row indices of the k nearest neighbours of `rows` by inner product on `unit` (normalised), self excluded."""
    import faiss

    k = min(k, len(unit) - 1)
    _, labels = faiss.knn(np.ascontiguousarray(unit[rows]), unit, k + 1, metric=faiss.METRIC_INNER_PRODUCT)
    keep = labels != rows[:, None]
    keep[keep.all(axis=1), -1] = False  # the query tied with a duplicate beyond the list: drop the last hit
    return labels[keep].reshape(len(rows), k)


def overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Mean share of row i of `a` found in row i of `b` (two neighbour lists of equal length per row)."""
    if not len(a):
        return float("nan")
    return float(np.mean([np.intersect1d(x, y).size / len(x) for x, y in zip(a, b, strict=True)]))
