"""The encoder pieces: small model round trip, pooling, token store, and the trainer's resume and DDP paths."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from citeflow.errors import CiteflowError
from models import train_encoder as trainer
from models.encoder import TokenStore, build_small, collate, load, paper_text, pool
from models.train_encoder import TrainSpec, accumulate_gradients, triplet_loss

REPO = Path(__file__).resolve().parents[2]
WORDS = (
    "graph neural network protein folding enzyme kinetics galaxy survey quasar lensing tumour "
    "immunotherapy citation embedding transformer"
).split()


def corpus(n=60, seed=0):
    rng = np.random.default_rng(seed)
    ids = np.arange(1000, 1000 + n, dtype=np.int64)
    titles = [" ".join(rng.choice(WORDS, 4)).title() for _ in range(n)]
    abstracts = [" ".join(rng.choice(WORDS, 25)) + "." for _ in range(n)]
    return ids, titles, abstracts


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    ids, titles, abstracts = corpus()
    out = tmp_path_factory.mktemp("small") / "model"
    build_small(
        [paper_text(t, a, "") for t, a in zip(titles, abstracts, strict=True)],
        out,
        vocab_size=200,
        hidden=32,
        layers=1,
        heads=2,
        intermediate=64,
        max_length=64,
        seed=0,
        dropout=0.0,
    )
    return out


def test_paper_text_is_title_sep_abstract():
    assert paper_text("A Title ", " the abstract", "[SEP]") == "A Title [SEP] the abstract"
    assert paper_text(None, "only abstract", "[SEP]") == "[SEP] only abstract"


def test_small_model_reloads_with_plain_transformers(small):
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = load(str(small))
    plain_tok = AutoTokenizer.from_pretrained(str(small))
    plain = AutoModel.from_pretrained(str(small), add_pooling_layer=False).eval()
    assert (small / "model.safetensors").is_file() and (small / "tokenizer.json").is_file()
    text = paper_text("Graph Neural Network", "protein folding and enzyme kinetics", tokenizer.sep_token)
    a = tokenizer([text], return_tensors="pt")
    assert a["input_ids"][0, 0] == tokenizer.cls_token_id and tokenizer.sep_token_id in a["input_ids"][0]
    assert plain_tok.tokenize("GRAPH") == plain_tok.tokenize("graph")  # lower-cased WordPiece
    with torch.inference_mode():
        x = model.eval()(**a).last_hidden_state
        y = plain(**plain_tok([text], return_tensors="pt")).last_hidden_state
    assert torch.equal(x, y)


def test_model_dir_errors_are_clear(tmp_path):
    with pytest.raises(CiteflowError, match="does not exist"):
        load(str(tmp_path / "missing"))
    with pytest.raises(CiteflowError, match="no config.json"):
        load(str(tmp_path))


def test_pooling_by_hand():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert pool(hidden, mask, "cls").tolist() == [[1.0, 2.0]]
    assert pool(hidden, mask, "mean").tolist() == [[2.0, 3.0]]


def test_token_store_round_trip(small, tmp_path):
    tokenizer, _ = load(str(small), tokenizer_only=True)
    ids, titles, abstracts = corpus(10)
    batches = [(ids[:4], titles[:4], abstracts[:4]), (ids[4:], titles[4:], abstracts[4:])]
    store = TokenStore.write(tmp_path / "tokens", iter(batches), tokenizer, 16, 10)
    assert len(store) == 10 and not (tmp_path / "tokens.tmp").exists()
    for i in (0, 5, 9):
        want = tokenizer(paper_text(titles[i], abstracts[i], tokenizer.sep_token), truncation=True, max_length=16)[
            "input_ids"
        ]
        assert store.get(i).tolist() == want
    assert store.rows(np.array([1009, 1000])).tolist() == [9, 0]
    with pytest.raises(CiteflowError, match="no text"):
        store.rows(np.array([5]))
    ids_t, mask = collate([np.array([5, 6, 7]), np.array([8])], pad_id=0)
    assert ids_t.tolist() == [[5, 6, 7], [8, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_triplet_loss_by_hand():
    q = torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    p = torch.tensor([[3.0, 4.0], [0.0, 1.0]])  # distances 5 and 1
    n = torch.tensor([[0.0, 1.0], [6.0, 8.0]])  # distances 1 and 10
    # max(5 - 1 + 1, 0) = 5 and max(1 - 10 + 1, 0) = 0: mean 2.5
    assert triplet_loss(q, p, n, margin=1.0).item() == pytest.approx(2.5, abs=1e-5)
    assert triplet_loss(q[1:], p[1:], n[1:], margin=10.0).item() == pytest.approx(1.0, abs=1e-5)


def test_train_spec_refuses_unknown_settings(tmp_path):
    (tmp_path / "spec.json").write_text(json.dumps({"tokens": "t", "learning_rate": 1e-3}))
    with pytest.raises(SystemExit, match="unknown training settings learning_rate"):
        TrainSpec.read(tmp_path / "spec.json")


def make_spec(small, tmp_path, name, **over):
    tokenizer, _ = load(str(small), tokenizer_only=True)
    ids, titles, abstracts = corpus()
    tokens = tmp_path / "tokens"
    if not tokens.exists():
        TokenStore.write(tokens, iter([(ids, titles, abstracts)]), tokenizer, 48, len(ids))
        rng = np.random.default_rng(1)
        q, p, n = (rng.choice(ids, 96) for _ in range(3))
        pq.write_table(pa.table({"query_id": q, "positive_id": p, "negative_id": n}), tmp_path / "triplets.parquet")
    run = tmp_path / name
    run.mkdir()
    spec = {
        "tokens": str(tokens),
        "triplets": str(tmp_path / "triplets.parquet"),
        "model_in": str(small),
        "model_out": str(run / "model"),
        "work": str(run / "checkpoints"),
        "log": str(run / "log.jsonl"),
        "epochs": 2,
        "max_steps": 0,
        "batch_size": 8,
        "per_device_batch": 4,
        "lr": 1e-3,
        "weight_decay": 0.01,
        "warmup_fraction": 0.1,
        "margin": 1.0,
        "bitfit": False,
        "bitfit_lr": 1e-4,
        "pooling": "cls",
        "seed": 3,
        "gradient_checkpointing": False,
        "precision": "auto",
        "checkpoint_every": 5,
        "citeflow": {"test": name},
        "device": "cpu",
        **over,
    }
    (run / "spec.json").write_text(json.dumps(spec))
    return run


def train(run, nproc=1, env=None):
    module = ["-m", "models.train_encoder", str(run / "spec.json")]
    command = (
        [sys.executable, *module]
        if nproc == 1
        else [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *module]
    )
    return subprocess.run(
        command,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )


def weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_killed_training_resumes_to_the_same_model(small, tmp_path):
    # the documented conditions: deterministic=true (one thread, deterministic algorithms), whatever OMP says
    two_threads = {"OMP_NUM_THREADS": "2"}
    whole = make_spec(small, tmp_path, "whole", deterministic=True)
    done = train(whole, env=two_threads)
    assert done.returncode == 0, done.stdout[-3000:]
    log = [json.loads(line) for line in (whole / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 25))  # 96 triplets / 8 = 12 steps x 2 epochs
    assert json.loads((whole / "model" / "citeflow.json").read_text()) == {"test": "whole"}

    killed = make_spec(small, tmp_path, "killed", deterministic=True)
    first = train(killed, env={"CITEFLOW_KILL_AT_STEP": "13", **two_threads})
    assert first.returncode == -9  # SIGKILL after step 13
    assert not (killed / "model").exists()
    assert sorted(p.name for p in (killed / "checkpoints").glob("ckpt-*")) == ["ckpt-00000005", "ckpt-00000010"]
    second = train(killed, env=two_threads)
    assert second.returncode == 0, second.stdout[-3000:]
    assert "resuming from ckpt-00000010" in second.stdout + second.stderr
    a, b = weights(whole / "model"), weights(killed / "model")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    resumed_log = [json.loads(line) for line in (killed / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in resumed_log] == list(range(1, 25))
    assert [r["loss"] for r in resumed_log] == [r["loss"] for r in log]


def test_bitfit_trains_only_biases(small, tmp_path):
    run = make_spec(small, tmp_path, "bitfit", bitfit=True, max_steps=3)
    done = train(run)
    assert done.returncode == 0, done.stdout[-3000:]
    before, after = weights(small), weights(run / "model")
    changed = {k for k in after if not torch.equal(before[k], after[k])}
    assert changed and all(k.endswith("bias") for k in changed)


@pytest.mark.slow
def test_two_processes_with_ddp_match_one_with_accumulation(small, tmp_path):
    one = make_spec(small, tmp_path, "one", max_steps=6)
    two = make_spec(small, tmp_path, "two", max_steps=6, per_device_batch=4)
    assert train(one).returncode == 0
    done = train(two, nproc=2)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    a, b = weights(one / "model"), weights(two / "model")
    # the same effective batch of 8: one process accumulates 2 x 4, two processes average 4 + 4 (gloo, CPU)
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
    la = [json.loads(x)["loss"] for x in (one / "log.jsonl").read_text().splitlines()]
    lb = [json.loads(x)["loss"] for x in (two / "log.jsonl").read_text().splitlines()]
    assert np.allclose(la, lb, atol=1e-5)


def test_gradient_checkpointing_trains_the_same_model(small, tmp_path):
    plain = make_spec(small, tmp_path, "plain", max_steps=3)
    checkpointed = make_spec(small, tmp_path, "checkpointed", max_steps=3, gradient_checkpointing=True)
    for run in (plain, checkpointed):
        done = train(run)
        assert done.returncode == 0, done.stdout[-3000:]
    a, b = weights(plain / "model"), weights(checkpointed / "model")
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_gradients_are_clipped_at_max_grad_norm(small, tmp_path, monkeypatch):
    at_step = []
    original = torch.optim.AdamW.step

    def spy(self, *args, **kwargs):
        grads = [p.grad for group in self.param_groups for p in group["params"] if p.grad is not None]
        at_step.append(torch.sqrt(sum((g.double() ** 2).sum() for g in grads)).item())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", spy)
    logged = {}
    for limit in (0.01, 0.0):
        run = make_spec(small, tmp_path, f"clip-{limit}", max_steps=3, max_grad_norm=limit)
        trainer.train(TrainSpec.read(run / "spec.json"))
        logged[limit] = [json.loads(line)["grad_norm"] for line in (run / "log.jsonl").read_text().splitlines()]
    clipped, free = at_step[:3], at_step[3:]
    assert min(logged[0.01]) > 0.05  # the gradients are well above the limit before clipping...
    assert max(clipped) <= 0.01 * (1 + 1e-4)  # ...and at it when the optimizer steps
    assert free == pytest.approx(logged[0.0], rel=1e-4) and min(free) > 0.05  # 0 turns clipping off


def test_loss_scaler_state_survives_a_checkpoint(tmp_path):
    from transformers import get_linear_schedule_with_warmup

    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = get_linear_schedule_with_warmup(optimizer, 1, 10)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    for overflow in (True, False):  # 1024 halves to 512 on the overflow; the good step counts 1 towards growth
        scaler.scale(model(torch.ones(2, 3)).sum()).backward()
        if overflow:
            model.weight.grad[0, 0] = float("inf")
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    trainer._save_checkpoint(tmp_path, 7, model, optimizer, scheduler, scaler, rank=0, world=1, cuda=False)
    fresh = torch.amp.GradScaler("cpu")
    step = trainer._load_checkpoint(
        tmp_path / "ckpt-00000007", model, optimizer, scheduler, fresh, rank=0, device="cpu", cuda=False
    )
    assert step == 7 and fresh.get_scale() == 512.0 and fresh.state_dict()["_growth_tracker"] == 1


def _count_all_reduces(rank: int, init: str, results: str) -> None:
    """One of two gloo processes: DDP over a linear model, 4 micro-batches, gradient all-reduces counted."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    counts = {}
    for how in ("trainer", "forward outside no_sync"):
        ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
        calls = []

        def counting(state, bucket, calls=calls):
            calls.append(1)
            return default_hooks.allreduce_hook(state, bucket)

        ddp.register_comm_hook(dist.group.WORLD, counting)
        parts = [torch.full((2, 4), float(rank + i)) for i in range(4)]
        if how == "trainer":
            accumulate_gradients(ddp, parts, lambda x, ddp=ddp: ddp(x).sum() / 4)
        else:  # the order this trainer had before: the forward outside no_sync()
            for i, x in enumerate(parts):
                loss = ddp(x).sum() / 4
                with ddp.no_sync() if i < 3 else torch.enable_grad():
                    loss.backward()
        counts[how] = len(calls)
    Path(f"{results}-{rank}.json").write_text(json.dumps(counts))
    dist.destroy_process_group()


@pytest.mark.slow
def test_ddp_all_reduces_once_per_optimizer_step(tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(_count_all_reduces, args=(f"file://{tmp_path}/rendezvous", str(tmp_path / "calls")), nprocs=2)
    for rank in range(2):
        counts = json.loads((tmp_path / f"calls-{rank}.json").read_text())
        # one all-reduce for four micro-batches; with the forward outside no_sync(), one per micro-batch
        assert counts == {"trainer": 1, "forward outside no_sync": 4}
