"""The dirt on a snapshot's citations: duplicate, self and external citations, S2ORC's outbound lists that carry
them, and S2AG's citation rows with their own dirt (null ids, citing papers outside the corpus).

Arrays in, arrays out (no files); world.py builds them into the World.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from citeflow.synthcorpus.arrays import csr_ptr, lengths_to_offsets, pick, random_stream, rate_count
from citeflow.synthcorpus.config import GenerateConfig
from citeflow.synthcorpus.papers import Papers


@dataclass(frozen=True)
class EdgeDirt:
    """Dirt on the edges, the same for both formats, and S2ORC's outbound lists that carry it."""

    dup_edges: np.ndarray  # clean edges written twice
    self_cite: np.ndarray  # papers citing themselves
    ext_src: np.ndarray  # citing paper of each citation to a paper outside the corpus
    ext_id: np.ndarray  # its cited (outside) id
    out_ptr: np.ndarray
    out_val: np.ndarray


@dataclass(frozen=True)
class CitationRows:
    """S2AG citation rows and the dirt only they carry."""

    rows: dict[str, np.ndarray]
    n_null: int
    n_outside: int
    outside_cited: np.ndarray  # papers cited by a paper outside the corpus


def sample_edge_dirt(
    config: GenerateConfig, cid: np.ndarray, src: np.ndarray, dst: np.ndarray, outside_ids: np.ndarray
) -> EdgeDirt:
    """Edge dirt, the same for both formats; S2ORC's outbound lists: each paper's clean references + duplicate
    copies + itself + outside ids, shuffled."""
    n = len(cid)
    edges = random_stream(config.seed, "edge-dirt")
    dup_edges = pick(edges, len(src), rate_count(config.duplicate_citation_rate, len(src)))
    self_cite = pick(edges, n, rate_count(config.self_citation_rate, n))
    ext_papers = pick(edges, n, rate_count(config.external_citation_rate, n))
    ext_k = edges.integers(1, 4, size=len(ext_papers))
    ext_src = np.repeat(ext_papers, ext_k)
    ext_start = np.repeat(edges.integers(0, len(outside_ids), size=len(ext_papers)), ext_k)
    ext_offsets = lengths_to_offsets(ext_k)
    ext_id = outside_ids[(ext_start + np.arange(len(ext_src)) - np.repeat(ext_offsets[:-1], ext_k)) % len(outside_ids)]

    entry_paper = np.concatenate([src, src[dup_edges], self_cite, ext_src])
    entry_id = np.concatenate([cid[dst], cid[dst[dup_edges]], cid[self_cite], ext_id])
    order = np.lexsort((edges.random(len(entry_paper)), entry_paper))
    out_ptr, out_val = csr_ptr(entry_paper[order], n), entry_id[order]
    return EdgeDirt(
        dup_edges=dup_edges, self_cite=self_cite, ext_src=ext_src, ext_id=ext_id, out_ptr=out_ptr, out_val=out_val
    )


def s2ag_citation_rows(
    config: GenerateConfig,
    papers: Papers,
    bounds: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    dirt: EdgeDirt,
    outside_ids: np.ndarray,
) -> CitationRows:
    """S2AG citation rows: the clean edges (src, dst) plus null ids and citing papers outside the corpus, grouped by the
    shard of the known paper and shuffled within it (no rows for S2ORC, whose draws are made all the same)."""
    n, cid = papers.n, papers.corpus_id
    rows_dirt = random_stream(config.seed, "s2ag-rows")
    n_null = rate_count(config.null_id_citation_rate, len(src)) if config.format == "s2ag" else 0
    n_outside = rate_count(config.citing_outside_rate, len(src)) if config.format == "s2ag" else 0
    null_paper = rows_dirt.integers(0, n, size=n_null)
    null_citing = rows_dirt.random(n_null) < 0.15  # mostly the cited id is null (a reference not resolved)
    outside_cited = rows_dirt.integers(0, n, size=n_outside)
    outside_citing = outside_ids[rows_dirt.integers(0, len(outside_ids), size=n_outside)]
    dup, self_cite, ext_src = dirt.dup_edges, dirt.self_cite, dirt.ext_src
    known = np.concatenate([src, src[dup], self_cite, ext_src, null_paper, outside_cited])
    citing = np.concatenate(
        [
            cid[src],
            cid[src[dup]],
            cid[self_cite],
            cid[ext_src],
            np.where(null_citing, -1, cid[null_paper]),
            outside_citing,
        ]
    )
    cited = np.concatenate(
        [
            cid[dst],
            cid[dst[dup]],
            cid[self_cite],
            dirt.ext_id,
            np.where(null_citing, cid[null_paper], -1),
            cid[outside_cited],
        ]
    )
    row_shard = np.searchsorted(bounds, known, side="right") - 1
    order = np.lexsort((rows_dirt.random(len(known)), row_shard))
    rows = {
        "citing": citing[order],
        "cited": cited[order],
        "shard": row_shard[order],
        "field": papers.field[known[order]],
    }
    if config.format != "s2ag":
        rows = {k: v[:0] for k, v in rows.items()}
    return CitationRows(rows=rows, n_null=n_null, n_outside=n_outside, outside_cited=outside_cited)
