"""Link prediction on held-out edges: MRR, Hits@1, Hits@10 and AUC (docs/reference.md §3).

Each held-out edge (a, b) scores b against `num_negatives` entities drawn
uniformly (seeded) for its batch, with the comparator the embeddings were
trained with (dot or cos). rank = 1 + number of negatives scoring strictly
higher than b, plus half the ties; AUC is the share of (positive, negative)
pairs ordered correctly, ties counting half. The same function scores random
embeddings as the baseline every report carries.
"""

from __future__ import annotations

import numpy as np


def _normalise(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def link_prediction(
    vectors: np.ndarray,
    lhs: np.ndarray,
    rhs: np.ndarray,
    *,
    num_negatives: int = 1000,
    comparator: str = "dot",
    seed: int = 0,
    batch: int = 4096,
) -> dict[str, float]:
    """Metrics for edges lhs[i] -> rhs[i] given row-indexed `vectors`."""
    if comparator not in ("dot", "cos"):
        raise ValueError(f"comparator must be dot or cos, not {comparator!r}")
    emb = _normalise(vectors) if comparator == "cos" else vectors
    rng = np.random.default_rng(seed)
    rr, h1, h10, auc = [], [], [], []
    for start in range(0, len(lhs), batch):
        a, b = emb[lhs[start : start + batch]], emb[rhs[start : start + batch]]
        negatives = emb[rng.integers(0, len(emb), size=num_negatives)]
        pos = np.einsum("ij,ij->i", a, b)[:, None]
        neg = a @ negatives.T
        higher = (neg > pos).sum(axis=1)
        ties = (neg == pos).sum(axis=1)
        rank = 1 + higher + 0.5 * ties
        rr.append(1.0 / rank)
        h1.append(rank <= 1)
        h10.append(rank <= 10)
        auc.append((num_negatives - higher - 0.5 * ties) / num_negatives)
    if not rr:
        return {"mrr": float("nan"), "hits@1": float("nan"), "hits@10": float("nan"), "auc": float("nan"), "edges": 0}
    cat = np.concatenate
    return {
        "mrr": float(cat(rr).mean()),
        "hits@1": float(cat(h1).mean()),
        "hits@10": float(cat(h10).mean()),
        "auc": float(cat(auc).mean()),
        "edges": int(len(lhs)),
    }
