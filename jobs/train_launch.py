"""How train_encoder's trainer runs: in a process of its own, or as torchrun's ranks on this host, and how the
batch splits over them."""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path

from citeflow.errors import JAVA_MESSAGES, CiteflowError

log = logging.getLogger("citeflow")


def launch(spec_path: Path, nproc: int, log_path: Path) -> None:
    """Run the trainer (`models/training/train.py`) in its own process (torchrun for several); its output goes
    to `log_path` and stderr."""
    from citeflow.process import run_child
    from citeflow.progress import PROGRESS_ENV, is_progress_line, mode_for_child, to_log_files

    module = ["-m", "citeflow.models.training.train", str(spec_path)]
    if nproc > 1:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *module]
    else:
        command = [sys.executable, *module]
    mode = os.environ.get(PROGRESS_ENV) or mode_for_child()
    env = {
        **os.environ,
        PROGRESS_ENV: mode,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep),
    }
    log.info("train_encoder: %s", " ".join(command))

    # under a guard: the trainer (and torchrun's ranks) die with this process, and on interruption
    # A bar goes to the terminal as the child draws it. Otherwise the child's progress and its own lines
    # (`train_encoder: ...`: the epoch, a damaged checkpoint set aside) go through this process's log (the run
    # log, an Airflow task's log) like the stage's lines, where a handler shows them; a traceback, from its first
    # line on, to the log files only (the terminal ends with the stage's one line; `log_path` keeps everything);
    # anything else to stderr as the child printed it.
    failing = False
    shown = any(
        isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) in (sys.stderr, sys.__stderr__)
        for h in logging.getLogger().handlers
    )

    def relay(line: str) -> bool:
        nonlocal failing
        failing = failing or line.startswith("Traceback (most recent call last)")
        if is_progress_line(line) or (shown and not failing and line.startswith("train_encoder: ")):
            log.info("%s", line)
        elif failing:
            to_log_files(line)
        else:
            return False
        return True

    code = run_child(command, log_path=log_path, env=env, echo=True, relay=None if mode == "bar" else relay)
    if code != 0:
        tail = log_path.read_text(errors="replace")[-3000:]
        for message, number in JAVA_MESSAGES.items():  # the same words in Python's OSError text
            if message in tail:  # the machine's state, not the training: one line (citeflow.errors)
                raise OSError(number, message, str(spec_path.parent))
        from citeflow.models.training.checkpoints import latest_checkpoint

        checkpoints = spec_path.parent / "checkpoints"
        resumable = checkpoints.is_dir() and latest_checkpoint(checkpoints) is not None
        rerun = "rerun to resume from the last checkpoint" if resumable else "no checkpoint was written"
        errors = [line for line in tail.splitlines() if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", line)]
        why = f": {errors[-1][:300]}" if errors else ""
        raise CiteflowError(f"encoder training failed (exit {code}{why}); {rerun}; its log: {log_path}")


def per_device(batch: int, per_device: int, nproc: int) -> int:
    """The largest per-device batch <= the asked one that divides batch / nproc."""
    if batch % nproc:
        raise CiteflowError(f"train_encoder.batch_size {batch} is not divisible by {nproc} processes")
    share = batch // nproc
    return max(d for d in range(1, min(per_device, share) + 1) if share % d == 0)


def gpus() -> int:
    """CUDA devices this process sees; 0 without a usable CUDA."""
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - no usable CUDA means CPU
        return 0
