"""Topic texts: the vocabulary of a snapshot and the titles, abstracts and citation contexts drawn from it.

Titles and abstracts mix subtopic, field, second-field and shared words (so text predicts topic); every
function takes its random stream from the caller and returns pyarrow string arrays (no files).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from citeflow.synth.arrays import concat_strings, int_strings, lengths_to_offsets, random_stream
from citeflow.synth.lexicon import (
    COMMUNITY_OFFSETS,
    FIELD_WORDS,
    FIELDS,
    FUNCTION_WORDS,
    PSEUDO_PER_SUBTOPIC,
    PSEUDO_SUFFIXES,
    PSEUDO_SYLLABLES,
    SHARED_WORDS,
    SUBTOPIC_COUNTS,
    SUBTOPICS,
)


@dataclass(frozen=True)
class Vocabulary:
    """Words in four spellings: `strings[i + k * size]` for k = 0 plain, 1 Capitalised, 2 plain + '.',
    3 Capitalised + '.'. Shared words come first (Zipf-sampled), then each field's, then each subtopic's."""

    strings: pa.StringArray
    size: int
    function: np.ndarray
    shared_cdf: np.ndarray
    field_offset: np.ndarray
    field_size: np.ndarray
    sub_offset: np.ndarray
    sub_size: np.ndarray


def build_vocabulary(seed: int) -> Vocabulary:
    rng = random_stream(seed, "vocabulary")
    shared = list(dict.fromkeys(SHARED_WORDS.split()))
    words = list(shared)
    field_offset, field_size = [], []
    for f in FIELDS:
        field_offset.append(len(words))
        field_size.append(len(FIELD_WORDS[f]))
        words.extend(FIELD_WORDS[f])
    sub_offset, sub_size = [], []
    for f in FIELDS:
        for name, sub_words in SUBTOPICS[f]:
            # Generated terms of art, e.g. "kamorphase": they occur only in this subtopic.
            syllables = rng.integers(0, len(PSEUDO_SYLLABLES), size=(PSEUDO_PER_SUBTOPIC, 3))
            lengths = rng.integers(2, 4, size=PSEUDO_PER_SUBTOPIC)
            suffixes = rng.integers(0, len(PSEUDO_SUFFIXES), size=PSEUDO_PER_SUBTOPIC)
            pseudo = [
                "".join(PSEUDO_SYLLABLES[s] for s in syl[:k]) + PSEUDO_SUFFIXES[x]
                for syl, k, x in zip(syllables, lengths, suffixes, strict=True)
            ]
            terms = list(dict.fromkeys([*name.split(), *sub_words, *pseudo]))
            sub_offset.append(len(words))
            sub_size.append(len(terms))
            words.extend(terms)
    capital = [w[:1].upper() + w[1:] for w in words]
    strings = pa.array(words + capital + [w + "." for w in words] + [w + "." for w in capital], pa.string())
    ranks = np.arange(len(shared), dtype=np.float64)
    zipf = 1.0 / (ranks + 2.7)
    return Vocabulary(
        strings=strings,
        size=len(words),
        function=np.array([w in FUNCTION_WORDS for w in words], dtype=bool),
        shared_cdf=np.cumsum(zipf) / zipf.sum(),
        field_offset=np.array(field_offset, dtype=np.int64),
        field_size=np.array(field_size, dtype=np.int64),
        sub_offset=np.array(sub_offset, dtype=np.int64),
        sub_size=np.array(sub_size, dtype=np.int64),
    )


def sample_words(
    vocab: Vocabulary,
    rng: np.random.Generator,
    lengths: np.ndarray,
    field_: np.ndarray,
    field2: np.ndarray,
    community: np.ndarray,
    mix: tuple[float, float, float],
) -> np.ndarray:
    """Word indices (flat, document after document) mixing subtopic, field, second-field and shared words."""
    doc = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    u = rng.random(len(doc))
    r = rng.random(len(doc))
    p_sub, p_field, p_field2 = mix
    f2 = field2[doc]
    is_sub = u < p_sub
    is_field = (u >= p_sub) & (u < p_sub + p_field)
    is_field2 = (u >= p_sub + p_field) & (u < p_sub + p_field + p_field2) & (f2 >= 0)
    idx = np.searchsorted(vocab.shared_cdf, r, side="right").clip(0, len(vocab.shared_cdf) - 1)
    # Within a field or subtopic the first words are the most frequent (r ** k skews towards 0).
    f = field_[doc]
    idx = np.where(is_field, vocab.field_offset[f] + (vocab.field_size[f] * r**1.4).astype(np.int64), idx)
    g = np.maximum(f2, 0)
    idx = np.where(is_field2, vocab.field_offset[g] + (vocab.field_size[g] * r**1.4).astype(np.int64), idx)
    c = community[doc]
    idx = np.where(is_sub, vocab.sub_offset[c] + (vocab.sub_size[c] * r**1.3).astype(np.int64), idx)
    return idx


def _join_words(vocab: Vocabulary, idx: np.ndarray, variant: np.ndarray, offsets: np.ndarray) -> pa.Array:
    tokens = vocab.strings.take(pa.array(idx + variant * vocab.size))
    return pc.binary_join(pa.LargeListArray.from_arrays(pa.array(offsets), tokens), " ")


def make_titles(
    vocab: Vocabulary, rng: np.random.Generator, field_: np.ndarray, field2: np.ndarray, community: np.ndarray
) -> pa.Array:
    """Titles of 6-14 words in title case (function words stay lower case)."""
    lengths = rng.integers(6, 15, size=len(field_))
    offsets = lengths_to_offsets(lengths)
    idx = sample_words(vocab, rng, lengths, field_, field2, community, mix=(0.35, 0.30, 0.05))
    first = np.zeros(len(idx), dtype=bool)
    first[offsets[:-1]] = True
    variant = (first | ~vocab.function[idx]).astype(np.int64)
    return _join_words(vocab, idx, variant, offsets)


def make_abstracts(
    vocab: Vocabulary,
    rng: np.random.Generator,
    field_: np.ndarray,
    field2: np.ndarray,
    community: np.ndarray,
    min_words: int = 60,
    max_words: int = 200,
    sentence_words: float = 16.0,
) -> pa.Array:
    """Abstracts of sentences (capitalised, ending with a full stop) of about `sentence_words` words."""
    n = len(field_)
    lengths = np.clip(
        np.round(rng.normal((min_words + max_words) / 2, (max_words - min_words) / 5, size=n)), min_words, max_words
    ).astype(np.int64)
    offsets = lengths_to_offsets(lengths)
    idx = sample_words(vocab, rng, lengths, field_, field2, community, mix=(0.17, 0.22, 0.05))
    # Sentence lengths 6 + Poisson, laid end to end over all documents; each document also ends one.
    sentences = 6 + rng.poisson(max(sentence_words - 6, 1.0), size=len(idx) // 6 + 1)
    end = np.zeros(len(idx), dtype=bool)
    stops = np.cumsum(sentences) - 1
    end[stops[stops < len(idx)]] = True
    # No sentence shorter than 6 words at either end of a document (the stream ignores documents).
    pos = np.arange(len(idx), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    end &= (pos >= 5) & (np.repeat(lengths, lengths) - pos > 6)
    end[offsets[1:] - 1] = True
    start = np.r_[True, end[:-1]]
    start[offsets[:-1]] = True
    return _join_words(vocab, idx, start.astype(np.int64) + 2 * end.astype(np.int64), offsets)


_CONTEXTS_PER_FIELD = 48


def make_context_pool(vocab: Vocabulary, rng: np.random.Generator) -> tuple[str, ...]:
    """Citation contexts: one sentence with a citation marker, _CONTEXTS_PER_FIELD per field, JSON-quoted."""
    field_ = np.repeat(np.arange(len(FIELDS), dtype=np.int64), _CONTEXTS_PER_FIELD)
    community = COMMUNITY_OFFSETS[field_] + (rng.random(len(field_)) * SUBTOPIC_COUNTS[field_]).astype(np.int64)
    text = make_abstracts(
        vocab, rng, field_, np.full(len(field_), -1), community, min_words=8, max_words=28, sentence_words=1000.0
    )
    marker = int_strings(rng.integers(1, 60, size=len(field_)))
    sentence = concat_strings('"', pc.utf8_slice_codeunits(text, 0, -1), " [", marker, ']."')
    return tuple(sentence.to_pylist())
