"""The CPU recipe's parts: a loss over the whole optimizer step (GradCache), bf16 on a CPU that has it, and the
progress lines a user watches during a long stage."""

import io
import logging
import sys

import pytest
import torch

from citeflow import progress as P
from citeflow.models.training import step as train_step
from citeflow.models.training.losses import STEP_WIDE, in_batch_loss, loss_of
from citeflow.models.training.step import cached_step_gradients, micro_batch_vectors
from citeflow.process import run_child


class Encoder(torch.nn.Module):
    """A stand-in for `piecewise`: (pieces, inverse) in, one vector per paper out, with dropout."""

    def __init__(self, dropout: float) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(6, 5)
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, pieces, inverse):
        ((x, _),) = pieces
        return self.dropout(self.layer(x.float()))[inverse]


def micro_batches(x: torch.Tensor, parts: int):
    """`x` (3 x triplets rows: queries, positives, negatives) cut into `parts` micro-batches of whole triplets."""
    n = len(x) // 3
    q, p, neg = x[:n], x[n : 2 * n], x[2 * n :]
    size = n // parts
    out = []
    for k in range(parts):
        rows = torch.cat([t[k * size : (k + 1) * size] for t in (q, p, neg)])
        out.append(([(rows, torch.ones(len(rows)))], torch.arange(len(rows))))
    return out


class Spec:
    loss, margin, scale = "in_batch", 0.0, 20.0


def gradients(model):
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def test_the_in_batch_loss_of_a_step_of_micro_batches_is_the_loss_of_the_whole_step():
    # 8 triplets as 4 micro-batches of 2: each query still ranks its positive among all 16 papers of the step
    x = torch.randn(24, 6, generator=torch.Generator().manual_seed(1))
    whole, cached = Encoder(0.0), Encoder(0.0)
    vectors = whole(*micro_batches(x, 1)[0])
    expected = in_batch_loss(vectors[:8], vectors[8:16], vectors[16:], 20.0)
    expected.backward()
    loss = cached_step_gradients(
        cached, micro_batches(x, 4), micro_batch_vectors(cached, "fp32", x.device), loss_of(Spec)
    )
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert torch.allclose(gradients(cached), gradients(whole), atol=1e-6)
    # the micro-batches' own losses, averaged, are another (smaller-candidate) loss: the trainer must not use it
    alone = Encoder(0.0)
    per_micro = sum(in_batch_loss(v[:2], v[2:4], v[4:], 20.0) / 4 for v in (alone(*m) for m in micro_batches(x, 4)))
    assert abs(per_micro.item() - expected.item()) > 1e-3
    assert "in_batch" in STEP_WIDE and "triplet" not in STEP_WIDE


def test_the_second_forward_draws_the_first_forwards_dropout_masks():
    # with dropout on, GradCache's gradients are right only when each micro-batch's two forwards drop the same units
    x = torch.randn(12, 6, generator=torch.Generator().manual_seed(2))
    model = Encoder(0.5)
    vectors_of = micro_batch_vectors(model, "fp32", x.device)
    seen = []

    def vectors_and_record(part):
        out = vectors_of(part)
        seen.append(out.detach().clone())
        return out

    torch.manual_seed(3)
    cached_step_gradients(model, micro_batches(x, 2), vectors_and_record, loss_of(Spec))
    first, second = seen[:2], seen[2:]
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    assert not torch.equal(first[0], Encoder(0.0)(*micro_batches(x, 2)[0]))  # dropout did drop units


def test_auto_precision_is_bf16_on_a_cpu_with_bf16_instructions_and_fp32_elsewhere(monkeypatch):
    monkeypatch.setattr(train_step, "cpu_has_bf16", lambda: True)
    assert train_step.resolve_precision("auto", cuda=False) == "bf16"
    monkeypatch.setattr(train_step, "cpu_has_bf16", lambda: False)
    assert train_step.resolve_precision("auto", cuda=False) == "fp32"
    assert train_step.resolve_precision("bf16", cuda=False) == "bf16"  # asked for: kept
    assert train_step.resolve_precision("fp16", cuda=False) == "fp32"  # a CPU gains nothing from fp16
    assert train_step.autocast_settings("bf16", torch.device("cpu")) == {
        "device_type": "cpu",
        "dtype": torch.bfloat16,
        "enabled": True,
    }
    assert train_step.autocast_settings("fp32", torch.device("cpu"))["enabled"] is False


def test_bf16_autocast_on_a_cpu_gives_the_fp32_vectors_to_bf16_rounding():
    x = torch.randn(9, 6, generator=torch.Generator().manual_seed(4))
    model = Encoder(0.0)
    part = micro_batches(x, 1)[0]
    fp32 = micro_batch_vectors(model, "fp32", x.device)(part)
    bf16 = micro_batch_vectors(model, "bf16", x.device)(part)
    assert bf16.dtype == torch.float32 and not torch.equal(fp32, bf16)
    assert torch.allclose(fp32, bf16, atol=5e-2)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_writes_a_line_at_least_every_30_seconds_with_rate_loss_and_time_left():
    clock, lines = Clock(), []
    with P.Progress(
        "train_encoder",
        total=100,
        unit="step",
        rate_of=16,
        rate_unit="triplets",
        emit=lines.append,
        mode="lines",
        clock=clock,
    ) as progress:
        for _ in range(20):
            clock.now += 2.0  # a step every 2 s: 8 triplets/s
            progress.update(1, loss=0.5)
        assert len(lines) == 1  # at 30 s, not at every step
        assert lines[0] == "train_encoder progress: step 15/100 (15%), 8.0 triplets/s, loss 0.500, 2m50s left"
    assert len(lines) == 2 and lines[1].startswith("train_encoder progress: step 20/100 (20%)")  # and at the end
    assert all(P.is_progress_line(line) for line in lines)
    assert not P.is_progress_line("Traceback: progress: of a stage") and not P.is_progress_line(
        "train_encoder: epoch 0"
    )


