"""Failures a user causes, through `citeflow run` as a user runs it: each ends in one line (exit 2, or 130 for Ctrl-C)
with no Python traceback and no Java frames on the terminal, commits nothing, leaves no staging behind, and the run
again, once the cause is gone, gives the reference's versions and contents.

A full disk and a read-only artifact root are small tmpfs mounts (root may mount them: CI runs as root; without
the right to mount the two tests skip, and fail under CI=true).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.faults.conftest import SNAPSHOT, digest, family, finish, read, sweep, wait_until

PROGRESS = re.compile(r"^(\d\d:\d\d:\d\d (INFO|WARNING) |\[\d+/\d+\] |      /)")


def terminal(log: str) -> list[str]:
    """The lines a user saw, but citeflow's own progress (log lines of time, level and message; the stage lines
    `[i/n] stage: ...` and their paths)."""
    return [line for line in log.splitlines() if line.strip() and not PROGRESS.match(line)]


def assert_one_line(log: str, start: str, *parts: str) -> str:
    """The run's output holds no traceback and no Java frame, and ends in exactly one line of citeflow's saying
    why; that line."""
    assert "Traceback" not in log and "\tat " not in log and "py4j" not in log.lower(), log[-3000:]
    seen = terminal(log)
    assert len(seen) == 1 and seen[0].startswith(start), seen
    for part in parts:
        assert part in seen[0], seen[0]
    return seen[0]


def assert_nothing_left(root: Path, stage: str) -> None:
    """No version of `stage` committed, no half-built version folder, no lease."""
    folder = root / SNAPSHOT / stage
    left = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    assert [n for n in left if n != ".leases.lock"] == [], left


@contextlib.contextmanager
def mounted(path: Path, size: str):
    """A tmpfs of `size` at `path`, unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        why = f"cannot mount a tmpfs here: {done.stderr.decode().strip()}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def remount(path: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True)


def full_then_rebuilt(world, root: Path, stage: str) -> str:
    """`stage` on the full tmpfs at `root` ends in one line of a full disk, leaves nothing, and once the disk is
    larger builds the reference's content; the failed run's output."""
    code, log = finish(world.cli(root, stage))
    assert code == 2, log[-3000:]
    assert_one_line(log, "citeflow: error: no space left on the device", "another disk", "details in ")
    assert_nothing_left(root, stage)
    remount(root, "size=256m")
    code, rebuilt = finish(world.cli(root, stage))
    assert code == 0, rebuilt[-3000:]
    assert digest(read(root, stage)) == world.digests[stage]
    return log


def test_a_full_disk_ends_in_one_line_and_removes_what_the_run_wrote(world):
    with mounted(world.tmp / "full-disk", "600k") as root:
        full_then_rebuilt(world, root, "build_graph")


def test_a_read_only_artifact_root_ends_in_one_line(world):
    with mounted(world.tmp / "read-only", "64m") as root:
        shutil.copytree(world.reference / SNAPSHOT / "build_graph", root / SNAPSHOT / "build_graph")
        remount(root, "ro")
        code, log = finish(world.cli(root, "filter_leakage"))
        assert code == 2, log[-3000:]
        assert_one_line(log, "citeflow: error: the filesystem is read-only", "writable --artifacts")
        remount(root, "rw")
        assert_nothing_left(root, "filter_leakage")
        code, log = finish(world.cli(root, "filter_leakage"))
        assert code == 0, log[-3000:]
        assert digest(read(root, "filter_leakage")) == world.digests["filter_leakage"]


@pytest.mark.parametrize("damage", ["truncated", "not gzip"])
def test_an_unreadable_shard_ends_in_one_line_without_java_frames(world, damage):
    name = damage.replace(" ", "-")
    snapshot = world.tmp / f"snapshot-{name}"
    shutil.copytree(world.snapshot, snapshot)
    shard = sorted((snapshot / "corpus" / "metadata").glob("*.jsonl.gz"))[-1]
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2] if damage == "truncated" else gzip.decompress(data)[:5000])
    root = world.tmp / f"unreadable-{name}"
    run = lambda: world.cli(root, "build_graph", args=("--corpus", str(snapshot / "corpus")))  # noqa: E731
    code, log = finish(run())
    assert code == 2, log[-3000:]
    line = assert_one_line(log, f"citeflow: error: corpus file {shard} cannot be read (", "details in ")
    details = Path(line.rsplit("details in ", 1)[1])
    assert "\tat " in details.read_text()  # the Java frames went to the run's log, named in the line
    assert_nothing_left(root, "build_graph")
    shard.write_bytes(data)
    code, log = finish(run())
    assert code == 0, log[-3000:]
    assert digest(read(root, "build_graph")) == world.digests["build_graph"]


