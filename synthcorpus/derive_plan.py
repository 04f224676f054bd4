"""What a later release changes (pure: arrays in, arrays out): which papers go, which change and how, and the
papers it adds, drawn from release 1's topic vocabulary and cited like the generator cites.

Reads and writes nothing; derive_rewrite.py applies the plan to release 1's lines.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from citeflow.errors import CiteflowError
from citeflow.synthcorpus.arrays import csr_ptr, index_mask, make_shas, pick, random_stream, rate_count
from citeflow.synthcorpus.citations import Citable, sample_references
from citeflow.synthcorpus.config import GenerateConfig
from citeflow.synthcorpus.derive_census import Corpus
from citeflow.synthcorpus.papers import Authors, LaterRelease, Papers, sample_authors, sample_papers
from citeflow.synthcorpus.vocabulary import Topics, Vocabulary, make_abstracts, make_context_pool, make_titles
from citeflow.synthcorpus.world import World
from citeflow.text import fold_titles

# What happens to a changed paper: abstract revised, title corrected, or both.
_CHANGE_P = (0.6, 0.2, 0.2)


@dataclass
class Plan:
    """The changes from release 1 to release 2."""

    removed: np.ndarray  # corpus ids, sorted
    changed: np.ndarray  # corpus ids, sorted
    change_kind: np.ndarray  # per changed paper: 0 abstract, 1 title, 2 both
    new_title: dict[int, str]  # corpus id -> corrected title
    abstract_tail: dict[int, str]  # corpus id -> the rewritten second half of its abstract
    added: World | None  # the added papers (indices 0..A-1), as generator line writers read them
    added_src: np.ndarray  # their clean references: added index -> existing corpus id
    added_dst: np.ndarray
    added_year: int


def derived_seed(meta: dict[str, Any], seed: int) -> int:
    """The seed of a derivation's random streams: its own seed mixed with the chain's seed and release number,
    so that deriving with seed 0 never replays the streams that made release 1."""
    base = meta.get("base_config", meta["config"]).get("seed", meta.get("seed", 0))
    text = f"citeflow-derive:{base}:{meta.get('release', 1)}:{seed}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big") >> 1


def _fresh_titles(
    vocab: Vocabulary,
    seed: int,
    stream: str,
    topics: Topics,
    avoid: set[str],
) -> pa.Array:
    """make_titles, drawn again (deterministically) for any title that folds to one in `avoid`."""
    titles = make_titles(vocab, random_stream(seed, stream), topics)
    value_set = pa.array(sorted(avoid), pa.string())
    for attempt in range(100):
        bad = np.flatnonzero(np.asarray(pc.fill_null(pc.is_in(fold_titles(titles), value_set=value_set), False)))
        if len(bad) == 0:
            return titles
        again = make_titles(vocab, random_stream(seed, stream, attempt + 1), topics.select(bad))
        mask = index_mask(len(titles), bad)
        titles = pc.replace_with_mask(titles, pa.array(mask), again)
    raise RuntimeError("could not draw titles unlike SciDocs' title-matched ones; try another seed")


def choose_changes(
    corpus: Corpus,
    topics: dict[str, np.ndarray],
    scidocs_ids: np.ndarray,
    protected: set[str],
    removed: int,
    changed: int,
    seed: int,
    vocab: Vocabulary,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict, dict]:
    """Pick the removed and changed papers and write the changed texts."""
    n = len(corpus.ids)
    folded = fold_titles(corpus.title)
    guarded = np.asarray(
        pc.fill_null(pc.is_in(folded, value_set=pa.array(sorted(protected), pa.string())), False), dtype=bool
    )
    removable = ~np.isin(corpus.ids, scidocs_ids) & ~guarded
    if removed > removable.sum():
        raise CiteflowError(
            f"cannot remove {removed:,} papers: only {int(removable.sum()):,} of release 1's {n:,} "
            "may go (SciDocs papers, and papers with a title SciDocs matches by, stay); ask for "
            "fewer (--removed)"
        )
    rng = random_stream(seed, "derive-removed")
    gone = np.sort(rng.choice(np.flatnonzero(removable), size=removed, replace=False))
    titled = ~np.asarray(pc.is_null(corpus.title), dtype=bool)
    changeable = removable & titled & corpus.has_abstract & ~corpus.generic & ~index_mask(n, gone)
    if changed > changeable.sum():
        raise CiteflowError(
            f"cannot change {changed:,} papers: only {int(changeable.sum()):,} of release 1's papers "
            "have a title and an abstract, are outside SciDocs and are not removed; ask for fewer "
            "(--changed)"
        )
    rng = random_stream(seed, "derive-changed")
    pos = np.sort(rng.choice(np.flatnonzero(changeable), size=changed, replace=False))
    kind = rng.choice(3, size=changed, p=_CHANGE_P).astype(np.int64)
    # The changed texts keep their paper's topics (no second field: its words are a small share anyway).
    about = Topics(
        field=topics["field"][pos],
        field2=np.full(len(pos), -1, dtype=np.int64),
        community=topics["community"][pos],
        niche=topics["niche"][pos],
        niche2=topics["niche2"][pos],
    )
    retitle = kind >= 1
    old_titles = set(folded.take(pa.array(pos[retitle])).to_pylist())
    titles = _fresh_titles(
        vocab,
        seed,
        "derive-titles",
        about.select(np.flatnonzero(retitle)),
        protected | old_titles,
    )
    rewrite = kind != 1
    tails = make_abstracts(
        vocab,
        random_stream(seed, "derive-abstracts"),
        about.select(np.flatnonzero(rewrite)),
        mean_words=65.0,
        min_words=30,
        max_words=100,
    )
    ids = corpus.ids
    new_title = dict(zip(ids[pos[retitle]].tolist(), titles.to_pylist(), strict=True))
    abstract_tail = dict(zip(ids[pos[rewrite]].tolist(), tails.to_pylist(), strict=True))
    return ids[gone], ids[pos], kind, new_title, abstract_tail


def _later_release(corpus: Corpus, count: int, taken: np.ndarray) -> tuple[LaterRelease, int]:
    """Where `count` added papers go: January 1st of the year after release 1's last, ids above its own; and
    that year."""
    added_year = int(corpus.year.max(initial=1969)) + 1
    first_day = int((np.datetime64(f"{added_year:04d}-01-01", "D") - np.datetime64("1970-01-01", "D")).astype(np.int64))
    later = LaterRelease(
        papers=count,
        first_day=first_day,
        taken_ids=taken,
        mag_floor=corpus.floors["mag"] + 1,
        pubmed_floor=corpus.floors["pubmed"] + 1,
        pmc_floor=corpus.floors["pmc"] + 1,
    )
    return later, added_year


def _added_references(
    base: GenerateConfig,
    seed: int,
    papers: Papers,
    corpus: Corpus,
    removed: np.ndarray,
    topics: dict[str, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """The added papers' references (added index, existing corpus id), each paper's list in random order: to
    papers that stay, all older than the added ones, weighted by the citations they have received (+1), drawn
    like the generator draws a fresh snapshot's (subtopic / field / across fields)."""
    pool = np.flatnonzero(~np.isin(corpus.ids, removed))
    year = corpus.year[pool]
    citable = Citable(
        niche=topics["niche"][pool],
        field=topics["field"][pool],
        time=np.maximum(year, 0),
        weight=(np.bincount(corpus.dst, minlength=len(corpus.ids)) + 1.0)[pool],
    )
    citing_year = np.full(papers.n, int(year.max(initial=0)) + 1)
    src, to = sample_references(random_stream(seed, "added-citations"), base, papers, citing_year, citable)
    dst = corpus.ids[pool[to]]
    order = np.lexsort((random_stream(seed, "added-outbound").random(len(src)), src))
    return src[order], dst[order]


