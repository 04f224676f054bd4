"""Nearest pool neighbours for triplet mining: a FAISS index over the graph embeddings and its search.

Works on pool positions, as `models/triplets/mining.py` does. A query's neighbours are the k_max nearest pool
papers by inner product on L2-normalised vectors, the query itself excluded, ranked 1..k_max. The index is
exact (flat) or approximate (IVF, HNSW, IVF-PQ), and moves to every GPU FAISS sees when k_max is within the
GPU search's limit. Exact ranks and the recall of an approximate index against the exact one check what the
search returns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from citeflow.models.triplets.mining import SALT_SAMPLE, hash64
from citeflow.registry import INDEX_KINDS, named

log = logging.getLogger("citeflow")

# faiss' GPU indexes return at most this many neighbours per query.
GPU_MAX_K = 2048


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Row-normalised float32 copy; all-zero rows stay zero."""
    out = np.ascontiguousarray(vectors, dtype=np.float32).copy()
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


@dataclass(frozen=True)
class IndexOptions:
    """The settings an index kind's builder reads (mine_triplets' section)."""

    k_max: int
    nlist: int = 0
    nprobe: int = 32
    hnsw_m: int = 32
    ef_search: int = 0
    pq_m: int = 0
    train_size: int = 100_000
    seed: int = 0


def _flat(vectors: np.ndarray, o: IndexOptions):
    import faiss

    return faiss.IndexFlatIP(vectors.shape[1]), "IndexFlatIP (exact)"


