"""Evaluation while training (models/training/evaluate.py, heldout.py) and the time-left estimate that counts it
(models/training/plan.py `time_left`, citeflow/progress.py), on inputs whose answers are worked by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from citeflow.models.training.evaluate import CurveLog, eval_steps, triplet_metrics
from citeflow.models.training.heldout import held_out
from citeflow.models.training.plan import time_left
from citeflow.progress import Progress


def test_whole_queries_are_held_out_until_the_count_is_reached():
    queries = np.repeat(np.arange(10), [3, 2, 1, 4, 2, 3, 1, 2, 2, 4])  # 24 triplets: a third is 8
    mask = held_out(queries, 4, seed=0)
    chosen = set(queries[mask].tolist())
    # every triplet of a chosen query is held out, none of another's, and at least 4 of them
    assert all(mask[queries == q].all() for q in chosen) and not mask[~np.isin(queries, list(chosen))].any()
    assert mask.sum() >= 4 and len(chosen) < 4
    assert (held_out(queries, 4, seed=0) == mask).all()  # seeded
    assert not held_out(queries, 0, seed=0).any()
    # asking for everything holds out whole queries up to a third of the triplets (8 of 24), no further
    everything = held_out(queries, 100, seed=0)
    assert 4 < everything.sum() <= 8 and all(everything[queries == q].all() for q in set(queries[everything].tolist()))
    # a query bigger than the third is never held out; of two queries, one is always left to train on
    assert not held_out(np.array([1, 1, 1, 1, 2]), 1, seed=0)[:4].any()
    pair = np.array([1, 2, 3, 4, 5, 6])
    assert held_out(pair, 100, seed=0).sum() == 2 and held_out(np.array([1, 2]), 100, seed=0).sum() == 0


def test_triplet_accuracy_and_mrr_by_hand():
    # papers on a line (l2): 0 is the query of both triplets; papers 1 (at 1), 2 (at 3), 3 (at 2), 4 (at 10)
    vectors = np.array([[0.0], [1.0], [3.0], [2.0], [10.0]])
    triplets = np.array([[0, 1, 4], [0, 2, 3]])
    got = triplet_metrics(vectors, triplets, "l2")
    # triplet 1: positive 1 nearer than negative 4; triplet 2: positive 2 (3) farther than negative 3 (2)
    assert got["heldout_accuracy"] == 0.5
    # candidates 1, 2, 3, 4; the query's positives 1 and 2 are not wrong answers: positive 1 ranks first, positive
    # 2 behind negative 3 only: MRR (1 + 1/2) / 2
    assert got["heldout_mrr"] == pytest.approx(0.75)
    # cosine: the vectors' directions; the negative pointing the same way as the query ranks a positive second
    vectors = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [5.0, 0.0]])
    got = triplet_metrics(vectors, np.array([[0, 1, 2], [3, 2, 1]]), "cosine")
    # q0: positive 1 above negative 2 (accuracy), and first among 1 and 2 -> 1; q3 (same direction as q0):
    # positive 2 (orthogonal) below negative 1 -> rank 2
    assert got == pytest.approx({"heldout_accuracy": 0.5, "heldout_mrr": 0.75})


def test_the_curve_log_keeps_what_a_resumed_run_kept_and_names_the_best_trained_step(tmp_path):
    path = tmp_path / "eval.jsonl"
    curve = CurveLog(path, resumed_at=0)
    for step, score in ((0, 0.9), (4, 0.5), (8, 0.7), (12, 0.7)):
        row = {"step": step, "score": score}
        assert curve.improves(row) == (step in (4, 8, 12))  # step 0, the untrained model, is never kept
        curve.add(row)
    assert curve.best()["step"] == 12  # a tie goes to the later step
    resumed = CurveLog(path, resumed_at=8)  # a run resumed from the checkpoint of step 8 forgets later rows
    assert [r["step"] for r in resumed.rows] == [0, 4, 8] and resumed.best()["step"] == 8
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [0, 4, 8]
    assert not resumed.has(12) and resumed.has(8)
    assert CurveLog(path, resumed_at=0).rows == []  # a fresh start begins a fresh curve


def test_evaluated_steps_are_every_nth_and_the_last():
    assert eval_steps(420, 105) == [105, 210, 315, 420]
    assert eval_steps(420, 100) == [100, 200, 300, 400, 420]
    assert eval_steps(10, 0) == [10]
    assert eval_steps(420, 105, start=210) == [315, 420]


def test_time_left_counts_the_steps_at_their_pace_and_the_evaluations_apart():
    assert time_left([], [], 10, 1) is None
    # the first step pays for warming up and is left out: 2 s a step; 3 evaluations of 30 s still to come
    assert time_left([9.0, 2.0, 2.0], [30.0], steps_left=100, evals_left=3) == pytest.approx(200 + 90)
    assert time_left([4.0], [], steps_left=5, evals_left=2) == pytest.approx(20)  # one step: it is all there is


def test_a_progress_line_says_the_callers_estimate():
    lines: list[str] = []
    clock = iter([0.0, 60.0, 60.0]).__next__
    progress = Progress("train_encoder", total=10, unit="step", mode="lines", emit=lines.append, every=30, clock=clock)
    progress.update(2, left=125.0, loss=0.5)
    assert lines == ["train_encoder progress: step 2/10 (20%), 0.0 steps/s, loss 0.500, 2m05s left"]