def test_ctrl_c_during_build_graph_ends_in_one_line_and_removes_the_staging(world):
    root = world.tmp / "interrupted"
    process = world.cli(root, "build_graph")
    building = root / SNAPSHOT / "build_graph"
    staged = lambda: building.is_dir() and any(building.glob("*/_staging/*"))  # noqa: E731
    assert wait_until(staged, timeout_s=240), Path(process.log_path).read_text()[-3000:]
    os.killpg(process.pid, signal.SIGINT)  # what a terminal sends the foreground group on Ctrl-C
    code, log = finish(process)
    assert code == 130, log[-3000:]
    assert_one_line(log, "citeflow: interrupted", "details in ")
    assert wait_until(lambda: not family(process.tag), timeout_s=60), family(process.tag)
    sweep(process.tag)
    assert_nothing_left(root, "build_graph")
    code, log = finish(world.cli(root, "build_graph"))
    assert code == 0, log[-3000:]
    assert digest(read(root, "build_graph")) == world.digests["build_graph"]


def test_a_model_folder_of_pickled_code_is_refused_in_one_line_before_any_work(world):
    import torch

    witness = world.tmp / "pickle-ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {witness}",))

    model = world.tmp / "pickled-model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "bert", "vocab_size": 10}))
    torch.save({"bert.embeddings.word_embeddings.weight": Payload()}, model / "pytorch_model.bin")
    root = world.copy("pickled", without=("train_encoder",))
    started = time.monotonic()
    code, log = finish(world.cli(root, "train_encoder", f"train_encoder.model={model}"))
    assert code == 2, log[-3000:]
    assert_one_line(log, "citeflow: error: model folder", "pytorch_model.bin is refused", "model.safetensors")
    assert "rerun to resume" not in log and not witness.exists()
    assert time.monotonic() - started < 120  # refused at preflight, before any stage ran
    assert_nothing_left(root, "train_encoder")


def fill_to(root: Path, free: int) -> None:
    """Shrink the tmpfs at `root` to what it holds plus `free` bytes."""
    used = shutil.disk_usage(root).used
    remount(root, f"size={(used + free) // 4096 * 4096}")


@pytest.mark.parametrize("free", [700 * 1024, 1800 * 1024], ids=["import", "training"])
def test_a_full_disk_during_embed_graph_ends_in_one_line_without_a_crash(world, free):
    # PBG's import (HDF5) and its training: a failed HDF5 close used to crash the process (exit 139) after ten
    # tracebacks
    with mounted(world.tmp / f"full-embed-{free}", "256m") as root:
        for stage in ("build_graph", "filter_leakage"):
            shutil.copytree(world.reference / SNAPSHOT / stage, root / SNAPSHOT / stage)
        fill_to(root, free)
        log = full_then_rebuilt(world, root, "embed_graph")
        assert "Segmentation" not in log and "core dumped" not in log


def test_a_full_disk_during_train_encoder_ends_in_one_line_and_frees_the_disk(world):
    with mounted(world.tmp / "full-train", "256m") as root:
        for stage in ("build_graph", "filter_leakage", "embed_graph", "mine_triplets"):
            shutil.copytree(world.reference / SNAPSHOT / stage, root / SNAPSHOT / stage)
        before = shutil.disk_usage(root).used
        fill_to(root, 1536 * 1024)  # the tokens and a checkpoint fit, not a second: the trainer child meets it
        code, log = finish(world.cli(root, "train_encoder"))
        assert code == 2, log[-3000:]
        assert_one_line(log, "citeflow: error: no space left on the device", "details in ")
        assert "rerun to resume" not in log
        work = root / SNAPSHOT / "train_encoder" / ".work"
        assert not work.exists() or not any(work.rglob("*")), list(work.rglob("*"))  # no partial files kept
        assert shutil.disk_usage(root).used <= before + 64 * 1024  # the disk is not left full
        assert_nothing_left(root, "train_encoder")
