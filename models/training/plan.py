"""Which triplets each optimizer step of the encoder trainer trains on, and the log row each step writes.

Each epoch's order is a pure function of (seed, epoch, triplet lengths) (`epoch_order`), so step s trains on the
same triplets in any number of processes; `StepPlan` cuts it into the optimizer steps, each process's share and
its micro-batches, and `StepLog` writes the steps' rows once their losses are read back from the device.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

# `length_pieces` 0 on a CPU: padding costs compute there; a GPU runs small parts no faster than one padded part
CPU_LENGTH_PIECES = 3
# `pad_to_multiple` 0 on a GPU: a new batch shape every step costs more than the padding saves (docs/performance.md)
GPU_PAD_MULTIPLE = 64


class PlanSettings(Protocol):
    """What the plan reads (a `citeflow.models.training.train.TrainSpec` has it), as read-only properties: the
    fields of a frozen dataclass satisfy those, not writable attributes."""

    @property
    def epochs(self) -> int: ...
    @property
    def max_steps(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def per_device_batch(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def length_grouping(self) -> bool: ...
    @property
    def length_group_batches(self) -> int: ...
    @property
    def length_pieces(self) -> int: ...
    @property
    def pad_to_multiple(self) -> int: ...


def steps_per_epoch(triplets: int, batch_size: int) -> int:
    return triplets // batch_size


def epoch_order(spec: PlanSettings, epoch: int, lengths: np.ndarray) -> np.ndarray:
    """The epoch's triplet order: a pure function of (seed, epoch, triplet lengths), the same in every process.

    A seeded permutation; with `length_grouping`, regrouped by length
    (`citeflow.models.training.token_batches.group_by_length`) and
    the batches of each mega-batch shuffled with a generator of their own, seeded by (seed, epoch).
    """
    import torch

    from citeflow.models.training.token_batches import group_by_length, shuffle_groups

    generator = torch.Generator().manual_seed(spec.seed * 1000 + epoch)
    order = torch.randperm(len(lengths), generator=generator).numpy()
    if spec.length_grouping:
        grouped = group_by_length(order, lengths, spec.batch_size, spec.length_group_batches)
        rng = np.random.default_rng([spec.seed, epoch])
        order = shuffle_groups(grouped, spec.batch_size, spec.length_group_batches, rng)
    return order


@dataclass
class StepPlan:
    """Which triplets each optimizer step trains on: `total` steps from `start`, each of `accumulation`
    micro-batches of `per_device` triplets per process, in each epoch's order (`epoch_order`)."""

    spec: PlanSettings
    rows: np.ndarray  # (triplets, 3): rows of the token store
    paper_lengths: np.ndarray  # (triplets, 3): their token counts
    rank: int
    per_device: int
    accumulation: int
    per_epoch: int
    total: int
    pieces: int  # `length_pieces` resolved for the device
    multiple: int  # `pad_to_multiple` resolved for the device
    positions: int | None  # the model's longest input, the padded length's bound
    pad_id: int
    start: int = 0

    @classmethod
    def of(cls, spec: PlanSettings, store, rows, model, tokenizer, rank: int, world: int, use_cuda: bool) -> StepPlan:
        batch, per_device = spec.batch_size, spec.per_device_batch
        if batch % (per_device * world):
            raise SystemExit(
                f"batch_size {batch} is not a multiple of per_device_batch {per_device} x {world} processes"
            )
        per_epoch = steps_per_epoch(len(rows), batch)
        if per_epoch == 0:
            raise SystemExit(f"{len(rows)} triplets make no batch of {batch}")
        total = per_epoch * spec.epochs
        offsets = np.asarray(store.offsets)
        return cls(
            spec=spec,
            rows=rows,
            paper_lengths=(offsets[rows + 1] - offsets[rows]).astype(np.int64),
            rank=rank,
            per_device=per_device,
            accumulation=batch // (per_device * world),
            per_epoch=per_epoch,
            total=min(total, spec.max_steps) if spec.max_steps else total,
            pieces=spec.length_pieces or (1 if use_cuda else CPU_LENGTH_PIECES),
            multiple=spec.pad_to_multiple or (GPU_PAD_MULTIPLE if use_cuda else 1),
            positions=getattr(model.config, "max_position_embeddings", None),
            pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
        )

    def padding(self, micro: np.ndarray) -> float:
        from citeflow.models.training.token_batches import padding_share

        return padding_share(self.paper_lengths, micro, self.pieces, self.multiple, self.positions)

    def step_batch(self, step: int, order: np.ndarray) -> np.ndarray:
        """Every process's triplets of optimizer step `step`."""
        lo = (step % self.per_epoch) * self.spec.batch_size
        return order[lo : lo + self.spec.batch_size]

    def orders(self, announce: bool):
        """(step, epoch, order) for each step from `start` on, computing each epoch's order once."""
        current, order = -1, np.empty(0, dtype=np.int64)  # replaced at the first step: no epoch is -1
        lengths = self.paper_lengths.max(axis=1)  # a micro-batch is padded to its longest paper
        for step in range(self.start, self.total):
            epoch = step // self.per_epoch
            if epoch != current:
                current, order = epoch, epoch_order(self.spec, epoch, lengths)
                if announce and self.rank == 0:
                    used = order[: self.per_epoch * self.spec.batch_size].reshape(-1, self.per_device)
                    kind = "length-grouped" if self.spec.length_grouping else "random"
                    print(
                        f"train_encoder: epoch {epoch}: padding share {self.padding(used):.3f} ({kind} batches)",
                        flush=True,
                    )
            yield step, epoch, order

    def micro_batches(self, store):
        """Every micro-batch of this process from `start` on, in training order, as `collate_pieces` gives it."""
        from citeflow.models.training.token_batches import collate_pieces

        mine_per_step = self.per_device * self.accumulation
        for step, _, order in self.orders(announce=False):
            mine = self.step_batch(step, order)[self.rank * mine_per_step : (self.rank + 1) * mine_per_step]
            for m in range(self.accumulation):
                papers = self.rows[mine[m * self.per_device : (m + 1) * self.per_device]].T.ravel()  # q, pos, neg
                yield collate_pieces(store, papers, self.pad_id, self.pieces, self.multiple, self.positions)

    def row(self, step: int, epoch: int, order: np.ndarray, lr: float, seconds: float) -> dict[str, Any]:
        """The log row of optimizer step `step` (its loss and gradient norm are added when read back)."""
        batch = self.spec.batch_size
        micro = self.step_batch(step, order).reshape(-1, self.per_device)  # the whole step's, every process's
        return {
            "step": step + 1,
            "epoch": epoch,
            "lr": lr,
            "seconds": seconds,
            "triplets_per_second": batch / max(seconds, 1e-9),
            "padding_share": round(self.padding(micro), 4),
        }


