"""The losses the trainer can use, each of (query, positive, negative) vectors, one row per triplet.

`triplet` is the reference's (docs/reference.md §5); `triplet_cosine` and `in_batch` are the named deviations
for a model trained for cosine similarity (docs/train_encoder.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol


class LossSettings(Protocol):
    """What `loss_of` reads (a `citeflow.models.training.train.TrainSpec` has it), as read-only properties: the
    fields of a frozen dataclass satisfy those, not writable attributes."""

    @property
    def loss(self) -> str: ...
    @property
    def margin(self) -> float: ...
    @property
    def scale(self) -> float: ...


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


@dataclass(frozen=True)
class Loss:
    """A loss by name: `of(spec)` builds the function of (query, positive, negative) vectors. `step_wide`: its
    rows compete with each other, so the step's loss is one loss over all its micro-batches' rows
    (`citeflow.models.training.step.cached_step_gradients`), not a sum of the micro-batches' own losses."""

    name: str
    of: Callable[[LossSettings], Callable]
    step_wide: bool = False
    distance: str = "cosine"  # the geometry it trains, in which the held-out triplets are scored while training


# The losses by name (train_encoder.loss): adding one is one function above and one entry here.
LOSSES: dict[str, Loss] = {
    loss.name: loss
    for loss in (
        Loss("triplet", lambda spec: partial(triplet_loss, margin=spec.margin), distance="l2"),
        Loss("triplet_cosine", lambda spec: partial(cosine_triplet_loss, margin=spec.margin)),
        Loss("in_batch", lambda spec: partial(in_batch_loss, scale=spec.scale), step_wide=True),
    )
}
STEP_WIDE = frozenset(name for name, loss in LOSSES.items() if loss.step_wide)


def loss_of(spec: LossSettings):
    """The loss of (query, positive, negative) vectors the spec names."""
    if spec.loss not in LOSSES:
        raise SystemExit(f"unknown loss {spec.loss!r}: {', '.join(LOSSES)}")
    return LOSSES[spec.loss].of(spec)
