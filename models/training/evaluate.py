"""Evaluation while the encoder trains: the held-out slice of the triplets (models/training/heldout.py) and, where
the run gives it, a sample of the benchmark's val split, scored every `eval_every` steps.

- `triplet_metrics(query, positive, negative, queries, distance)`: triplet accuracy (the positive nearer than the
  negative, as sentence-transformers' TripletEvaluator counts it) and MRR of each triplet's positive among every
  positive and negative of the slice (the query's own other positives left out), from the vectors: pure.
- `Evaluator`: embeds the slice's papers (and the val sample's) with the model being trained, in eval mode
  without gradients, at the training length, and returns one curve row `{step, heldout_accuracy, heldout_mrr,
  [val_<task>_<metric>, val_mean], score, seconds}`; it writes nothing itself.
- `CurveLog`: the rows as JSON lines beside the step log, cut back to a checkpoint when a run resumes, and the best
  row so far (`score`: the val sample's mean of its four numbers where there is one, else the held-out MRR).

The curve is for comparing steps with each other: papers are cut at the training length and the val sample is a
sample, so its numbers are not the benchmark stage's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

# the val numbers scored while training: the ranking tasks SciDocs' val split has, with their metrics
VAL_NUMBERS = (("cite", "map"), ("cite", "ndcg"), ("cocite", "map"), ("cocite", "ndcg"))


def triplet_metrics(vectors, triplets: np.ndarray, distance: str) -> dict[str, float]:
    """Triplet accuracy and MRR of the held-out triplets: `vectors` (papers, d) of their distinct papers,
    `triplets` (n, 3) the rows of (query, positive, negative) in it; `distance`: `l2` or `cosine` (the geometry
    the loss trains).

    Accuracy: the share of triplets whose positive is nearer to the query than its negative. MRR: each triplet's
    positive ranked among every distinct positive and negative of the slice (ties counted against it), the
    query's other positives and the query itself left out: they are not wrong answers."""
    vectors = np.asarray(vectors, dtype=np.float64)
    triplets = np.asarray(triplets)
    if distance == "cosine":
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    def near(a, b):  # higher is nearer: every row of a against every row of b
        if distance == "cosine":
            return a @ b.T
        squared = (a * a).sum(1)[:, None] - 2 * a @ b.T + (b * b).sum(1)[None, :]
        return -np.sqrt(np.maximum(squared, 0.0))

    query, positive, negative = (vectors[triplets[:, k]] for k in range(3))
    own_positive = np.diagonal(near(query, positive))
    accuracy = float(np.mean(own_positive > np.diagonal(near(query, negative))))
    candidates = np.unique(triplets[:, 1:])
    column = {int(paper): j for j, paper in enumerate(candidates)}
    scores = near(query, vectors[candidates])
    excluded = np.zeros(scores.shape, dtype=bool)
    for i, q in enumerate(triplets[:, 0]):
        mine = triplets[triplets[:, 0] == q, 1]  # this triplet's positive and the query's others
        excluded[i, [column[int(p)] for p in mine]] = True
        if int(q) in column:
            excluded[i, column[int(q)]] = True
    ranks = 1 + ((scores >= own_positive[:, None] - 1e-12) & ~excluded).sum(1)
    return {"heldout_accuracy": accuracy, "heldout_mrr": float(np.mean(1.0 / ranks))}


def val_metrics(vectors: dict[str, np.ndarray], qrels: dict[str, dict[str, dict[str, int]]]) -> dict[str, float]:
    """MAP and nDCG (x 100) of each val task, ranked by -L2 as SciDocs ranks (`citeflow.evaluation.scidocs`), and
    their mean."""
    from citeflow.ranking import evaluate_run, l2_run

    out: dict[str, float] = {}
    for task, judged in qrels.items():
        run, _ = l2_run(judged, vectors)
        result = evaluate_run(run, judged, ("map", "ndcg"))
        for metric in ("map", "ndcg"):
            out[f"val_{task}_{metric}"] = 100 * float(result[metric])
    if out:
        out["val_mean"] = float(np.mean(list(out.values())))
    return out


