"""Encoder training throughput (triplets/s) of citeflow's trainer, on CPU here or on GPUs.

    python bench/bench_train.py --shape small --tokens 96 --steps 30             # this machine
    python bench/bench_train.py --shape bert-base --tokens 512 --precision bf16 \
        --per-device 32 --steps 40                                               # a GPU machine
    python bench/bench_train.py --shape bert-base --tokens 512 --nproc 8 ...     # torchrun, DDP

Builds a model of the given shape from a config (random weights: throughput
does not depend on them; BERT-base is 768 hidden, 12 layers, 12 heads), a
WordPiece tokenizer and a token store of synthetic papers that all fill
--tokens tokens, then runs the real trainer (`models/train_encoder.py`, in
its own process, `torchrun` for --nproc > 1) for --steps optimizer steps of
the effective batch 32. Reports the median triplets/s over the steps after
the first --warmup ones (3 sequences of --tokens tokens per triplet).
Writes OUT/train_<shape>_<tokens>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = {"small": dict(hidden=128, layers=2, heads=2), "bert-base": dict(hidden=768, layers=12, heads=12)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="small")
    parser.add_argument("--tokens", type=int, default=96, help="tokens per paper (max_length)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32, help="effective batch")
    parser.add_argument("--per-device", type=int, default=32)
    parser.add_argument("--nproc", type=int, default=1)
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"])
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()

    from jobs.train_encoder import launch
    from models.encoder import TokenStore, build_small, load

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="citeflow-train-bench-"))
    rng = np.random.default_rng(0)
    words = [f"w{i:05d}" for i in range(20_000)]
    papers = 2_000
    n_words = args.tokens  # each synthetic word becomes at least one token: every paper is truncated
    texts = [(" ".join(rng.choice(words, 12)), " ".join(rng.choice(words, n_words))) for _ in range(papers)]
    shape = SHAPES[args.shape]
    build_small(
        (f"{t} {a}" for t, a in texts),
        work / "model",
        vocab_size=30_522,
        hidden=shape["hidden"],
        layers=shape["layers"],
        heads=shape["heads"],
        intermediate=4 * shape["hidden"],
        max_length=args.tokens,
        seed=0,
    )
    tokenizer, _ = load(str(work / "model"), tokenizer_only=True)
    ids = np.arange(papers, dtype=np.int64)
    store = TokenStore.write(
        work / "tokens", iter([(ids, [t for t, _ in texts], [a for _, a in texts])]), tokenizer, args.tokens, papers
    )
    lengths = np.diff(np.asarray(store.offsets))
    triplets = args.batch * (args.steps + 1)
    pq.write_table(
        pa.table({c: rng.choice(ids, triplets) for c in ("query_id", "positive_id", "negative_id")}),
        work / "triplets.parquet",
    )
    spec = {
        "tokens": str(work / "tokens"),
        "triplets": str(work / "triplets.parquet"),
        "model_in": str(work / "model"),
        "model_out": str(work / "out"),
        "work": str(work / "checkpoints"),
        "log": str(work / "log.jsonl"),
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
        "pooling": "cls",
        "seed": 0,
        "gradient_checkpointing": args.gradient_checkpointing,
        "precision": args.precision,
        "checkpoint_every": 10**9,
        "citeflow": {"bench": True},
    }
    (work / "spec.json").write_text(json.dumps(spec))
    launch(work / "spec.json", args.nproc, work / "train.log")
    rows = [json.loads(line) for line in (work / "log.jsonl").read_text().splitlines()]
    rates = [r["triplets_per_second"] for r in rows[args.warmup :]] or [r["triplets_per_second"] for r in rows]
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({torch.get_num_threads()} threads)"
    result = {
        "shape": args.shape,
        "tokens": args.tokens,
        "mean_tokens": float(lengths.mean()),
        "steps": len(rows),
        "batch": args.batch,
        "per_device": spec["per_device_batch"],
        "nproc": args.nproc,
        "precision": args.precision,
        "device": device,
        "triplets_per_second": round(statistics.median(rates), 2),
        "seconds_per_step": round(statistics.median(r["seconds"] for r in rows[args.warmup :] or rows), 3),
    }
    name = f"train_{args.shape}_{args.tokens}"
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"{name}.md").write_text(
        "| model | tokens | device | precision | processes | triplets/s | s/step (batch 32) |\n"
        "|---|---:|---|---|---:|---:|---:|\n"
        f"| {args.shape} | {args.tokens} | {device} | {args.precision} | {args.nproc} | "
        f"{result['triplets_per_second']} | {result['seconds_per_step']} |\n"
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
