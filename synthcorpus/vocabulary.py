"""Topic texts: the vocabulary of a snapshot and the titles, abstracts and citation contexts drawn from it.

A text's tokens come from the core terms of its paper's niche and secondary niche, the vocabularies of its
subtopic, field and second field, a random other subtopic (topics share words) and, for the rest, shared
scientific English; the shares are the difficulty's
TopicStrength (config.py), varied per text. Every vocabulary is Zipf-distributed, its listed words (lexicon.py)
first and generated words after them, so that the corpus has a real vocabulary's long tail. Every function takes
its random stream from the caller and returns pyarrow string arrays (no files).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from citeflow.synthcorpus.arrays import concat_strings, int_strings, lengths_to_offsets, random_stream
from citeflow.synthcorpus.config import TITLE_TOPIC_BOOST, TopicStrength, topic_strength
from citeflow.synthcorpus.lexicon import (
    CODAS,
    COMMUNITY_OFFSETS,
    FIELD_WORDS,
    FIELDS,
    FUNCTION_WORDS,
    ONSETS,
    SHARED_WORDS,
    SUBTOPIC_COUNTS,
    SUBTOPICS,
    SUFFIXES,
    VOWELS,
)

# Vocabulary sizes (words per vocabulary) and Zipf shapes, calibrated with calibration.py: the word of rank r
# (0-based) has weight 1 / (r + offset) ** exponent.
SHARED_SIZE = 10500
FIELD_SIZE = 700
SUBTOPIC_SIZE = 250
# A niche's core terms: NICHE_SIZE words of shared English drawn from ranks NICHE_POOL (a word is the core of
# niches in several fields). Papers that cite each other share many words that are not particular to their
# field (real sample: "usability", "beamforming", "stereo"), which is how text can follow citations closely
# (citation similarity AUC 0.93) while fields stay hard to tell apart (same-field similarity AUC 0.59).
NICHE_SIZE = 30
NICHE_POOL = (100, 1600)
SHARED_ZIPF = (0.91, 4.0)  # exponent, offset
TOPIC_ZIPF = (1.45, 4.0)  # fields and subtopics
NICHE_ZIPF = (1.45, 1.0)
# Per-text topicality: a text's topic shares are multiplied by a Gamma(k, 1 / k) draw (mean 1), so that some
# abstracts are generic and some dense with terms of art.
TOPICALITY_SHAPE = 4.0
# Burstiness: a text draws its topic words from a few key terms of each of its topic vocabularies (Zipf-drawn
# once per text), so that a term of art, once used, comes back, as in real abstracts.
KEY_TERMS = 7
# Abstract lengths in words: Gamma(shape, mean / shape), clipped (real S2ORC: mean 150, deciles 52 .. 251).
ABSTRACT_SHAPE = 3.0
ABSTRACT_MEAN = 150.0
# Title lengths in words: lognormal (real: mean 10.9, deciles 5 .. 17).
TITLE_MEDIAN, TITLE_SIGMA = 10.0, 0.42


@dataclass(frozen=True)
class Vocabulary:
    """Words in four spellings: `strings[i + k * size]` for k = 0 plain, 1 Capitalised, 2 plain + '.',
    3 Capitalised + '.'. Shared words come first, then each field's FIELD_SIZE, each subtopic's SUBTOPIC_SIZE,
    within each, the most frequent first. A niche's core terms are shared words (`niche_words`)."""

    strings: pa.StringArray
    size: int
    function: np.ndarray
    shared_cdf: np.ndarray
    topic_cdf: dict[int, np.ndarray]  # vocabulary size -> CDF of its Zipf ranks
    field_offset: np.ndarray
    sub_offset: np.ndarray
    niche_words: np.ndarray  # (niches, NICHE_SIZE) word indices, most frequent first
    niches_per_subtopic: int
    topics: TopicStrength


@dataclass(frozen=True)
class Topics:
    """What each text is about: field, second field (-1: none), subtopic (global index: community), niche and
    secondary niche (global indices)."""

    field: np.ndarray
    field2: np.ndarray
    community: np.ndarray
    niche: np.ndarray
    niche2: np.ndarray

    def select(self, rows: np.ndarray | slice) -> Topics:
        return Topics(
            field=self.field[rows],
            field2=self.field2[rows],
            community=self.community[rows],
            niche=self.niche[rows],
            niche2=self.niche2[rows],
        )

    @staticmethod
    def outside(vocab: Vocabulary, rng: np.random.Generator, field_: np.ndarray) -> Topics:
        """Topics of texts of papers outside the corpus: a random niche of each field, no second field."""
        community = COMMUNITY_OFFSETS[field_] + (rng.random(len(field_)) * SUBTOPIC_COUNTS[field_]).astype(np.int64)
        k = vocab.niches_per_subtopic
        niche = community * k + rng.integers(0, k, size=len(field_))
        none = np.full(len(field_), -1, dtype=np.int64)
        return Topics(field=field_, field2=none, community=community, niche=niche, niche2=niche)


