"""Triplet mining on hand-built embeddings and graphs whose answers are known (docs/reference.md §4)."""

import numpy as np
import pytest

from citeflow.errors import CiteflowError
from citeflow.models.triplets import knn as knn
from citeflow.models.triplets import mining as T
from citeflow.models.triplets import specter as S


def arc(n: int) -> np.ndarray:
    """n unit vectors on a half circle at angles 0, 1, 3, 6, 10, ... degrees (steps grow, so no ties):
    from row 0, row i is the i-th nearest neighbour."""
    angles = np.radians(np.cumsum(np.arange(n)) * 170 / (n * (n - 1) / 2))
    return np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)


def mine_scincl(vectors, rows, windows, seed=0, batch=None):
    index, _ = knn.build_index(vectors, "flat", k_max=windows.k_max, use_gpu=False)
    pool_ids = np.arange(100, 100 + len(vectors), dtype=np.int64)
    parts = []
    for chunk in T.batches(rows, batch or len(rows)):
        parts.append(
            T.scincl_batch(chunk, knn.search_neighbours(index, vectors, chunk, windows.k_max), windows, pool_ids, seed)
        )
    return parts


def test_neighbour_ranks_on_the_arc_exclude_the_query():
    vectors = arc(30)
    index, _ = knn.build_index(vectors, "flat", k_max=10, use_gpu=False)
    got = knn.search_neighbours(index, vectors, np.array([0, 29]), 10)
    assert got[0].tolist() == list(range(1, 11))  # row i is rank i from row 0
    assert got[1].tolist() == list(range(28, 18, -1))  # and from the other end, backwards


def test_the_query_is_dropped_even_when_a_duplicate_ties_with_it():
    vectors = arc(12)
    vectors[5] = vectors[4]  # rows 4 and 5 are the same point
    index, _ = knn.build_index(vectors, "flat", k_max=6, use_gpu=False)
    got = knn.search_neighbours(index, vectors, np.array([4, 5]), 6)
    assert 4 not in got[0] and 5 in got[0] and got[0][0] == 5
    assert 5 not in got[1] and 4 in got[1] and got[1][0] == 4
    assert got.shape == (2, 6)


def test_scincl_windows_on_the_arc():
    vectors = arc(40)
    windows = T.Windows(k_pos=6, k_hard=12, c_pos=3, c_hard=1, c_easy=2)
    (batch,) = mine_scincl(vectors, np.array([0]), windows)
    pool_ids = np.arange(100, 140)
    # positives: ranks (6-3, 6] = rows 4, 5, 6; two easy negatives, then the hard one: rank 12 = row 12
    assert batch.positive.tolist() == [4, 5, 6]
    assert batch.positive_rank.tolist() == [4, 5, 6]
    assert batch.negative[2] == 12 and batch.negative_rank.tolist() == [-1, -1, 12]
    assert batch.hard.tolist() == [False, False, True]
    assert all(13 <= e < 40 for e in batch.negative[:2])  # outside the query and its k_max = 12 neighbours
    assert batch.query.tolist() == [0, 0, 0]
    assert pool_ids[batch.positive].tolist() == [104, 105, 106]


def test_easy_negatives_never_fall_in_the_k_max_neighbourhood():
    vectors = arc(40)
    windows = T.Windows(k_pos=5, k_hard=15, c_pos=5, c_hard=2, c_easy=3)
    rows = np.arange(40)
    index, _ = knn.build_index(vectors, "flat", k_max=15, use_gpu=False)
    neighbours = knn.search_neighbours(index, vectors, rows, 15)
    for seed in range(20):
        batch = T.scincl_batch(rows, neighbours, windows, np.arange(40), seed)
        easy = batch.negative[~batch.hard].reshape(40, 3)
        for q in rows:
            assert q not in easy[q] and not set(easy[q]) & set(neighbours[q])


