"""mine_triplets' two strategies, by name (`STRATEGY_MINERS`, one entry per `citeflow.registry.STRATEGIES`).

A strategy answers four questions for the stage's loop (jobs/mine_triplets.py): which pool papers may be
queries (`candidates`), what it needs once the queries are drawn (`prepare`), the triplets of one batch of
queries (`batch`), and what its manifest adds (`batch_metrics`, then `finish`).
- SciNCL: any pool paper is a query; positives and hard negatives come from rank windows of a FAISS kNN
  search over the graph embeddings.
- SPECTER: a paper that cites a paper which cites another; positives are its citations, hard negatives the
  citations of its citations.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from citeflow import tables
from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.errors import CiteflowError

log = logging.getLogger("citeflow")


class Scincl:
    """SciNCL's kNN windows over the pool's graph embeddings."""

    def __init__(self, cfg, store: ArtifactStore, leakage: Manifest, pool, vectors, metrics: dict[str, Any]):
        self.cfg, self.pool, self.vectors, self.metrics = cfg, pool, vectors, metrics
        self.candidates = pool
        self.windows = self.index = None
        self.easy_from = self.easy_window = None
        self.search_seconds = 0.0

    def prepare(self, query_rows, warnings: list[str]) -> None:
        """The rank windows fitted to the pool, the FAISS index, and where easy negatives come from."""
        from citeflow.models.triplets import mining as T

        cfg = self.cfg
        self.windows, self.index = _scincl_index(cfg, self.vectors, self.metrics, warnings)
        if cfg.easy_negatives_sampling == "window":
            # one list for the whole query list, so a query's window does not depend on its batch
            self.easy_window = T.EasyWindow.shuffled(query_rows, 2 * cfg.easy_negatives, cfg.seed)
        elif cfg.easy_negatives_from == "queries":
            self.easy_from = query_rows

    def batch(self, rows):
        from citeflow.models.triplets import knn as knn
        from citeflow.models.triplets import mining as T

        assert self.windows is not None  # set by prepare(), which the stage calls first
        s0 = time.monotonic()
        neighbours = knn.search_neighbours(self.index, self.vectors, rows, self.windows.k_max)
        self.search_seconds += time.monotonic() - s0
        return T.scincl_batch(
            rows,
            neighbours,
            self.windows,
            self.pool,
            self.cfg.seed,
            easy_from=self.easy_from,
            easy_window=self.easy_window,
            distinct=self.cfg.distinct_easy_negatives,
        )

    def batch_metrics(self, counts: dict[str, int]) -> dict[str, Any]:
        out: dict[str, Any] = {"search_seconds": round(self.search_seconds, 3)}
        if self.cfg.easy_negatives_sampling == "window":
            out["easy_negatives_window"] = {
                "width": 2 * self.cfg.easy_negatives,
                "queries_reading_past_their_window": counts.get("easy_window_overruns", 0),
                "queries_whose_easy_negative_is_itself": counts.get("easy_negative_is_query", 0),
            }
        return out

    def finish(self, metrics: dict[str, Any], query_rows) -> None:
        """An approximate index's recall against exact search, on a sample of the queries."""
        from citeflow.models.triplets import knn as knn

        cfg = self.cfg
        if not knn.INDEX_BUILDERS[cfg.index].exact and cfg.recall_sample:
            metrics["index"]["recall"] = _recall(self.index, self.vectors, query_rows, self.windows, cfg)
            log.info("mine_triplets: %s recall against exact search: %s", cfg.index, metrics["index"]["recall"])


class Specter:
    """SPECTER's citation triplets over the citations among pool papers."""

    windows = None

    def __init__(self, cfg, store: ArtifactStore, leakage: Manifest, pool, vectors, metrics: dict[str, Any]):
        self.cfg, self.pool = cfg, pool
        self.candidates, self.cites = _specter_candidates(cfg, store, leakage, pool, metrics)

    def prepare(self, query_rows, warnings: list[str]) -> None:
        """Nothing: the citation index is read with the candidates."""

    def batch(self, rows):
        from citeflow.models.triplets import specter as S

        cfg = self.cfg
        return S.specter_batch(
            rows,
            self.cites,
            self.pool,
            cfg.positives,
            cfg.hard_negatives,
            cfg.easy_negatives,
            cfg.seed,
            distinct=cfg.distinct_easy_negatives,
            rule=cfg.specter_query_rule,
        )

    def batch_metrics(self, counts: dict[str, int]) -> dict[str, Any]:
        return {
            "positive_repeats": counts.get("positive_repeats", 0),
            "hard_negative_shortfall": counts.get("hard_negative_shortfall", 0),
        }

    def finish(self, metrics: dict[str, Any], query_rows) -> None:
        """Nothing to add."""


STRATEGY_MINERS: dict[str, type[Scincl] | type[Specter]] = {"scincl": Scincl, "specter": Specter}


