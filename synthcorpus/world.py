"""The whole snapshot before serialisation: papers, titles, graph, dirt and paper-ids, with its exact counts.

`build_world` draws everything but the abstracts' text, which `abstracts_of` generates in fixed blocks of
TEXT_BLOCK papers as the shards are written (text never depends on the sharding). No files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from synthcorpus.arrays import (
    csr_ptr,
    index_mask,
    lengths_to_offsets,
    make_shas,
    pick,
    random_stream,
    rate_count,
    unique_ints,
    weighted_sample,
)
from synthcorpus.citations import sample_citations
from synthcorpus.config import CORPUS_ID_RANGE, TEXT_BLOCK, GenerateConfig
from synthcorpus.lexicon import GENERIC_TITLES
from synthcorpus.papers import Authors, Papers, sample_authors, sample_papers
from synthcorpus.vocabulary import (
    Vocabulary,
    build_vocabulary,
    make_abstracts,
    make_context_pool,
    make_titles,
)

# Relative odds of lacking an abstract for a paper with references (real S2ORC sample: 0.18 / 0.57).
MISSING_ABSTRACT_WEIGHT_CITING = 0.15


@dataclass
class World:
    """Per-paper and per-edge arrays the line writers of serialise.py read (derive_plan.py fills one for the
    papers a later release adds)."""

    config: GenerateConfig
    papers: Papers
    authors: Authors
    vocab: Vocabulary
    title: pa.Array  # final titles (null for missing; generic ones included)
    has_abstract: np.ndarray  # bool: the kept record has an abstract
    generic: np.ndarray  # bool: a generic (ambiguous) title
    bounds: np.ndarray  # shard s holds papers bounds[s] .. bounds[s + 1] - 1
    src: np.ndarray  # clean edges, paper indices, sorted by (src, dst)
    dst: np.ndarray
    clean_ptr: np.ndarray  # CSR of the clean edges over src
    in_ptr: np.ndarray  # CSR over dst of the clean citing papers (random order within a row)
    in_src: np.ndarray
    dup_of: np.ndarray  # duplicate records: the paper each copies, and the shard it is written to
    dup_shard: np.ndarray
    malformed: dict[str, np.ndarray]  # dataset -> malformed lines per shard
    out_ptr: np.ndarray  # S2ORC outbound_citations as written (with dirt), CSR over papers
    out_val: np.ndarray  # corpus ids
    rows: dict[str, np.ndarray]  # S2AG citation rows (citing, cited: corpus id or -1 for null; shard; field)
    abstract_row: np.ndarray  # S2AG: the paper has an abstracts line (its abstract may be null)
    primary_sha: pa.LargeStringArray  # per paper
    extra_paper: np.ndarray  # non-primary paper-ids rows: paper index and sha
    extra_sha: pa.LargeStringArray
    outside_ids: np.ndarray  # ids of papers outside the corpus (cited by it, in paper-ids)
    outside_sha: pa.LargeStringArray  # primary shas of the first len(outside_sha) outside ids
    counts_per_paper: dict[str, np.ndarray]  # S2AG referencecount, citationcount, influentialcitationcount
    context_pool: tuple[str, ...]  # S2AG citation contexts (JSON strings), the same number per field
    counts: dict[str, Any]


def _spread(rng: np.random.Generator, total: int, lines_per_shard: np.ndarray) -> np.ndarray:
    """Split `total` extra lines over the shards in proportion to their lines (none to an empty shard)."""
    lines = np.asarray(lines_per_shard, dtype=np.float64)
    if total == 0 or lines.sum() == 0:
        return np.zeros(len(lines), dtype=np.int64)
    return np.bincount(rng.choice(len(lines), size=total, p=lines / lines.sum()), minlength=len(lines))


def build_world(config: GenerateConfig) -> World:
    """Everything about the snapshot except the abstracts' text (generated block by block when written)."""
    seed, n, shards = config.seed, config.papers, config.shard_count
    papers = sample_papers(config)
    vocab = build_vocabulary(seed, config.difficulty, config.niches_per_subtopic)
    authors = sample_authors(papers, seed)
    bounds = (np.arange(shards + 1, dtype=np.int64) * n) // shards

    # Citations; titles; then generic titles and missing titles / abstracts (dirt on the kept records).
    src, dst = sample_citations(papers, config)
    clean_ptr = csr_ptr(src, n)
    cid = papers.corpus_id
    dirt = random_stream(seed, "dirt")
    title = make_titles(vocab, random_stream(seed, "titles"), papers.topics)
    no_title = index_mask(n, pick(dirt, n, rate_count(config.missing_title_rate, n)))
    # Papers with references lack an abstract less often (real S2ORC sample: 18% of them, 57% of the others).
    citing = np.bincount(src, minlength=n) > 0
    weight = np.where(citing, MISSING_ABSTRACT_WEIGHT_CITING, 1.0)
    has_abstract = ~index_mask(n, weighted_sample(dirt, weight, rate_count(config.missing_abstract_rate, n)))
    titled = np.flatnonzero(~no_title)
    generic_idx = (
        np.sort(
            dirt.choice(titled, size=min(len(titled), max(2, rate_count(config.generic_title_rate, n))), replace=False)
        )
        if config.generic_title_rate > 0
        else np.empty(0, np.int64)
    )
    generic_names = dirt.zipf(1.6, size=len(generic_idx)).clip(1, len(GENERIC_TITLES)) - 1
    generic_names[:2] = 0  # at least two "Editorial": a title that matches several papers
    generic = index_mask(n, generic_idx)
    title = pc.replace_with_mask(
        title, pa.array(generic), pa.array([GENERIC_TITLES[i] for i in generic_names], pa.string())
    )
    title = pc.if_else(pa.array(no_title), pa.scalar(None, pa.string()), title)

    order = np.lexsort((random_stream(seed, "inbound").random(len(dst)), dst))
    in_ptr, in_src = csr_ptr(dst[order], n), src[order]
    outside_ids = unique_ints(random_stream(seed, "outside"), max(1000, n // 5), *CORPUS_ID_RANGE, exclude=cid)

    # Edge dirt, the same for both formats.
    edges = random_stream(seed, "edge-dirt")
    dup_edges = pick(edges, len(src), rate_count(config.duplicate_citation_rate, len(src)))
    self_cite = pick(edges, n, rate_count(config.self_citation_rate, n))
    ext_papers = pick(edges, n, rate_count(config.external_citation_rate, n))
    ext_k = edges.integers(1, 4, size=len(ext_papers))
    ext_src = np.repeat(ext_papers, ext_k)
    ext_start = np.repeat(edges.integers(0, len(outside_ids), size=len(ext_papers)), ext_k)
    ext_offsets = lengths_to_offsets(ext_k)
    ext_id = outside_ids[(ext_start + np.arange(len(ext_src)) - np.repeat(ext_offsets[:-1], ext_k)) % len(outside_ids)]

    # S2ORC: each paper's outbound list = clean + duplicate copies + itself + outside ids, shuffled.
    entry_paper = np.concatenate([src, src[dup_edges], self_cite, ext_src])
    entry_id = np.concatenate([cid[dst], cid[dst[dup_edges]], cid[self_cite], ext_id])
    order = np.lexsort((edges.random(len(entry_paper)), entry_paper))
    out_ptr, out_val = csr_ptr(entry_paper[order], n), entry_id[order]

    # S2AG citation rows: the same edges plus null ids and citing papers outside the corpus.
    rows_dirt = random_stream(seed, "s2ag-rows")
    n_null = rate_count(config.null_id_citation_rate, len(src)) if config.format == "s2ag" else 0
    n_outside = rate_count(config.citing_outside_rate, len(src)) if config.format == "s2ag" else 0
    null_paper = rows_dirt.integers(0, n, size=n_null)
    null_citing = rows_dirt.random(n_null) < 0.15  # mostly the cited id is null (a reference not resolved)
    outside_cited = rows_dirt.integers(0, n, size=n_outside)
    outside_citing = outside_ids[rows_dirt.integers(0, len(outside_ids), size=n_outside)]
    known = np.concatenate([src, src[dup_edges], self_cite, ext_src, null_paper, outside_cited])
    citing = np.concatenate(
        [
            cid[src],
            cid[src[dup_edges]],
            cid[self_cite],
            cid[ext_src],
            np.where(null_citing, -1, cid[null_paper]),
            outside_citing,
        ]
    )
    cited = np.concatenate(
        [
            cid[dst],
            cid[dst[dup_edges]],
            cid[self_cite],
            ext_id,
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

    # Duplicate records (strictly less complete copies) and S2AG abstract lines.
    recs = random_stream(seed, "records")
    dup_of = pick(recs, n, rate_count(config.duplicate_record_rate, n))
    dup_shard = recs.integers(0, shards, size=len(dup_of))
    abstract_row = has_abstract | (recs.random(n) < 0.2)  # some papers have a line with "abstract": null
    in_shard = np.diff(bounds)
    paper_lines = in_shard + np.bincount(dup_shard, minlength=shards)
    bad = random_stream(seed, "malformed")
    if config.format == "s2orc":
        line_counts = {"metadata": paper_lines}
    else:
        line_counts = {
            "papers": paper_lines,
            "abstracts": np.add.reduceat(abstract_row.astype(np.int64), bounds[:-1]),
            "citations": np.bincount(rows["shard"], minlength=shards),
        }
    malformed = {
        name: _spread(bad, rate_count(config.malformed_line_rate, int(lines.sum())), lines)
        for name, lines in line_counts.items()
    }

    # paper-ids: a primary sha per paper, non-primary ones for ~10%, and shas of papers outside the corpus.
    shas = random_stream(seed, "shas")
    primary_sha = make_shas(shas, n)
    extra_paper = np.sort(shas.integers(0, n, size=rate_count(config.extra_sha_rate, n)))
    extra_sha = make_shas(shas, len(extra_paper))
    outside_sha = make_shas(shas, min(len(outside_ids), rate_count(config.outside_sha_rate, n)))

    citations_in = np.diff(in_ptr) + np.bincount(outside_cited, minlength=n)
    counts_per_paper = {
        "references": np.diff(clean_ptr) + np.bincount(ext_src, minlength=n),
        "citations": citations_in,
        "influential": recs.binomial(citations_in, 0.1),
    }
    context_pool = make_context_pool(vocab, random_stream(seed, "contexts"))

    m_total = {name: int(m.sum()) for name, m in malformed.items()}
    counts: dict[str, Any] = {
        "papers": n,
        "lines": int(paper_lines.sum() + m_total.get("metadata", 0) + m_total.get("papers", 0)),
    }
    if config.format == "s2ag":
        counts["abstract_lines"] = int(line_counts["abstracts"].sum() + m_total["abstracts"])
        counts["citation_lines"] = int(line_counts["citations"].sum() + m_total["citations"])
    counts.update(
        {
            "malformed_lines": int(sum(m_total.values())),
            "malformed_lines_by_dataset": m_total,
            "duplicate_records": len(dup_of),
            "papers_without_title": int(no_title.sum()),
            "papers_without_abstract": int((~has_abstract).sum()),
            "papers_with_generic_title": int(generic.sum()),
            "citations": len(src),
            "graph_nodes": int(((np.diff(clean_ptr) + np.diff(in_ptr)) > 0).sum()),
            "self_citations": len(self_cite),
            "duplicate_citations": len(dup_edges),
            "external_citations": len(ext_src),
            "null_id_citations": n_null,
            "citing_not_in_corpus": n_outside,
            "shards": shards,
        }
    )
    return World(
        config=config,
        papers=papers,
        authors=authors,
        vocab=vocab,
        title=title,
        has_abstract=has_abstract,
        generic=generic,
        bounds=bounds,
        src=src,
        dst=dst,
        clean_ptr=clean_ptr,
        in_ptr=in_ptr,
        in_src=in_src,
        dup_of=dup_of,
        dup_shard=dup_shard,
        malformed=malformed,
        out_ptr=out_ptr,
        out_val=out_val,
        rows=rows,
        abstract_row=abstract_row,
        primary_sha=primary_sha,
        extra_paper=extra_paper,
        extra_sha=extra_sha,
        outside_ids=outside_ids,
        outside_sha=outside_sha,
        counts_per_paper=counts_per_paper,
        context_pool=context_pool,
        counts=counts,
    )


def abstract_block(world: World, block: int) -> pa.Array:
    """Abstracts of papers block * TEXT_BLOCK .. (block + 1) * TEXT_BLOCK - 1 (null where missing).

    Generated per fixed block, whatever the shard count, so text never depends on the sharding."""
    p = world.papers
    lo, hi = block * TEXT_BLOCK, min((block + 1) * TEXT_BLOCK, p.n)
    rows = np.flatnonzero(world.has_abstract[lo:hi])  # only papers that show one get text
    text = make_abstracts(world.vocab, random_stream(world.config.seed, "abstracts", block), p.topics.select(lo + rows))
    where = np.full(hi - lo, -1, dtype=np.int64)
    where[rows] = np.arange(len(rows))
    return text.take(pa.array(where, mask=where < 0)).cast(pa.large_string())


def abstracts_of(world: World, lo: int, hi: int, cache: dict[int, pa.Array]) -> pa.Array:
    """Abstracts of papers lo .. hi - 1; `cache` keeps the last block (shards rarely align with blocks)."""
    parts = []
    for block in range(lo // TEXT_BLOCK, (hi - 1) // TEXT_BLOCK + 1):
        if block not in cache:
            cache.clear()
            cache[block] = abstract_block(world, block)
        start = block * TEXT_BLOCK
        parts.append(cache[block].slice(max(lo - start, 0), min(hi, start + TEXT_BLOCK) - max(lo, start)))
    return pa.concat_arrays(parts) if parts else pa.array([], pa.large_string())
