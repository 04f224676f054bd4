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

from citeflow.synthcorpus.arrays import (
    csr_ptr,
    index_mask,
    make_shas,
    pick,
    random_stream,
    rate_count,
    unique_ints,
    weighted_sample,
)
from citeflow.synthcorpus.citations import sample_citations
from citeflow.synthcorpus.config import CORPUS_ID_RANGE, TEXT_BLOCK, GenerateConfig
from citeflow.synthcorpus.edge_dirt import CitationRows, EdgeDirt, s2ag_citation_rows, sample_edge_dirt
from citeflow.synthcorpus.lexicon import GENERIC_TITLES
from citeflow.synthcorpus.papers import Authors, Papers, sample_authors, sample_papers
from citeflow.synthcorpus.vocabulary import (
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


@dataclass(frozen=True)
class _Graph:
    """The clean citation graph: edges sorted by (src, dst), CSR over src, and CSR over dst of the citing
    papers (random order within a row)."""

    src: np.ndarray
    dst: np.ndarray
    clean_ptr: np.ndarray
    in_ptr: np.ndarray
    in_src: np.ndarray


@dataclass(frozen=True)
class _Titles:
    """Final titles and the dirt on the kept records: missing titles and abstracts, generic titles."""

    title: pa.Array
    no_title: np.ndarray
    has_abstract: np.ndarray
    generic: np.ndarray


@dataclass(frozen=True)
class _Records:
    """Duplicate records, abstract lines, lines per dataset and shard, and the malformed lines among them."""

    dup_of: np.ndarray
    dup_shard: np.ndarray
    abstract_row: np.ndarray
    paper_lines: np.ndarray  # per shard: kept and duplicate records (S2ORC metadata, S2AG papers)
    line_counts: dict[str, np.ndarray]  # dataset -> well-formed lines per shard
    malformed: dict[str, np.ndarray]
    influential: np.ndarray  # S2AG influentialcitationcount (drawn from the same stream, last)


@dataclass(frozen=True)
class _PaperIds:
    """paper-ids' shas: a primary one per paper, non-primary ones, and those of papers outside the corpus."""

    primary_sha: pa.LargeStringArray
    extra_paper: np.ndarray
    extra_sha: pa.LargeStringArray
    outside_sha: pa.LargeStringArray


def _spread(rng: np.random.Generator, total: int, lines_per_shard: np.ndarray) -> np.ndarray:
    """Split `total` extra lines over the shards in proportion to their lines (none to an empty shard)."""
    lines = np.asarray(lines_per_shard, dtype=np.float64)
    if total == 0 or lines.sum() == 0:
        return np.zeros(len(lines), dtype=np.int64)
    return np.bincount(rng.choice(len(lines), size=total, p=lines / lines.sum()), minlength=len(lines))


def _titles(config: GenerateConfig, papers: Papers, vocab: Vocabulary, src: np.ndarray) -> _Titles:
    """Titles, then generic titles and missing titles / abstracts (dirt on the kept records)."""
    seed, n = config.seed, papers.n
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
    return _Titles(title=title, no_title=no_title, has_abstract=has_abstract, generic=generic)


def _inbound(seed: int, n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR over dst of the clean citing papers, in random order within a row."""
    order = np.lexsort((random_stream(seed, "inbound").random(len(dst)), dst))
    return csr_ptr(dst[order], n), src[order]


def _records(
    config: GenerateConfig,
    bounds: np.ndarray,
    has_abstract: np.ndarray,
    row_shard: np.ndarray,
    citations_in: np.ndarray,
) -> _Records:
    """Duplicate records (strictly less complete copies), S2AG abstract lines, the malformed lines spread over
    each dataset's shards, and the influential citation counts (the records stream's last draw)."""
    seed, n, shards = config.seed, config.papers, config.shard_count
    recs = random_stream(seed, "records")
    dup_of = pick(recs, n, rate_count(config.duplicate_record_rate, n))
    dup_shard = recs.integers(0, shards, size=len(dup_of))
    abstract_row = has_abstract | (recs.random(n) < 0.2)  # some papers have a line with "abstract": null
    paper_lines = np.diff(bounds) + np.bincount(dup_shard, minlength=shards)
    bad = random_stream(seed, "malformed")
    if config.format == "s2orc":
        line_counts = {"metadata": paper_lines}
    else:
        line_counts = {
            "papers": paper_lines,
            "abstracts": np.add.reduceat(abstract_row.astype(np.int64), bounds[:-1]),
            "citations": np.bincount(row_shard, minlength=shards),
        }
    malformed = {
        name: _spread(bad, rate_count(config.malformed_line_rate, int(lines.sum())), lines)
        for name, lines in line_counts.items()
    }
    return _Records(
        dup_of=dup_of,
        dup_shard=dup_shard,
        abstract_row=abstract_row,
        paper_lines=paper_lines,
        line_counts=line_counts,
        malformed=malformed,
        influential=recs.binomial(citations_in, 0.1),
    )


def _paper_ids(config: GenerateConfig, outside_ids: np.ndarray) -> _PaperIds:
    """paper-ids: a primary sha per paper, non-primary ones for ~10%, and shas of papers outside the corpus."""
    n = config.papers
    shas = random_stream(config.seed, "shas")
    primary_sha = make_shas(shas, n)
    extra_paper = np.sort(shas.integers(0, n, size=rate_count(config.extra_sha_rate, n)))
    extra_sha = make_shas(shas, len(extra_paper))
    outside_sha = make_shas(shas, min(len(outside_ids), rate_count(config.outside_sha_rate, n)))
    return _PaperIds(primary_sha=primary_sha, extra_paper=extra_paper, extra_sha=extra_sha, outside_sha=outside_sha)


def _counts(
    config: GenerateConfig, graph: _Graph, titles: _Titles, dirt: EdgeDirt, rows: CitationRows, records: _Records
) -> dict[str, Any]:
    """The exact truth counts of generator.json (generate.run's docstring says what each is)."""
    m_total = {name: int(m.sum()) for name, m in records.malformed.items()}
    counts: dict[str, Any] = {
        "papers": config.papers,
        "lines": int(records.paper_lines.sum() + m_total.get("metadata", 0) + m_total.get("papers", 0)),
    }
    if config.format == "s2ag":
        counts["abstract_lines"] = int(records.line_counts["abstracts"].sum() + m_total["abstracts"])
        counts["citation_lines"] = int(records.line_counts["citations"].sum() + m_total["citations"])
    counts.update(
        {
            "malformed_lines": int(sum(m_total.values())),
            "malformed_lines_by_dataset": m_total,
            "duplicate_records": len(records.dup_of),
            "papers_without_title": int(titles.no_title.sum()),
            "papers_without_abstract": int((~titles.has_abstract).sum()),
            "papers_with_generic_title": int(titles.generic.sum()),
            "citations": len(graph.src),
            "graph_nodes": int(((np.diff(graph.clean_ptr) + np.diff(graph.in_ptr)) > 0).sum()),
            "self_citations": len(dirt.self_cite),
            "duplicate_citations": len(dirt.dup_edges),
            "external_citations": len(dirt.ext_src),
            "null_id_citations": rows.n_null,
            "citing_not_in_corpus": rows.n_outside,
            "shards": config.shard_count,
        }
    )
    return counts


def build_world(config: GenerateConfig) -> World:
    """Everything about the snapshot except the abstracts' text (generated block by block when written)."""
    seed, n, shards = config.seed, config.papers, config.shard_count
    papers = sample_papers(config)
    vocab = build_vocabulary(seed, config.difficulty, config.niches_per_subtopic)
    authors = sample_authors(papers, seed)
    bounds = (np.arange(shards + 1, dtype=np.int64) * n) // shards
    src, dst = sample_citations(papers, config)
    clean_ptr = csr_ptr(src, n)
    titles = _titles(config, papers, vocab, src)
    in_ptr, in_src = _inbound(seed, n, src, dst)
    graph = _Graph(src=src, dst=dst, clean_ptr=clean_ptr, in_ptr=in_ptr, in_src=in_src)
    cid = papers.corpus_id
    outside_ids = unique_ints(random_stream(seed, "outside"), max(1000, n // 5), *CORPUS_ID_RANGE, exclude=cid)
    dirt = sample_edge_dirt(config, cid, src, dst, outside_ids)
    rows = s2ag_citation_rows(config, papers, bounds, src, dst, dirt, outside_ids)
    citations_in = np.diff(in_ptr) + np.bincount(rows.outside_cited, minlength=n)
    records = _records(config, bounds, titles.has_abstract, rows.rows["shard"], citations_in)
    ids = _paper_ids(config, outside_ids)
    return World(
        config=config,
        papers=papers,
        authors=authors,
        vocab=vocab,
        title=titles.title,
        has_abstract=titles.has_abstract,
        generic=titles.generic,
        bounds=bounds,
        src=src,
        dst=dst,
        clean_ptr=clean_ptr,
        in_ptr=in_ptr,
        in_src=in_src,
        dup_of=records.dup_of,
        dup_shard=records.dup_shard,
        malformed=records.malformed,
        out_ptr=dirt.out_ptr,
        out_val=dirt.out_val,
        rows=rows.rows,
        abstract_row=records.abstract_row,
        primary_sha=ids.primary_sha,
        extra_paper=ids.extra_paper,
        extra_sha=ids.extra_sha,
        outside_ids=outside_ids,
        outside_sha=ids.outside_sha,
        counts_per_paper={
            "references": np.diff(clean_ptr) + np.bincount(dirt.ext_src, minlength=n),
            "citations": citations_in,
            "influential": records.influential,
        },
        context_pool=make_context_pool(vocab, random_stream(seed, "contexts")),
        counts=_counts(config, graph, titles, dirt, rows, records),
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
