"""Triplet-loss training of the paper encoder: one entry point for one CPU, one GPU or many (torchrun).

    python -m models.train_encoder SPEC.json                                   # one process
    python -m torch.distributed.run --standalone --nproc_per_node 4 -m models.train_encoder SPEC.json

Reads SPEC.json, a `TrainSpec` written by `jobs/train_encoder.py`: the token
store, the triplets Parquet, the input model directory and the
hyper-parameters (docs/reference.md §5). Writes the trained model to `spec.model_out`
(safetensors, tokenizer, `citeflow.json`), one JSON line per optimizer step
to `spec.log`, and checkpoints under `spec.work`.

`train(spec)` reads top to bottom: processes and device, the triplets as token-store rows, model and
optimizer, the schedule (`_Plan`: which triplets each optimizer step trains on), the newest good checkpoint
(`_resume`), then the loop over optimizer steps: the next micro-batches (collated by a background
`Prefetcher`), forward and backward of each (`accumulate_gradients`), clip and step (`clip_and_step`), the
step's log row (`_StepLog`) and a checkpoint every `checkpoint_every` steps (`models/train_checkpoints.py`).
The losses are in `models/losses.py`.

The recipe (loss, optimizer, schedule, effective batch, precision), the data order (a seeded permutation per
epoch, grouped by length, so step s always sees the same triplets in any number of processes), the pace
settings and the checkpoint, resume and determinism guarantees are in docs/train_encoder.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from models import train_checkpoints as C
from models.losses import loss_of
from models.prefetch import Prefetcher

# `length_pieces` 0 on a CPU: padding costs compute there; a GPU runs small parts no faster than one padded part
CPU_LENGTH_PIECES = 3
# `pad_to_multiple` 0 on a GPU: a new batch shape every step costs more than the padding saves (docs/performance.md)
GPU_PAD_MULTIPLE = 64


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True, kw_only=True)
class TrainSpec:
    """Everything one training run needs; `jobs/train_encoder.py` writes it as JSON, the trainer reads it."""

    tokens: str = field(metadata=_help("TokenStore folder with the token ids of every paper in the triplets"))
    triplets: str = field(metadata=_help("Parquet with query_id, positive_id, negative_id"))
    model_in: str = field(metadata=_help("local Hugging Face model folder to start from"))
    model_out: str = field(metadata=_help("folder the trained model is written to (via a temp folder)"))
    work: str = field(metadata=_help("checkpoint folder: ckpt-<step>/ subfolders"))
    log: str = field(metadata=_help("JSON lines, one per optimizer step (rank 0 writes it)"))
    epochs: int = field(metadata=_help("passes over the triplets"))
    max_steps: int = field(default=0, metadata=_help("stop after this many optimizer steps; 0: all epochs"))
    batch_size: int = field(metadata=_help("effective batch: per_device_batch x accumulation x processes"))
    per_device_batch: int = field(metadata=_help("triplets per forward pass and process"))
    lr: float = field(metadata=_help("AdamW learning rate (without bitfit)"))
    weight_decay: float = field(metadata=_help("AdamW weight decay, not on biases and LayerNorm weights"))
    warmup_fraction: float = field(metadata=_help("share of the steps with linear warm-up, then linear decay"))
    loss: str = field(default="triplet", metadata=_help("triplet, triplet_cosine or in_batch (`loss_of`)"))
    margin: float = field(metadata=_help("triplet loss margin (L2 or cosine distance)"))
    scale: float = field(default=20.0, metadata=_help("in_batch: the cosine similarities' scale"))
    max_grad_norm: float = field(default=1.0, metadata=_help("clip the global gradient norm at this value; 0: off"))
    bitfit: bool = field(default=False, metadata=_help("train bias terms only"))
    bitfit_lr: float = field(default=1e-4, metadata=_help("learning rate with bitfit"))
    pooling: str = field(metadata=_help("cls or mean (see models.encoder.pool)"))
    normalize: bool = field(
        default=False, metadata=_help("unit-length embeddings: the loss compares the vectors the model is used with")
    )
    seed: int = field(metadata=_help("seed of the data order and the dropout RNG"))
    gradient_checkpointing: bool = field(default=False, metadata=_help("recompute activations in backward"))
    precision: str = field(default="auto", metadata=_help("auto, fp32, bf16 or fp16 (GPU autocast)"))
    checkpoint_every: int = field(metadata=_help("optimizer steps between checkpoints"))
    citeflow: dict[str, Any] = field(default_factory=dict, metadata=_help("written as citeflow.json beside the model"))
    device: str = field(default="auto", metadata=_help("auto: CUDA when available; cpu forces the CPU"))
    deterministic: bool = field(
        default=False, metadata=_help("deterministic algorithms, one CPU thread, fixed cuBLAS workspace")
    )
    length_grouping: bool = field(
        default=True, metadata=_help("batches of triplets of similar length (sorted within shuffled mega-batches)")
    )
    length_group_batches: int = field(default=50, metadata=_help("optimizer batches per mega-batch sorted by length"))
    length_pieces: int = field(
        default=0,
        metadata=_help(
            "forward passes per micro-batch, its papers sorted by length; 1: one padded to the longest; "
            "0: 3 on a CPU, 1 on a GPU"
        ),
    )
    pad_to_multiple: int = field(
        default=0,
        metadata=_help(
            "pad each part to a multiple of this many tokens; 1: to its longest paper; 0: 1 on a CPU, 64 on a GPU"
        ),
    )
    prefetch: int = field(default=4, metadata=_help("micro-batches collated ahead by a background thread; 0: none"))
    log_every: int = field(default=10, metadata=_help("optimizer steps between loss read-backs (log writes)"))
    compile: bool = field(default=False, metadata=_help("torch.compile the encoder"))
    tune_threads: bool = field(
        default=True,
        metadata=_help("passive OpenMP waiting, torch threads from the usable cores; false: the libraries' defaults"),
    )

    @classmethod
    def read(cls, path: str | Path) -> TrainSpec:
        data = json.loads(Path(path).read_text())
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SystemExit(f"{path}: unknown training settings {', '.join(unknown)}")
        return cls(**data)

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(dataclasses.asdict(self), indent=2))


def accumulate_gradients(model, parts, loss_of, scaler=None):
    """Forward and backward of each micro-batch in `parts`; returns the summed (already scaled) loss.

    The sum is a float64 tensor on the loss's device: reading it (`.item()`) would wait for the device, so
    the caller reads losses back only every few steps.

    A DistributedDataParallel model decides in its forward whether the following backward all-reduces, so
    every micro-step but the last runs forward *and* backward inside `no_sync()`: one all-reduce per
    optimizer step, not one per micro-batch.
    """
    import torch

    total = None
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        distributed = isinstance(model, torch.nn.parallel.DistributedDataParallel)
        with model.no_sync() if distributed and not last else contextlib.nullcontext():
            loss = loss_of(part)
            (scaler.scale(loss) if scaler else loss).backward()
        value = loss.detach().double()
        total = value if total is None else total + value
    return total


def clip_and_step(model, optimizer, scaler, max_grad_norm: float):
    """Unscale (fp16), clip the global gradient norm at `max_grad_norm` (0: no clipping), step.

    Returns the norm before clipping as a tensor on the device, not read back (inf or nan when an fp16 step
    overflowed; the scaler then skips it).
    """
    import torch

    if scaler:
        scaler.unscale_(optimizer)
    limit = max_grad_norm if max_grad_norm > 0 else float("inf")
    norm = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], limit)
    if scaler:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return norm.detach()


def steps_per_epoch(triplets: int, batch_size: int) -> int:
    return triplets // batch_size


def epoch_order(spec: TrainSpec, epoch: int, lengths: np.ndarray) -> np.ndarray:
    """The epoch's triplet order: a pure function of (seed, epoch, triplet lengths), the same in every process.

    A seeded permutation; with `length_grouping`, regrouped by length (`models.token_batches.group_by_length`) and
    the batches of each mega-batch shuffled with a generator of their own, seeded by (seed, epoch).
    """
    import torch

    from models.token_batches import group_by_length, shuffle_groups

    generator = torch.Generator().manual_seed(spec.seed * 1000 + epoch)
    order = torch.randperm(len(lengths), generator=generator).numpy()
    if spec.length_grouping:
        grouped = group_by_length(order, lengths, spec.batch_size, spec.length_group_batches)
        rng = np.random.default_rng([spec.seed, epoch])
        order = shuffle_groups(grouped, spec.batch_size, spec.length_group_batches, rng)
    return order


def train(spec: TrainSpec) -> None:
    """Train `spec.model_in` on the triplets and save it to `spec.model_out`, resuming from the last checkpoint."""
    from citeflow.process import fault_point, faults_armed
    from citeflow.threads import configure

    # Processes: torchrun sets RANK / WORLD_SIZE / LOCAL_RANK; a plain run is rank 0 of 1.
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    # Passive OpenMP waiting, pools from the usable cores shared by this host's processes (before torch starts
    # OpenMP where this process imports torch first; OMP_NUM_THREADS, when set, wins).
    if spec.tune_threads:
        configure(None if os.environ.get("OMP_NUM_THREADS") else max(1, _host_cores() // _local_world(world)))

    import torch
    import torch.distributed as dist
    from transformers import get_linear_schedule_with_warmup

    from models.encoder import load
    from models.token_batches import TokenStore

    if spec.deterministic:
        # Bitwise repeatable: the cuBLAS workspace must be fixed before CUDA starts, one CPU thread keeps
        # reductions in one order, and ops without a deterministic kernel raise instead of varying.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.set_num_threads(1)
    use_cuda = torch.cuda.is_available() and spec.device != "cpu"
    device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if world > 1:
        dist.init_process_group("nccl" if use_cuda else "gloo")
    if use_cuda:
        torch.cuda.set_device(device)
    work = Path(spec.work)
    work.mkdir(parents=True, exist_ok=True)

    # Data: triplets as rows of the token store (query, positive, negative).
    store = TokenStore(Path(spec.tokens))
    rows = _triplet_rows(store, spec.triplets)

    # Model and optimizer.
    torch.manual_seed(spec.seed)
    tokenizer, model = load(spec.model_in)  # BERT without its pooler: only the hidden states are trained
    if spec.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    if spec.bitfit:
        for name, param in model.named_parameters():
            param.requires_grad = name.endswith("bias")
    model.to(device)
    optimizer = _adamw(model, spec.bitfit_lr if spec.bitfit else spec.lr, spec.weight_decay, fused=use_cuda)

    # Schedule: which triplets each optimizer step trains on, and the learning rate along the steps.
    plan = _Plan.of(spec, store, rows, model, tokenizer, rank, world, use_cuda)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(spec.warmup_fraction * plan.total), plan.total)
    precision = _precision(spec.precision, use_cuda)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    plan.start = _resume(spec, work, (model, optimizer, scheduler, scaler), rank, device, use_cuda, plan.total)

    encoder = _piecewise(torch.compile(model, dynamic=True) if spec.compile else model, spec.pooling, spec.normalize)
    ddp = encoder
    if world > 1:
        ddp = torch.nn.parallel.DistributedDataParallel(encoder, device_ids=[local_rank] if use_cuda else None)
    model.train()
    micro_loss = _micro_loss(ddp, loss_of(spec), precision, device, plan.accumulation)

    # The loop: one optimizer step per batch, its row logged, a checkpoint every `checkpoint_every` steps.
    prefetch = Prefetcher(plan.micro_batches(store), spec.prefetch, pin=use_cuda)
    last = time.monotonic()
    try:
        with _StepLog(spec.log, plan, rank, world) as log:
            for step, epoch, order in plan.orders(announce=True):
                parts = [prefetch.next() for _ in range(plan.accumulation)]
                total_loss = accumulate_gradients(ddp, parts, micro_loss, scaler)
                grad_norm = clip_and_step(model, optimizer, scaler, spec.max_grad_norm)
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                now = time.monotonic()
                seconds, last = now - last, now
                done = step + 1
                log.add(plan.row(step, epoch, order, scheduler.get_last_lr()[0], seconds), total_loss, grad_norm)
                checkpoint_now = done % spec.checkpoint_every == 0 and done < plan.total
                if done % spec.log_every == 0 or checkpoint_now or done == plan.total or faults_armed():
                    log.flush()
                if checkpoint_now:
                    C.save_checkpoint(work, done, model, optimizer, scheduler, scaler, rank, world, use_cuda)
                fault_point(f"train_encoder.step.{done}")  # the resume tests kill the run here
    finally:
        prefetch.close()
    if rank == 0:
        _save_model(model, tokenizer, spec)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


@dataclass
class _Plan:
    """Which triplets each optimizer step trains on: `total` steps from `start`, each of `accumulation`
    micro-batches of `per_device` triplets per process, in each epoch's order (`epoch_order`)."""

    spec: TrainSpec
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
    def of(cls, spec: TrainSpec, store, rows, model, tokenizer, rank: int, world: int, use_cuda: bool) -> _Plan:
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
        from models.token_batches import padding_share

        return padding_share(self.paper_lengths, micro, self.pieces, self.multiple, self.positions)

    def step_batch(self, step: int, order: np.ndarray) -> np.ndarray:
        """Every process's triplets of optimizer step `step`."""
        lo = (step % self.per_epoch) * self.spec.batch_size
        return order[lo : lo + self.spec.batch_size]

    def orders(self, announce: bool):
        """(step, epoch, order) for each step from `start` on, computing each epoch's order once."""
        current, order = -1, None
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
        from models.token_batches import collate_pieces

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