def test_draws_do_not_depend_on_the_batch_size():
    vectors = arc(60)
    windows = T.Windows(k_pos=5, k_hard=20, c_pos=5, c_hard=2, c_easy=3)
    rows = np.arange(0, 60, 2)
    whole = mine_scincl(vectors, rows, windows, seed=3)
    pieces = mine_scincl(vectors, rows, windows, seed=3, batch=7)
    assert np.array_equal(whole[0].negative, np.concatenate([b.negative for b in pieces]))
    other_seed = mine_scincl(vectors, rows, windows, seed=4)
    assert not np.array_equal(whole[0].negative, other_seed[0].negative)


def test_exact_ranks_agree_with_the_windows():
    vectors = arc(40)
    windows = T.Windows(k_pos=6, k_hard=12, c_pos=3, c_hard=1, c_easy=2)
    (batch,) = mine_scincl(vectors, np.array([0, 39]), windows)
    targets = np.concatenate([batch.positive.reshape(2, 3), batch.negative.reshape(2, 3)], axis=1)
    ranks = knn.exact_ranks(vectors, np.array([0, 39]), targets)
    assert ranks[:, :3].tolist() == [[4, 5, 6], [4, 5, 6]]
    assert ranks[:, 5].tolist() == [12, 12] and (ranks[:, 3:5] > 12).all()


def test_a_querys_easy_negatives_are_distinct():
    # 12 points, k_max 5: each query has 6 papers outside its neighbourhood for 3 easy negatives, so draws
    # with replacement would repeat one in about 1 query of 3
    vectors = arc(12)
    windows = T.Windows(k_pos=3, k_hard=5, c_pos=5, c_hard=2, c_easy=3)
    rows = np.arange(12)
    index, _ = knn.build_index(vectors, "flat", k_max=5, use_gpu=False)
    neighbours = knn.search_neighbours(index, vectors, rows, 5)
    for seed in range(10):
        easy = T.scincl_batch(rows, neighbours, windows, np.arange(12), seed).negative.reshape(12, 5)[:, :3]
        assert all(len(set(e)) == 3 for e in easy), (seed, easy)
    with_replacement = [
        T.scincl_batch(rows, neighbours, windows, np.arange(12), seed, distinct=False).negative.reshape(12, 5)[:, :3]
        for seed in range(10)
    ]
    assert any(len(set(e)) < 3 for easy in with_replacement for e in easy)


def test_easy_negatives_can_be_drawn_among_the_queries_only():
    vectors = arc(60)
    windows = T.Windows(k_pos=5, k_hard=8, c_pos=5, c_hard=2, c_easy=3)
    rows = np.arange(0, 60, 3)  # the queries, SciNCL's random list
    index, _ = knn.build_index(vectors, "flat", k_max=8, use_gpu=False)
    neighbours = knn.search_neighbours(index, vectors, rows, 8)
    seen = set()
    for seed in range(20):
        batch = T.scincl_batch(rows, neighbours, windows, np.arange(60), seed, easy_from=rows)
        seen |= set(batch.negative[~batch.hard].tolist())
    assert seen <= set(rows.tolist()) and len(seen) > 10


def test_too_few_queries_for_easy_negatives_is_one_clear_error():
    vectors = arc(40)
    windows = T.Windows(k_pos=5, k_hard=10, c_pos=5, c_hard=2, c_easy=3)
    rows = np.array([0, 1, 2])  # each query's 10 nearest include the other two: no query is left to draw
    index, _ = knn.build_index(vectors, "flat", k_max=10, use_gpu=False)
    neighbours = knn.search_neighbours(index, vectors, rows, 10)
    with pytest.raises(CiteflowError, match="easy_negatives_from=pool"):
        T.scincl_batch(rows, neighbours, windows, np.arange(40), 0, easy_from=rows)


def test_relative_windows_are_scincls_at_its_pool_size_and_scale_with_the_pool():
    # 25 and 4000 of 680,967 papers: at 20,000 papers 0.73 (at least c_pos = 5) and 117.48; at 200,000 7.34
    # and 1174.8
    expected = {680_967: (25, 4000), 20_000: (5, 117), 200_000: (7, 1175)}
    for pool, (k_pos, k_hard) in expected.items():
        windows, warnings = T.fit_windows(pool, 25, 4000, 5, 2, 3, relative=True)
        assert (windows.k_pos, windows.k_hard) == (k_pos, k_hard), pool
        assert "relative windows" in warnings[0]
    absolute, _ = T.fit_windows(20_000, 25, 4000, 5, 2, 3)
    assert (absolute.k_pos, absolute.k_hard) == (25, 4000)


