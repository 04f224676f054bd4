"""SciNCL mining throughput against the bare matrix-product bound, in one run.

    python bench/bench_mine.py --pool 1000000 --queries 20000 --dim 768 --out bench/results

Builds a pool of --pool unit vectors (--dim, clustered, seeded) and mines
SciNCL triplets for --queries of them exactly as the stage does
(`models.triplets`: FAISS IndexFlatIP search of k_max + 1 neighbours in
batches, self exclusion, windows, easy negatives drawn outside the k_max
neighbourhood). The bound is what any exact miner must at least do: batched
torch GEMM of queries × pool plus torch.topk(k_max + 1), timed on the first
--bound-queries queries in the same process and scaled per query (the cost
is linear in the number of queries for a fixed pool). Peak memory (VmHWM)
is reported for the whole process; vectors alone take pool × dim × 4 bytes
and the index a second copy.
Writes OUT/mine.json and OUT/mine.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from models import triplets as T  # noqa: E402


def peak_gib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20
    return float("nan")


def make_pool(n: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors around 1,000 random centres, built in chunks (no float64 copy of the pool)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((1000, dim), dtype=np.float32)
    out = np.empty((n, dim), dtype=np.float32)
    for lo in range(0, n, 100_000):
        hi = min(n, lo + 100_000)
        out[lo:hi] = centres[rng.integers(0, 1000, hi - lo)] + rng.standard_normal((hi - lo, dim), dtype=np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def bound(vectors: np.ndarray, rows: np.ndarray, k: int, batch: int) -> float:
    import torch

    pool = torch.from_numpy(vectors)
    t0 = time.monotonic()
    for lo in range(0, len(rows), batch):
        scores = torch.from_numpy(vectors[rows[lo : lo + batch]]) @ pool.T
        torch.topk(scores, k, dim=1)
    return time.monotonic() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--k-pos", type=int, default=25)
    parser.add_argument("--k-hard", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=2048, help="queries per FAISS search (the stage's batch_size)")
    parser.add_argument("--bound-queries", type=int, default=2000)
    parser.add_argument("--bound-batch", type=int, default=256, help="queries per GEMM in the bound")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    vectors = make_pool(args.pool, args.dim, args.seed)
    pool_ids = np.arange(args.pool, dtype=np.int64)
    rows = np.sort(np.random.default_rng(args.seed + 1).choice(args.pool, args.queries, replace=False))
    print(f"pool {args.pool:,} x {args.dim} built in {time.monotonic() - t0:.1f}s", flush=True)
    windows, warnings = T.fit_windows(args.pool, args.k_pos, args.k_hard, 5, 2, 3)

    t0 = time.monotonic()
    index, description = T.build_index(vectors, "flat", k_max=windows.k_max)
    index_seconds = time.monotonic() - t0
    search = sample = 0.0
    triplets = 0
    t0 = time.monotonic()
    for chunk in T.batches(rows, args.batch):
        s0 = time.monotonic()
        neighbours = T.search_neighbours(index, vectors, chunk, windows.k_max)
        search += time.monotonic() - s0
        s0 = time.monotonic()
        batch = T.scincl_batch(chunk, neighbours, windows, pool_ids, args.seed)
        sample += time.monotonic() - s0
        triplets += len(batch.query)
        print(f"  mined {triplets // 5:,}/{len(rows):,} queries, {time.monotonic() - t0:.0f}s", flush=True)
    mining = time.monotonic() - t0

    bound_rows = rows[: args.bound_queries]
    bound_seconds = bound(vectors, bound_rows, windows.k_max + 1, args.bound_batch)
    bound_scaled = bound_seconds * len(rows) / len(bound_rows)
    result = {
        "pool": args.pool,
        "queries": len(rows),
        "dim": args.dim,
        "k_max": windows.k_max,
        "index": description,
        "threads": os.cpu_count(),
        "index_seconds": round(index_seconds, 2),
        "mining_seconds": round(mining, 2),
        "search_seconds": round(search, 2),
        "sampling_seconds": round(sample, 2),
        "queries_per_second": round(len(rows) / mining, 1),
        "triplets": triplets,
        "bound_queries": len(bound_rows),
        "bound_seconds": round(bound_seconds, 2),
        "bound_seconds_scaled": round(bound_scaled, 2),
        "ratio_to_bound": round(mining / bound_scaled, 3),
        "peak_rss_gib": round(peak_gib(), 2),
        "warnings": warnings,
    }
    (out / "mine.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "mine.md").write_text(
        "| pool | queries | dim | k_max | mining | of which search | GEMM+topk bound | ratio | peak RSS |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        f"| {args.pool:,} | {len(rows):,} | {args.dim} | {windows.k_max} | {mining:.1f} s | {search:.1f} s | "
        f"{bound_scaled:.1f} s ({len(bound_rows):,} queries timed) | {mining / bound_scaled:.2f}x | "
        f"{result['peak_rss_gib']:.2f} GiB |\n"
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
