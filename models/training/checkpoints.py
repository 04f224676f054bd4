"""Training checkpoints: written atomically by every process, checked before they are trusted, set aside when damaged.

`save_checkpoint` writes `work/ckpt-<step>/` (model as safetensors, optimizer, scheduler, loss scaler, each
process's RNG state, the step) through a temp folder renamed last, keeping the newest two; `load_checkpoint`
restores it with `weights_only=True`. `checkpoint_problem` checks every file's structure and the CRCs of the
torch files, so `find_checkpoint` passes over a damaged one and `set_aside` moves it to
`work/.damaged-ckpt-<step>-<time>/`: a rerun is never trapped on the same broken checkpoint. `resume` finds
and loads the newest good one when a run starts. Used by `models/training/train.py`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any


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
    if (folder / "scaler.pt").exists():
        torch_files.append("scaler.pt")
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


def set_aside(damaged: list[tuple[Path, str]], found: Path | None) -> None:
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


def save_checkpoint(
    work: Path, step: int, model, optimizer, scheduler, scaler, rank: int, world: int, cuda: bool
) -> None:
    """Every process writes its RNG state, rank 0 the rest; the folder appears under its final name last."""
    import torch
    import torch.distributed as dist
    from safetensors.torch import save_file

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
    _save(rng, tmp / f"rng-{rank}.pt")
    if rank == 0:
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp / "model.safetensors"))
        _save(optimizer.state_dict(), tmp / "optimizer.pt")
        _save(scheduler.state_dict(), tmp / "scheduler.pt")
        if scaler is not None:  # fp16: the loss scale and its growth tracker
            _save(scaler.state_dict(), tmp / "scaler.pt")
    if world > 1:
        dist.barrier()
    if rank == 0:
        (tmp / "state.json").write_text(json.dumps({"step": step}))
        os.replace(tmp, final)
        for old in sorted(work.glob("ckpt-*"))[:-2]:
            shutil.rmtree(old, ignore_errors=True)
    if world > 1:
        dist.barrier()


def _save(obj, path: Path) -> None:
    """`torch.save` through a Python file: a full disk is then an `OSError` (errno 28) in the error's chain and
    its traceback, which the stage reads as one line, not only torch's 'unexpected pos'."""
    import torch

    with open(path, "wb") as fh:
        torch.save(obj, fh)


def load_checkpoint(checkpoint: Path, model, optimizer, scheduler, scaler, rank: int, device, cuda: bool) -> int:
    """Restore what `save_checkpoint` wrote; returns the step it was taken after."""
    import torch
    from safetensors.torch import load_file

    model.load_state_dict(load_file(str(checkpoint / "model.safetensors"), device=str(device)))
    optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", map_location=device, weights_only=True))
    scheduler.load_state_dict(torch.load(checkpoint / "scheduler.pt", weights_only=True))
    if scaler is not None and (checkpoint / "scaler.pt").is_file():
        scaler.load_state_dict(torch.load(checkpoint / "scaler.pt", weights_only=True))
    rng = torch.load(checkpoint / f"rng-{rank}.pt", weights_only=True)
    torch.set_rng_state(rng["cpu"])
    if cuda and "cuda" in rng:
        torch.cuda.set_rng_state(rng["cuda"], device)
    return json.loads((checkpoint / "state.json").read_text())["step"]


def truncate_log(path: Path, step: int) -> None:
    """Drop log rows after the checkpoint a resumed run restarts from."""
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line)["step"] <= step]
    path.write_text("".join(line + "\n" for line in kept))


def resume(
    work: Path, log: Path, state: tuple[Any, Any, Any, Any], rank: int, device, use_cuda: bool, total: int
) -> int:
    """The step to start from: the newest complete checkpoint's, loaded into `state` (model, optimizer,
    scheduler, scaler), or 0. A damaged checkpoint, or one that does not load, is moved aside; the `log` rows
    after the step are dropped (all of them when the run starts afresh)."""
    checkpoint, damaged = find_checkpoint(work)
    if rank == 0 and damaged:
        set_aside(damaged, checkpoint)
    if checkpoint is None:
        if rank == 0:
            log.unlink(missing_ok=True)
        return 0
    try:
        start = load_checkpoint(checkpoint, *state, rank, device, use_cuda)
    except Exception as exc:
        # passed the structural checks but does not load: set it aside, so the next run falls back
        if rank == 0:
            set_aside([(checkpoint, f"does not load: {str(exc).splitlines()[0][:200]}")], None)
        raise SystemExit(f"checkpoint {checkpoint.name} does not load; it was moved aside: run again") from None
    if rank == 0:
        truncate_log(log, start)
        print(f"train_encoder: resuming from {checkpoint.name} (step {start} of {total})", flush=True)
    return start