def _resume(spec: TrainSpec, work: Path, state: tuple, rank: int, device, use_cuda: bool, total: int) -> int:
    """The step to start from: the newest complete checkpoint's, loaded into `state` (model, optimizer,
    scheduler, scaler), or 0. A damaged checkpoint, or one that does not load, is moved aside."""
    checkpoint, damaged = C.find_checkpoint(work)
    if rank == 0 and damaged:
        C.set_aside(damaged, checkpoint)
    if checkpoint is None:
        if rank == 0:
            Path(spec.log).unlink(missing_ok=True)
        return 0
    try:
        start = C.load_checkpoint(checkpoint, *state, rank, device, use_cuda)
    except Exception as exc:
        # passed the structural checks but does not load: set it aside, so the next run falls back
        if rank == 0:
            C.set_aside([(checkpoint, f"does not load: {str(exc).splitlines()[0][:200]}")], None)
        raise SystemExit(f"checkpoint {checkpoint.name} does not load; it was moved aside: run again") from None
    if rank == 0:
        C.truncate_log(Path(spec.log), start)
        print(f"train_encoder: resuming from {checkpoint.name} (step {start} of {total})", flush=True)
    return start


def _micro_loss(ddp, loss, precision: str, device, accumulation: int):
    """The loss of one collated micro-batch (queries, positives, negatives), scaled for accumulation."""
    import torch

    autocast = dict(
        device_type="cuda",
        dtype=torch.bfloat16 if precision == "bf16" else torch.float16,
        enabled=precision in ("bf16", "fp16"),
    )

    def micro_loss(part):
        pieces, inverse = part
        pieces = [tuple(t.to(device, non_blocking=True) for t in piece) for piece in pieces]
        with torch.autocast(**autocast):
            vectors = ddp(pieces, inverse.to(device, non_blocking=True)).float()
        n = len(vectors) // 3
        return loss(vectors[:n], vectors[n : 2 * n], vectors[2 * n :]) / accumulation

    return micro_loss


