"""Triplet-loss training of the paper encoder: one entry point for one CPU, one GPU or many (torchrun).

    python -m citeflow.models.training.train SPEC.json                                   # one process
    python -m torch.distributed.run --standalone --nproc_per_node 4 -m citeflow.models.training.train SPEC.json

Reads SPEC.json, a `TrainSpec` written by `jobs/train_encoder.py`: the token
store, the triplets Parquet, the input model directory and the
hyper-parameters (docs/reference.md §5). Writes the trained model to `spec.model_out`
(safetensors, tokenizer, `citeflow.json`), one JSON line per optimizer step
to `spec.log`, and checkpoints under `spec.work`.

`train(spec)` reads top to bottom: processes and device, the triplets as token-store rows, model and
optimizer, the schedule (`StepPlan`: which triplets each optimizer step trains on), the newest good checkpoint
(`resume`), then the loop over optimizer steps: the next micro-batches (collated by a background
`Prefetcher`), forward and backward of each (`accumulate_gradients`), clip and step (`clip_and_step`), the
step's log row (`StepLog`) and a checkpoint every `checkpoint_every` steps. The step's parts are in
`models/training/step.py`, the plan and the log in `models/training/plan.py`, checkpoints and resuming in
`models/training/checkpoints.py`, the losses in `models/training/losses.py`.

The recipe (loss, optimizer, schedule, effective batch, precision), the data order (a seeded permutation per
epoch, grouped by length, so step s always sees the same triplets in any number of processes), the pace
settings and the checkpoint, resume and determinism guarantees are in docs/train_encoder.md.
"""

from __future__ import annotations

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

