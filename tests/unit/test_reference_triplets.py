"""citeflow's SciNCL and SPECTER sampling against what the reference samplers themselves produced.

The fixture `triplets.json` (in `../shared/reference/triplets/` beside the checkout, or the folder named by
$CITEFLOW_TRIPLET_REFERENCE) is the output of allenai/specter's `TripletGenerator` and malteos/scincl's
`worker_generate_triples`, run unchanged on small known inputs (commits in the file). Output of outside code is not
kept in this repository: without the fixture these tests skip. Their draws are random, citeflow's are hashed: the
comparison is of everything that is not a coin toss (which queries give triplets, how many of each kind in which
order, positives and hard negatives in rank order) and of the sets the random draws come from.

Two reference rules are options of citeflow's (docs/parity-samplers.md), each compared here with the reference's
own output: SPECTER's parallel sampler (`specter_query_rule="parallel"`, the fixture's `specter.parallel`) and
SciNCL's easy-negative windows (`EasyWindow`, the fixture's `scincl.runs` and `summary_all_queries`).
"""

import json
import os
import random
from pathlib import Path

import numpy as np
import pytest

from citeflow.models.triplets import knn as knn
from citeflow.models.triplets import mining as T
from citeflow.models.triplets import specter as S
from tests.support.shared import missing

_FIXTURE = (
    Path(
        os.environ.get("CITEFLOW_TRIPLET_REFERENCE")
        or Path(__file__).resolve().parents[3] / "shared" / "reference" / "triplets"
    )
    / "triplets.json"
)
if not _FIXTURE.is_file():
    missing(f"reference sampler output not found at {_FIXTURE}")
REFERENCE = json.loads(_FIXTURE.read_text())


# (citeflow's rule, the fixture's record of the reference file it follows)
SPECTER_RULES = {
    "generator": REFERENCE["specter"]["per_query"],  # TripletGenerator, triplet_sampling.py
    "parallel": REFERENCE["specter"]["parallel"]["per_query"],  # triplet_sampling_parallel.py
}
_SPECTER_SEEN: dict[str, tuple] = {}


def specter_seen(rule: str):
    """citeflow's SPECTER triplets under `rule` on the fixture's graph, over as many seeds as the reference ran."""
    if rule in _SPECTER_SEEN:
        return _SPECTER_SEEN[rule]
    ref = REFERENCE["specter"]
    edges = np.array(ref["edges"])
    cites = S.CitationIndex.from_edges(edges[:, 0], edges[:, 1], ref["pool"])
    pool_ids = np.arange(1000, 1000 + ref["pool"])
    queries = np.array([int(q) - 1000 for q in sorted(ref["per_query"])])
    eligible = S.specter_eligible(queries, cites, rule)
    seen = {str(1000 + q): {"kinds": set(), "positives": set(), "hard": set(), "easy": set()} for q in queries}
    for seed in range(ref["runs"]):
        batch = S.specter_batch(queries[eligible], cites, pool_ids, 5, 2, 3, seed=seed, rule=rule)
        for i, q in enumerate(queries[eligible]):
            s, rows = seen[str(1000 + q)], slice(5 * i, 5 * i + 5)
            s["kinds"].add(tuple("hard" if h else "easy" for h in batch.hard[rows]))
            s["positives"] |= {str(p) for p in pool_ids[batch.positive[rows]]}
            for negative, hard in zip(pool_ids[batch.negative[rows]], batch.hard[rows], strict=True):
                s["hard" if hard else "easy"].add(str(negative))
    _SPECTER_SEEN[rule] = queries, eligible, seen
    return _SPECTER_SEEN[rule]


@pytest.mark.parametrize("rule", sorted(SPECTER_RULES))
def test_specter_gives_triplets_to_the_same_queries(rule):
    queries, eligible, _ = specter_seen(rule)
    ref = SPECTER_RULES[rule]
    assert [ref[str(1000 + q)]["triplets"] for q in queries] == [[5] if e else [0] for e in eligible]
    assert not eligible.all()  # the query without a citation of a citation is skipped, as by the reference


def test_the_two_specter_files_disagree_on_some_queries_and_so_do_citeflows_rules():
    # not vacuous: the parallel rule is a rule of its own, on the reference's output and on citeflow's
    counts = {rule: [ref[q]["triplets"] for q in sorted(ref)] for rule, ref in SPECTER_RULES.items()}
    assert counts["generator"] != counts["parallel"]
    assert not np.array_equal(specter_seen("generator")[1], specter_seen("parallel")[1])


