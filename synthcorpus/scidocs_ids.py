"""How a SciDocs set's ids map to the corpus: by a paper's primary or a non-primary sha in paper-ids, by a title
unique in the corpus only (a fresh sha, the title re-spelt), or not at all (unmappable papers, with a title
matching several corpus papers or none, folded as the leakage filter folds them, citeflow.text).

scidocs.py picks the set's papers; this module says how each is found and writes the unmappable ones' texts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from citeflow.synthcorpus.arrays import make_shas, random_stream
from citeflow.synthcorpus.lexicon import FIELD_WEIGHTS, FIELDS, GENERIC_TITLES
from citeflow.synthcorpus.vocabulary import Topics, make_abstracts, make_titles
from citeflow.synthcorpus.world import World
from citeflow.text import fold_titles


def title_counts(titles: pa.Array) -> np.ndarray:
    """For each title: how many titles of the array fold to the same string (0 for a null title)."""
    encoded = pc.dictionary_encode(fold_titles(titles))
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    valid = ~np.asarray(pc.is_null(encoded.indices).to_numpy(zero_copy_only=False), dtype=bool)
    codes = np.where(valid, codes, 0).astype(np.int64)
    counts = np.bincount(codes[valid], minlength=len(encoded.dictionary))
    return np.where(valid, counts[codes], 0)


def _respell(title: str, j: int) -> str:
    """The same title after case / punctuation / whitespace folding, spelt differently."""
    return (title.lower(), title + ".", "  ".join(title.split()) + " ", title.upper())[j % 4]


@dataclass(frozen=True)
class IdMapping:
    """How the corpus papers of the set are found: their SciDocs id and title, and the kind (SciDocsPlan.kind)."""

    sha: list[str]
    title: list[str]
    kind: np.ndarray
    virtual_sha: list[str]  # fresh shas of the unmappable papers


@dataclass(frozen=True)
class UnmappableTexts:
    """The unmappable papers' titles and abstracts; the first `ambiguous` carry a title several papers have."""

    title: list[str]
    abstract: list[str]
    ambiguous: int


def map_ids(world: World, rng: np.random.Generator, used: np.ndarray, n_virtual: int) -> IdMapping:
    """Which SciDocs papers map how: title only (a fresh sha, the title re-spelt; among titles unique in the
    corpus), by a non-primary sha, or by their primary sha; and fresh shas for the unmappable papers. `rng` is
    the set's own stream (scidocs.py), drawn from after the papers are picked; `used` its corpus papers, sorted."""
    cfg = world.config
    counts = title_counts(world.title)
    unique_title = used[counts[used] == 1]
    n_title = (
        0
        if cfg.scidocs_title_only_rate == 0
        else min(len(unique_title), max(3, round(cfg.scidocs_title_only_rate * len(used))))
    )
    title_only = np.sort(rng.choice(unique_title, size=n_title, replace=False))
    with_extra = np.setdiff1d(np.intersect1d(used, world.extra_paper), title_only)
    n_np = (
        0
        if cfg.scidocs_non_primary_rate == 0
        else min(len(with_extra), max(1, round(cfg.scidocs_non_primary_rate * len(used))))
    )
    non_primary = np.sort(rng.choice(with_extra, size=n_np, replace=False))
    kind = np.zeros(len(used), dtype=np.int64)
    kind[np.searchsorted(used, non_primary)] = 1
    kind[np.searchsorted(used, title_only)] = 2
    fresh = make_shas(random_stream(cfg.seed, "scidocs-shas"), n_title + n_virtual).to_pylist()
    sha = world.primary_sha.take(pa.array(used)).to_pylist()
    extra_sha = world.extra_sha.take(pa.array(np.searchsorted(world.extra_paper, non_primary))).to_pylist()
    for i, s in zip(np.searchsorted(used, non_primary).tolist(), extra_sha, strict=True):
        sha[i] = s
    titles = world.title.take(pa.array(used)).to_pylist()
    for j, i in enumerate(np.searchsorted(used, title_only).tolist()):
        sha[i] = fresh[j]
        titles[i] = _respell(titles[i], j)
    return IdMapping(sha=sha, title=titles, kind=kind, virtual_sha=fresh[n_title:])


def unmappable_texts(world: World, n_virtual: int) -> UnmappableTexts:
    """Unmappable papers' texts: half carry a title several corpus papers have, the others a title no corpus
    paper has."""
    folded = fold_titles(world.title)
    folded_counts = {d["values"]: d["counts"] for d in pc.value_counts(folded).to_pylist() if d["values"]}
    ambiguous = [
        t
        for t, f in zip(GENERIC_TITLES, fold_titles(pa.array(GENERIC_TITLES)).to_pylist(), strict=True)
        if folded_counts.get(f, 0) >= 2
    ]
    vr = random_stream(world.config.seed, "scidocs-unmappable")
    vf = vr.choice(len(FIELDS), size=n_virtual + 8, p=FIELD_WEIGHTS).astype(np.int64)
    vt = Topics.outside(world.vocab, vr, vf)
    candidates_t = make_titles(world.vocab, vr, vt)
    new_titles = [
        t
        for t, seen in zip(
            candidates_t.to_pylist(),
            pc.is_in(fold_titles(candidates_t), value_set=folded.drop_null()).to_pylist(),
            strict=True,
        )
        if not seen
    ]
    n_ambiguous = n_virtual // 2 if ambiguous else 0
    virtual_title = [ambiguous[j % len(ambiguous)] for j in range(n_ambiguous)] + new_titles[: n_virtual - n_ambiguous]
    virtual_abstract = make_abstracts(world.vocab, vr, vt.select(slice(0, n_virtual))).to_pylist()
    return UnmappableTexts(title=virtual_title, abstract=virtual_abstract, ambiguous=n_ambiguous)
