"""SPECTER's citation triplets (docs/reference.md §4), on pool positions and counter-based draws as in
`models/triplets/mining.py`.

`specter_batch` follows allenai/specter
`specter/data_utils/triplet_sampling.py` on `data.json` (a query's
candidates are its citations, count 5, and the citations of those, count 1;
`samples_per_query` 5, `ratio_hard_negatives` 0.3, `margin_fraction` 0.5):
a query with no citation of a citation gives no triplet (the reference
skips it). Otherwise h = min(c_hard, |cited| x |cited by cited|) hard
triplets pair a cited paper with a citation of a citation, then c_pos - h
easy triplets pair a cited paper with a pool paper that is neither a
candidate nor the query. Positives and hard negatives are drawn with
replacement, as the reference draws them.

Easy negatives of a query are distinct (`distinct=True`; the reference draws them with replacement).

Which queries give triplets follows one of two reference files (`rule`, see `SPECTER_QUERY_RULES`):
`TripletGenerator` in `triplet_sampling.py` ("generator", the default) needs a citation of a citation;
`triplet_sampling_parallel.py` ("parallel"), which SPECTER's `create_training_files.py` runs and so made its
training data, also needs at least three candidates (its `_get_triplet`, line 69, `len(candidates) > 2`), so a
query with one citation and one citation of a citation gets no triplet there (docs/parity-samplers.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from citeflow.models.triplets.mining import SALT_HARD, SALT_POSITIVE, Batch, hash64, in_sorted, sample_outside

# "generator": triplet_sampling.py's TripletGenerator; "parallel": triplet_sampling_parallel.py.
SPECTER_QUERY_RULES = ("generator", "parallel")


@dataclass(frozen=True)
class CitationIndex:
    """Out-edges among pool papers, CSR over pool positions (targets sorted within a row)."""

    indptr: np.ndarray
    indices: np.ndarray

    @classmethod
    def from_edges(cls, src: np.ndarray, dst: np.ndarray, pool_size: int) -> CitationIndex:
        keys = np.unique(src.astype(np.int64) * pool_size + dst)
        src, dst = keys // pool_size, keys % pool_size
        indptr = np.zeros(pool_size + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=pool_size), out=indptr[1:])
        return cls(indptr=indptr, indices=dst)

    def degree(self, rows: np.ndarray) -> np.ndarray:
        return self.indptr[rows + 1] - self.indptr[rows]

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(owner index into rows, target) for every out-edge of `rows`."""
        deg = self.degree(rows)
        owner = np.repeat(np.arange(len(rows), dtype=np.int64), deg)
        starts = np.repeat(self.indptr[rows] - np.cumsum(deg) + deg, deg)
        return owner, self.indices[starts + np.arange(deg.sum())]


def specter_candidates(query_rows: np.ndarray, cites: CitationIndex) -> tuple[np.ndarray, ...]:
    """SPECTER's candidates of each query as (owner, paper) pairs sorted by (owner, paper).

    Returns (cited_owner, cited, coc_owner, coc): the pool papers each query cites (data.json count 5) and
    the papers those cite that the query neither cites nor is (count 1); owner indexes `query_rows`.
    """
    pool_size = len(cites.indptr) - 1
    owner, cited = cites.gather(query_rows)  # sorted by (owner, cited): CSR rows are sorted
    second_owner, second = cites.gather(cited)
    keys = np.unique(owner[second_owner] * pool_size + second)
    cited_keys = owner * pool_size + cited
    c_owner, coc = keys // pool_size, keys % pool_size
    keep = ~in_sorted(cited_keys, keys) & (coc != query_rows[c_owner])
    return owner, cited, c_owner[keep], coc[keep]


def specter_candidate_counts(query_rows: np.ndarray, cites: CitationIndex) -> tuple[np.ndarray, np.ndarray]:
    """(papers cited, citations of citations) per query: its data.json entries of count 5 and of count 1."""
    owner, _, c_owner, _ = specter_candidates(query_rows, cites)
    n = len(query_rows)
    return np.bincount(owner, minlength=n), np.bincount(c_owner, minlength=n)


