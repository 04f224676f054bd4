"""Triplet-loss training of the paper encoder: one entry point for one CPU, one GPU or many (torchrun).

    python -m models.train_encoder SPEC.json                                   # one process
    python -m torch.distributed.run --standalone --nproc_per_node 4 -m models.train_encoder SPEC.json

SPEC.json (written by `jobs/train_encoder.py`) names the token store, the
triplets Parquet, the input model directory, the output model directory, the
checkpoint folder, the log file and the hyper-parameters (SPEC §5):
triplet margin loss (L2, margin 1) on pooled final hidden states, AdamW with
weight decay (not on biases and LayerNorm weights), linear warm-up then
linear decay, effective batch = per-device batch × accumulation × processes.
BitFit trains bias terms only. On CUDA, bf16 autocast where supported (else
fp16 with loss scaling); gradient checkpointing on request.

Data order is a seeded permutation per epoch, so step s always sees the same
triplets. Every `checkpoint_every` optimizer steps, model, optimizer,
scheduler, each process's RNG state and the step are written to
`work/ckpt-<step>/` (temp folder, then rename; the last two are kept). A
restarted run loads the newest one and continues: the result equals an
uninterrupted run. Checkpoints are read with `weights_only=True`.

A damaged checkpoint (truncated, garbled, a file missing: `checkpoint_problem`
checks every file's structure and the CRCs of the torch files) is moved aside
to `work/.damaged-ckpt-<step>-<time>/` with a message, and training resumes
from the previous good one, or from the start when there is none: a rerun is
never trapped on the same broken checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

# Tests set this to a step number: the process SIGKILLs itself right after that optimizer step.
KILL_AT_STEP = "CITEFLOW_KILL_AT_STEP"


def _env() -> tuple[int, int, int]:
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("LOCAL_RANK", 0))


def checkpoint_problem(folder: Path) -> str | None:
    """Why `folder` cannot be resumed from, or None. Cheap structural checks of every file a checkpoint
    holds: state.json parses, model.safetensors' header and size agree, the torch files are intact zip
    archives (CRC-checked) and rank 0's RNG state is there."""
    import zipfile

    try:
        step = json.loads((folder / "state.json").read_text())["step"]
        if not isinstance(step, int) or step < 1:
            return f"state.json names no step ({step!r})"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"state.json unreadable: {exc}"
    model = folder / "model.safetensors"
    try:
        with open(model, "rb") as fh:
            size = int.from_bytes(fh.read(8), "little")
            if not 0 < size <= min(model.stat().st_size - 8, 100 << 20):
                return f"model.safetensors has no valid header (header size {size})"
            header = json.loads(fh.read(size))
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
        if model.stat().st_size != 8 + size + end:
            return f"model.safetensors has {model.stat().st_size} bytes, its header says {8 + size + end}"
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        return f"model.safetensors unreadable: {exc}"
    torch_files = ["optimizer.pt", "scheduler.pt", *sorted(p.name for p in folder.glob("rng-*.pt"))]
    if "rng-0.pt" not in torch_files:
        return "rng-0.pt is missing"
    for name in torch_files:
        try:
            with zipfile.ZipFile(folder / name) as archive:
                bad = archive.testzip()
            if bad is not None:
                return f"{name}: {bad} fails its CRC check"
        except (OSError, zipfile.BadZipFile, EOFError, ValueError) as exc:
            return f"{name} unreadable: {exc}"
    return None


