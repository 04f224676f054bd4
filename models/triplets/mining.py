"""Triplet mining: SciNCL's kNN windows over graph embeddings, and the draws both strategies share
(docs/reference.md §4).

Everything here works on *pool positions*: the candidate pool is an array of
corpus ids sorted ascending, and a paper is its index in that array. Queries
are pool positions too. Each function handles one batch of queries and
returns numpy arrays, so the stage (`jobs/mine_triplets.py`) streams batches
to Parquet and memory stays bounded whatever the pool size.

Randomness is counter-based: every draw is a hash of (seed, purpose, query
id, candidate id or slot, round), never a stateful generator. The triplets of
a query therefore do not depend on the batch size, on the batch a query falls
in, or on which other queries are mined, and the pool of a new snapshot keeps
the papers both snapshots share.

SciNCL (`scincl_batch`, after malteos/scincl `gdt/triples_miner/sampling.py`)
samples from the k_max nearest pool neighbours of each query, ranked 1..k_max
(`models/triplets/knn.py` finds them). Positives: ranks (k_pos - c_pos, k_pos], in
rank order; hard negatives: ranks (k_hard - c_hard, k_hard]; easy negatives:
c_easy papers outside the query and its k_max neighbourhood, drawn among the
queries (SciNCL's random list is its query papers) or the whole pool.
Triplet i pairs positive i with negative i, easy negatives first as the
reference concatenates them, so ranks 21-23 meet easy and 24-25 hard
negatives.

SPECTER's citation triplets live in `models/triplets/specter.py` and use the same
counter-based draws.

Easy negatives of a query are distinct (`distinct=True`; both references
draw them with replacement).

SciNCL's own easy negatives are not uniform: they are the first c_easy
entries outside the query's k_max neighbourhood of a window of 2 x c_easy
entries that starts at the query's index in one shuffled list of the
queries, each 2 x c_easy times (`EasyWindow`; docs/parity-samplers.md).
Consecutive queries' windows overlap, and about a third of the queries is
never anyone's easy negative. The list is shuffled once for the whole query
list, by hashes, so the windows do not depend on the batches either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

# Purposes of hashed draws: distinct salts keep the streams independent.
SALT_POOL, SALT_QUERY, SALT_EASY, SALT_POSITIVE, SALT_HARD, SALT_SAMPLE, SALT_WINDOW = 11, 13, 17, 19, 23, 29, 31
MAX_REJECTION_ROUNDS = 64


# --- counter-based randomness ----------------------------------------------------------------------------


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def hash64(seed: int, salt: int, *columns: np.ndarray | int) -> np.ndarray:
    """A 64-bit hash per row of the broadcast integer `columns`, independent per (seed, salt)."""
    h = _mix(np.full(1, (seed * 1_000_003 + salt) & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64))
    for column in columns:
        h = _mix(h ^ np.asarray(column, dtype=np.int64).view(np.uint64))
    return h


def hashed_sample(ids: np.ndarray, size: int, seed: int, salt: int) -> np.ndarray:
    """The `size` ids with the smallest hash, sorted: a seeded sample that is stable under additions."""
    if size >= len(ids):
        return np.sort(ids)
    keys = hash64(seed, salt, ids)
    chosen = np.argpartition(keys, size - 1)[:size]
    return np.sort(ids[chosen])


def _uniform_positions(
    seed: int, salt: int, query_ids: np.ndarray, slot: np.ndarray | int, round_: int, pool_size: int
) -> np.ndarray:
    return (hash64(seed, salt, query_ids, slot, round_) % np.uint64(pool_size)).astype(np.int64)


# --- windows ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Windows:
    """SciNCL's sampling windows over neighbour ranks (1 = nearest, the query excluded)."""

    k_pos: int
    k_hard: int
    c_pos: int = 5
    c_hard: int = 2
    c_easy: int = 3

    @property
    def k_max(self) -> int:
        return max(self.k_pos, self.k_hard)

    @property
    def positive_ranks(self) -> np.ndarray:
        return np.arange(self.k_pos - self.c_pos + 1, self.k_pos + 1)

    @property
    def hard_ranks(self) -> np.ndarray:
        return np.arange(self.k_hard - self.c_hard + 1, self.k_hard + 1)


