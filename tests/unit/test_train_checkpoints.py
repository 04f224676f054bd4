"""A damaged latest checkpoint falls back to the previous good one, with a message; never a trap."""

import json
import os

import pytest

torch = pytest.importorskip("torch")
safetensors = pytest.importorskip("safetensors.torch")

from citeflow.models.training.checkpoints import checkpoint_problem, find_checkpoint, latest_checkpoint, set_aside  # noqa: E402


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


def test_the_losses_on_hand_made_vectors():
    """`loss_of`: the L2 triplet loss, its cosine-distance form and the in-batch softmax, worked out by hand on
    2-d vectors."""
    import math

    import torch

    from citeflow.models.training.losses import loss_of

    def spec(**kw):
        return type("Spec", (), {"loss": "triplet", "margin": 1.0, "scale": 20.0, **kw})()

    q = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    p = torch.tensor([[1.0, 1.0], [0.0, 1.0]])
    n = torch.tensor([[-1.0, 0.0], [3.0, 2.0]])
    # L2: row 1 d(q,p) = 1, d(q,n) = 2 -> max(1 - 2 + 1, 0) = 0; row 2 d = 1, 3 -> 0; margin 2.5: 1.5 and 0.5
    assert loss_of(spec(margin=2.5))(q, p, n).item() == pytest.approx(1.0)
    # cosine distance: row 1: 1 - cos 45° and 1 - cos 180° = 2; row 2: 0 and 1 - 4 / (2 sqrt 13)
    d_n2 = 1 - 4 / (2 * math.sqrt(13))
    want = (max(1 - math.sqrt(0.5) - 2 + 0.5, 0) + max(0 - d_n2 + 0.5, 0)) / 2
    assert loss_of(spec(loss="triplet_cosine", margin=0.5))(q, p, n).item() == pytest.approx(want, abs=1e-6)
    # in batch: each query against both positives and both negatives, softmax of 20 x cosine
    cos = torch.nn.functional.normalize(q, dim=-1) @ torch.nn.functional.normalize(torch.cat([p, n]), dim=-1).T
    rows = [-math.log(math.exp(20 * cos[i, i]) / sum(math.exp(20 * c) for c in cos[i])) for i in range(2)]
    assert loss_of(spec(loss="in_batch"))(q, p, n).item() == pytest.approx(sum(rows) / 2, rel=1e-5)
    with pytest.raises(SystemExit, match="unknown loss"):
        loss_of(spec(loss="nope"))