def _as_world(
    cfg: GenerateConfig,
    *,
    papers: Papers,
    authors: Authors,
    vocab: Vocabulary,
    title: pa.Array,
    has_abstract: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    shards: int,
) -> World:
    """The added papers as a World: only the fields serialise.py's line writers read are filled (no dirt, no
    inbound citations); references (src, dst: added index, corpus id) are their clean outbound lists."""
    seed, count = cfg.seed, papers.n
    out_ptr = csr_ptr(src, count)
    bounds = (np.arange(shards + 1, dtype=np.int64) * count) // shards
    row_shard = np.searchsorted(bounds, src, side="right") - 1
    empty = np.empty(0, dtype=np.int64)
    return World(
        config=cfg,
        papers=papers,
        authors=authors,
        vocab=vocab,
        title=title,
        has_abstract=has_abstract,
        generic=np.zeros(count, bool),
        bounds=bounds,
        src=empty,
        dst=empty,
        clean_ptr=out_ptr,
        in_ptr=np.zeros(count + 1, dtype=np.int64),
        in_src=empty,
        dup_of=empty,
        dup_shard=empty,
        malformed={},
        out_ptr=out_ptr,
        out_val=dst,
        rows={"citing": papers.corpus_id[src], "cited": dst, "shard": row_shard, "field": papers.field[src]},
        abstract_row=has_abstract,
        primary_sha=make_shas(random_stream(seed, "added-shas"), count),
        extra_paper=empty,
        extra_sha=make_shas(random_stream(seed, "added-shas"), 0),
        outside_ids=empty,
        outside_sha=make_shas(random_stream(seed, "added-shas"), 0),
        counts_per_paper={
            "references": np.diff(out_ptr),
            "citations": np.zeros(count, np.int64),
            "influential": np.zeros(count, np.int64),
        },
        context_pool=make_context_pool(vocab, random_stream(seed, "added-contexts")),
        counts={},
    )


