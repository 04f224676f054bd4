"""synthcorpus/recomm.py: the in-place draw of click distractors equals the draw from a copied remainder."""

from __future__ import annotations

import numpy as np
import pytest

from citeflow.synthcorpus.recomm import nth_remaining


@pytest.mark.parametrize("seed", range(5))
def test_nth_remaining_indexes_the_pool_as_setdiff1d_would(seed):
    rng = np.random.default_rng(seed)
    for _ in range(300):
        pool = np.unique(rng.integers(0, 300, size=int(rng.integers(2, 120))))
        removed = [int(x) for x in rng.choice(pool, size=int(rng.integers(0, min(7, len(pool)))), replace=False)]
        rest = np.setdiff1d(pool, removed)
        if len(rest) == 0:
            continue
        ranks = rng.choice(len(rest), size=min(4, len(rest)), replace=False)
        assert pool[nth_remaining(pool, removed, ranks)].tolist() == rest[ranks].tolist()


def test_removed_at_both_ends_and_adjacent():
    pool = np.array([3, 5, 8, 13, 21, 34])
    removed = [3, 34, 8, 13]
    assert pool[nth_remaining(pool, removed, np.array([0, 1]))].tolist() == [5, 21]


def test_the_draw_consumes_the_stream_as_a_draw_from_the_copy_did():
    pool = np.arange(0, 50_000, 3)
    removed = [6, 300, 9_000, 44_997]
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    for size in (1, 3, 9, 2_000):
        copy = a.choice(np.setdiff1d(pool, removed), size=size, replace=False)
        ranks = b.choice(len(pool) - len(removed), size=size, replace=False)
        assert copy.tolist() == pool[nth_remaining(pool, removed, ranks)].tolist()
    assert a.integers(0, 1 << 30) == b.integers(0, 1 << 30)