def find_checkpoint(work: Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """(the newest intact checkpoint or None, [(newer damaged checkpoint, why)])."""
    damaged = []
    for folder in sorted((p for p in Path(work).glob("ckpt-*") if p.is_dir()), reverse=True):
        problem = checkpoint_problem(folder)
        if problem is None:
            return folder, damaged
        damaged.append((folder, problem))
    return None, damaged


def latest_checkpoint(work: Path) -> Path | None:
    """The newest intact checkpoint (damaged newer ones are passed over)."""
    return find_checkpoint(work)[0]


def _set_aside(damaged: list[tuple[Path, str]], found: Path | None) -> None:
    """Move damaged checkpoints out of the way (kept as evidence), saying what training falls back to."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for folder, problem in damaged:
        target = folder.with_name(f".damaged-{folder.name}-{stamp}")
        with contextlib.suppress(OSError):  # another rank may have moved it already
            folder.rename(target)
        print(
            f"train_encoder: checkpoint {folder.name} is damaged ({problem}); moved aside to {target.name}, "
            f"resuming from {found.name if found else 'the start'}",
            flush=True,
        )


def steps_per_epoch(triplets: int, batch_size: int) -> int:
    return triplets // batch_size


def main(argv: list[str]) -> int:
    import pyarrow.parquet as pq
    import torch
    import torch.distributed as dist
    from safetensors.torch import load_file, save_file
    from transformers import get_linear_schedule_with_warmup

    from models.encoder import TokenStore, collate, load, pool

    spec: dict[str, Any] = json.loads(Path(argv[0]).read_text())
    rank, world, local_rank = _env()
    use_cuda = torch.cuda.is_available() and spec.get("device", "auto") != "cpu"
    device = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if world > 1:
        dist.init_process_group("nccl" if use_cuda else "gloo")
    if use_cuda:
        torch.cuda.set_device(device)
    work = Path(spec["work"])
    work.mkdir(parents=True, exist_ok=True)

    store = TokenStore(Path(spec["tokens"]))
    t = pq.read_table(spec["triplets"], columns=["query_id", "positive_id", "negative_id"])
    rows = np.stack([store.rows(t.column(c).to_numpy()) for c in ("query_id", "positive_id", "negative_id")], axis=1)
    del t
    torch.manual_seed(spec["seed"])
    tokenizer, model = load(spec["model_in"])  # BERT without its pooler: only the hidden states are trained
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    if spec["gradient_checkpointing"]:
        model.gradient_checkpointing_enable()
    if spec["bitfit"]:
        for name, param in model.named_parameters():
            param.requires_grad = name.endswith("bias")
    model.to(device)
    lr = spec["bitfit_lr"] if spec["bitfit"] else spec["lr"]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and (n.endswith("bias") or "LayerNorm" in n)]
    decay = [p for n, p in model.named_parameters() if p.requires_grad and not (n.endswith("bias") or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": spec["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}], lr=lr
    )

    batch, per_device = spec["batch_size"], spec["per_device_batch"]
    if batch % (per_device * world):
        raise SystemExit(f"batch_size {batch} is not a multiple of per_device_batch {per_device} x {world} processes")
    accumulation = batch // (per_device * world)
    per_epoch = steps_per_epoch(len(rows), batch)
    if per_epoch == 0:
        raise SystemExit(f"{len(rows)} triplets make no batch of {batch}")
    total = per_epoch * spec["epochs"]
    if spec["max_steps"]:
        total = min(total, spec["max_steps"])
    scheduler = get_linear_schedule_with_warmup(optimizer, int(spec["warmup_fraction"] * total), total)
    precision = _precision(spec["precision"], use_cuda)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    loss_fn = torch.nn.TripletMarginLoss(margin=spec["margin"], p=2)

    start = 0
    checkpoint, damaged = find_checkpoint(work)
    if rank == 0 and damaged:
        _set_aside(damaged, checkpoint)
    if checkpoint is not None:
        state = json.loads((checkpoint / "state.json").read_text())
        try:
            model.load_state_dict(load_file(str(checkpoint / "model.safetensors"), device=str(device)))
            optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location=device, weights_only=True))
            scheduler.load_state_dict(torch.load(checkpoint / "scheduler.pt", weights_only=True))
            rng = torch.load(checkpoint / f"rng-{rank}.pt", weights_only=True)
        except Exception as exc:
            # passed the structural checks but does not load: set it aside, so the next run falls back
            if rank == 0:
                _set_aside([(checkpoint, f"does not load: {str(exc).splitlines()[0][:200]}")], None)
            raise SystemExit(f"checkpoint {checkpoint.name} does not load; it was moved aside: run again") from None
        torch.set_rng_state(rng["cpu"])
        if use_cuda and "cuda" in rng:
            torch.cuda.set_rng_state(rng["cuda"], device)
        start = state["step"]
        if rank == 0:
            _truncate_log(Path(spec["log"]), start)
            print(f"train_encoder: resuming from {checkpoint.name} (step {start} of {total})", flush=True)
    elif rank == 0:
        Path(spec["log"]).unlink(missing_ok=True)

    ddp = model
    if world > 1:
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
    model.train()

    def embed(ids, mask):
        with torch.autocast(
            "cuda",
            dtype=torch.bfloat16 if precision == "bf16" else torch.float16,
            enabled=precision in ("bf16", "fp16"),
        ):
            hidden = ddp(input_ids=ids, attention_mask=mask).last_hidden_state
        return pool(hidden, mask, spec["pooling"]).float()

    from tqdm import tqdm

    bar = tqdm(total=total, initial=start, desc="train_encoder", unit="step", disable=rank != 0 or None)
    order_epoch, order = -1, None
    with open(spec["log"], "a") as log:
        for step in range(start, total):
            epoch = step // per_epoch
            if epoch != order_epoch:
                generator = torch.Generator().manual_seed(spec["seed"] * 1000 + epoch)
                order, order_epoch = torch.randperm(len(rows), generator=generator).numpy(), epoch
            lo = (step % per_epoch) * batch
            mine = order[lo : lo + batch][rank * per_device * accumulation : (rank + 1) * per_device * accumulation]
            t0 = time.monotonic()
            total_loss = 0.0
            for micro in range(accumulation):
                part = rows[mine[micro * per_device : (micro + 1) * per_device]]
                ids, mask = collate([store.get(r) for r in part.T.ravel()], pad_id)
                ids, mask = ids.to(device), mask.to(device)
                vectors = embed(ids, mask)
                n = len(part)
                loss = loss_fn(vectors[:n], vectors[n : 2 * n], vectors[2 * n :]) / accumulation
                sync = micro == accumulation - 1 or world == 1
                context = ddp.no_sync() if (world > 1 and not sync) else _nullcontext()
                with context:
                    (scaler.scale(loss) if scaler else loss).backward()
                total_loss += loss.item()
            if scaler:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            if world > 1:
                reduced = torch.tensor([total_loss], device=device)
                dist.all_reduce(reduced)
                total_loss = reduced.item() / world
            seconds = time.monotonic() - t0
            if rank == 0:
                log.write(
                    json.dumps(
                        {
                            "step": step + 1,
                            "epoch": epoch,
                            "loss": total_loss,
                            "lr": scheduler.get_last_lr()[0],
                            "seconds": seconds,
                            "triplets_per_second": batch / max(seconds, 1e-9),
                        }
                    )
                    + "\n"
                )
                log.flush()
                bar.update(1)
                bar.set_postfix(loss=f"{total_loss:.3f}")
            done = step + 1
            if done % spec["checkpoint_every"] == 0 and done < total:
                _save_checkpoint(work, done, model, optimizer, scheduler, rank, world, use_cuda, save_file)
            if os.environ.get(KILL_AT_STEP) == str(done):  # fault injection for the resume tests
                log.flush()
                os.kill(os.getpid(), signal.SIGKILL)
    bar.close()
    if rank == 0:
        out = Path(spec["model_out"])
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        (tmp / "citeflow.json").write_text(json.dumps(spec["citeflow"], indent=2) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return 0


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _precision(requested: str, cuda: bool) -> str:
    import torch

    if not cuda:
        return "fp32"
    if requested == "auto":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return requested


def _save_checkpoint(
    work: Path, step: int, model, optimizer, scheduler, rank: int, world: int, cuda: bool, save_file
) -> None:
    import torch
    import torch.distributed as dist

    final = work / f"ckpt-{step:08d}"
    tmp = work / f".ckpt-{step:08d}.tmp"
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    if world > 1:
        dist.barrier()
    rng = {"cpu": torch.get_rng_state()}
    if cuda:
        rng["cuda"] = torch.cuda.get_rng_state()
    torch.save(rng, tmp / f"rng-{rank}.pt")
    if rank == 0:
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp / "model.safetensors"))
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    if world > 1:
        dist.barrier()
    if rank == 0:
        (tmp / "state.json").write_text(json.dumps({"step": step}))
        os.replace(tmp, final)
        for old in sorted(work.glob("ckpt-*"))[:-2]:
            shutil.rmtree(old, ignore_errors=True)
    if world > 1:
        dist.barrier()


def _truncate_log(path: Path, step: int) -> None:
    """Drop log rows after the checkpoint a resumed run restarts from."""
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line)["step"] <= step]
    path.write_text("".join(line + "\n" for line in kept))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
