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
from citeflow.models.encoder.model import build_small, load, paper_text, pool
from citeflow.models.training import checkpoints as train_checkpoints
from citeflow.models.training import plan as train_plan
from citeflow.models.training import prefetch as prefetch
from citeflow.models.training import step as train_step
from citeflow.models.training import train as trainer
from citeflow.models.training.losses import triplet_loss
from citeflow.models.training.step import accumulate_gradients
from citeflow.models.training.token_batches import TokenStore, collate
from citeflow.models.training.train import TrainSpec

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
    module = ["-m", "citeflow.models.training.train", str(run / "spec.json")]
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


@pytest.mark.slow  # trains in child processes, killed and resumed
def test_killed_training_resumes_to_the_same_model(small, tmp_path):
    # the documented conditions: deterministic=true (one thread, deterministic algorithms), whatever OMP says
    two_threads = {"OMP_NUM_THREADS": "2"}
    whole = make_spec(small, tmp_path, "whole", deterministic=True)
    done = train(whole, env=two_threads)
    assert done.returncode == 0, done.stdout[-3000:]
    log = [json.loads(line) for line in (whole / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 25))  # 96 triplets / 8 = 12 steps x 2 epochs
    assert json.loads((whole / "model" / "citeflow.json").read_text()) == {
        "test": "whole",
        "kept_step": 24,
        "heldout_triplets": 0,
        "trained_triplets": 96,
    }

    killed = make_spec(small, tmp_path, "killed", deterministic=True)
    first = train(killed, env={"CITEFLOW_FAULT_KILL": "train_encoder.step.13", **two_threads})
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


@pytest.mark.slow  # trains in a child process
def test_held_out_triplets_are_scored_while_training_and_keep_best_keeps_the_best_step(small, tmp_path):
    """Whole held-out queries' triplets are scored before training, every eval_every steps and after the last,
    never trained on; keep=best commits the weights of the best scored step (the later of a tie), which is then
    what citeflow.json says, and takes a checkpoint at each scored step."""
    from citeflow.models.training.heldout import held_out

    run = make_spec(
        small, tmp_path, "best", max_steps=8, eval_triplets=30, eval_every=2, keep="best", lr=5e-3, checkpoint_every=100
    )
    (run / "spec.json").write_text(
        json.dumps({**json.loads((run / "spec.json").read_text()), "eval_log": str(run / "eval.jsonl")})
    )
    done = train(run)
    assert done.returncode == 0, done.stdout[-3000:]
    curve = [json.loads(line) for line in (run / "eval.jsonl").read_text().splitlines()]
    assert [r["step"] for r in curve] == [0, 2, 4, 6, 8]
    assert all(0 <= r["heldout_accuracy"] <= 1 and 0 < r["heldout_mrr"] <= 1 for r in curve)
    best = max((r for r in curve if r["step"] > 0), key=lambda r: (r["heldout_mrr"], r["step"]))
    assert json.loads((run / "model" / "citeflow.json").read_text())["kept_step"] == best["step"]
    from safetensors import safe_open
    from safetensors.torch import load_file

    kept, saved = weights(run / "model"), load_file(str(run / "checkpoints" / "best.safetensors"))
    assert kept.keys() == saved.keys() and all(torch.equal(kept[k], saved[k]) for k in kept)

    with safe_open(str(run / "checkpoints" / "best.safetensors"), framework="pt") as f:
        assert f.metadata()["step"] == str(best["step"])
    # a checkpoint at each scored step (the newest two kept), so a resumed run never keeps a step it lost
    assert sorted(p.name for p in (run / "checkpoints").glob("ckpt-*")) == ["ckpt-00000004", "ckpt-00000006"]
    # none of the held-out queries' triplets is among those the steps trained on: 96 - held out, in 8-triplet steps
    queries = pq.read_table(str(tmp_path / "triplets.parquet")).column("query_id").to_numpy()
    assert 0 < held_out(queries, 30, seed=3).sum() <= 96 // 3
    assert f"{held_out(queries, 30, seed=3).sum():,} held-out triplets" in done.stdout


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
    la = [json.loads(x)["loss"] for x in (one / "log.jsonl").read_text().splitlines()]
    lb = [json.loads(x)["loss"] for x in (two / "log.jsonl").read_text().splitlines()]
    # the same effective batch of 8: one process accumulates 2 x 4, two processes average 4 + 4 (gloo, CPU).
    # On failure, the largest differences and both loss curves (a failure seen once in a loaded suite run,
    # not reproduced in 7 runs alone or under load: these say whether it was rounding or a different step)
    differences = sorted(((a[k] - b[k]).abs().max().item(), k) for k in a)[-3:]
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a), (differences, la, lb)
    assert np.allclose(la, lb, atol=1e-5), (la, lb)