def _generated_words(rng: np.random.Generator, count: int, avoid: set[str]) -> list[str]:
    """`count` distinct made-up words (2-3 syllables and a suffix), none in `avoid`, in draw order."""
    syllables = np.array([o + v + c for o in ONSETS for v in VOWELS for c in CODAS], dtype=object)
    out: list[str] = []
    seen = set(avoid)
    while len(out) < count:
        k = int((count - len(out)) * 1.3) + 64
        parts = syllables[rng.integers(0, len(syllables), size=(3, k))]
        parts[2, rng.random(k) < 0.5] = ""  # two or three syllables
        words = parts[0] + parts[1] + parts[2] + np.array(SUFFIXES, dtype=object)[rng.integers(0, len(SUFFIXES), k)]
        _, first = np.unique(words.astype(str), return_index=True)
        for word in words[np.sort(first)].tolist():
            if word not in seen:
                seen.add(word)
                out.append(word)
                if len(out) == count:
                    break
    return out


def _zipf_cdf(size: int, exponent: float, offset: float) -> np.ndarray:
    weight = 1.0 / (np.arange(size, dtype=np.float64) + offset) ** exponent
    return np.cumsum(weight) / weight.sum()


def build_vocabulary(seed: int, difficulty: float, niches_per_subtopic: int) -> Vocabulary:
    """The vocabulary of a snapshot: fixed by its seed (generated words), difficulty (token shares) and niches
    per subtopic (GenerateConfig.niches_per_subtopic)."""
    rng = random_stream(seed, "vocabulary")
    shared = list(dict.fromkeys(SHARED_WORDS.split()))
    listed_fields = [list(dict.fromkeys(FIELD_WORDS[f])) for f in FIELDS]
    listed_subs = [list(dict.fromkeys([*name.split(), *words])) for f in FIELDS for name, words in SUBTOPICS[f]]
    listed = set(shared) | {w for ws in listed_fields + listed_subs for w in ws}
    niches = int(COMMUNITY_OFFSETS[-1]) * niches_per_subtopic
    sizes = [SHARED_SIZE - len(shared)]
    sizes += [FIELD_SIZE - len(ws) for ws in listed_fields] + [SUBTOPIC_SIZE - len(ws) for ws in listed_subs]
    fresh = iter(_generated_words(rng, sum(sizes), listed))
    # A listed word of several vocabularies (e.g. "cognitive" in Psychology and two of its subtopics) is the
    # same string in each: the topics share it.
    words = shared + [next(fresh) for _ in range(SHARED_SIZE - len(shared))]
    field_offset, sub_offset = [], []
    for ws in listed_fields:
        field_offset.append(len(words))
        words.extend(ws + [next(fresh) for _ in range(FIELD_SIZE - len(ws))])
    for ws in listed_subs:
        sub_offset.append(len(words))
        words.extend(ws + [next(fresh) for _ in range(SUBTOPIC_SIZE - len(ws))])
    capital = [w[:1].upper() + w[1:] for w in words]
    strings = pa.array(words + capital + [w + "." for w in words] + [w + "." for w in capital], pa.string())
    return Vocabulary(
        strings=strings,
        size=len(words),
        function=np.array([w in FUNCTION_WORDS for w in words], dtype=bool),
        shared_cdf=_zipf_cdf(SHARED_SIZE, *SHARED_ZIPF),
        topic_cdf={
            FIELD_SIZE: _zipf_cdf(FIELD_SIZE, *TOPIC_ZIPF),
            SUBTOPIC_SIZE: _zipf_cdf(SUBTOPIC_SIZE, *TOPIC_ZIPF),
            NICHE_SIZE: _zipf_cdf(NICHE_SIZE, *NICHE_ZIPF),
        },
        field_offset=np.array(field_offset, dtype=np.int64),
        sub_offset=np.array(sub_offset, dtype=np.int64),
        niche_words=rng.integers(*NICHE_POOL, size=(niches, NICHE_SIZE)),
        niches_per_subtopic=niches_per_subtopic,
        topics=topic_strength(difficulty),
    )


# Token sources, in the order of their shares' cut points.
_NICHE, _NICHE2, _SUBTOPIC, _FIELD, _FIELD2, _FOREIGN, _SHARED = range(7)