def added_world(
    base: GenerateConfig,
    seed: int,
    count: int,
    shards: int,
    corpus: Corpus,
    removed: np.ndarray,
    topics: dict[str, np.ndarray],
    taken: np.ndarray,
    protected: set[str],
    vocab: Vocabulary,
) -> tuple[World, np.ndarray, np.ndarray, int]:
    """The added papers as a World that serialise.py's line writers can serialise, their references
    (added index, existing corpus id) and their year. Only the fields those writers read are filled."""
    later, added_year = _later_release(corpus, count, taken)
    cfg = dataclasses.replace(base, seed=seed)
    papers = sample_papers(cfg, later)
    authors = sample_authors(papers, seed)
    has_abstract = ~index_mask(
        count, pick(random_stream(seed, "added-dirt"), count, rate_count(base.missing_abstract_rate, count))
    )
    src, dst = _added_references(base, seed, papers, corpus, removed, topics)
    title = _fresh_titles(vocab, seed, "added-titles", papers.topics, protected)
    world = _as_world(
        cfg,
        papers=papers,
        authors=authors,
        vocab=vocab,
        title=title,
        has_abstract=has_abstract,
        src=src,
        dst=dst,
        shards=shards,
    )
    return world, src, dst, added_year


def added_abstracts(world: World) -> pa.Array:
    """The added papers' abstracts (null for those without one)."""
    p = world.papers
    text = make_abstracts(world.vocab, random_stream(world.config.seed, "added-abstracts"), p.topics)
    return pc.if_else(pa.array(world.has_abstract), text, pa.scalar(None, text.type))


def revise(abstract: str, tail: str) -> str:
    """A revised abstract: the first half of its sentences, then new ones."""
    sentences = abstract.split(". ")
    head = ". ".join(sentences[: max(1, len(sentences) // 2)])
    return (head if head.endswith(".") else head + ".") + " " + tail