def relative_k(k: int, pool_size: int, reference_pool: int, floor: int) -> int:
    """k scaled from a pool of `reference_pool` papers to one of `pool_size` (rounded, at least `floor`)."""
    return max(floor, int(np.floor(k * pool_size / reference_pool + 0.5)))


def fit_windows(
    pool_size: int,
    k_pos: int,
    k_hard: int,
    c_pos: int,
    c_hard: int,
    c_easy: int,
    *,
    relative: bool = False,
    reference_pool: int = 680_967,
) -> tuple[Windows, list[str]]:
    """Windows for a pool of `pool_size` papers, and warnings for what had to change.

    relative=True scales k_pos and k_hard by pool_size / reference_pool first, so the windows cut the same
    quantiles of the pool as SciNCL's at its pool size (and equal them there). k_hard is capped at
    (pool_size - 1) // 2 so that at least half of the pool lies outside the k_max neighbourhood for easy
    negatives; overlapping windows are allowed (SciNCL's ablation) but warned about, since they produce
    collisions.
    """
    from citeflow.errors import CiteflowError

    if c_pos != c_hard + c_easy:
        raise CiteflowError(
            f"positives ({c_pos}) must equal hard ({c_hard}) + easy ({c_easy}) negatives: "
            "each triplet pairs one positive with one negative"
        )
    warnings: list[str] = []
    if relative:
        scaled = (
            relative_k(k_pos, pool_size, reference_pool, c_pos),
            relative_k(k_hard, pool_size, reference_pool, c_hard),
        )
        warnings.append(
            f"relative windows: k_pos {k_pos} -> {scaled[0]}, k_hard {k_hard} -> {scaled[1]} "
            f"(pool of {pool_size:,} papers, reference pool {reference_pool:,})"
        )
        k_pos, k_hard = scaled
    cap = (pool_size - 1) // 2
    if k_hard > cap:
        warnings.append(
            f"k_hard capped from {k_hard} to {cap}: the pool has only {pool_size:,} papers and easy "
            "negatives need papers outside the k_max neighbourhood"
        )
        k_hard = cap
    if k_pos > cap:
        raise CiteflowError(
            f"the pool ({pool_size:,} papers) is too small for k_pos={k_pos}: "
            "lower mine_triplets.k_pos or use a larger pool"
        )
    if k_hard < c_hard or k_pos < c_pos:
        raise CiteflowError(
            f"the pool ({pool_size:,} papers) is too small for the sampling windows (k_pos={k_pos}, k_hard={k_hard})"
        )
    windows = Windows(k_pos=k_pos, k_hard=k_hard, c_pos=c_pos, c_hard=c_hard, c_easy=c_easy)
    if np.intersect1d(windows.positive_ranks, windows.hard_ranks).size:
        warnings.append(
            f"the positive ranks {windows.positive_ranks[0]}-{windows.positive_ranks[-1]} and the hard "
            f"negative ranks {windows.hard_ranks[0]}-{windows.hard_ranks[-1]} overlap: expect collisions"
        )
    return windows, warnings


# --- sampling --------------------------------------------------------------------------------------------


@dataclass
class Batch:
    """Triplets of one query batch (pool positions) and what was counted while drawing them."""

    query: np.ndarray
    positive: np.ndarray
    negative: np.ndarray
    hard: np.ndarray  # bool: negative_kind == "hard"
    positive_rank: np.ndarray  # int64, -1 where not applicable
    negative_rank: np.ndarray
    counts: dict[str, int]