class StepLog:
    """The steps' rows, held until their losses and gradient norms are read back from the device in one wait,
    then written to the log (rank 0; the losses averaged over the processes) and shown as progress
    (`citeflow.progress`)."""

    def __init__(self, path: str, plan: StepPlan, rank: int, world: int) -> None:
        from citeflow.progress import Progress

        self.path, self.rank, self.world = path, rank, world
        # a bar on the user's terminal, else a line at least every 30 s (the parent relays them to its log)
        self.progress = (
            Progress(
                "train_encoder",
                total=plan.total,
                initial=plan.start,
                unit="step",
                rate_of=plan.spec.batch_size,
                rate_unit="triplets",
            )
            if rank == 0
            else None
        )
        self.pending: list[tuple[dict, Any, Any]] = []  # steps whose loss and norm are still on the device

    def __enter__(self) -> StepLog:
        self.file = None  # opened with the first row: a run that fails before its first step leaves no empty log
        return self

    def __exit__(self, *_: object) -> None:
        if self.file is not None:
            self.file.close()
        if self.progress is not None:
            self.progress.close()

    def add(self, row: dict, loss, norm) -> None:
        self.pending.append((row, loss, norm))

    def flush(self) -> None:
        import torch
        import torch.distributed as dist

        if not self.pending:
            return
        losses = torch.stack([loss for _, loss, _ in self.pending])
        if self.world > 1:
            dist.all_reduce(losses)
            losses /= self.world
        norms = torch.stack([norm.float() for _, _, norm in self.pending]).cpu().tolist()
        for (row, _, _), loss, norm in zip(self.pending, losses.cpu().tolist(), norms, strict=True):
            row.update(loss=loss, grad_norm=norm)
            if self.rank == 0:
                if self.file is None:
                    self.file = open(self.path, "a")  # noqa: SIM115 - closed by __exit__
                self.file.write(json.dumps(row) + "\n")
        if self.progress is not None:
            if self.file is not None:
                self.file.flush()
            self.progress.update(len(self.pending), loss=float(self.pending[-1][0]["loss"]))
        self.pending.clear()
