"""Time of the SciDocs evaluation (all tasks of the original layout) on 30k papers' embeddings.

    python bench/bench_benchmark.py --papers 30000 --dim 768 --out bench/results

Writes a SciDocs folder in the original layout over --papers paper ids with
SciDocs' proportions (MAG: half the papers, 19 classes; MeSH: 40%, 11 classes;
train/val/test 70/10/20; cite, cocite, coview, coread: 1,000 val and 1,000
test queries each, 5 positives and 25 negatives per query) and --dim-
dimensional embeddings with a class signal, then times `jobs.benchmark.score`
(the stage's and the CLI's code path) end to end, including reading the
embeddings Parquet. Writes OUT/benchmark.json and .md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def write_scidocs(root: Path, ids: list[str], rng: np.random.Generator, dim: int) -> np.ndarray:
    n = len(ids)
    topic = rng.integers(0, 19, n)
    centres = rng.normal(size=(19, dim)).astype(np.float32)
    vectors = centres[topic] + 3 * rng.normal(size=(n, dim)).astype(np.float32)
    for task, share, classes in (("mag", 0.5, 19), ("mesh", 0.4, 11)):
        chosen = rng.choice(n, int(share * n), replace=False)
        labels = topic[chosen] % classes
        cut = np.cumsum([0.7, 0.1]) * len(chosen)
        (root / task).mkdir(parents=True)
        for split, part in zip(
            ("train", "val", "test"), np.split(np.arange(len(chosen)), cut.astype(int)), strict=True
        ):
            body = "".join(f"{ids[chosen[i]]},{labels[i]}\n" for i in part)
            (root / task / f"{split}.csv").write_text("pid,class_label\n" + body)
    for task in ("cite", "cocite", "coview", "coread"):
        (root / task).mkdir()
        for split in ("val", "test"):
            lines = []
            for q in rng.choice(n, 1000, replace=False):
                same = np.flatnonzero(topic == topic[q])
                positives = rng.choice(same, 5, replace=False)
                negatives = rng.choice(n, 25, replace=False)
                lines += [f"{ids[q]} 0 {ids[p]} 1\n" for p in positives if p != q]
                lines += [f"{ids[q]} 0 {ids[p]} 0\n" for p in negatives if p != q and p not in positives]
            (root / task / f"{split}.qrel").write_text("".join(lines))
    return vectors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", type=int, default=30_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()

    from jobs.benchmark import load_embeddings, score

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    work = Path(tempfile.mkdtemp(prefix="citeflow-benchmark-bench-"))
    ids = [f"{i:040x}" for i in rng.choice(2**62, args.papers, replace=False)]
    vectors = write_scidocs(work / "scidocs", ids, rng, args.dim)
    flat = pa.array(vectors.reshape(-1), pa.float32())
    pq.write_table(
        pa.table({"paper_id": ids, "embedding": pa.FixedSizeListArray.from_arrays(flat, args.dim)}),
        work / "embeddings.parquet",
    )
    t0 = time.monotonic()
    embeddings = load_embeddings(str(work / "embeddings.parquet"))
    loaded = time.monotonic() - t0
    rows = score(embeddings, work / "scidocs", n_jobs=-1)
    seconds = time.monotonic() - t0
    result = {
        "papers": args.papers,
        "dim": args.dim,
        "seconds": round(seconds, 1),
        "load_seconds": round(loaded, 1),
        "scores": {
            f"{r['task']}/{r['metric']}": round(r["value"], 2)
            for r in rows
            if r["status"] == "ok" and r["split"] == "test"
        },
    }
    (out / "benchmark.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "benchmark.md").write_text(
        "| papers | dim | tasks | seconds (incl. reading embeddings) |\n|---:|---:|---|---:|\n"
        f"| {args.papers:,} | {args.dim} | mag, mesh, cite, cocite, coview, coread "
        f"| {seconds:.1f} |\n"
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