@pytest.mark.slow  # trains the model twice: make test, not make test-fast
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
    train_checkpoints.save_checkpoint(tmp_path, 7, model, optimizer, scheduler, scaler, rank=0, world=1, cuda=False)
    fresh = torch.amp.GradScaler("cpu")
    step = train_checkpoints.load_checkpoint(
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


def test_group_by_length_sorts_each_mega_batch_longest_first():
    from citeflow.models.training.token_batches import group_by_length

    lengths = np.array([10, 40, 20, 80, 30, 70, 50, 60, 90])
    order = np.array([5, 2, 7, 0, 3, 1, 6, 4])
    # mega-batches of 2 batches of 2: [5 2 7 0] has lengths 70 20 60 10, [3 1 6 4] has 80 40 50 30
    assert group_by_length(order, lengths, batch=2, group=2).tolist() == [5, 7, 2, 0, 3, 6, 1, 4]
    # 3 batches a mega-batch: [5 2 7 0 3 1] -> 3 5 7 1 2 0; the short last one [6 4] (50, 30) stays
    assert group_by_length(order, lengths, batch=2, group=3).tolist() == [3, 5, 7, 1, 2, 0, 6, 4]
    # the entry an epoch drops (9 is not a multiple of 2) stays last, however long it is
    tail = np.array([5, 2, 7, 0, 3, 1, 6, 4, 8])
    assert group_by_length(tail, lengths, batch=2, group=2).tolist() == [5, 7, 2, 0, 3, 6, 1, 4, 8]
    # equal lengths keep their permuted order (stable)
    assert group_by_length(np.array([3, 1, 2, 0]), np.ones(4), batch=2, group=2).tolist() == [3, 1, 2, 0]


def test_shuffle_groups_moves_whole_batches_within_their_mega_batch():
    from citeflow.models.training.token_batches import shuffle_groups

    order = np.arange(26)
    out = shuffle_groups(order, batch=2, group=4, rng=np.random.default_rng(0))
    pairs = out[:24].reshape(-1, 2)
    assert all(b - a == 1 and a % 2 == 0 for a, b in pairs)  # every batch whole
    for lo in (0, 8, 16):  # and within its own mega-batch of 8
        assert sorted(out[lo : lo + 8].tolist()) == list(range(lo, lo + 8))
    assert out[24:].tolist() == [24, 25]
    assert out.tolist() != order.tolist()


def test_padding_share_by_hand():
    from citeflow.models.training.token_batches import padding_share

    lengths = np.array([[3, 5, 2], [4, 4, 4], [1, 1, 1], [2, 2, 6]])
    # batch [0 1]: 22 tokens padded to 6 x 5 = 30; batch [2 3]: 13 tokens padded to 6 x 6 = 36
    assert padding_share(lengths, np.array([[0, 1], [2, 3]])) == pytest.approx(1 - 35 / 66)
    assert padding_share(lengths, np.array([[1]])) == 0.0
    # in 3 forward passes: batch [0 1] sorted 2 3 | 4 4 | 4 5 pads to 2 x 3 + 2 x 4 + 2 x 5 = 24
    assert padding_share(lengths, np.array([[0, 1]]), pieces=3) == pytest.approx(1 - 22 / 24)
    # padded as collate_rows pads on a GPU: each batch to 16 (a multiple of 16), 6 x 16 = 96 each; the limit caps
    assert padding_share(lengths, np.array([[0, 1], [2, 3]]), multiple=16) == pytest.approx(1 - 35 / 192)
    assert padding_share(lengths, np.array([[0, 1], [2, 3]]), multiple=16, limit=8) == pytest.approx(1 - 35 / 96)


def test_epoch_order_is_seeded_and_groups_lengths():
    rng = np.random.default_rng(0)
    lengths = rng.integers(10, 500, 640)
    base = dict(
        tokens="t", triplets="t", model_in="m", model_out="o", work="w", log="l", epochs=1, batch_size=8,
        per_device_batch=4, lr=1e-3, weight_decay=0.0, warmup_fraction=0.0, margin=1.0, pooling="cls", seed=3,
        checkpoint_every=5,
    )  # fmt: skip
    grouped, plain = TrainSpec(**base), TrainSpec(**base, length_grouping=False)
    a, b = train_plan.epoch_order(grouped, 1, lengths), train_plan.epoch_order(grouped, 1, lengths)
    assert np.array_equal(a, b) and sorted(a.tolist()) == list(range(640))
    assert not np.array_equal(a, train_plan.epoch_order(grouped, 2, lengths))
    # without grouping: the seeded permutation the trainer always used
    generator = torch.Generator().manual_seed(3 * 1000 + 1)
    assert np.array_equal(train_plan.epoch_order(plain, 1, lengths), torch.randperm(640, generator=generator).numpy())
    # grouping keeps each batch's triplets but makes micro-batches of similar length
    from citeflow.models.training.token_batches import padding_share

    grouped_share = padding_share(lengths[:, None], a.reshape(-1, 4))
    plain_share = padding_share(lengths[:, None], train_plan.epoch_order(plain, 1, lengths).reshape(-1, 4))
    # four uniform lengths in 10..500 pad to their maximum: about 1 - 255 / 402 = 0.37 of the tokens
    assert grouped_share < 0.05 and 0.3 < plain_share < 0.45
    batches = a.reshape(-1, 8)  # each optimizer batch of 8 holds 8 of the mega-batch's sorted triplets
    assert all(np.ptp(lengths[b]) < 100 for b in batches)


def test_collate_rows_matches_collate(small, tmp_path):
    from citeflow.models.training.token_batches import collate_pieces, collate_rows

    tokenizer, _ = load(str(small), tokenizer_only=True)
    ids, titles, abstracts = corpus()
    titles[3], abstracts[3] = "Short", None
    store = TokenStore.write(tmp_path / "t", iter([(ids, titles, abstracts)]), tokenizer, 20, len(ids))
    rows = np.array([3, 0, 7, 3])
    expected = collate([store.get(r) for r in rows], tokenizer.pad_token_id)
    got = collate_rows(store, rows, tokenizer.pad_token_id)
    assert all(torch.equal(x, y) for x, y in zip(expected, got, strict=True))
    assert got[1][0].sum() < got[1][1].sum()  # the short paper is padded
    pieces, inverse = collate_pieces(store, rows, tokenizer.pad_token_id, 2)
    assert [p[0].shape[0] for p in pieces] == [2, 2] and pieces[0][1][0].sum() == got[1][0].sum()
    assert pieces[0][0].shape[1] < pieces[1][0].shape[1]  # the two short copies of paper 3 pad less
    rebuilt = torch.cat(
        [torch.nn.functional.pad(i, (0, 20 - i.shape[1]), value=tokenizer.pad_token_id) for i, _ in pieces]
    )
    assert torch.equal(rebuilt[inverse][:, : got[0].shape[1]], got[0])
    # padded to a multiple (a GPU's bounded set of shapes): the same tokens, more padding, never beyond `limit`
    longest = got[0].shape[1]
    for multiple, limit, width in ((8, None, -(-longest // 8) * 8), (64, 20, 20), (64, None, 64), (1, 20, longest)):
        ids_m, mask_m = collate_rows(store, rows, tokenizer.pad_token_id, multiple, limit)
        assert ids_m.shape[1] == width, (multiple, limit)
        assert torch.equal(ids_m[:, :longest], got[0]) and torch.equal(mask_m[:, :longest], got[1])
        assert (ids_m[:, longest:] == tokenizer.pad_token_id).all() and mask_m[:, longest:].sum() == 0


def test_prefetcher_keeps_the_order_and_passes_errors_on():
    def items(n, fail_at=None):
        for i in range(n):
            if i == fail_at:
                raise ValueError("broken batch")
            yield (torch.full((2,), i),)

    for depth in (0, 3):
        fetch = prefetch.Prefetcher(items(7), depth, pin=False)
        assert [int(fetch.next()[0][0]) for _ in range(7)] == list(range(7))
        fetch.close()
    fetch = prefetch.Prefetcher(items(5, fail_at=2), 2, pin=False)
    assert [int(fetch.next()[0][0]) for _ in range(2)] == [0, 1]
    with pytest.raises(ValueError, match="broken batch"):
        fetch.next()
    fetch.close()


def test_fused_adamw_is_selected_and_steps_like_the_plain_one():
    torch.manual_seed(0)
    models = [torch.nn.Linear(4, 3) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    plain = train_step.adamw(models[0], 0.1, 0.01)
    fused = train_step.adamw(models[1], 0.1, 0.01, fused=True)
    assert fused.defaults["fused"] is True and not plain.defaults["fused"]
    assert {g["weight_decay"] for g in fused.param_groups} == {0.01, 0.0}  # bias exempt
    x = torch.randn(5, 4)
    for model, optimizer in zip(models, (plain, fused), strict=True):
        for _ in range(3):
            model(x).pow(2).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
    pairs = zip(models[0].parameters(), models[1].parameters(), strict=True)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in pairs)


def test_the_device_paths_run_on_cpu(small, tmp_path):
    # pinned prefetch is CUDA-only, but non-blocking copies, autocast (disabled on CPU) and the deferred
    # loss read-back run here: every step is logged with its loss, norm and padding share
    run = make_spec(small, tmp_path, "paths", max_steps=7, log_every=3, prefetch=2, length_group_batches=2)
    done = train(run)
    assert done.returncode == 0, done.stdout[-3000:]
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 8))
    assert all(r["loss"] > 0 and r["grad_norm"] > 0 and 0 <= r["padding_share"] < 1 for r in log)
    assert "epoch 0: padding share" in done.stdout + done.stderr


def test_embed_papers_groups_lengths_and_keeps_the_input_order(small, tmp_path):
    from citeflow.jobs.embed_papers import embed_to_parquet

    ids, titles, abstracts = corpus(n=24)
    papers = [
        (str(i), t, " ".join(a.split()[: 1 + (k * 7) % 25]))
        for k, (i, t, a) in enumerate(zip(ids, titles, abstracts, strict=True))
    ]
    stats, tables = {}, {}
    for grouping in (False, True):
        out = tmp_path / f"grouped-{grouping}"
        stats[grouping] = embed_to_parquet(
            iter(papers),
            str(small),
            out,
            max_length=48,
            pooling="mean",
            batch_size=4,
            length_grouping=grouping,
            precision="fp32",  # in bf16 a batch's padding moves the last digits
        )
        tables[grouping] = pq.read_table(out / "part-0.parquet")
    assert tables[True]["paper_id"].to_pylist() == [p[0] for p in papers] == tables[False]["paper_id"].to_pylist()
    a, b = (np.stack(tables[g]["embedding"].to_pylist()) for g in (False, True))
    assert np.allclose(a, b, atol=1e-5)
    assert stats[True]["padding_share"] < stats[False]["padding_share"] / 2
    assert stats[True]["papers"] == 24 and stats[True]["papers_per_second"] > 0 and stats[True]["precision"] == "fp32"


def test_prefetcher_pins_every_tensor_of_a_micro_batch(monkeypatch):
    # pinning needs CUDA; here Tensor.pin_memory is replaced by a marker to see that the CUDA path reaches
    # every tensor of the nested (pieces, inverse) structure the trainer collates
    pinned = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: pinned.append(self.shape) or self)
    item = ([(torch.zeros(2, 3), torch.ones(2, 3)), (torch.zeros(1, 5), torch.ones(1, 5))], torch.arange(3))
    fetch = prefetch.Prefetcher(iter([item]), 2, pin=True)
    pieces, inverse = fetch.next()
    fetch.close()
    assert sorted(pinned) == sorted([(2, 3), (2, 3), (1, 5), (1, 5), (3,)])
    assert isinstance(pieces, list) and torch.equal(inverse, torch.arange(3))


@pytest.mark.slow  # trains in child processes, killed and resumed
def test_killed_length_grouped_training_resumes_to_the_same_model(small, tmp_path):
    # papers of 3 to 40 tokens, so grouping really reorders; the resume test above runs on papers of one length
    tokenizer, _ = load(str(small), tokenizer_only=True)
    ids, titles, abstracts = corpus()
    abstracts = [" ".join(a.split()[: (7 * k) % 30]) for k, a in enumerate(abstracts)]
    TokenStore.write(tmp_path / "tokens", iter([(ids, titles, abstracts)]), tokenizer, 40, len(ids))
    rng = np.random.default_rng(1)
    q, p, n = (rng.choice(ids, 96) for _ in range(3))
    pq.write_table(pa.table({"query_id": q, "positive_id": p, "negative_id": n}), tmp_path / "triplets.parquet")
    settings = dict(deterministic=True, length_group_batches=3, checkpoint_every=4, log_every=3, epochs=1)
    whole = make_spec(small, tmp_path, "whole", **settings)
    plain = make_spec(small, tmp_path, "plain", **{**settings, "length_grouping": False, "length_pieces": 1})
    for run in (whole, plain):
        done = train(run)
        assert done.returncode == 0, done.stdout[-3000:]
    killed = make_spec(small, tmp_path, "killed", **settings)
    assert train(killed, env={"CITEFLOW_FAULT_KILL": "train_encoder.step.7"}).returncode == -9
    second = train(killed)
    assert second.returncode == 0 and "resuming from ckpt-00000004" in second.stdout + second.stderr
    a, b = weights(whole / "model"), weights(killed / "model")
    assert all(torch.equal(a[k], b[k]) for k in a)
    logs = {r.name: [json.loads(x) for x in (r / "log.jsonl").read_text().splitlines()] for r in (whole, killed, plain)}
    assert [r["loss"] for r in logs["killed"]] == [r["loss"] for r in logs["whole"]] and len(logs["whole"]) == 12
    grouped_pad = np.mean([r["padding_share"] for r in logs["whole"]])
    assert grouped_pad < 0.5 * np.mean([r["padding_share"] for r in logs["plain"]])


def test_the_small_vocabulary_numbers_its_tokens_in_a_fixed_order(tmp_path):
    """HF tokenizers' WordPiece trainer numbers tokens in hash-map order, which changes between builds; the
    saved vocabulary numbers them in a fixed order (a function of the token set alone), and tokenises as the
    trained one. (The set itself can still differ where merge counts tie: see README, Determinism.)"""
    import json

    from tokenizers import Tokenizer

    from citeflow.models.encoder.model import canonical_vocab

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    ids, titles, abstracts = corpus(200, seed=4)
    texts = [paper_text(t, a, "") for t, a in zip(titles, abstracts, strict=True)]
    size = dict(vocab_size=300, hidden=8, layers=1, heads=1, intermediate=8, max_length=16, seed=0)
    build_small(texts, tmp_path / "m", **size)
    saved = json.loads((tmp_path / "m" / "tokenizer.json").read_text())["model"]["vocab"]
    assert saved == canonical_vocab(saved, special)
    assert [t for t, _ in sorted(saved.items(), key=lambda kv: kv[1])][:5] == special
    rest = [t for t, _ in sorted(saved.items(), key=lambda kv: kv[1])][5:]
    assert rest == sorted(rest) and len(rest) > 50
    shuffled = dict(sorted(saved.items(), key=lambda kv: hash(kv[0])))
    assert canonical_vocab(shuffled, special) == saved

    # the renumbered tokenizer splits text as the trainer's own
    from tokenizers import models, normalizers, pre_tokenizers, trainers

    trained = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    trained.normalizer = normalizers.BertNormalizer(lowercase=True)
    trained.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=300, special_tokens=special, min_frequency=2)
    trained.train_from_iterator(texts, trainer)
    renumbered = Tokenizer(models.WordPiece(canonical_vocab(trained.get_vocab(), special), unk_token="[UNK]"))
    renumbered.normalizer, renumbered.pre_tokenizer = trained.normalizer, trained.pre_tokenizer
    for text in texts[:50]:
        assert renumbered.encode(text).tokens == trained.encode(text).tokens
    loaded = Tokenizer.from_file(str(tmp_path / "m" / "tokenizer.json"))
    assert loaded.encode(texts[0], add_special_tokens=False).tokens == [
        t for t in loaded.encode(texts[0]).tokens if t not in special
    ]
