"""SIGKILL of `citeflow run` at several points of each stage that starts a child (issue #16, attack 1).

The killed run's children (PBG's trainer and its spawned workers; the encoder trainer) must die with it,
write nothing more, and leave no committed version; the rerun must commit exactly the version an
uninterrupted run builds (same id, rows, row hashes, model weights).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.faults.conftest import SNAPSHOT, digest, family, finish, kill, sweep, wait_until


def _killed_at(world, root: Path, until: str, point: str, ready) -> None:
    """Run `citeflow run --until STAGE` in its own process and SIGKILL it at `point`."""
    env = {"CITEFLOW_FAULT_KILL": point} if point in ("child-started", "before-commit") else {}
    process = world.cli(root, until, env=env)
    try:
        if env:
            code, log = finish(process)
            assert code == -9, log  # the fault point killed the run itself
        else:
            assert wait_until(lambda: ready(root) or process.poll() is not None), "the stage never got there"
            assert process.poll() is None, finish(process)[1]
            kill(process)
        # every process the run started is gone within seconds, grandchildren included
        assert wait_until(lambda: family(process.tag) == [], timeout_s=15), family(process.tag)
    finally:
        sweep(process.tag)


def _version_folder(root: Path, stage: str, version: str) -> Path:
    return root / SNAPSHOT / stage / version


@pytest.mark.parametrize("point", ["child-started", "training", "before-commit"])
def test_embed_graph_killed_then_rerun_equals_an_uninterrupted_run(world, point):
    from citeflow.artifacts import ArtifactStore
    from citeflow.jobs import embed_graph

    reference = world.manifests["embed_graph"]
    root = world.copy(f"kill-embed-{point}", without=("embed_graph", "mine_triplets", "train_encoder"))
    folder = _version_folder(root, "embed_graph", reference.version)
    stats = folder / "pbg" / "mining" / "checkpoint" / "training_stats.json"

    def training(_root):  # PBG's trainer has spawned its workers and started the first epoch
        log = folder / "pbg" / "mining" / "train.log"
        return log.is_file() and "Starting epoch 1" in log.read_text(errors="replace")

    _killed_at(world, root, "embed_graph", point, training)
    store = ArtifactStore(str(root))
    assert store.read_manifest(SNAPSHOT, "embed_graph", reference.version) is None  # nothing committed
    # nothing writes into the folder any more (the orphaned trainer used to keep training into it)
    before = stats.read_bytes() if stats.exists() else None
    time.sleep(2)
    assert (stats.read_bytes() if stats.exists() else None) == before
    if point == "training":  # the trainer died in its first epoch: it did not train on to the end as an orphan
        assert before is None or len(before.splitlines()) < reference.tables["training_log"]["rows"]

    rebuilt = embed_graph.run(world.config(root))
    assert not rebuilt.skipped
    assert digest(rebuilt) == world.digests["embed_graph"]
    assert store.verify(rebuilt) == []
    assert rebuilt.tables["training_log"]["rows"] == 8  # one row per epoch, no doubled log
    # one version folder, the lease released (only the stage's lock file, which is never removed, is left)
    assert sorted(os.listdir(root / SNAPSHOT / "embed_graph")) == [reference.version]


# (before-commit is a stage-level point that embed_graph covers; each encoder run costs ~20 s here)
@pytest.mark.parametrize("point", ["child-started", "training"])
def test_train_encoder_killed_then_rerun_equals_an_uninterrupted_run(world, point, capfd):
    from citeflow.artifacts import ArtifactStore
    from citeflow.jobs import train_encoder

    reference = world.manifests["train_encoder"]
    root = world.copy(f"kill-encoder-{point}", without=("train_encoder",))
    work = root / SNAPSHOT / "train_encoder" / ".work" / reference.version

    def training(_root):  # a checkpoint exists and the trainer is still at it
        log = work / "log.jsonl"
        return log.is_file() and len(log.read_text().splitlines()) >= 7

    _killed_at(world, root, "train_encoder", point, training)
    store = ArtifactStore(str(root))
    assert store.read_manifest(SNAPSHOT, "train_encoder", reference.version) is None
    if point == "training":
        # the trainer died with its parent: its log stops growing
        lines = len((work / "log.jsonl").read_text().splitlines())
        time.sleep(2)
        assert len((work / "log.jsonl").read_text().splitlines()) == lines
        # and the newest checkpoint is damaged on top of it: the rerun falls back to the one before
        newest = sorted(work.joinpath("checkpoints").glob("ckpt-*"))[-1]
        os.truncate(newest / "optimizer.pt", 64)

    rebuilt = train_encoder.run(world.config(root))
    assert not rebuilt.skipped
    assert digest(rebuilt) == world.digests["train_encoder"]
    assert store.verify(rebuilt) == []
    if point == "training":
        out = capfd.readouterr()
        assert f"checkpoint {newest.name} is damaged (optimizer.pt unreadable" in out.err + out.out
        assert rebuilt.metrics["resumed_from_step"] == int(newest.name.split("-")[1]) - 3
    assert not work.exists()