class _StepLog:
    """The steps' rows, held until their losses and gradient norms are read back from the device in one wait,
    then written to the log (rank 0; the losses averaged over the processes) and shown on the progress bar."""

    def __init__(self, path: str, plan: _Plan, rank: int, world: int) -> None:
        from tqdm import tqdm

        self.path, self.rank, self.world = path, rank, world
        self.bar = tqdm(
            total=plan.total, initial=plan.start, desc="train_encoder", unit="step", disable=rank != 0 or None
        )
        self.pending: list[tuple[dict, Any, Any]] = []  # steps whose loss and norm are still on the device

    def __enter__(self) -> _StepLog:
        self.file = open(self.path, "a")  # noqa: SIM115 - closed by __exit__
        return self

    def __exit__(self, *_: object) -> None:
        self.file.close()
        self.bar.close()

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
                self.file.write(json.dumps(row) + "\n")
        if self.rank == 0:
            self.file.flush()
            self.bar.update(len(self.pending))
            self.bar.set_postfix(loss=f"{self.pending[-1][0]['loss']:.3f}")
        self.pending.clear()


def _piecewise(encoder, pooling: str, normalize: bool = False):
    """A module running `encoder` on each (input_ids, attention_mask) part and returning the pooled vectors in
    the micro-batch's order: the parts go through one module call, so DDP sees one forward per backward."""
    import torch

    from models.encoder import pool

    class Piecewise(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = encoder

        def forward(self, pieces, inverse):
            vectors = [
                pool(self.encoder(input_ids=i, attention_mask=m).last_hidden_state, m, pooling, normalize)
                for i, m in pieces
            ]
            return torch.cat(vectors)[inverse]

    return Piecewise()


def _host_cores() -> int:
    from citeflow.threads import usable_cores

    return usable_cores()


def _local_world(world: int) -> int:
    """Processes of this run on this host (torchrun's LOCAL_WORLD_SIZE), which share its cores."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", world))


def _triplet_rows(store, triplets: str) -> np.ndarray:
    """(triplets, 3) token-store rows of query, positive and negative."""
    import pyarrow.parquet as pq

    table = pq.read_table(triplets, columns=["query_id", "positive_id", "negative_id"])
    return np.stack([store.rows(table.column(c).to_numpy()) for c in table.column_names], axis=1)


def _adamw(model, lr: float, weight_decay: float, *, fused: bool = False):
    """AdamW with weight decay on every trained weight but biases and LayerNorm (BERT's recipe).

    `fused`: one kernel for the whole update instead of several per parameter group (the trainer asks for it
    on CUDA; PyTorch has a fused CPU kernel too, used by the tests of this path).
    """
    import torch

    def exempt(name: str) -> bool:
        return name.endswith("bias") or "LayerNorm" in name

    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    return torch.optim.AdamW(
        [
            {"params": [p for n, p in trained if not exempt(n)], "weight_decay": weight_decay},
            {"params": [p for n, p in trained if exempt(n)], "weight_decay": 0.0},
        ],
        lr=lr,
        fused=fused or None,
    )


def _precision(requested: str, cuda: bool) -> str:
    import torch

    if not cuda:
        return "fp32"
    if requested == "auto":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return requested


def _save_model(model, tokenizer, spec: TrainSpec) -> None:
    """The trained model as a plain Hugging Face folder, written to a temp folder and renamed."""
    out = Path(spec.model_out)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp), safe_serialization=True)
    tokenizer.save_pretrained(str(tmp))
    (tmp / "citeflow.json").write_text(json.dumps(spec.citeflow, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


def main(argv: list[str]) -> int:
    train(TrainSpec.read(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
