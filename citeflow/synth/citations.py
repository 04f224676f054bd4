"""The citation sampler, one for a fresh snapshot and for the papers a later release adds.

Each reference is drawn within the citing paper's subtopic, field or across fields (the second field when the
paper has one), falling back to a wider pool when the narrow one has no older paper, by preferential attachment
on a weight with a mild preference for recent papers. Out-degrees are a discretised lognormal. Arrays in,
arrays out (no files).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from citeflow.synth.arrays import random_stream
from citeflow.synth.config import LAST_DAY, GenerateConfig
from citeflow.synth.papers import Papers


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
        ok = hi > lo
        base = np.where(lo > 0, self.cum[np.maximum(lo - 1, 0)], 0.0)
        top = self.cum[np.maximum(hi - 1, 0)]
        pos = np.searchsorted(self.cum, base + v * (top - base), side="right")
        pos = np.clip(pos, lo, np.maximum(hi - 1, lo))
        return self.order[np.minimum(pos, len(self.order) - 1)], ok


def draw_references(
    rng: np.random.Generator, config: GenerateConfig, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The references of n citing papers before their targets are picked: (citing paper of each reference,
    its kind: 0 same subtopic / 1 same field / 2 across fields, a draw v in [0, 1) whose density 2v makes
    later, more recent papers in the cumulative order likelier). Out-degrees are a discretised lognormal
    with `zero_reference_rate` of papers citing nothing."""
    sigma = 0.9
    mu = math.log(config.mean_references / max(1e-9, 1 - config.zero_reference_rate)) - sigma**2 / 2
    degree = np.minimum(np.ceil(rng.lognormal(mu, sigma, size=n)), 500).astype(np.int64)
    degree[rng.random(n) < config.zero_reference_rate] = 0
    citing = np.repeat(np.arange(n, dtype=np.int64), degree)
    kind = np.searchsorted(
        [config.same_subtopic_rate, config.same_subtopic_rate + config.same_field_rate],
        rng.random(len(citing)),
        side="right",
    )
    return citing, kind, np.sqrt(rng.random(len(citing)))


@dataclass(frozen=True)
class Citable:
    """The papers references may point to: topic segments, time (only strictly earlier papers are cited) and
    attractiveness. A fresh snapshot: every paper, by day, weighted by fitness. A later release: the papers
    it keeps, by year, weighted by the citations they have received."""

    community: np.ndarray
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
    src, kind, v = draw_references(rng, config, citing.n)
    e = len(src)
    time = citing_time[src]
    cited = np.full(e, -1, dtype=np.int64)

    def attempt(pool: _Pool, segment: np.ndarray, rows: np.ndarray) -> None:
        rows = rows[cited[rows] < 0]
        target, ok = pool.draw(segment[rows], time[rows], v[rows])
        cited[rows[ok]] = target[ok]

    every = np.arange(e, dtype=np.int64)
    by_field = _Pool(citable.field, citable.time, citable.weight)
    attempt(_Pool(citable.community, citable.time, citable.weight), citing.community[src], every[kind == 0])
    attempt(by_field, citing.field[src], every[kind <= 1])
    second = citing.field2[src]
    attempt(by_field, second, every[(kind == 2) & (second >= 0)])
    everything = _Pool(np.zeros(m, dtype=np.int64), citable.time, citable.weight)
    attempt(everything, np.zeros(e, dtype=np.int64), every)
    keep = cited >= 0
    pairs = np.unique(src[keep] * m + cited[keep])
    return pairs // m, pairs % m


def sample_citations(papers: Papers, config: GenerateConfig) -> tuple[np.ndarray, np.ndarray]:
    """Clean citation edges (citing, cited) of a fresh snapshot as paper indices: unique, cited strictly
    older, sorted. Only the very first papers have nothing older to cite."""
    citable = Citable(community=papers.community, field=papers.field, time=papers.day, weight=papers.fitness)
    return sample_references(random_stream(config.seed, "citations"), config, papers, papers.day, citable)