def specter_rule(n_cited: np.ndarray, n_coc: np.ndarray, rule: str = "generator") -> np.ndarray:
    """True for the queries the reference named by `rule` gives triplets, from their candidate counts.

    Both files need a citation of a citation: without one every candidate has count 5, the margin is 0 and
    neither file samples anything. "parallel" also needs more than two candidates in all.
    """
    if rule not in SPECTER_QUERY_RULES:
        raise ValueError(f"unknown SPECTER query rule {rule!r}; rules: {', '.join(SPECTER_QUERY_RULES)}")
    eligible = n_coc > 0
    if rule == "parallel":
        eligible &= n_cited + n_coc > 2
    return eligible


def specter_eligible(query_rows: np.ndarray, cites: CitationIndex, rule: str = "generator") -> np.ndarray:
    """True for queries the reference gives triplets (see `specter_rule`); the others get none."""
    return specter_rule(*specter_candidate_counts(query_rows, cites), rule)


def _pick(owner_start: np.ndarray, owner_count: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Index into a grouped array: element keys % count of each row's group (uniform with replacement)."""
    return owner_start[:, None] + (keys % owner_count[:, None].astype(np.uint64)).astype(np.int64)


def specter_batch(
    query_rows: np.ndarray,
    cites: CitationIndex,
    pool_ids: np.ndarray,
    c_pos: int,
    c_hard: int,
    c_easy: int,
    seed: int,
    *,
    distinct: bool = True,
    rule: str = "generator",
) -> Batch:
    """SPECTER triplets for queries the reference named by `rule` gives triplets (see `specter_eligible`)."""
    n, pool_size = len(query_rows), len(pool_ids)
    qids = pool_ids[query_rows]
    owner, cited, c_owner, coc = specter_candidates(query_rows, cites)
    n_cited = np.bincount(owner, minlength=n)
    n_coc = np.bincount(c_owner, minlength=n)
    if not specter_rule(n_cited, n_coc, rule).all():
        raise ValueError(f"specter_batch needs queries the {rule!r} rule gives triplets (see specter_eligible)")
    slots = np.arange(c_pos, dtype=np.int64)

    # Every triplet draws its positive from the query's citations, with replacement.
    cited_start = np.r_[0, np.cumsum(n_cited)[:-1]]
    keys = hash64(seed, SALT_POSITIVE, qids[:, None], slots[None, :])
    positives = cited[_pick(cited_start, n_cited, keys)]
    # The first h triplets take a hard negative (with replacement), h = min(c_hard, |cited| x |coc|).
    hard_count = np.minimum(c_hard, n_cited * n_coc)
    coc_start = np.r_[0, np.cumsum(n_coc)[:-1]]
    hard = coc[_pick(coc_start, n_coc, hash64(seed, SALT_HARD, qids[:, None], slots[None, :]))]
    # The rest an easy one: a pool paper that is no candidate and not the query itself.
    itself = np.arange(n, dtype=np.int64) * pool_size + query_rows
    keys = np.sort(np.concatenate([owner * pool_size + cited, c_owner * pool_size + coc, itself]))
    forbidden = lambda rows, draw: in_sorted(keys, rows * pool_size + draw)  # noqa: E731
    easy = sample_outside(seed, qids, forbidden, c_pos, pool_size, None, distinct)
    is_hard = slots[None, :] < hard_count[:, None]
    negatives = np.where(is_hard, hard, easy)
    repeats = int((np.diff(np.sort(positives, axis=1), axis=1) == 0).sum())
    return Batch(
        query=np.repeat(query_rows, c_pos),
        positive=positives.ravel(),
        negative=negatives.ravel(),
        hard=is_hard.ravel(),
        positive_rank=np.full(n * c_pos, -1, dtype=np.int64),
        negative_rank=np.full(n * c_pos, -1, dtype=np.int64),
        counts={
            "queries": n,
            "positive_repeats": repeats,
            "hard_negative_shortfall": int((c_hard - hard_count).sum()),
        },
    )
