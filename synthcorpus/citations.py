"""The citation sampler, one for a fresh snapshot and for the papers a later release adds.

Each reference is drawn within the citing paper's niche or secondary niche, its field, or anywhere (the second
field first when the paper has one), falling back to a wider pool (the niche's subtopic, the field, everything)
when the narrow one has no older paper, by preferential attachment on a weight with a mild preference for
recent papers. Out-degrees are a discretised lognormal; each paper keeps its first `degree` distinct references.
Arrays in, arrays out (no files).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from citeflow.synthcorpus.arrays import random_stream, rank_in_groups
from citeflow.synthcorpus.config import LAST_DAY, GenerateConfig
from citeflow.synthcorpus.papers import Papers


class _Pool:
    """Papers grouped by a segment (subtopic, field or all) in publication order, with cumulative weight:
    drawing a cited paper for many citing papers at once is two binary searches per draw. Times are days
    since 1970 or years, anything below _SPAN."""

    _SPAN = LAST_DAY + 2

    def __init__(self, segment: np.ndarray, day: np.ndarray, weight: np.ndarray) -> None:
        self.order = np.lexsort((day, segment))
        self.key = segment[self.order] * self._SPAN + day[self.order]
        self.cum = np.cumsum(weight[self.order])

    def draw(self, segment: np.ndarray, day: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each query: a paper of `segment` published strictly before `day`, chosen with probability
        proportional to weight (v in [0, 1) is the uniform draw), and whether there was one."""
        lo = np.searchsorted(self.key, segment * self._SPAN, side="left")
        hi = np.searchsorted(self.key, segment * self._SPAN + day, side="left")
        base = np.where(lo > 0, self.cum[np.maximum(lo - 1, 0)], 0.0)
        top = self.cum[np.maximum(hi - 1, 0)]
        ok = (hi > lo) & (top > base)  # some paper of positive weight
        pos = np.searchsorted(self.cum, base + v * (top - base), side="right")
        pos = np.clip(pos, lo, np.maximum(hi - 1, lo))
        return self.order[np.minimum(pos, len(self.order) - 1)], ok


# Out-degrees: ceil(lognormal(mu, OUT_DEGREE_SIGMA)) with mu set by mean_references (real S2ORC lists: median
# 14, deciles 2 .. 49). Each paper draws OVERDRAW times as many references as it keeps, so that popular papers
# drawn twice do not thin its list: it keeps its first `degree` distinct ones.
OUT_DEGREE_SIGMA = 1.0
OVERDRAW = 2.5


def draw_references(
    rng: np.random.Generator, config: GenerateConfig, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The reference draws of n citing papers before their targets are picked: (citing paper of each draw, its
    kind: 0 its niche / 1 its secondary niche / 2 its field / 3 anywhere, a draw v in [0, 1) whose density 2v
    makes later, more recent papers in the cumulative order likelier) and each paper's out-degree (discretised
    lognormal, `zero_reference_rate` of papers citing nothing)."""
    sigma = OUT_DEGREE_SIGMA
    mu = math.log(config.mean_references / max(1e-9, 1 - config.zero_reference_rate)) - sigma**2 / 2
    degree = np.minimum(np.ceil(rng.lognormal(mu, sigma, size=n)), 500).astype(np.int64)
    degree[rng.random(n) < config.zero_reference_rate] = 0
    citing = np.repeat(np.arange(n, dtype=np.int64), np.ceil(degree * OVERDRAW).astype(np.int64))
    t = config.topics
    kind = np.searchsorted(
        np.cumsum([t.cite_niche, t.cite_niche2, t.cite_field]),
        rng.random(len(citing)),
        side="right",
    )
    return citing, kind, np.sqrt(rng.random(len(citing))), degree


@dataclass(frozen=True)
class Citable:
    """The papers references may point to: topic segments, time (only strictly earlier papers are cited) and
    attractiveness. A fresh snapshot: every paper, by day, weighted by fitness. A later release: the papers
    it keeps, by year, weighted by the citations they have received."""

    niche: np.ndarray
    field: np.ndarray
    time: np.ndarray
    weight: np.ndarray


def sample_references(
    rng: np.random.Generator, config: GenerateConfig, citing: Papers, citing_time: np.ndarray, citable: Citable
) -> tuple[np.ndarray, np.ndarray]:
    """References of the `citing` papers (published at `citing_time`, in citable's time unit) to `citable`
    papers: (citing paper index, citable paper index) pairs, unique, sorted. References with no earlier paper
    even in the widest pool are dropped."""
    m = len(citable.time)
    if m == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    src, kind, v, degree = draw_references(rng, config, citing.n)
    e = len(src)
    time = citing_time[src]
    cited = np.full(e, -1, dtype=np.int64)

    def attempt(pool: _Pool, segment: np.ndarray, rows: np.ndarray) -> None:
        rows = rows[cited[rows] < 0]
        target, ok = pool.draw(segment[rows], time[rows], v[rows])
        cited[rows[ok]] = target[ok]

    every = np.arange(e, dtype=np.int64)
    by_field = _Pool(citable.field, citable.time, citable.weight)
    # The niche aimed at (kind 0: the citing paper's, 1: its secondary one), then that niche's subtopic, then
    # the citing paper's field; references anywhere try its second field first.
    aim = np.where(kind == 1, citing.niche2[src], citing.niche[src])
    attempt(_Pool(citable.niche, citable.time, citable.weight), aim, every[kind <= 1])
    k = config.niches_per_subtopic
    attempt(_Pool(citable.niche // k, citable.time, citable.weight), aim // k, every[kind <= 1])
    attempt(by_field, citing.field[src], every[kind <= 2])
    second = citing.field2[src]
    attempt(by_field, second, every[(kind == 3) & (second >= 0)])
    everything = _Pool(np.zeros(m, dtype=np.int64), citable.time, citable.weight)
    attempt(everything, np.zeros(e, dtype=np.int64), every)
    keep = np.flatnonzero(cited >= 0)
    _, first = np.unique(src[keep] * m + cited[keep], return_index=True)
    first = keep[np.sort(first)]  # distinct pairs in draw order, grouped by citing paper
    first = first[rank_in_groups(src[first]) < degree[src[first]]]
    pairs = np.sort(src[first] * m + cited[first])
    return pairs // m, pairs % m


def sample_citations(papers: Papers, config: GenerateConfig) -> tuple[np.ndarray, np.ndarray]:
    """Clean citation edges (citing, cited) of a fresh snapshot as paper indices: unique, cited strictly
    older, sorted. Only the very first papers have nothing older to cite."""
    citable = Citable(niche=papers.niche, field=papers.field, time=papers.day, weight=papers.fitness)
    return sample_references(random_stream(config.seed, "citations"), config, papers, papers.day, citable)
