"""synthcorpus/stats.py: each statistic on inputs small enough to work out by hand (values in the comments)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from citeflow.synthcorpus import stats


def test_tokens_are_lower_cased_letter_runs():
    assert stats.tokens("The H2O-based model's 3 results.") == ["the", "h", "o", "based", "model", "s", "results"]
    assert stats.tokens(None) == [] and stats.tokens("") == []


def test_length_stats_count_whitespace_words_of_non_empty_texts():
    # word counts 3 and 2 (None and blank skipped): mean 2.5; numpy's linear percentiles 2.1, 2.5, 2.9
    s = stats.length_stats(["a b c", "d  e", None, "  "])
    assert s == {"n": 2, "mean": 2.5, "p10": 2.1, "p50": 2.5, "p90": 2.9}


def test_vocabulary_stats_count_types_in_the_window_and_fit_the_zipf_slope():
    # frequencies 12, 6, 4, 3 = 12 / rank: log f = log 12 - log r, a slope of exactly -1
    text = " ".join(["a"] * 12 + ["b"] * 6 + ["c"] * 4 + ["d"] * 3)
    s = stats.vocabulary_stats([text, "e f g"], window=25)
    assert s == {"tokens": 25, "types": 4, "zipf_slope": -1.0}
    # the window cuts the stream: 26 tokens take in "e", a fifth type
    assert stats.vocabulary_stats([text, "e f g"], window=26)["types"] == 5


def test_topic_token_share():
    # label 0 holds 8 tokens, label 1 holds 8 (shares 1/2 each).
    # "x": 5 times, all in label 0: share 1 >= 0.5 and >= 1.5 * 1/2 -> topic-specific
    # "the": 8 times, 4 + 4: share 1/2 < 1.5 * 1/2 -> not
    # "y": 3 times (< min_count 5): left out of both numerator and denominator
    texts = ["x x x the the", "x x the the y", "the the y", "the the y"]
    labels = [0, 0, 1, 1]
    # 5 / 13, to 4 significant digits
    assert stats.topic_token_share(texts, labels, min_count=5, min_share=0.5, min_lift=1.5) == 0.3846
    # with a lift of 3 nothing qualifies (x's share 1 < 3 * 1/2)
    assert stats.topic_token_share(texts, labels, min_count=5, min_share=0.5, min_lift=3.0) == 0.0


def test_tfidf_rows_are_unit_vectors_over_shared_types():
    x = stats.tfidf(["a b", "a c", "d"])
    # shared types: only "a" (df 2); idf(a) = ln(4/3) + 1, idf(b) = idf(c) = idf(d) = ln(4/2) + 1
    ia, ib = math.log(4 / 3) + 1, math.log(2) + 1
    norm = math.sqrt(ia**2 + ib**2)
    assert x.shape == (3, 1)
    assert x[:, 0] == pytest.approx([ia / norm, ia / norm, 0.0])


def test_auc_counts_ties_as_half():
    assert stats.auc(np.array([3.0]), np.array([1.0, 2.0, 3.0, 4.0])) == pytest.approx((2 + 0.5) / 4)
    assert stats.auc(np.array([5.0, 0.0]), np.array([1.0, 2.0])) == pytest.approx(0.5)


def test_label_similarity_auc():
    # same-label pairs share a word, pairs across labels share none: every same-label cosine wins
    texts = ["alpha beta", "alpha gamma", "delta eps", "delta zeta"]
    assert stats.label_similarity_auc(texts, [0, 0, 1, 1]) == 1.0
    # labelled against their content: same-label pairs (0, 2), (1, 3) score 0; the other pairs score c, 0, 0, c
    # (c > 0): each same-label pair ties with two of four, (0 + 2 / 2) / 4
    assert stats.label_similarity_auc(texts, [0, 1, 0, 1]) == 0.25


def test_citation_similarity_auc():
    citing = ["graph neural nets", "protein folding", "tax policy"]
    cited = ["graph nets", "protein structure folding", "tax reform policy"]
    # each citing text shares words with its own cited text only: it wins against both others
    assert stats.citation_similarity_auc(citing, cited, [1, 2, 3]) == 1.0
    # shuffled: each citing text is paired with a text it shares nothing with (cosine 0); of its two negatives
    # one also scores 0 (a tie, 1/2) and one, its true partner, more: (0 + 1/2) / 2
    assert stats.citation_similarity_auc(citing, cited[1:] + cited[:1], [2, 3, 1]) == 0.25
    # a paper cited by two pairs is no negative of either: each pair wins against "tax law" alone (1.0); taken
    # as a negative, the twin would tie, (0.75 + 0.75 + 1) / 3
    citing = ["graph nets", "graph models", "tax policy"]
    cited = ["graph theory", "graph theory", "tax law"]
    assert stats.citation_similarity_auc(citing, cited, [5, 5, 9]) == 1.0


def test_too_few_texts_give_no_value():
    # one pair has no other pair to lose against; one label has no pair of two labels
    assert math.isnan(stats.citation_similarity_auc(["a b"], ["a c"], [1]))
    assert math.isnan(stats.label_similarity_auc(["a b", "a c"], [0, 0]))


def test_degree_stats():
    s = stats.degree_stats(np.array([0, 0, 1, 3, 5]))
    # zero share 2/5; non-zero 1, 3, 5: mean 3, percentiles 1.4, 3, 4.6
    assert s == {"n": 5, "zero_share": 0.4, "mean_nonzero": 3.0, "p10": 1.4, "p50": 3.0, "p90": 4.6}
