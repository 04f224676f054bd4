"""What changed between two releases' artifacts: the graph, the embeddings, the triplets and the scores.

    rows, histogram = drift(before, after)      # before / after: {stage: Manifest} of one release each

Pure functions over committed tables (read with pyarrow, searched with FAISS), writing nothing:
- `graph_delta`: papers added, removed and changed (same corpus id, another row), edges added and removed, from
  the two build_graph versions;
- `embedding_drift`: for the papers both releases embed, the cosine similarity of each paper's old and new vector
  (its quantiles and a histogram) and the overlap of its 10 nearest neighbours among those papers in each space
  (the share of the old ten that are among the new ten), for the graph embeddings (embed_graph's
  `paper_embeddings`) and the encoder's (embed_papers' `embeddings` of the trained model). The cosine says how far
  a vector moved, which only means something when the new space continues the old one (a warm start); the
  neighbour overlap does not depend on the space's orientation;
- `triplet_overlap`: the share of the new release's triplets (query, positive, negative) and of its positive
  pairs that the old release mined too;
- `score_delta`: the trained model's benchmark scores side by side, with their difference.
Each is a list of rows (`section`, `name`, `before`, `after`, `value`): the drift artifact's `summary` table.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from citeflow.errors import CiteflowError

NEIGHBOURS = 10
QUERY_SAMPLE = 2000  # papers whose neighbours are compared (all of them when fewer)
HISTOGRAM_BINS = np.linspace(-1.0, 1.0, 41)
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
PAPER_COLUMNS = ("title", "abstract", "year", "venue", "doi", "pubmed_id", "arxiv_id", "fields_of_study")


def row(section: str, name: str, value: float | int | None, before: Any = None, after: Any = None) -> dict:
    return {
        "section": section,
        "name": name,
        "before": None if before is None else float(before),
        "after": None if after is None else float(after),
        "value": None if value is None else float(value),
    }


def _pairs(table: pa.Table) -> np.ndarray:
    """Edges as one sorted int64 per pair (corpus ids fit in 31 bits)."""
    citing = table["citing"].to_numpy().astype(np.int64)
    cited = table["cited"].to_numpy().astype(np.int64)
    return np.unique((citing << 32) | cited)


def graph_delta(before, after) -> list[dict]:
    """Papers and edges added, removed, changed between two build_graph versions."""
    old = pq.read_table(before.table_path("papers"))
    new = pq.read_table(after.table_path("papers"))
    shared = [c for c in ("corpus_id", *PAPER_COLUMNS) if c in old.column_names and c in new.column_names]
    old, new = old.select(shared), new.select(shared)
    old_ids, new_ids = old["corpus_id"], new["corpus_id"]
    both = pc.is_in(new_ids, value_set=old_ids.combine_chunks())
    added = int(pc.sum(pc.invert(both)).as_py() or 0)
    removed = int(pc.sum(pc.invert(pc.is_in(old_ids, value_set=new_ids.combine_chunks()))).as_py() or 0)
    common = new.filter(both).sort_by("corpus_id")
    previous = old.filter(pc.is_in(old_ids, value_set=common["corpus_id"].combine_chunks())).sort_by("corpus_id")
    changed = np.zeros(common.num_rows, dtype=bool)
    for name in shared[1:]:
        a, b = previous[name].combine_chunks(), common[name].combine_chunks()
        same = pc.fill_null(pc.equal(a, b), False) if not pa.types.is_list(a.type) else None
        if same is None:  # list columns: compared as Python values
            same = pa.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)])
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        changed |= ~pc.or_(same, both_null).to_numpy(zero_copy_only=False)
    old_edges, new_edges = (_pairs(pq.read_table(m.table_path("citations"))) for m in (before, after))
    kept = np.isin(new_edges, old_edges, assume_unique=True)
    return [
        row("graph", "papers", new.num_rows - old.num_rows, old.num_rows, new.num_rows),
        row("graph", "papers added", added),
        row("graph", "papers removed", removed),
        row("graph", "papers changed", int(changed.sum())),
        row("graph", "edges", len(new_edges) - len(old_edges), len(old_edges), len(new_edges)),
        row("graph", "edges added", int((~kept).sum())),
        row("graph", "edges removed", len(old_edges) - int(kept.sum())),
    ]


def _vectors(table: pa.Table, id_column: str) -> tuple[np.ndarray, np.ndarray]:
    ids = np.asarray(table[id_column].to_pylist())
    flat = table["embedding"].combine_chunks()
    width = len(flat[0]) if len(flat) else 0
    vectors = np.asarray(flat.flatten().to_numpy(), dtype=np.float32).reshape(len(ids), width)
    return ids, vectors


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def _neighbours(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """The k nearest papers (by cosine, the paper itself left out) of each query row, exact."""
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors))
    _, found = index.search(np.ascontiguousarray(vectors[queries]), k + 1)
    return np.array([[j for j in hits if j != q][:k] for q, hits in zip(queries, found, strict=True)])


def embedding_drift(kind: str, before: pa.Table, after: pa.Table, id_column: str, seed: int = 0):
    """(summary rows, histogram rows) of how the papers both tables embed moved (see the module's docstring)."""
    old_ids, old = _vectors(before, id_column)
    new_ids, new = _vectors(after, id_column)
    common, old_at, new_at = np.intersect1d(old_ids, new_ids, return_indices=True)
    if len(common) == 0:
        raise CiteflowError(f"the two releases' {kind} embeddings hold no paper in common: nothing to compare")
    a, b = _unit(old[old_at]), _unit(new[new_at])
    rows = [row(kind, "papers in both", len(common), len(old_ids), len(new_ids))]
    if a.shape[1] == b.shape[1]:
        cosine = np.sum(a * b, axis=1)
        rows += [row(kind, f"cosine old-new q{int(q * 100):02d}", float(np.quantile(cosine, q))) for q in QUANTILES]
        rows.append(row(kind, "cosine old-new mean", float(cosine.mean())))
        counts, edges = np.histogram(np.clip(cosine, -1, 1), bins=HISTOGRAM_BINS)
        histogram = [
            {"kind": kind, "lo": float(lo), "hi": float(hi), "papers": int(n)}
            for lo, hi, n in zip(edges[:-1], edges[1:], counts, strict=True)
        ]
    else:
        histogram = []  # another dimension: the vectors cannot be compared, their neighbours can
    k = min(NEIGHBOURS, len(common) - 1)
    if k >= 1:
        rng = np.random.default_rng(seed)
        queries = np.sort(rng.choice(len(common), size=min(QUERY_SAMPLE, len(common)), replace=False))
        na, nb = _neighbours(a, queries, k), _neighbours(b, queries, k)
        overlap = np.array([len(set(x) & set(y)) / k for x, y in zip(na, nb, strict=True)])
        rows.append(row(kind, f"top-{k} neighbour overlap mean", float(overlap.mean())))
        rows.append(row(kind, f"top-{k} neighbour overlap median", float(np.median(overlap))))
    return rows, histogram


def triplet_overlap(before: pa.Table, after: pa.Table) -> list[dict]:
    def keys(table, columns):
        return {tuple(r) for r in zip(*(table[c].to_pylist() for c in columns), strict=True)}

    old_t, new_t = (
        keys(before, ("query_id", "positive_id", "negative_id")),
        keys(after, ("query_id", "positive_id", "negative_id")),
    )
    old_p, new_p = keys(before, ("query_id", "positive_id")), keys(after, ("query_id", "positive_id"))
    share = lambda new, old: len(new & old) / len(new) if new else None  # noqa: E731
    return [
        row("triplets", "triplets", len(new_t) - len(old_t), len(old_t), len(new_t)),
        row("triplets", "share of the new triplets mined before", share(new_t, old_t)),
        row("triplets", "share of the new positive pairs mined before", share(new_p, old_p)),
    ]


def score_delta(before: pa.Table, after: pa.Table) -> list[dict]:
    """The trained model's scores of both benchmark versions (`scores` tables), task by task, each change with its
    95% paired bootstrap interval over the queries (papers, clicks) both releases' models scored (`low`, `high`;
    none where the rows keep no units in common: `citeflow.evaluation.paired`)."""
    from citeflow.evaluation.paired import row_gain

    def trained(table):
        return {
            (r["task"], r["split"], r["metric"]): r
            for r in table.to_pylist()
            if r["model"] == "trained" and r["status"] == "ok" and r["value"] is not None
        }

    old, new = trained(before), trained(after)
    rows = []
    for key in sorted(old.keys() & new.keys()):
        task, split, metric = key
        a, b = old[key], new[key]
        gain = row_gain(a, b) if task != "average" else None
        interval = {"low": gain.low, "high": gain.high} if gain is not None else {}
        rows.append(
            row("scores", f"{task} {split} {metric}", b["value"] - a["value"], a["value"], b["value"]) | interval
        )
    return rows