@pytest.mark.parametrize("rule", sorted(SPECTER_RULES))
def test_specter_triplet_kinds_positives_and_negatives_are_the_references(rule):
    queries, eligible, seen = specter_seen(rule)
    for q in queries[eligible]:
        ref, ours = SPECTER_RULES[rule][str(1000 + q)], seen[str(1000 + q)]
        assert sorted(list(k) for k in ours["kinds"]) == ref["kinds"], q
        assert sorted(ours["positives"]) == ref["positives"], q
        assert sorted(ours["hard"]) == ref["hard_negatives"], q
        assert sorted(ours["easy"]) == ref["easy_negatives"], q


def scincl_setup():
    """The fixture's SciNCL vectors, windows and kNN lists of every point (all points are queries)."""
    ref = REFERENCE["scincl"]
    x = np.random.default_rng(ref["vector_seed"]).normal(size=(ref["points"], ref["dim"]))
    vectors = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    windows = T.Windows(k_pos=ref["windows"]["positive_ranks"][1], k_hard=ref["windows"]["hard_ranks"][1])
    everyone = np.arange(ref["points"])
    index, _ = knn.build_index(vectors, "flat", k_max=windows.k_max, use_gpu=False)
    neighbours = knn.search_neighbours(index, vectors, everyone, windows.k_max)
    return windows, everyone, neighbours, np.arange(1000, 1000 + ref["points"])


def test_scincl_positives_hard_negatives_and_their_pairing_are_the_references():
    ref = REFERENCE["scincl"]
    windows, everyone, all_neighbours, pool_ids = scincl_setup()
    recorded = len(ref["runs"][0]) // 5
    rows = np.arange(recorded)
    neighbours = all_neighbours[rows]
    for run, triplets in enumerate(ref["runs"]):
        reference = np.array(triplets, dtype=np.int64).reshape(recorded, 5, 3)
        # every point is a query: SciNCL's random list is the whole pool here
        batch = T.scincl_batch(rows, neighbours, windows, pool_ids, seed=run, easy_from=everyone)
        positive = pool_ids[batch.positive].reshape(recorded, 5)
        negative = pool_ids[batch.negative].reshape(recorded, 5)
        assert np.array_equal(reference[:, :, 0], np.repeat(pool_ids[rows], 5).reshape(recorded, 5))
        assert np.array_equal(positive, reference[:, :, 1])  # ranks 4-8 in rank order, triplet by triplet
        assert np.array_equal(negative[:, 3:], reference[:, :, 2][:, 3:])  # the last two take ranks 19, 20
        assert batch.hard.reshape(recorded, 5).tolist() == [[False] * 3 + [True] * 2] * recorded
        knn = pool_ids[neighbours]
        for i in range(recorded):
            # the first three are easy: outside the 20 nearest, for the reference and for citeflow
            assert not set(reference[i, :3, 2]) & set(knn[i]) and not set(negative[i, :3]) & set(knn[i])


def references_shuffled_list(run: int, points: int, width: int) -> np.ndarray:
    """The list SciNCL's sampler read in run `run`: worker_generate_triples calls transformers' set_seed(run),
    which seeds Python's `random`, and nothing draws from it before init_randoms shuffles the queries x width
    (malteos/scincl gdt/triples_miner/worker.py line 34; sampling.py lines 78-80). The shuffle depends on the
    list's length only, so the positions stand for the paper ids."""
    random.seed(run)
    papers = list(range(points)) * width
    random.shuffle(papers)
    return np.array(papers)


def easy_summary(easy: np.ndarray) -> dict[str, int]:
    """What the fixture's `summary_all_queries` counts, from (queries, c_easy) easy negatives of queries 0..n-1."""
    n = len(easy)
    chosen = set(easy.ravel().tolist())
    rows = [set(e) for e in easy.tolist()]
    return {
        "consecutive_queries_sharing_an_easy_negative": sum(
            bool(a & b) for a, b in zip(rows[:-1], rows[1:], strict=True)
        ),
        "distinct_easy_negatives": len(chosen),
        "easy_negative_is_the_query": int((easy == np.arange(n)[:, None]).any(axis=1).sum()),
        "queries_never_an_easy_negative": n - len(chosen & set(range(n))),
        "queries_with_a_repeated_easy_negative": sum(len(r) < easy.shape[1] for r in rows),
    }


