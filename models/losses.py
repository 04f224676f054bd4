"""The losses the trainer can use, each of (query, positive, negative) vectors, one row per triplet.

`triplet` is the reference's (docs/reference.md §5); `triplet_cosine` and `in_batch` are the named deviations
for a model trained for cosine similarity (docs/train_encoder.md).
"""

from __future__ import annotations

from typing import Protocol


class LossSettings(Protocol):
    """What `loss_of` reads (a `models.train_encoder.TrainSpec` has it)."""

    loss: str
    margin: float
    scale: float


def triplet_loss(query, positive, negative, margin: float):
    """Mean of max(‖q − p‖₂ − ‖q − n‖₂ + margin, 0) over the rows (docs/reference.md §5; torch's
    TripletMarginLoss, p=2)."""
    import torch.nn.functional as F

    return F.triplet_margin_loss(query, positive, negative, margin=margin, p=2)


def cosine_triplet_loss(query, positive, negative, margin: float):
    """Mean of max(d(q, p) − d(q, n) + margin, 0) with d = 1 − cos: the triplet loss in the geometry a model
    trained for cosine similarity is used in (sentence-transformers' TripletLoss with its cosine distance)."""
    import torch.nn.functional as F

    far = lambda a, b: 1 - F.cosine_similarity(a, b)  # noqa: E731
    return F.relu(far(query, positive) - far(query, negative) + margin).mean()


def in_batch_loss(query, positive, negative, scale: float):
    """Cross-entropy of each query's positive among every positive and negative of the batch, by `scale` x
    cosine similarity: the other rows' papers are its easy negatives, its own negative a hard one
    (sentence-transformers' MultipleNegativesRankingLoss with hard negatives). The trainer hands it the whole
    optimizer step's rows (`STEP_WIDE`), however many micro-batches the step is made of."""
    import torch
    import torch.nn.functional as F

    q = F.normalize(query, dim=-1)
    candidates = F.normalize(torch.cat([positive, negative]), dim=-1)
    scores = scale * q @ candidates.T
    return F.cross_entropy(scores, torch.arange(len(q), device=q.device))


# Losses whose rows compete with each other: the step's loss is one loss over all its micro-batches' rows
# (`models.train_step.cached_step_gradients`), not a sum of the micro-batches' own losses.
STEP_WIDE = frozenset({"in_batch"})


def loss_of(spec: LossSettings):
    """The loss of (query, positive, negative) vectors the spec names."""
    if spec.loss == "triplet":
        return lambda q, p, n: triplet_loss(q, p, n, spec.margin)
    if spec.loss == "triplet_cosine":
        return lambda q, p, n: cosine_triplet_loss(q, p, n, spec.margin)
    if spec.loss == "in_batch":
        return lambda q, p, n: in_batch_loss(q, p, n, spec.scale)
    raise SystemExit(f"unknown loss {spec.loss!r}: triplet, triplet_cosine or in_batch")
