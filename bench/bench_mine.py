"""SciNCL mining throughput against the bare matrix-product bound, in one run.

    python bench/bench_mine.py --pool 200000 --queries 4096 --dim 768 --out bench/results
    python bench/bench_mine.py ... --library-threads      # the libraries' own thread settings (the former default)

Builds a pool of --pool unit vectors (--dim, clustered, seeded) and mines
SciNCL triplets for --queries of them exactly as the stage does
(`citeflow.models.triplets.knn`: FAISS IndexFlatIP search of k_max + 1 neighbours in
batches, self exclusion; `citeflow.models.triplets.mining`: windows, easy negatives drawn
outside the k_max neighbourhood). The bound is what no exact miner can beat: the bare matrix
product, queries × pool × dim multiply-adds, at the best GEMM rate measured
in the same process (torch, numpy's BLAS and FAISS' BLAS through a k=1
search, blocks of --bound-batch queries × 16,384 pool vectors, best of
--gemm-repeats, measured before and after mining). The full bare product
(torch, in the same blocks as the search, no top-k) is timed as well, and so is
the same FAISS search for one neighbour (k=1): its GEMM with a trivial
selection, so that mining / bound splits into the GEMM's distance from the
bound and what keeping k_max + 1 neighbours per query costs. Peak
memory (VmHWM) is reported for the whole process; vectors alone take
pool × dim × 4 bytes and the index a second copy. The load average and the
thread settings (`citeflow.threads`, applied as the mining stage applies
them unless --library-threads) are printed beside the figures.
Writes OUT/mine.json and OUT/mine.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from citeflow.models.triplets import knn  # noqa: E402
from citeflow.models.triplets import mining as T  # noqa: E402


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


def gemm_rates(vectors: np.ndarray, batch: int, repeats: int) -> dict[str, float]:
    """Best multiply-add rate (GFLOP/s, 2 flops each) on a (batch x dim) @ (dim x 16384) block: torch, numpy's
    BLAS, and FAISS' own BLAS through an exact k=1 search (GEMM plus a top-1: a lower estimate of its rate)."""
    import faiss
    import torch

    block = min(16_384, len(vectors))
    a, b = np.ascontiguousarray(vectors[:batch]), np.ascontiguousarray(vectors[:block].T)
    flops = 2.0 * len(a) * block * vectors.shape[1]
    ta, tb = torch.from_numpy(a), torch.from_numpy(vectors[:block])
    out = np.empty((len(a), block), np.float32)
    base = np.ascontiguousarray(vectors[:block])
    products = {
        "torch": lambda: torch.mm(ta, tb.T),
        "numpy": lambda: np.matmul(a, b, out=out),
        "faiss_k1": lambda: faiss.knn(a, base, 1, metric=faiss.METRIC_INNER_PRODUCT),
    }
    rates = {}
    for name, product in products.items():
        product()
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            product()
            best = min(best, time.perf_counter() - t0)
        rates[name] = flops / best / 1e9
    return rates


def bare_product(vectors: np.ndarray, rows: np.ndarray, batch: int) -> float:
    """Seconds of queries x pool with torch, in the search's query batches, scores thrown away."""
    import torch

    pool = torch.from_numpy(vectors)
    t0 = time.monotonic()
    for lo in range(0, len(rows), batch):
        torch.from_numpy(vectors[rows[lo : lo + batch]]) @ pool.T
    return time.monotonic() - t0