from citeflow.models.training import checkpoints as C
from citeflow.models.training.evaluate import CurveLog, eval_steps
from citeflow.models.training.heldout import held_out
from citeflow.models.training.losses import LOSSES, STEP_WIDE, loss_of
from citeflow.models.training.plan import StepLog, StepPlan
from citeflow.models.training.prefetch import Prefetcher
from citeflow.models.training.step import (
    accumulate_gradients,
    adamw,
    cached_step_gradients,
    clip_and_step,
    micro_batch_loss,
    micro_batch_vectors,
    piecewise,
    resolve_precision,
)


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
    pooling: str = field(metadata=_help("cls or mean (see citeflow.models.encoder.model.pool)"))
    normalize: bool = field(
        default=False, metadata=_help("unit-length embeddings: the loss compares the vectors the model is used with")
    )
    seed: int = field(metadata=_help("seed of the data order and the dropout RNG"))
    gradient_checkpointing: bool = field(default=False, metadata=_help("recompute activations in backward"))
    precision: str = field(
        default="auto",
        metadata=_help("auto, fp32, bf16 or fp16 autocast (`citeflow.models.training.step.resolve_precision`)"),
    )
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
    eval_triplets: int = field(
        default=0, metadata=_help("triplets of whole held-out queries never trained on, scored while training; 0: none")
    )
    eval_every: int = field(default=0, metadata=_help("optimizer steps between evaluations; 0: only after the last"))
    eval_val: str = field(
        default="", metadata=_help("JSON of a val sample ({texts, qrels}) also scored at each evaluation; '': none")
    )
    eval_log: str = field(default="", metadata=_help("JSON lines, one per evaluation (rank 0); '': work/eval.jsonl"))
    eval_max_length: int = field(default=512, metadata=_help("tokens per val paper (the training length)"))
    keep: str = field(
        default="last", metadata=_help("last: the model after the last step; best: the evaluated step of best score")
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


def train(spec: TrainSpec) -> None:
    """Train `spec.model_in` on the triplets and save it to `spec.model_out`, resuming from the last checkpoint."""
    from citeflow.process import fault_point, faults_armed

    # Processes and device: torchrun sets RANK / WORLD_SIZE / LOCAL_RANK; a plain run is rank 0 of 1.
    rank, world, local_rank, device, use_cuda = _start_processes(spec)

    import torch
    import torch.distributed as dist
    from transformers import get_linear_schedule_with_warmup

    from citeflow.models.encoder.model import load
    from citeflow.models.training.token_batches import TokenStore

    work = Path(spec.work)
    work.mkdir(parents=True, exist_ok=True)

    # Data: triplets as rows of the token store (query, positive, negative); the held-out queries' triplets are
    # scored while training and never trained on.
    store = TokenStore(Path(spec.tokens))
    rows, queries = _triplet_rows(store, spec.triplets)
    held = held_out(queries, spec.eval_triplets, spec.seed)
    rows, eval_rows = rows[~held], rows[held]

    # Model and optimizer.
    torch.manual_seed(spec.seed)
    tokenizer, model = load(spec.model_in)  # BERT without its pooler: only the hidden states are trained
    if spec.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    if spec.bitfit:
        for name, param in model.named_parameters():
            param.requires_grad = name.endswith("bias")
    model.to(device)
    optimizer = adamw(model, spec.bitfit_lr if spec.bitfit else spec.lr, spec.weight_decay, fused=use_cuda)

    # Schedule: which triplets each optimizer step trains on, and the learning rate along the steps.
    plan = StepPlan.of(spec, store, rows, model, tokenizer, rank, world, use_cuda)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(spec.warmup_fraction * plan.total), plan.total)
    precision = resolve_precision(spec.precision, use_cuda)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    state = (model, optimizer, scheduler, scaler)
    plan.start = C.resume(work, Path(spec.log), state, rank, device, use_cuda, plan.total)

    encoder = piecewise(torch.compile(model, dynamic=True) if spec.compile else model, spec.pooling, spec.normalize)
    ddp = encoder
    if world > 1:
        ddp = torch.nn.parallel.DistributedDataParallel(encoder, device_ids=[local_rank] if use_cuda else None)
    model.train()
    step_gradients = _step_gradients(spec, ddp, precision, device, plan.accumulation, scaler)
    if rank == 0:
        print(
            f"train_encoder: {plan.total - plan.start} steps of {spec.batch_size} triplets, {spec.loss} loss, "
            f"{precision} on {device.type}" + (f"; {len(eval_rows):,} held-out triplets" if len(eval_rows) else ""),
            flush=True,
        )

    # Evaluation: the held-out triplets (and the val sample) every `eval_every` steps and after the last; with
    # keep=best a checkpoint is taken at each evaluated step first, so a resumed run never keeps a step it lost.
    evaluating = bool(len(eval_rows) or spec.eval_val)
    evaluator = _evaluator(spec, store, eval_rows, tokenizer, device, precision) if evaluating and rank == 0 else None
    curve = CurveLog(spec.eval_log or str(work / "eval.jsonl"), plan.start) if evaluator is not None else None
    evaluated = set(eval_steps(plan.total, spec.eval_every)) if evaluating else set()

    # The loop: one optimizer step per batch, its row logged, a checkpoint every `checkpoint_every` steps.
    prefetch = Prefetcher(plan.micro_batches(store), spec.prefetch, pin=use_cuda)
    try:
        with StepLog(spec.log, plan, rank, world, evals=sorted(evaluated)) as log:
            if curve is not None and (plan.start == 0 or plan.start in evaluated) and not curve.has(plan.start):
                _evaluate(evaluator, curve, model, plan.start, spec, log)  # the untrained model, or a lost evaluation
            last = time.monotonic()
            for step, epoch, order in plan.orders(announce=True):
                parts = [prefetch.next() for _ in range(plan.accumulation)]
                total_loss = step_gradients(parts)
                grad_norm = clip_and_step(model, optimizer, scaler, spec.max_grad_norm)
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                now = time.monotonic()
                seconds, last = now - last, now
                done = step + 1
                log.add(plan.row(step, epoch, order, float(scheduler.get_last_lr()[0]), seconds), total_loss, grad_norm)
                evaluate_now = done in evaluated
                checkpoint_now = done < plan.total and (
                    done % spec.checkpoint_every == 0 or (evaluate_now and spec.keep == "best")
                )
                if done % spec.log_every == 0 or checkpoint_now or evaluate_now or done == plan.total or faults_armed():
                    log.flush()
                if checkpoint_now:
                    C.save_checkpoint(work, done, model, optimizer, scheduler, scaler, rank, world, use_cuda)
                if evaluate_now and curve is not None:
                    _evaluate(evaluator, curve, model, done, spec, log)
                    last = time.monotonic()  # a step's seconds are its own, not the evaluation's
                fault_point(f"train_encoder.step.{done}")  # the resume tests kill the run here
    finally:
        prefetch.close()
    if rank == 0:
        kept = plan.total
        best = curve.best() if curve is not None and spec.keep == "best" else None
        if best is not None and best["step"] != plan.total:
            from safetensors.torch import load_file

            model.load_state_dict(load_file(str(work / BEST_WEIGHTS), device=str(device)))
            kept = best["step"]
            print(f"train_encoder: keeping step {kept} (best score {best['score']:.4f})", flush=True)
        record = {"kept_step": kept, "heldout_triplets": len(eval_rows), "trained_triplets": len(rows)}
        _save_model(model, tokenizer, dataclasses.replace(spec, citeflow={**spec.citeflow, **record}))
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