def in_sorted(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    at = np.searchsorted(sorted_keys, keys)
    return (at < len(sorted_keys)) & (sorted_keys[np.minimum(at, len(sorted_keys) - 1)] == keys)


def sample_outside(
    seed: int,
    query_ids: np.ndarray,
    forbidden: Callable[[np.ndarray, np.ndarray], np.ndarray],
    count: int,
    pool_size: int,
    candidates: np.ndarray | None = None,
    distinct: bool = True,
) -> np.ndarray:
    """`count` pool positions per query, none forbidden to it.

    `forbidden(query rows, drawn positions)`: a bool array, True where the position is forbidden to that
    query. Drawn uniformly from `candidates` (sorted pool positions; None: the whole pool) by hashed
    rejection sampling, slot by slot; with `distinct`, a slot also rejects the papers the query's earlier
    slots took.
    """
    n = len(query_ids)
    size = pool_size if candidates is None else len(candidates)
    out = np.full((n, count), -1, dtype=np.int64)
    for slot in range(count):
        todo = np.arange(n, dtype=np.int64)
        for round_ in range(MAX_REJECTION_ROUNDS):
            draw = _uniform_positions(seed, SALT_EASY, query_ids[todo], slot, round_, size)
            if candidates is not None:
                draw = candidates[draw]
            bad = forbidden(todo, draw)
            if distinct and slot:
                bad |= (out[todo, :slot] == draw[:, None]).any(axis=1)
            out[todo[~bad], slot] = draw[~bad]
            todo = todo[bad]
            if not len(todo):
                break
        else:
            from citeflow.errors import CiteflowError

            raise CiteflowError(
                f"could not draw easy negatives outside the queries' neighbourhoods after {MAX_REJECTION_ROUNDS} "
                f"rounds from {size:,} candidates: use a larger pool, more queries, smaller windows, or "
                "mine_triplets.easy_negatives_from=pool"
            )
    return out


@dataclass(frozen=True)
class EasyWindow:
    """SciNCL's easy-negative list: each query `width` times, shuffled once; a query reads from its index on.

    malteos/scincl `gdt/triples_miner/sampling.py` builds the list in `init_randoms` (lines 64-80: the queries
    x random_count, shuffled; random_count is 2 x the easy-negative count) and gives query i the slice
    [i, i + random_count) (lines 292-295), which never advances when random_sample_factor is 0, its default
    (lines 348-351). `get_random_examples_without` (lines 82-117) takes the slice's entries in order, passing
    over those among the query's k_max neighbours, which exclude the query itself (line 453).
    """

    queries: np.ndarray  # the query list (pool positions, sorted): a query's index in it is where it reads
    papers: np.ndarray  # the shuffled list, pool positions
    width: int

    @classmethod
    def shuffled(cls, queries: np.ndarray, width: int, seed: int) -> EasyWindow:
        """The list in a seeded order: entry j of the queries x width is placed by a hash of (seed, j)."""
        order = np.argsort(hash64(seed, SALT_WINDOW, np.arange(len(queries) * width)), kind="stable")
        return cls(queries=queries, papers=queries[order % len(queries)], width=width)

    def negatives(
        self,
        query_rows: np.ndarray,
        forbidden: Callable[[np.ndarray, np.ndarray], np.ndarray],
        count: int,
        distinct: bool,
    ) -> tuple[np.ndarray, int]:
        """`count` entries per query: the first of its window that are not forbidden to it, and how many
        queries had to read past their window for them.

        Where the window holds fewer than `count` such entries (the reference raises after its retries),
        the query reads on through the entries after it, wrapping at the end of the list. With `distinct`,
        an entry equal to one the query took already is passed over too.
        """
        start = np.searchsorted(self.queries, query_rows)
        if (start >= len(self.queries)).any() or (
            self.queries[np.minimum(start, len(self.queries) - 1)] != query_rows
        ).any():
            raise ValueError("every query of the batch must be in the easy-negative list's queries")
        n, size = len(query_rows), len(self.papers)
        out = np.full((n, count), -1, dtype=np.int64)
        taken = np.zeros(n, dtype=np.int64)
        todo = np.arange(n, dtype=np.int64)
        overruns = 0
        for offset in range(size):
            entry = self.papers[(start[todo] + offset) % size]
            ok = ~forbidden(todo, entry)
            if distinct:
                ok &= ~(out[todo] == entry[:, None]).any(axis=1)
            out[todo[ok], taken[todo[ok]]] = entry[ok]
            taken[todo[ok]] += 1
            todo = todo[taken[todo] < count]
            if offset == self.width - 1:
                overruns = len(todo)
            if not len(todo):
                return out, overruns
        from citeflow.errors import CiteflowError

        raise CiteflowError(
            f"{len(todo):,} queries found fewer than {count} easy negatives outside their neighbourhoods in the "
            f"whole list of {len(self.queries):,} queries: mine more queries, use smaller windows, or "
            "mine_triplets.easy_negatives_sampling=uniform"
        )


def scincl_batch(
    query_rows: np.ndarray,
    neighbours: np.ndarray,
    windows: Windows,
    pool_ids: np.ndarray,
    seed: int,
    *,
    easy_from: np.ndarray | None = None,
    easy_window: EasyWindow | None = None,
    distinct: bool = True,
) -> Batch:
    """SciNCL triplets for queries whose ranked neighbours (pool positions, rank 1 first) are given.

    `easy_from`: sorted pool positions easy negatives are drawn from uniformly (SciNCL: the queries); None: the
    pool. `easy_window`: take them from SciNCL's windows instead, as its sampler does (the query itself is
    not excluded there, only its k_max neighbours).
    """
    n, pool_size = len(query_rows), len(pool_ids)
    positives = neighbours[:, windows.positive_ranks - 1]
    hard = neighbours[:, windows.hard_ranks - 1]
    counts = {"queries": n}

    def forbidden(rows: np.ndarray, draw: np.ndarray) -> np.ndarray:
        """The query itself and its k_max neighbours, scanned in the rows still drawing: one comparison per
        neighbour and draw, where sorted keys cost a sort of every query's neighbourhood per batch."""
        return (query_rows[rows] == draw) | (neighbours[rows] == draw[:, None]).any(axis=1)

    if easy_window is None:
        easy = sample_outside(seed, pool_ids[query_rows], forbidden, windows.c_easy, pool_size, easy_from, distinct)
    elif easy_from is not None:
        raise ValueError("easy_from and easy_window exclude each other: the window's list is made of the queries")
    else:
        in_knn = lambda rows, entry: (neighbours[rows] == entry[:, None]).any(axis=1)  # noqa: E731
        easy, overruns = easy_window.negatives(query_rows, in_knn, windows.c_easy, distinct)
        counts["easy_window_overruns"] = overruns
        counts["easy_negative_is_query"] = int((easy == query_rows[:, None]).any(axis=1).sum())
    # The reference zips positives (rank order) with easy + hard negatives, in that order.
    negatives = np.concatenate([easy, hard], axis=1)
    is_hard = np.zeros(negatives.shape, dtype=bool)
    is_hard[:, windows.c_easy :] = True
    negative_rank = np.full(negatives.shape, -1, dtype=np.int64)
    negative_rank[:, windows.c_easy :] = windows.hard_ranks
    positive_rank = np.broadcast_to(windows.positive_ranks, positives.shape)
    return Batch(
        query=np.repeat(query_rows, windows.c_pos),
        positive=positives.ravel(),
        negative=negatives.ravel(),
        hard=is_hard.ravel(),
        positive_rank=positive_rank.ravel().astype(np.int64),
        negative_rank=negative_rank.ravel(),
        counts=counts,
    )


def collisions(query: np.ndarray, positive: np.ndarray, negative: np.ndarray, pool_size: int) -> int:
    """Distinct (query, paper) pairs that are both a positive and a negative of that query (pool positions)."""
    pos = np.unique(query.astype(np.int64) * pool_size + positive)
    neg = np.unique(query.astype(np.int64) * pool_size + negative)
    return int(np.intersect1d(pos, neg, assume_unique=True).size)


def batches(rows: np.ndarray, size: int) -> Iterator[np.ndarray]:
    for lo in range(0, len(rows), size):
        yield rows[lo : lo + size]