def nearest_only(index, vectors: np.ndarray, rows: np.ndarray, batch: int) -> float:
    """Seconds of the same exact search for 1 neighbour instead of k_max + 1: FAISS' GEMM with a trivial
    selection. Mining's time less this one is what keeping the k_max best of each query's scores costs."""
    t0 = time.monotonic()
    for lo in range(0, len(rows), batch):
        index.search(np.ascontiguousarray(vectors[rows[lo : lo + batch]]), 1)
    return time.monotonic() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--k-pos", type=int, default=25)
    parser.add_argument("--k-hard", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=2048, help="queries per FAISS search (the stage's batch_size)")
    parser.add_argument("--bound-batch", type=int, default=1024, help="queries per GEMM block of the rate")
    parser.add_argument("--gemm-repeats", type=int, default=5)
    parser.add_argument(
        "--library-threads", action="store_true", help="skip citeflow.threads (the libraries' own thread settings)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()

    from citeflow.threads import configure, describe

    # before faiss and torch are imported: OpenMP reads its settings once
    threads = describe() if args.library_threads else configure()
    print(f"machine: {json.dumps(threads)}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    vectors = make_pool(args.pool, args.dim, args.seed)
    pool_ids = np.arange(args.pool, dtype=np.int64)
    rows = np.sort(np.random.default_rng(args.seed + 1).choice(args.pool, args.queries, replace=False))
    print(f"pool {args.pool:,} x {args.dim} built in {time.monotonic() - t0:.1f}s", flush=True)
    windows, warnings = T.fit_windows(args.pool, args.k_pos, args.k_hard, 5, 2, 3)

    rates_before = gemm_rates(vectors, args.bound_batch, args.gemm_repeats)
    t0 = time.monotonic()
    index, description = knn.build_index(vectors, "flat", k_max=windows.k_max)
    index_seconds = time.monotonic() - t0
    search = sample = 0.0
    triplets = 0
    t0 = time.monotonic()
    for chunk in T.batches(rows, args.batch):
        s0 = time.monotonic()
        neighbours = knn.search_neighbours(index, vectors, chunk, windows.k_max)
        search += time.monotonic() - s0
        s0 = time.monotonic()
        batch = T.scincl_batch(chunk, neighbours, windows, pool_ids, args.seed)
        sample += time.monotonic() - s0
        triplets += len(batch.query)
        print(f"  mined {triplets // 5:,}/{len(rows):,} queries, {time.monotonic() - t0:.0f}s", flush=True)
    mining = time.monotonic() - t0

    after = gemm_rates(vectors, args.bound_batch, args.gemm_repeats)
    rates = {k: max(v, after[k]) for k, v in rates_before.items()}
    best_rate = max(rates.values())
    bound_seconds = 2.0 * len(rows) * args.pool * args.dim / (best_rate * 1e9)
    product_seconds = bare_product(vectors, rows, args.batch)
    k1_seconds = nearest_only(index, vectors, rows, args.batch)
    threads = {**describe(), "at_start": threads}
    result = {
        "pool": args.pool,
        "queries": len(rows),
        "dim": args.dim,
        "k_max": windows.k_max,
        "index": description,
        "threads": threads,
        "index_seconds": round(index_seconds, 2),
        "mining_seconds": round(mining, 2),
        "search_seconds": round(search, 2),
        "sampling_seconds": round(sample, 2),
        "queries_per_second": round(len(rows) / mining, 1),
        "triplets": triplets,
        "gemm_gflops": {k: round(v, 1) for k, v in rates.items()},
        "bound_seconds": round(bound_seconds, 2),
        "ratio_to_bound": round(mining / bound_seconds, 3),
        "bare_product_seconds": round(product_seconds, 2),
        "ratio_to_bare_product": round(mining / product_seconds, 3),
        "search_k1_seconds": round(k1_seconds, 2),
        "k1_ratio_to_bound": round(k1_seconds / bound_seconds, 3),
        "peak_rss_gib": round(peak_gib(), 2),
        "warnings": warnings,
    }
    (out / "mine.json").write_text(json.dumps(result, indent=2) + "\n")
    load = threads["load_average"]
    (out / "mine.md").write_text(
        "| pool | queries | dim | k_max | mining | of which search | GEMM bound | mining / bound | search for k=1 "
        "| bare torch product | peak RSS | load | threads |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n"
        f"| {args.pool:,} | {len(rows):,} | {args.dim} | {windows.k_max} | {mining:.1f} s | {search:.1f} s | "
        f"{bound_seconds:.1f} s ({best_rate:.0f} GFLOP/s) | {mining / bound_seconds:.2f}x | "
        f"{k1_seconds:.1f} s ({k1_seconds / bound_seconds:.2f}x) | {product_seconds:.1f} s | "
        f"{result['peak_rss_gib']:.2f} GiB | {threads['at_start']['load_average'][0]} → {load[0]} | "
        f"{threads['OMP_WAIT_POLICY']}, faiss {threads.get('faiss_threads')} |\n"
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