def _specter_candidates(cfg, store: ArtifactStore, leakage: Manifest, pool, metrics: dict[str, Any]):
    """(SPECTER's query candidates, the pool's citation index): papers with a citation and a citation of a
    citation (the reference skips the others), as `specter_query_rule` counts them."""
    import numpy as np

    from citeflow.models.triplets import mining as T
    from citeflow.models.triplets import specter as S

    cites = _citation_index(store, leakage.table_path("citations"), pool)
    citing = np.flatnonzero(cites.degree(np.arange(len(pool))) > 0)
    counted = [S.specter_candidate_counts(rows, cites) for rows in T.batches(citing, cfg.batch_size)]
    n_cited, n_coc = (np.concatenate(c) for c in zip(*counted, strict=True)) if counted else (citing, citing)
    # its own name: `eligible` (the papers with an embedding and text) is reported in the manifest
    gives_triplets = S.specter_rule(n_cited, n_coc, cfg.specter_query_rule)
    candidates = pool[citing[gives_triplets]]
    metrics["queries_without_citation_of_citation"] = int((n_coc == 0).sum())
    if cfg.specter_query_rule != "generator":
        metrics["specter_query_rule"] = cfg.specter_query_rule
        # the parallel file's `len(candidates) > 2`: one citation with one citation of a citation is too few
        metrics["queries_with_too_few_candidates"] = int(((n_coc > 0) & ~gives_triplets).sum())
    if len(candidates) == 0:
        too_few = (
            " and has three candidates (specter_query_rule=parallel)" if cfg.specter_query_rule == "parallel" else ""
        )
        raise CiteflowError(
            f"mine_triplets: no pool paper cites a paper that cites another{too_few}; "
            "SPECTER needs citations of citations"
        )
    return candidates, cites


def _citation_index(store: ArtifactStore, citations: str, pool):
    """Citations among pool papers, as CSR over pool positions, the table read in batches (citeflow/tables.py
    `batches`)."""
    import numpy as np

    from citeflow.models.triplets.specter import CitationIndex

    src, dst = [], []
    for batch in tables.batches(store.fs, citations, ["citing", "cited"], 1 << 20):
        citing, cited = batch.column("citing").to_numpy(), batch.column("cited").to_numpy()
        a = np.minimum(np.searchsorted(pool, citing), len(pool) - 1)
        b = np.minimum(np.searchsorted(pool, cited), len(pool) - 1)
        keep = (pool[a] == citing) & (pool[b] == cited)
        src.append(a[keep])
        dst.append(b[keep])
    src = np.concatenate(src) if src else np.zeros(0, np.int64)
    dst = np.concatenate(dst) if dst else np.zeros(0, np.int64)
    return CitationIndex.from_edges(src, dst, len(pool))


def _scincl_index(cfg, vectors, metrics: dict[str, Any], warnings: list[str]):
    """(SciNCL's rank windows fitted to the pool, the FAISS index of the pool's graph embeddings)."""
    from citeflow.models.triplets import knn as knn
    from citeflow.models.triplets import mining as T

    windows, fitted = T.fit_windows(
        len(vectors),
        cfg.k_pos,
        cfg.k_hard,
        cfg.positives,
        cfg.hard_negatives,
        cfg.easy_negatives,
        relative=cfg.windows == "relative",
        reference_pool=cfg.reference_pool,
    )
    warnings += fitted
    t0 = time.monotonic()
    index, description = knn.build_index(
        vectors,
        cfg.index,
        k_max=windows.k_max,
        nlist=cfg.nlist,
        nprobe=cfg.nprobe,
        hnsw_m=cfg.hnsw_m,
        ef_search=cfg.ef_search,
        pq_m=cfg.pq_m,
        seed=cfg.seed,
        use_gpu=cfg.gpu,
    )
    metrics["index"] = {"kind": cfg.index, "description": description, "build_seconds": round(time.monotonic() - t0, 3)}
    metrics["windows"] = {
        "mode": cfg.windows,
        "k_pos": windows.k_pos,
        "k_hard": windows.k_hard,
        "k_max": windows.k_max,
        "positive_ranks": [int(windows.positive_ranks[0]), int(windows.positive_ranks[-1])],
        "hard_ranks": [int(windows.hard_ranks[0]), int(windows.hard_ranks[-1])],
    }
    return windows, index


def _recall(index, vectors, query_rows, windows, cfg) -> dict[str, Any]:
    """Recall of the approximate index against exact search (faiss.knn) on a sample of queries."""
    import faiss
    import numpy as np

    from citeflow.models.triplets import knn as knn
    from citeflow.models.triplets import mining as T

    sample = np.searchsorted(query_rows, T.hashed_sample(query_rows, cfg.recall_sample, cfg.seed, T.SALT_SAMPLE))
    rows = query_rows[sample]
    approx = knn.search_neighbours(index, vectors, rows, windows.k_max)
    _, exact = faiss.knn(
        np.ascontiguousarray(vectors[rows]), vectors, windows.k_max + 1, metric=faiss.METRIC_INNER_PRODUCT
    )
    keep = exact != rows[:, None]
    keep[keep.all(axis=1), -1] = False
    exact = exact[keep].reshape(len(rows), windows.k_max)
    return {
        "queries": len(rows),
        f"at_{windows.k_pos}": round(knn.neighbour_recall(approx, exact, windows.k_pos), 4),
        f"at_{windows.k_max}": round(knn.neighbour_recall(approx, exact, windows.k_max), 4),
        "positive_window": round(_window_recall(approx, exact, windows.positive_ranks - 1), 4),
    }


def _window_recall(approx, exact, columns) -> float:
    import numpy as np

    hits = sum(np.intersect1d(a[columns], e[columns]).size for a, e in zip(approx, exact, strict=True))
    return hits / (len(columns) * len(exact)) if len(exact) else 1.0
