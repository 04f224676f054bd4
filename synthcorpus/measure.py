"""A generated snapshot measured like the real samples (calibration.py), for generator.json's `calibration`.

The sample: the first CALIBRATION_PAPERS papers in shard order (papers are in random order, so these are a
random sample, like the 1,000-record S2ORC sample) and CALIBRATION_PAIRS clean citations drawn at random among
those whose two papers have a title and an abstract (like SciRepEval's SPECTER triplets). Missing-abstract rates
and out-degrees are counted over the whole corpus (same definitions, less noise). No files.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import citeflow.synthcorpus.stats as stats
from citeflow.synthcorpus.arrays import random_stream
from citeflow.synthcorpus.calibration import (
    BOUNDS,
    CALIBRATION_PAIRS,
    CALIBRATION_PAPERS,
    TARGETS,
    UNMATCHED,
    text_statistics,
)
from citeflow.synthcorpus.world import World


def calibration_pairs(world: World) -> tuple[np.ndarray, np.ndarray]:
    """(citing, cited) paper indices of the sampled clean citations."""
    titled = ~np.asarray(pc.is_null(world.title).to_numpy(zero_copy_only=False), dtype=bool)
    ok = world.has_abstract & titled
    usable = np.flatnonzero(ok[world.src] & ok[world.dst])
    rng = random_stream(world.config.seed, "calibration-pairs")
    pick = np.sort(rng.choice(usable, size=min(CALIBRATION_PAIRS, len(usable)), replace=False))
    return world.src[pick], world.dst[pick]


def calibration_papers(world: World) -> np.ndarray:
    """The papers whose abstracts `measure` needs, sorted."""
    src, dst = calibration_pairs(world)
    first = np.arange(min(CALIBRATION_PAPERS, world.papers.n), dtype=np.int64)
    return np.unique(np.concatenate([first, src, dst]))


def measure(world: World, abstracts: dict[int, str | None]) -> dict[str, Any]:
    """generator.json's `calibration`: per statistic its target, the value achieved, the bound and whether the
    value is within it; plus `same_field_citations` (no target: the samples cannot measure it)."""
    n = world.papers.n
    first = range(min(CALIBRATION_PAPERS, n))
    titles = world.title.slice(0, len(first)).to_pylist()
    out_degree = np.diff(world.out_ptr)
    # Labelled by field, except where the S2ORC record shows no field of study (as the real sample is read).
    no_field = world.papers.flags["s2orc_fos_null"]
    achieved = text_statistics(
        titles,
        [abstracts[i] for i in first],
        [None if no_field[i] else int(world.papers.field[i]) for i in first],
        out_degree[: len(first)].tolist(),
    )
    # Whole-corpus counts for what does not need text.
    citing = out_degree > 0
    achieved["missing_abstract_rate"] = stats.round_to(float((~world.has_abstract).mean()))
    achieved["missing_abstract_rate_citing"] = stats.round_to(float((~world.has_abstract[citing]).mean()))
    degree = stats.degree_stats(out_degree)
    achieved["out_degree_zero_share"] = degree["zero_share"]
    achieved["out_degree_mean_nonzero"] = degree["mean_nonzero"]
    achieved.update({f"out_degree_{k}": degree[k] for k in ("p10", "p50", "p90")})
    src, dst = calibration_pairs(world)
    ends = np.unique(np.concatenate([src, dst]))
    title = dict(zip(ends.tolist(), world.title.take(pa.array(ends)).to_pylist(), strict=True))
    achieved["citation_similarity_auc"] = stats.citation_similarity_auc(
        [f"{title[i]} {abstracts[i]}" for i in src.tolist()],
        [f"{title[i]} {abstracts[i]}" for i in dst.tolist()],
        dst.tolist(),
    )
    achieved["in_degree_zero_share"] = stats.degree_stats(np.diff(world.in_ptr))["zero_share"]
    # A corpus too small for a statistic (no citation pair with two abstracts, a single field) has none.
    achieved = {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in achieved.items()}
    table = {
        name: {
            "target": target,
            "achieved": achieved[name],
            "bound": BOUNDS[name],
            "within": (value := achieved[name]) is not None and bool(abs(value - target) <= BOUNDS[name]),
        }
        for name, target in TARGETS.items()
    }
    # Real values the generator does not match on purpose (calibration.py says why): no bound.
    table.update(
        {
            name: {"target": real, "achieved": achieved[name], "bound": None, "within": None}
            for name, real in UNMATCHED.items()
        }
    )
    same_field = world.papers.field[world.src] == world.papers.field[world.dst]
    return {
        "difficulty": world.config.difficulty,
        "papers_measured": len(first),
        "pairs_measured": len(src),
        "statistics": table,
        "same_field_citations": stats.round_to(float(same_field.mean()) if len(same_field) else 0.0),
    }