def test_fit_windows_caps_k_hard_and_warns_on_overlap():
    windows, warnings = T.fit_windows(1001, 25, 4000, 5, 2, 3)
    assert windows.k_hard == 500 and windows.k_max == 500 and "capped from 4000 to 500" in warnings[0]
    windows, warnings = T.fit_windows(10_000, 25, 4000, 5, 2, 3)
    assert (windows.k_pos, windows.k_hard, warnings) == (25, 4000, [])
    assert windows.positive_ranks.tolist() == [21, 22, 23, 24, 25] and windows.hard_ranks.tolist() == [3999, 4000]
    _, warnings = T.fit_windows(10_000, 5, 5, 5, 2, 3)
    assert "overlap" in warnings[0]
    with pytest.raises(CiteflowError, match="too small"):
        T.fit_windows(30, 25, 4000, 5, 2, 3)
    with pytest.raises(CiteflowError, match="must equal"):
        T.fit_windows(10_000, 25, 4000, 5, 2, 2)


def test_overlapping_windows_collide_and_are_counted():
    vectors = arc(30)
    windows = T.Windows(k_pos=5, k_hard=5, c_pos=5, c_hard=2, c_easy=3)  # hard ranks 4, 5 are positives too
    (batch,) = mine_scincl(vectors, np.array([0, 10]), windows)
    assert T.collisions(batch.query, batch.positive, batch.negative, 30) == 4
    assert T.collisions(np.array([1, 1]), np.array([2, 3]), np.array([4, 5]), 30) == 0


def graph(pool_size, edges):
    src, dst = np.array([e[0] for e in edges]), np.array([e[1] for e in edges])
    return S.CitationIndex.from_edges(src, dst, pool_size)


def test_specter_citation_of_citation_rule():
    # 0 cites 1 and 2; 1 cites 3 and 4; 2 cites 4 and 1 (cited by 0: a positive, never a negative)
    cites = graph(12, [(0, 1), (0, 2), (1, 3), (1, 4), (2, 4), (2, 1), (5, 6), (6, 7)])
    pool_ids = np.arange(1000, 1012)
    batch = S.specter_batch(np.array([0, 5]), cites, pool_ids, 5, 2, 3, seed=0)
    q0 = slice(0, 5)
    assert set(batch.positive[q0]) <= {1, 2}  # drawn with replacement, as SPECTER does
    assert set(batch.negative[q0][:2]) <= {3, 4} and batch.hard[q0].tolist() == [True, True, False, False, False]
    assert not set(batch.negative[q0][2:]) & {0, 1, 2, 3, 4}  # easy: neither cited nor cited by a cited paper
    # 5 cites only 6, which cites 7: min(2, 1 x 1) = 1 hard triplet, then 4 easy ones
    q5 = slice(5, 10)
    assert batch.positive[q5].tolist() == [6] * 5
    assert batch.negative[q5][0] == 7 and batch.hard[q5].tolist() == [True, False, False, False, False]
    assert not set(batch.negative[q5][1:]) & {5, 6, 7}
    assert batch.counts["hard_negative_shortfall"] == 1 and batch.counts["positive_repeats"] >= 3 + 4
    assert T.collisions(batch.query, batch.positive, batch.negative, 12) == 0
    assert S.specter_eligible(np.array([0, 5, 7]), cites).tolist() == [True, True, False]


def test_specter_hard_negatives_come_from_every_cited_paper():
    # 0 cites 1..20 and paper j cites j + 20: a hard negative may come from a paper no triplet uses as positive
    cites = graph(50, [(0, j) for j in range(1, 21)] + [(j, j + 20) for j in range(1, 21)])
    outside = 0
    for seed in range(20):
        batch = S.specter_batch(np.array([0]), cites, np.arange(50), 5, 2, 3, seed=seed)
        assert set(batch.positive) <= set(range(1, 21)) and set(batch.negative[:2]) <= set(range(21, 41))
        outside += len(set(batch.negative[:2].tolist()) - {int(p) + 20 for p in batch.positive})
    assert outside > 10


