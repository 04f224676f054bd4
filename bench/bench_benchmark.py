"""Time of the SciDocs evaluation (all 12 numbers of the original layout, recomm included) on 30k papers' embeddings.

    python bench/bench_benchmark.py --papers 30000 --dim 768 --out bench/results

Writes a SciDocs folder in the original layout over --papers paper ids with
SciDocs' proportions (MAG: half the papers, 19 classes; MeSH: 40%, 11 classes;
train/val/test 70/10/20; cite, cocite, coview, coread: 1,000 val and 1,000
test queries each, 5 positives and 25 negatives per query; recomm: --clicks
train clicks, a quarter of that for val and test, 10 candidates each, with
`paper_metadata_recomm.json` and `propensity_scores.json`) and --dim-
dimensional embeddings with a class signal, then times `citeflow.jobs.benchmark.score`
(the stage's and the CLI's code path) end to end, including reading the
embeddings Parquet, with the time of each task group. Writes OUT/benchmark.json and .md.
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


def write_scidocs(root: Path, ids: list[str], rng: np.random.Generator, dim: int, clicks: int) -> np.ndarray:
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
    write_recomm(root, ids, topic, rng, clicks)
    return vectors


def write_recomm(root: Path, ids: list[str], topic: np.ndarray, rng: np.random.Generator, clicks: int) -> None:
    """recomm/ in the original layout: a click line is `query,clicked,"candidates"`; the clicked paper shares the
    query's topic, the other candidates are random."""
    n = len(ids)
    (root / "recomm").mkdir()
    chosen = rng.choice(n, min(n, 4 * clicks), replace=False)
    metadata = {
        ids[i]: {
            "paper_id": ids[i],
            "title": f"paper {i}",
            "abstract": "",
            "authors": [f"a{int(a)}" for a in rng.integers(0, 5000, 3)],
            "references": [],
            "cited_by": [],
            "year": int(rng.integers(1990, 2020)),
        }
        for i in chosen
    }
    (root / "paper_metadata_recomm.json").write_text(json.dumps(metadata))
    (root / "recomm" / "propensity_scores.json").write_text(json.dumps({"scores": [1 / (k + 1) for k in range(10)]}))
    by_topic = {t: np.flatnonzero(topic[chosen] == t) for t in np.unique(topic[chosen])}
    for split, count in (("train", clicks), ("val", clicks // 4), ("test", clicks // 4)):
        lines = ["query_id,clicked_id,other_ids"]
        for q in rng.choice(len(chosen), count):
            same = by_topic[topic[chosen[q]]]
            clicked = chosen[rng.choice(same)]
            others = [chosen[j] for j in rng.choice(len(chosen), 9, replace=False)]
            candidates = others[: int(rng.integers(10))] + [clicked]
            candidates += others[len(candidates) - 1 :]
            lines.append(f'{ids[chosen[q]]},{ids[clicked]},"{",".join(ids[c] for c in candidates)}"')
        (root / "recomm" / f"{split}.csv").write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", type=int, default=30_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clicks", type=int, default=4000, help="recomm train clicks (SciDocs: about 4k)")
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from citeflow.threads import describe

    # the load and the thread settings beside every figure: a shared machine changes them all
    print(f"machine: {json.dumps(describe())}", flush=True)

    from citeflow.evaluation.embeddings import load_embeddings
    from citeflow.jobs.benchmark import score

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    # the SciDocs folder and the embeddings are scratch: removed after (at 30k papers, 100 MB a run)
    with tempfile.TemporaryDirectory(prefix="citeflow-benchmark-bench-") as tmp:
        work = Path(tmp)
        ids = [f"{i:040x}" for i in rng.choice(2**62, args.papers, replace=False)]
        vectors = write_scidocs(work / "scidocs", ids, rng, args.dim, args.clicks)
        flat = pa.array(vectors.reshape(-1), pa.float32())
        pq.write_table(
            pa.table({"paper_id": ids, "embedding": pa.FixedSizeListArray.from_arrays(flat, args.dim)}),
            work / "embeddings.parquet",
        )
        t0 = time.monotonic()
        embeddings = load_embeddings(str(work / "embeddings.parquet"))
        loaded = time.monotonic() - t0
        timings: dict[str, float] = {}
        for name in ("classification", "ranking", "recomm"):
            _time(name, timings)
        rows = score(embeddings, work / "scidocs", n_jobs=-1)
        seconds = time.monotonic() - t0
    result = {
        "papers": args.papers,
        "dim": args.dim,
        "seconds": round(seconds, 1),
        "load_seconds": round(loaded, 1),
        "task_seconds": {k: round(v, 1) for k, v in timings.items()},
        "scores": {
            f"{r['task']}/{r['metric']}": round(r["value"], 2)
            for r in rows
            if r["status"] == "ok" and r["split"] == "test"
        },
    }
    (out / "benchmark.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "benchmark.md").write_text(
        "| papers | dim | tasks | seconds (incl. reading embeddings) |\n|---:|---:|---|---:|\n"
        f"| {args.papers:,} | {args.dim} | all 12: mag, mesh, cite, cocite, coview, coread (map, ndcg), recomm "
        f"| {seconds:.1f} |\n"
    )
    print(json.dumps(result, indent=2))
    return 0


def _time(group: str, timings: dict[str, float]) -> None:
    """Wrap the task group's function in citeflow.evaluation.scidocs so each call adds its wall time to
    timings[group]."""
    from citeflow.evaluation import recomm, scidocs

    owner, name = {"classification": (scidocs, "classification"), "ranking": (scidocs, "ranking")}.get(
        group, (recomm, "evaluate")
    )
    function = getattr(owner, name)

    def timed(*args, **kwargs):
        start = time.monotonic()
        try:
            return function(*args, **kwargs)
        finally:
            timings[group] = timings.get(group, 0.0) + time.monotonic() - start

    setattr(owner, name, timed)


if __name__ == "__main__":
    sys.exit(main())