class Evaluator:
    """Scores the model being trained on the held-out triplets (token-store rows `rows`, (n, 3)) and, with `val`
    ({"texts": {paper: text}, "qrels": {task: {query: {paper: rel}}}}), the val sample, tokenised here at
    `max_length`."""

    def __init__(
        self,
        store,
        rows,
        *,
        pad_id,
        device,
        precision,
        pooling,
        normalize,
        distance,
        tokenizer=None,
        max_length=512,
        val=None,
        batch_size=64,
    ):
        self.store, self.rows = store, np.asarray(rows)
        self.pad_id, self.device, self.precision = pad_id, device, precision
        self.pooling, self.normalize, self.distance, self.batch_size = pooling, normalize, distance, batch_size
        self.papers, self.index = np.unique(self.rows, return_inverse=True)
        self.index = self.index.reshape(self.rows.shape)
        self.val = None
        if val and val.get("qrels"):
            if tokenizer is None:
                raise ValueError("scoring the val split while training needs the tokenizer")
            ids = list(val["texts"])
            encoded = tokenizer([val["texts"][p] for p in ids], truncation=True, max_length=max_length)["input_ids"]
            self.val = (ids, [np.asarray(e, dtype=np.int64) for e in encoded], val["qrels"])

    def _vectors(self, model, sequences: list[np.ndarray]) -> np.ndarray:
        """Pooled float32 vectors of token sequences, in batches of similar length."""
        import torch

        from citeflow.models.encoder.model import pool
        from citeflow.models.training.step import autocast_settings
        from citeflow.models.training.token_batches import collate

        out = np.empty((len(sequences), model.config.hidden_size), dtype=np.float32)
        order = np.argsort([-len(s) for s in sequences], kind="stable")
        with torch.no_grad(), torch.autocast(**autocast_settings(self.precision, self.device)):
            for lo in range(0, len(order), self.batch_size):
                part = order[lo : lo + self.batch_size]
                ids, mask = collate([sequences[i] for i in part], self.pad_id)
                ids, mask = ids.to(self.device), mask.to(self.device)
                hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
                out[part] = pool(hidden.float(), mask, self.pooling, self.normalize).cpu().numpy()
        return out

    def __call__(self, model, step: int) -> dict[str, Any]:
        """One curve row for the model as it is after `step` optimizer steps (0: before training)."""
        started = time.monotonic()
        was_training = model.training
        model.eval()
        try:
            row: dict[str, Any] = {"step": step}
            if len(self.rows):
                vectors = self._vectors(model, [self.store.get(int(r)) for r in self.papers])
                row |= triplet_metrics(vectors, self.index, self.distance)
            if self.val is not None:
                ids, sequences, qrels = self.val
                vectors = dict(zip(ids, self._vectors(model, sequences), strict=True))
                row |= val_metrics(vectors, qrels)
        finally:
            model.train(was_training)
        row["score"] = row.get("val_mean", row.get("heldout_mrr"))
        row["seconds"] = time.monotonic() - started
        return row


class CurveLog:
    """The curve rows as JSON lines at `path` (rank 0 writes), and the best one so far (highest `score`, a trained
    step: step 0 is the untrained model, shown on the curve but never kept)."""

    def __init__(self, path: str | Path, resumed_at: int) -> None:
        self.path = Path(path)
        rows = []
        if resumed_at and self.path.is_file():
            rows = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
        self.rows = [r for r in rows if r["step"] <= resumed_at]
        self.path.write_text("".join(json.dumps(r) + "\n" for r in self.rows))

    def has(self, step: int) -> bool:
        return any(r["step"] == step for r in self.rows)

    def best(self) -> dict[str, Any] | None:
        trained = [r for r in self.rows if r["step"] > 0 and r.get("score") is not None]
        return max(trained, key=lambda r: (r["score"], r["step"])) if trained else None

    def improves(self, row: dict[str, Any]) -> bool:
        """Whether `row` (not added yet) would be the best trained step (a later step wins a tie)."""
        best = self.best()
        return row["step"] > 0 and row.get("score") is not None and (best is None or row["score"] >= best["score"])

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        with open(self.path, "a") as fh:
            fh.write(json.dumps(row) + "\n")


def eval_steps(total: int, every: int, start: int = 0) -> list[int]:
    """The steps evaluated after `start`: every `every`-th and the last (0: only the last)."""
    steps = list(range(every, total, every)) if every else []
    return [s for s in [*steps, total] if s > start]