def _lists(vectors: np.ndarray, o: IndexOptions) -> int:
    n = len(vectors)
    return o.nlist or max(1, min(n // 39, int(4 * np.sqrt(n))))


def _trained(index, vectors: np.ndarray, o: IndexOptions, lists: int):
    """An IVF index trained on a seeded sample of at most `train_size` vectors, searching `nprobe` lists."""
    sample = vectors
    if len(vectors) > o.train_size:
        rows = np.sort(np.argsort(hash64(o.seed, SALT_SAMPLE, np.arange(len(vectors))))[: o.train_size])
        sample = vectors[rows]
    index.train(np.ascontiguousarray(sample))
    index.nprobe = min(o.nprobe, lists)
    return index


def _ivf(vectors: np.ndarray, o: IndexOptions):
    import faiss

    dim, lists = vectors.shape[1], _lists(vectors, o)
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, lists, faiss.METRIC_INNER_PRODUCT)
    return _trained(index, vectors, o, lists), f"IVF{lists},Flat nprobe={min(o.nprobe, lists)}"


def _ivfpq(vectors: np.ndarray, o: IndexOptions):
    import faiss

    dim, lists = vectors.shape[1], _lists(vectors, o)
    m = o.pq_m or next(d for d in range(max(1, dim // 8), 0, -1) if dim % d == 0)
    index = faiss.IndexIVFPQ(faiss.IndexFlatIP(dim), dim, lists, m, 8, faiss.METRIC_INNER_PRODUCT)
    return _trained(index, vectors, o, lists), f"IVF{lists},PQ{m}x8 nprobe={min(o.nprobe, lists)}"


def _hnsw(vectors: np.ndarray, o: IndexOptions):
    import faiss

    index = faiss.IndexHNSWFlat(vectors.shape[1], o.hnsw_m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efSearch = max(o.ef_search or 2 * o.k_max, o.k_max + 1)
    return index, f"HNSW{o.hnsw_m},Flat efSearch={index.hnsw.efSearch}"


@dataclass(frozen=True)
class IndexKind:
    build: Callable[[np.ndarray, IndexOptions], tuple[Any, str]]  # (empty index, its description)
    gpu: bool  # FAISS has a GPU form of it
    exact: bool = False  # returns the true neighbours (an approximate index's recall is measured against it)


# The index kinds by name (mine_triplets.index; their descriptions: citeflow.registry.INDEX_KINDS): adding one is
# one builder above, one entry here and one there.
INDEX_BUILDERS: dict[str, IndexKind] = {
    "flat": IndexKind(_flat, gpu=True, exact=True),
    "ivf": IndexKind(_ivf, gpu=True),
    "hnsw": IndexKind(_hnsw, gpu=False),
    "ivfpq": IndexKind(_ivfpq, gpu=True),
}


def build_index(vectors: np.ndarray, kind: str, *, use_gpu: bool = True, **options: Any):
    """A FAISS inner-product index over `vectors` (already L2-normalised). Returns (index, description).

    `options`: `IndexOptions`' fields. flat: exact (IndexFlatIP); ivf: IVF-Flat with nlist lists (0: 4*sqrt(n))
    searched with nprobe; hnsw: HNSW with M links, efSearch (0: 2*k_max); ivfpq: IVF with product quantisation
    (pq_m sub-vectors, 0: dimension/8 or the nearest divisor) for pools too large for memory. Trained on a
    seeded sample. On a machine with FAISS GPUs and k_max within their limit the index moves to every GPU.
    """
    import faiss

    from citeflow.models.triplets.faiss_build import faiss_build_problem, installed_faiss

    named("index kind", kind, INDEX_KINDS)
    o = IndexOptions(**options)
    index, description = INDEX_BUILDERS[kind].build(vectors, o)
    index.add(np.ascontiguousarray(vectors))
    gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    if use_gpu and (problem := faiss_build_problem(installed_faiss(), gpus)):
        log.warning("%s", problem)
    if use_gpu and gpus > 0 and INDEX_BUILDERS[kind].gpu:
        if o.k_max + 1 <= GPU_MAX_K:
            index = faiss.index_cpu_to_all_gpus(index)
            description += f" on {gpus} GPU(s)"
        else:
            log.warning("FAISS GPU search returns at most %d neighbours; k_max=%d runs on the CPU", GPU_MAX_K, o.k_max)
    return index, description


def search_neighbours(index, vectors: np.ndarray, query_rows: np.ndarray, k_max: int) -> np.ndarray:
    """Pool positions of the k_max nearest neighbours of each query row, the query itself excluded.

    Searches k_max + 1 and drops the query wherever it appears (normally rank 0; after ties possibly
    later); when it does not appear (an approximate index missed it, or ties), the last hit is dropped.
    """
    _, labels = index.search(np.ascontiguousarray(vectors[query_rows]), k_max + 1)
    if (labels < 0).any():
        raise RuntimeError(
            "the index returned fewer neighbours than asked for: raise nprobe / efSearch or use a larger pool"
        )
    keep = labels != query_rows[:, None]
    missing_self = keep.all(axis=1)
    keep[missing_self, -1] = False
    return labels[keep].reshape(len(query_rows), k_max)


def neighbour_recall(approx: np.ndarray, exact: np.ndarray, k: int) -> float:
    """Mean share of each query's exact top-k found in its approximate top-k."""
    hits = sum(np.intersect1d(a[:k], e[:k]).size for a, e in zip(approx, exact, strict=True))
    return hits / (k * len(exact)) if len(exact) else 1.0


def exact_ranks(vectors: np.ndarray, query_rows: np.ndarray, targets: np.ndarray, batch: int = 256) -> np.ndarray:
    """Rank of each target among the query's pool neighbours (1 = nearest, the query excluded), exactly.

    `targets` is (queries, t) pool positions; a tie counts in the target's favour.
    """
    ranks = np.empty(targets.shape, dtype=np.int64)
    for lo in range(0, len(query_rows), batch):
        rows = query_rows[lo : lo + batch]
        scores = vectors[rows] @ vectors.T  # (b, pool)
        scores[np.arange(len(rows)), rows] = -np.inf  # the query itself never counts
        target_scores = np.take_along_axis(scores, targets[lo : lo + batch], axis=1)
        for j in range(targets.shape[1]):
            ranks[lo : lo + batch, j] = (scores > target_scores[:, j : j + 1]).sum(axis=1) + 1
    return ranks