def test_specter_refuses_queries_without_citations():
    with pytest.raises(ValueError):
        S.specter_batch(np.array([3]), graph(5, [(0, 1)]), np.arange(5), 5, 2, 3, seed=0)


def test_hashed_sample_is_seeded_and_stable_when_papers_are_added():
    ids = np.arange(10_000, 20_000)
    sample = T.hashed_sample(ids, 500, seed=1, salt=T.SALT_POOL)
    assert len(sample) == 500 and np.array_equal(sample, np.sort(sample))
    assert np.array_equal(sample, T.hashed_sample(ids[::-1].copy(), 500, seed=1, salt=T.SALT_POOL))
    assert not np.array_equal(sample, T.hashed_sample(ids, 500, seed=2, salt=T.SALT_POOL))
    grown = T.hashed_sample(np.arange(10_000, 21_000), 500, seed=1, salt=T.SALT_POOL)
    old_in_grown = grown[grown < 20_000]
    assert set(old_in_grown) <= set(sample) and len(old_in_grown) > 400


@pytest.mark.parametrize("kind", ["ivf", "hnsw", "ivfpq"])
def test_approximate_indexes_find_the_exact_neighbours(kind):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(20, 16))
    vectors = knn.l2_normalize(np.repeat(centres, 100, axis=0) + 0.3 * rng.normal(size=(2000, 16)))
    rows = np.arange(0, 2000, 40)
    exact_index, _ = knn.build_index(vectors, "flat", k_max=30, use_gpu=False)
    exact = knn.search_neighbours(exact_index, vectors, rows, 30)
    index, description = knn.build_index(vectors, kind, k_max=30, nlist=20, nprobe=20, pq_m=8, use_gpu=False)
    approx = knn.search_neighbours(index, vectors, rows, 30)
    recall = knn.neighbour_recall(approx, exact, 30)
    # every list probed: IVF is exact; HNSW with efSearch 60 nearly; PQ loses some precision
    assert recall >= {"ivf": 1.0, "hnsw": 0.95, "ivfpq": 0.5}[kind], (description, recall)


def window_setup(points=60, k_max=8):
    vectors = arc(points)
    windows = T.Windows(k_pos=5, k_hard=k_max, c_pos=5, c_hard=2, c_easy=3)
    index, _ = knn.build_index(vectors, "flat", k_max=k_max, use_gpu=False)
    return vectors, windows, index


def test_the_easy_negative_list_holds_each_query_width_times_in_a_seeded_order():
    queries = np.arange(0, 60, 3)
    window = T.EasyWindow.shuffled(queries, 6, seed=0)
    assert window.width == 6 and np.array_equal(np.sort(window.papers), np.repeat(queries, 6))
    assert not np.array_equal(window.papers, np.repeat(queries, 6))
    assert np.array_equal(window.papers, T.EasyWindow.shuffled(queries, 6, seed=0).papers)
    assert not np.array_equal(window.papers, T.EasyWindow.shuffled(queries, 6, seed=1).papers)


def test_window_easy_negatives_are_the_first_entries_outside_the_neighbourhood_the_query_allowed():
    vectors, windows, index = window_setup()
    rows = np.arange(8)
    neighbours = knn.search_neighbours(index, vectors, rows, 8)
    # query i reads entries i..i+5. On the arc query 0's 8 nearest are rows 1-8, query 1's rows 0 and 2-8
    papers = np.array([1, 2, 0, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49])
    window = T.EasyWindow(queries=rows, papers=papers, width=6)
    batch = T.scincl_batch(rows, neighbours, windows, np.arange(60), 0, easy_window=window, distinct=False)
    easy = batch.negative.reshape(8, 5)[:, :3]
    assert easy[0].tolist() == [0, 40, 41]  # passes over 1 and 2 and takes 0: the query is not its own neighbour
    assert easy[1].tolist() == [40, 41, 42]  # 2 and 0 are query 1's neighbours
    assert easy[3].tolist() == [40, 41, 42] and easy[7].tolist() == [44, 45, 46]  # the first three of the window
    assert batch.counts["easy_negative_is_query"] == 1 and batch.counts["easy_window_overruns"] == 0


