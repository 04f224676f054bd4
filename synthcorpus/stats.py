"""Corpus statistics the generator is calibrated on, measured the same way on real samples (calibration.py) and
on a generated snapshot (generator.json's `calibration`).

Pure functions: texts, labels and degree arrays in, dicts of floats out; no files. Definitions:

- words: whitespace-separated words (`str.split`), for lengths; tokens: lower-cased runs of letters
  (`[^\\W\\d_]+`), for everything about vocabulary.
- length_stats: mean and 10th / 50th / 90th percentiles of the word counts of the non-empty texts.
- vocabulary_stats: over the first `window` tokens of the texts in the order given, `types` (distinct tokens)
  and `zipf_slope`, the least-squares slope of log(frequency) on log(rank) over ranks 1 .. `ranks`.
- topic_token_share: among the tokens of types that occur at least `min_count` times in the labelled texts,
  the share whose type is topic-specific: at least `min_share` of its occurrences fall in the texts of one
  label, and that share is at least `min_lift` times that label's share of all tokens.
- label_similarity_auc: TF-IDF cosine of every pair of labelled texts; the probability that a random
  same-label pair scores higher than a random pair of different labels (ties count half).
- citation_similarity_auc: TF-IDF cosine of each citing text with its cited text against its cosine with
  the other pairs' cited texts; the per-pair probability that the cited text wins (ties half), averaged.
- degree_stats: share of zero out-degrees; mean and 10th / 50th / 90th percentiles of the others.

TF-IDF: raw term counts times idf = ln((1 + D) / (1 + df)) + 1 over the D texts measured, rows L2-normalised.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

TOKEN = re.compile(r"[^\W\d_]+")


def tokens(text: str | None) -> list[str]:
    """Lower-cased runs of letters."""
    return TOKEN.findall(text.lower()) if text else []


def round_to(x: float, digits: int = 4) -> float:
    # Few significant digits: generator.json must not depend on the last bits of a float sum.
    return float(f"{x:.{digits}g}")


def length_stats(texts: Sequence[str | None]) -> dict[str, float]:
    counts = np.array([len(t.split()) for t in texts if t and t.strip()], dtype=np.float64)
    if len(counts) == 0:
        return {"n": 0, "mean": 0.0, "p10": 0.0, "p50": 0.0, "p90": 0.0}
    p10, p50, p90 = np.percentile(counts, [10, 50, 90])
    return {
        "n": len(counts),
        "mean": round_to(counts.mean()),
        "p10": round_to(p10),
        "p50": round_to(p50),
        "p90": round_to(p90),
    }


def vocabulary_stats(texts: Sequence[str | None], window: int = 50_000, ranks: int = 1000) -> dict[str, float]:
    stream: list[str] = []
    for text in texts:
        stream.extend(tokens(text))
        if len(stream) >= window:
            break
    stream = stream[:window]
    freq = np.array(sorted(Counter(stream).values(), reverse=True), dtype=np.float64)
    top = freq[:ranks]
    slope = np.polyfit(np.log(np.arange(1, len(top) + 1)), np.log(top), 1)[0] if len(top) > 1 else 0.0
    return {"tokens": len(stream), "types": len(freq), "zipf_slope": round_to(slope, 3)}


def topic_token_share(
    texts: Sequence[str], labels: Sequence[int | str], min_count: int = 5, min_share: float = 0.5, min_lift: float = 3.0
) -> float:
    docs = [tokens(t) for t in texts]
    label_ids = {label: i for i, label in enumerate(sorted(set(labels)))}
    per_type: dict[str, np.ndarray] = {}
    label_tokens = np.zeros(len(label_ids), dtype=np.float64)
    for doc, label in zip(docs, labels, strict=True):
        j = label_ids[label]
        label_tokens[j] += len(doc)
        for word, c in Counter(doc).items():
            row = per_type.get(word)
            if row is None:
                row = per_type[word] = np.zeros(len(label_ids), dtype=np.float64)
            row[j] += c
    if not per_type:
        return 0.0
    counts = np.stack(list(per_type.values()))
    total = counts.sum(axis=1)
    kept = total >= min_count
    counts, total = counts[kept], total[kept]
    if total.sum() == 0:
        return 0.0
    top = counts.argmax(axis=1)
    share = counts[np.arange(len(counts)), top] / total
    label_share = label_tokens / label_tokens.sum()
    specific = (share >= min_share) & (share >= min_lift * label_share[top])
    return round_to(total[specific].sum() / total.sum())


def tfidf(texts: Sequence[str]) -> np.ndarray:
    """L2-normalised TF-IDF rows (see the module docstring) over the types found in at least two texts: a type
    of one text only never adds to a cosine between two texts, but it does count in the row's norm."""
    ids: dict[str, int] = {}
    doc_of, type_of = [], []
    for i, text in enumerate(texts):
        toks = tokens(text)
        doc_of.extend([i] * len(toks))
        type_of.extend(ids.setdefault(t, len(ids)) for t in toks)
    d, v = len(texts), len(ids)
    pair, count = np.unique(
        np.asarray(doc_of, dtype=np.int64) * v + np.asarray(type_of, dtype=np.int64), return_counts=True
    )
    doc, typ = pair // max(v, 1), pair % max(v, 1)
    df = np.bincount(typ, minlength=v)
    weight = count * (np.log((1 + d) / (1 + df[typ])) + 1)
    norm = np.sqrt(np.bincount(doc, weights=weight**2, minlength=d))
    norm[norm == 0] = 1.0
    shared = np.flatnonzero(df >= 2)
    column = np.full(v, -1, dtype=np.int64)
    column[shared] = np.arange(len(shared))
    keep = column[typ] >= 0
    matrix = np.zeros((d, len(shared)), dtype=np.float64)
    matrix[doc[keep], column[typ[keep]]] = weight[keep] / norm[doc[keep]]
    return matrix


def auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """P(a positive score > a negative score), ties counting half."""
    if len(positive) == 0 or len(negative) == 0:
        return float("nan")
    neg = np.sort(negative)
    below = np.searchsorted(neg, positive, side="left")
    not_above = np.searchsorted(neg, positive, side="right")
    return float(((below + not_above) / 2).mean() / len(neg))


def label_similarity_auc(texts: Sequence[str], labels: Sequence[int | str]) -> float:
    x = tfidf(texts)
    cos = x @ x.T
    lab = np.asarray(labels)
    i, j = np.triu_indices(len(lab), k=1)
    same = lab[i] == lab[j]
    return round_to(auc(cos[i, j][same], cos[i, j][~same]))


def citation_similarity_auc(citing: Sequence[str], cited: Sequence[str], cited_ids: Sequence[object]) -> float:
    """Pair k is (citing[k], cited[k]); the other pairs' cited texts (other ids than cited_ids[k]) are its
    negatives."""
    m = len(citing)
    if m < 2:
        return float("nan")
    x = tfidf(list(citing) + list(cited))
    cos = x[:m] @ x[m:].T
    ids = np.asarray([str(c) for c in cited_ids])
    wins = [auc(cos[k, k : k + 1], cos[k, ids != ids[k]]) for k in range(m)]
    wins = [w for w in wins if not math.isnan(w)]
    return round_to(float(np.mean(wins))) if wins else float("nan")


def degree_stats(out_degree: np.ndarray | Sequence[int]) -> dict[str, float]:
    degree = np.asarray(out_degree, dtype=np.float64)
    nonzero = degree[degree > 0]
    p10, p50, p90 = np.percentile(nonzero, [10, 50, 90]) if len(nonzero) else (0.0, 0.0, 0.0)
    return {
        "n": len(degree),
        "zero_share": round_to(float((degree == 0).mean()) if len(degree) else 0.0),
        "mean_nonzero": round_to(float(nonzero.mean()) if len(nonzero) else 0.0),
        "p10": round_to(p10),
        "p50": round_to(p50),
        "p90": round_to(p90),
    }
