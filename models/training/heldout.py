"""The held-out slice of the mined triplets that train_encoder evaluates on while it trains, and never trains on.

Whole queries are held out, not single triplets: a query's other triplets (its other positives) would otherwise be
trained on, and the slice would measure memory, not generalisation. `held_out(query_ids, count, seed)` draws the
queries in a seeded order until their triplets reach `count`, never past a third of the triplets (`MAX_SHARE`: a
small corpus still trains on most of what it mined); the trainer (models/training/train.py) and the
sentence-transformers variant of bench/bench_real_encoder.py both split with it, so both train on the same
triplets.
"""

from __future__ import annotations

import numpy as np

# a stream of its own: the held-out queries do not move when another draw from the run's seed changes
_STREAM = 7_311
# the held-out slice asks for at most this share of the triplets
MAX_SHARE = 1 / 3


def held_out(query_ids: np.ndarray, count: int, seed: int) -> np.ndarray:
    """A boolean mask over the triplets (one query id each): True for the triplets of the held-out queries, whole
    queries drawn in a seeded order until at least `count` triplets are held out (0: none), or until the next
    query would take the slice past a third of the triplets (`MAX_SHARE`). At least one query is always left to
    train on."""
    query_ids = np.asarray(query_ids)
    mask = np.zeros(len(query_ids), dtype=bool)
    if count <= 0 or len(query_ids) == 0:
        return mask
    queries, sizes = np.unique(query_ids, return_counts=True)
    order = np.random.default_rng([seed, _STREAM]).permutation(len(queries))
    reached = np.cumsum(sizes[order])
    taken = np.searchsorted(reached, count) + 1  # queries until `count` triplets are reached
    fits = np.searchsorted(reached, int(len(query_ids) * MAX_SHARE), side="right")  # queries within the share
    chosen = queries[order[: min(taken, fits, len(queries) - 1)]]
    return np.isin(query_ids, chosen)