BEST_WEIGHTS = "best.safetensors"  # keep=best: the weights of the best evaluated step so far, beside the checkpoints


def _evaluator(spec: TrainSpec, store, eval_rows, tokenizer, device, precision: str):
    """The evaluator of the held-out rows and the val sample, in the geometry the loss trains."""
    from citeflow.models.training.evaluate import Evaluator

    val = json.loads(Path(spec.eval_val).read_text()) if spec.eval_val else None
    return Evaluator(
        store,
        eval_rows,
        pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
        device=device,
        precision=precision,
        pooling=spec.pooling,
        normalize=spec.normalize,
        distance=LOSSES[spec.loss].distance,
        tokenizer=tokenizer,
        max_length=spec.eval_max_length,
        val=val,
    )


def _evaluate(evaluator, curve, model, step: int, spec: TrainSpec, log) -> None:
    """One evaluation: its curve row; with keep=best, the weights when the row is the best so far (written before
    the row, so a row marked best always has its weights)."""
    from safetensors.torch import save_file

    row = evaluator(model, step)
    if spec.keep == "best" and step > 0 and curve.improves(row):
        target = Path(spec.work) / BEST_WEIGHTS
        tmp = target.with_name(target.name + ".tmp")
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp), metadata={"step": str(step)})
        os.replace(tmp, target)
    curve.add(row)
    log.evaluated(row)
    shown = ", ".join(f"{k} {v:.4f}" for k, v in row.items() if k.startswith(("heldout_", "val_mean")))
    print(f"train_encoder: evaluated step {step}: {shown} ({row['seconds']:.0f}s)", flush=True)


def _step_gradients(spec: TrainSpec, ddp, precision: str, device, accumulation: int, scaler):
    """The function from a step's micro-batches to its gradients (accumulated) and its loss: a loss over the
    whole step (`STEP_WIDE`) of several micro-batches runs GradCache's two passes, any other the micro-batches'
    own losses, summed."""
    loss = loss_of(spec)
    if spec.loss in STEP_WIDE and accumulation > 1:
        vectors_of = micro_batch_vectors(ddp, precision, device)
        return lambda parts: cached_step_gradients(ddp, parts, vectors_of, loss, scaler)
    micro_loss = micro_batch_loss(ddp, loss, precision, device, accumulation)
    return lambda parts: accumulate_gradients(ddp, parts, micro_loss, scaler)


def _start_processes(spec: TrainSpec) -> tuple[int, int, int, Any, bool]:
    """(rank, world, local rank, device, whether CUDA is used) of this process, once its threads, determinism
    and process group are set up."""
    from citeflow.threads import configure

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    # Passive OpenMP waiting, pools from the usable cores shared by this host's processes (before torch starts
    # OpenMP where this process imports torch first; OMP_NUM_THREADS, when set, wins).
    if spec.tune_threads:
        configure(None if os.environ.get("OMP_NUM_THREADS") else max(1, _host_cores() // _local_world(world)))

    import torch
    import torch.distributed as dist

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
    return rank, world, local_rank, device, use_cuda


def _host_cores() -> int:
    from citeflow.threads import usable_cores

    return usable_cores()


def _local_world(world: int) -> int:
    """Processes of this run on this host (torchrun's LOCAL_WORLD_SIZE), which share its cores."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", world))


def _triplet_rows(store, triplets: str) -> tuple[np.ndarray, np.ndarray]:
    """((triplets, 3) token-store rows of query, positive and negative, each triplet's query id)."""
    import pyarrow.parquet as pq

    table = pq.read_table(triplets, columns=["query_id", "positive_id", "negative_id"])
    rows = np.stack([store.rows(table.column(c).to_numpy()) for c in table.column_names], axis=1)
    return rows, table.column("query_id").to_numpy()


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
