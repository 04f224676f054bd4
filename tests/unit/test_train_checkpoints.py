"""A damaged latest checkpoint falls back to the previous good one, with a message; never a trap."""

import json
import os

import pytest

torch = pytest.importorskip("torch")
safetensors = pytest.importorskip("safetensors.torch")

from models.train_checkpoints import checkpoint_problem, find_checkpoint, latest_checkpoint, set_aside  # noqa: E402


def write_checkpoint(work, step):
    folder = work / f"ckpt-{step:08d}"
    folder.mkdir(parents=True)
    safetensors.save_file({"w": torch.full((4, 4), float(step))}, str(folder / "model.safetensors"))
    torch.save({"state": {}, "param_groups": [{"lr": 0.1 * step}]}, folder / "optimizer.pt")
    torch.save({"last_epoch": step}, folder / "scheduler.pt")
    torch.save({"cpu": torch.get_rng_state()}, folder / "rng-0.pt")
    (folder / "state.json").write_text(json.dumps({"step": step}))
    return folder


def flip_a_byte(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage, problem",
    [
        (lambda f: os.truncate(f / "model.safetensors", 50), "model.safetensors"),
        (lambda f: (f / "model.safetensors").write_bytes(b"garbage!" * 4), "model.safetensors has no valid header"),
        (lambda f: os.truncate(f / "optimizer.pt", 100), "optimizer.pt unreadable"),
        (lambda f: flip_a_byte(f / "scheduler.pt", 70), "scheduler.pt"),
        (lambda f: (f / "rng-0.pt").unlink(), "rng-0.pt is missing"),
        (lambda f: (f / "state.json").write_text("{"), "state.json unreadable"),
    ],
)
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(tmp_path, damage, problem):
    older = write_checkpoint(tmp_path, 5)
    newest = write_checkpoint(tmp_path, 10)
    assert checkpoint_problem(newest) is None and latest_checkpoint(tmp_path) == newest
    damage(newest)
    found, damaged = find_checkpoint(tmp_path)
    assert found == older and [d[0] for d in damaged] == [newest]
    assert problem in damaged[0][1]


def test_damaged_checkpoints_are_moved_aside_with_a_message(tmp_path, capsys):
    older = write_checkpoint(tmp_path, 5)
    newest = write_checkpoint(tmp_path, 10)
    os.truncate(newest / "optimizer.pt", 10)
    found, damaged = find_checkpoint(tmp_path)
    set_aside(damaged, found)
    out = capsys.readouterr().out
    assert "checkpoint ckpt-00000010 is damaged (optimizer.pt unreadable" in out
    assert "resuming from ckpt-00000005" in out
    assert (
        not newest.exists()
        and [p.name.startswith(".damaged-ckpt-00000010-") for p in tmp_path.iterdir()].count(True) == 1
    )
    # a new checkpoint of the same step can be written again, and the next run starts from the good one
    assert find_checkpoint(tmp_path) == (older, [])


def test_when_every_checkpoint_is_damaged_training_starts_over(tmp_path):
    for step in (5, 10):
        os.truncate(write_checkpoint(tmp_path, step) / "model.safetensors", 3)
    found, damaged = find_checkpoint(tmp_path)
    assert found is None and len(damaged) == 2