def test_progress_without_a_total_counts_time_spent():
    clock, lines = Clock(), []
    progress = P.Progress("embed_papers", total=None, unit="paper", emit=lines.append, mode="lines", clock=clock)
    clock.now += 31
    progress.update(64)
    assert lines == ["embed_papers progress: paper 64, 2.1 papers/s, 31s so far"]
    assert P.duration(3 * 3600 + 125) == "3h02m" and P.duration(59.6) == "1m00s"


def test_a_child_s_progress_lines_are_handed_to_the_parent_and_the_rest_goes_to_stderr(tmp_path, monkeypatch):
    script = (
        "import sys, time\n"
        "print('train_encoder progress: step 1/2 (50%), 1.0 triplets/s, 1s left', flush=True)\n"
        "print('a warning', flush=True)\n"
        "sys.stdout.write('train_encoder progress: step 2/2 (100%)')\n"  # the last line without its newline
    )
    relayed, err = [], io.BytesIO()
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(err))
    code = run_child(
        [sys.executable, "-c", script],
        log_path=tmp_path / "child.log",
        echo=True,
        relay=lambda line: P.is_progress_line(line) and (relayed.append(line) or True),
    )
    sys.stderr.flush()
    assert code == 0
    assert relayed == [
        "train_encoder progress: step 1/2 (50%), 1.0 triplets/s, 1s left",
        "train_encoder progress: step 2/2 (100%)",
    ]
    assert err.getvalue() == b"a warning\n"
    assert (tmp_path / "child.log").read_text().count("progress:") == 2  # the child's own log keeps everything


def test_the_trainer_launch_logs_its_childs_progress_lines(tmp_path, monkeypatch, caplog):
    from citeflow.jobs import train_launch

    child = tmp_path / "child.py"
    child.write_text("print('train_encoder progress: step 3/9 (33%), 2.0 triplets/s, 9s left')\n")
    monkeypatch.setenv(P.PROGRESS_ENV, "lines")
    monkeypatch.setattr(train_launch.sys, "executable", sys.executable)
    commands = []
    real = run_child

    def fake(command, **kwargs):
        commands.append(command)
        return real([sys.executable, str(child)], **kwargs)

    monkeypatch.setattr("citeflow.process.run_child", fake)
    with caplog.at_level(logging.INFO, logger="citeflow"):
        train_launch.launch(tmp_path / "spec.json", 1, tmp_path / "train.log")
    assert "train_encoder progress: step 3/9 (33%), 2.0 triplets/s, 9s left" in caplog.messages


def test_a_trainer_that_fails_before_its_first_step_leaves_no_empty_step_log(tmp_path):
    from types import SimpleNamespace

    from citeflow.models.training.plan import StepLog

    plan = SimpleNamespace(total=4, start=0, spec=SimpleNamespace(batch_size=2))
    with pytest.raises(RuntimeError), StepLog(str(tmp_path / "log.jsonl"), plan, rank=0, world=1):
        raise RuntimeError("the model did not load")
    assert not (tmp_path / "log.jsonl").exists()
    with StepLog(str(tmp_path / "log.jsonl"), plan, rank=0, world=1) as log:
        log.add({"step": 1}, torch.tensor(0.5, dtype=torch.float64), torch.tensor(1.0))
        log.flush()
    assert (tmp_path / "log.jsonl").read_text().startswith('{"step": 1, "loss": 0.5')


def test_a_run_refused_before_any_work_names_a_log_that_holds_the_error(tmp_path):
    import os
    import subprocess

    env = {**os.environ, "CITEFLOW_LOG_DIR": str(tmp_path / "logs")}
    done = subprocess.run(
        [sys.executable, "-m", "citeflow.jobs.cli", "run", "--snapshot", "x", "--corpus", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    (log,) = (tmp_path / "logs").iterdir()
    assert f"details in {log}" in done.stderr
    text = log.read_text()
    assert "does not exist" in text and "Traceback" in text


def test_a_failed_training_leaves_no_half_written_folders_and_a_full_disk_no_work_at_all(tmp_path):
    import errno

    from citeflow.jobs.train_encoder import _clean_after_failure

    def work_folder(name):
        work = tmp_path / name / ".work" / "v1"
        for part in ("base_model.tmp", "checkpoints/.ckpt-00000006.tmp", "checkpoints/ckpt-00000003", "tokens"):
            (work / part).mkdir(parents=True)
            (work / part / "x").write_bytes(b"0" * 100)
        return work

    work = work_folder("crash")
    _clean_after_failure(work, RuntimeError("the model diverged"))
    left = sorted(p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_dir())
    assert left == ["checkpoints", "checkpoints/ckpt-00000003", "tokens"]  # a rerun resumes from these

    work = work_folder("full")
    _clean_after_failure(work, OSError(errno.ENOSPC, "No space left on device"))
    assert not work.exists() and not work.parent.exists()  # nothing keeps the disk full