def window_batch(window, windows, everyone, neighbours, pool_ids, distinct):
    return T.scincl_batch(everyone, neighbours, windows, pool_ids, seed=0, easy_window=window, distinct=distinct)


def test_scincl_window_easy_negatives_are_the_references_given_its_shuffled_list():
    ref = REFERENCE["scincl"]
    windows, everyone, neighbours, pool_ids = scincl_setup()
    width = 2 * ref["arguments"]["easy_negatives_count"]  # random_count: 2 x the random_without_knn count
    recorded = len(ref["runs"][0]) // 5
    for run, triplets in enumerate(ref["runs"]):
        window = T.EasyWindow(queries=everyone, papers=references_shuffled_list(run, len(everyone), width), width=width)
        batch = window_batch(window, windows, everyone, neighbours, pool_ids, distinct=False)
        ours = np.stack([pool_ids[batch.query], pool_ids[batch.positive], pool_ids[batch.negative]], axis=1)
        # every triplet of the recorded queries, easy negatives included, in the reference's order
        assert ours[: 5 * recorded].tolist() == np.array(triplets, dtype=np.int64).tolist(), run
        easy = batch.negative.reshape(len(everyone), 5)[:, :3]
        assert easy_summary(easy) == ref["summary_all_queries"][run], run
        assert batch.counts["easy_negative_is_query"] == ref["summary_all_queries"][run]["easy_negative_is_the_query"]
        assert batch.counts["easy_window_overruns"] == 0  # the reference raises where a window runs short


def test_scincl_window_with_distinct_negatives_changes_only_the_references_repeats():
    ref = REFERENCE["scincl"]
    windows, everyone, neighbours, pool_ids = scincl_setup()
    changed = 0
    for run in range(len(ref["runs"])):
        window = T.EasyWindow(queries=everyone, papers=references_shuffled_list(run, len(everyone), 6), width=6)
        plain = window_batch(window, windows, everyone, neighbours, pool_ids, distinct=False).negative.reshape(-1, 5)
        distinct = window_batch(window, windows, everyone, neighbours, pool_ids, distinct=True).negative.reshape(-1, 5)
        repeats = np.array([len(set(e)) < 3 for e in plain[:, :3].tolist()])
        assert repeats.sum() == ref["summary_all_queries"][run]["queries_with_a_repeated_easy_negative"]
        assert np.array_equal(plain[~repeats], distinct[~repeats])
        assert all(len(set(e)) == 3 for e in distinct[:, :3].tolist())
        changed += int(repeats.sum())
    assert changed > 0


def test_scincl_window_with_citeflows_own_list_has_the_references_structure():
    ref = REFERENCE["scincl"]
    windows, everyone, neighbours, pool_ids = scincl_setup()
    summaries = ref["summary_all_queries"]
    low = min(s["queries_never_an_easy_negative"] for s in summaries)
    high = max(s["queries_never_an_easy_negative"] for s in summaries)
    sharing = min(s["consecutive_queries_sharing_an_easy_negative"] for s in summaries)
    ours, uniform = [], []
    for seed in range(len(summaries)):
        window = T.EasyWindow.shuffled(everyone, 6, seed)
        easy = window_batch(window, windows, everyone, neighbours, pool_ids, distinct=False).negative.reshape(-1, 5)
        ours.append(easy_summary(easy[:, :3]))
        drawn = T.scincl_batch(everyone, neighbours, windows, pool_ids, seed, easy_from=everyone, distinct=False)
        uniform.append(easy_summary(drawn.negative.reshape(-1, 5)[:, :3]))
    for s in ours:
        # about a third is never chosen (the reference: 330-342 of 1000), consecutive queries share one
        assert low - 25 <= s["queries_never_an_easy_negative"] <= high + 25, s
        assert s["consecutive_queries_sharing_an_easy_negative"] >= sharing - 5, s
    # the query may be its own easy negative, and a window may repeat one, as in the reference
    assert sum(s["easy_negative_is_the_query"] for s in ours) > 0
    assert sum(s["queries_with_a_repeated_easy_negative"] for s in ours) > 0
    for s in uniform:  # the default, uniform draws, has neither property
        assert s["queries_never_an_easy_negative"] < low / 2 and s["consecutive_queries_sharing_an_easy_negative"] < 100
        assert s["easy_negative_is_the_query"] == 0