def test_window_reads_past_a_short_window_and_counts_it():
    vectors, windows, index = window_setup()
    rows = np.arange(3)
    neighbours = knn.search_neighbours(index, vectors, rows, 8)
    # query 0's window [3, 4, 5, 6, 50, 51] holds two entries outside its 8 nearest: the third comes after it
    papers = np.array([3, 4, 5, 6, 50, 51, 52, 53, 54])
    window = T.EasyWindow(queries=rows, papers=papers, width=6)
    batch = T.scincl_batch(rows, neighbours, windows, np.arange(60), 0, easy_window=window, distinct=False)
    assert batch.negative.reshape(3, 5)[0, :3].tolist() == [50, 51, 52]
    assert batch.counts["easy_window_overruns"] == 1  # queries 1 and 2 find three in [4, 5, 6, 50, 51, 52], [5, ...]
    # distinct: a repeated entry is passed over, as the neighbours are
    window = T.EasyWindow(queries=rows, papers=np.array([50, 50, 51, 52, 53, 54, 55, 56]), width=6)
    easy = T.scincl_batch(rows, neighbours, windows, np.arange(60), 0, easy_window=window).negative.reshape(3, 5)
    assert easy[0, :3].tolist() == [50, 51, 52]
    easy = T.scincl_batch(rows, neighbours, windows, np.arange(60), 0, easy_window=window, distinct=False)
    assert easy.negative.reshape(3, 5)[0, :3].tolist() == [50, 50, 51]


def test_window_easy_negatives_do_not_depend_on_the_batch_size():
    vectors, windows, index = window_setup()
    rows = np.arange(0, 60, 2)
    window = T.EasyWindow.shuffled(rows, 6, seed=3)

    def mine(batch):
        parts = [
            T.scincl_batch(chunk, knn.search_neighbours(index, vectors, chunk, 8), windows, np.arange(60), 3,
                           easy_window=window).negative
            for chunk in T.batches(rows, batch)
        ]  # fmt: skip
        return np.concatenate(parts)

    assert np.array_equal(mine(len(rows)), mine(7))


def test_a_list_without_enough_easy_negatives_is_one_clear_error():
    vectors, windows, index = window_setup(k_max=10)
    rows = np.array([0, 1, 2])  # each query's 10 nearest hold the other two: the list has one entry left
    neighbours = knn.search_neighbours(index, vectors, rows, 10)
    window = T.EasyWindow.shuffled(rows, 6, seed=0)
    with pytest.raises(CiteflowError, match="easy_negatives_sampling=uniform"):
        T.scincl_batch(rows, neighbours, windows, np.arange(60), 0, easy_window=window)
    with pytest.raises(ValueError, match="exclude each other"):
        T.scincl_batch(rows, neighbours, windows, np.arange(60), 0, easy_window=window, easy_from=rows)


def test_specter_parallel_rule_needs_three_candidates():
    # 0 cites 1, which cites 2: one citation, one citation of a citation. 3 cites 4 and 5; 5 cites 6.
    cites = graph(10, [(0, 1), (1, 2), (3, 4), (3, 5), (5, 6), (7, 8)])
    queries = np.array([0, 3, 7])
    assert S.specter_eligible(queries, cites, "generator").tolist() == [True, True, False]
    assert S.specter_eligible(queries, cites, "parallel").tolist() == [False, True, False]
    # the queries both rules keep get the same triplets under either
    a = S.specter_batch(np.array([3]), cites, np.arange(10), 5, 2, 3, seed=0)
    b = S.specter_batch(np.array([3]), cites, np.arange(10), 5, 2, 3, seed=0, rule="parallel")
    assert np.array_equal(a.negative, b.negative) and np.array_equal(a.positive, b.positive)
    assert S.specter_batch(np.array([0]), cites, np.arange(10), 5, 2, 3, seed=0).hard.tolist() == [True] + [False] * 4
    with pytest.raises(ValueError, match="'parallel' rule"):
        S.specter_batch(np.array([0]), cites, np.arange(10), 5, 2, 3, seed=0, rule="parallel")