def sample_words(
    vocab: Vocabulary,
    rng: np.random.Generator,
    lengths: np.ndarray,
    topics: Topics,
    boost: float = 1.0,
) -> np.ndarray:
    """Word indices (flat, text after text) from the sources of the module docstring in the shares of
    vocab.topics (times `boost`), each text's shares scaled by its topicality."""
    t = vocab.topics
    doc = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    topicality = rng.gamma(TOPICALITY_SHAPE, 1.0 / TOPICALITY_SHAPE, size=len(lengths))
    u = rng.random(len(doc)) / (boost * topicality[doc])
    r = rng.random(len(doc))
    shares = [t.niche_words, t.niche2_words, t.subtopic_words, t.field_words, t.field2_words, t.foreign_words]
    source = np.searchsorted(np.cumsum(shares), u, side="right")
    f2 = topics.field2[doc]
    source[(source == _FIELD2) & (f2 < 0)] = _SHARED
    idx = np.searchsorted(vocab.shared_cdf, r, side="right").clip(0, SHARED_SIZE - 1)
    # Key terms: KEY_TERMS Zipf ranks per text and vocabulary kind; a topic token takes one of them.
    keys = rng.random((len(lengths), 3, KEY_TERMS))
    key = (r * KEY_TERMS).astype(np.int64)

    def ranks(rows: np.ndarray, which: int, size: int) -> np.ndarray:
        return np.searchsorted(vocab.topic_cdf[size], keys[doc[rows], which, key[rows]], side="right").clip(0, size - 1)

    for src, niche in ((_NICHE, topics.niche), (_NICHE2, topics.niche2)):
        m = np.flatnonzero(source == src)
        idx[m] = vocab.niche_words[niche[doc[m]], ranks(m, 0, NICHE_SIZE)]
    m = np.flatnonzero(source == _SUBTOPIC)
    idx[m] = vocab.sub_offset[topics.community[doc[m]]] + ranks(m, 1, SUBTOPIC_SIZE)
    m = np.flatnonzero(source == _FOREIGN)
    idx[m] = vocab.sub_offset[rng.integers(0, len(vocab.sub_offset), size=len(m))] + ranks(m, 1, SUBTOPIC_SIZE)
    m = np.flatnonzero(source == _FIELD)
    idx[m] = vocab.field_offset[topics.field[doc[m]]] + ranks(m, 2, FIELD_SIZE)
    m = np.flatnonzero(source == _FIELD2)
    idx[m] = vocab.field_offset[f2[m]] + ranks(m, 2, FIELD_SIZE)
    return idx


def _join_words(vocab: Vocabulary, idx: np.ndarray, variant: np.ndarray, offsets: np.ndarray) -> pa.Array:
    tokens = vocab.strings.take(pa.array(idx + variant * vocab.size))
    return pc.binary_join(pa.LargeListArray.from_arrays(pa.array(offsets), tokens), " ")


def make_titles(vocab: Vocabulary, rng: np.random.Generator, topics: Topics) -> pa.Array:
    """Titles of lognormal length (2 .. 40 words) in title case (function words stay lower case)."""
    lengths = np.clip(np.round(rng.lognormal(np.log(TITLE_MEDIAN), TITLE_SIGMA, size=len(topics.field))), 2, 40)
    lengths = lengths.astype(np.int64)
    offsets = lengths_to_offsets(lengths)
    idx = sample_words(vocab, rng, lengths, topics, boost=TITLE_TOPIC_BOOST)
    first = np.zeros(len(idx), dtype=bool)
    first[offsets[:-1]] = True
    variant = (first | ~vocab.function[idx]).astype(np.int64)
    return _join_words(vocab, idx, variant, offsets)


def make_abstracts(
    vocab: Vocabulary,
    rng: np.random.Generator,
    topics: Topics,
    mean_words: float = ABSTRACT_MEAN,
    min_words: int = 12,
    max_words: int = 700,
    sentence_words: float = 22.0,
) -> pa.Array:
    """Abstracts of Gamma-distributed length (mean `mean_words`, clipped to [min_words, max_words]) made of
    sentences (capitalised, ending with a full stop) of about `sentence_words` words."""
    n = len(topics.field)
    lengths = rng.gamma(ABSTRACT_SHAPE, mean_words / ABSTRACT_SHAPE, size=n)
    lengths = np.clip(np.round(lengths), min_words, max_words).astype(np.int64)
    offsets = lengths_to_offsets(lengths)
    idx = sample_words(vocab, rng, lengths, topics)
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
    text = make_abstracts(
        vocab,
        rng,
        Topics.outside(vocab, rng, field_),
        mean_words=18.0,
        min_words=8,
        max_words=28,
        sentence_words=1000.0,
    )
    marker = int_strings(rng.integers(1, 60, size=len(field_)))
    sentence = concat_strings('"', pc.utf8_slice_codeunits(text, 0, -1), " [", marker, ']."')
    return tuple(sentence.to_pylist())
