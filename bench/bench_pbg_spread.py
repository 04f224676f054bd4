"""How far identical PBG runs drift apart: HOGWILD's nondeterminism, measured as link-prediction MRR.

    python bench/bench_pbg_spread.py --embed-graph ARTIFACTS/<snap>/embed_graph/<version> --runs 4 \
        --workers 2 --out bench/results_windows

Takes an embed_graph version that has a link-prediction run (its `pbg/entities`, `edges_train`,
`edges_holdout` and resolved settings), trains the link-prediction run again --runs times with --workers
HOGWILD workers and the same seed, each into a temporary folder (the artifact is never written), and scores
each on the held-out edges exactly as the stage does, and compares the runs' top-25 cosine neighbours of
1,000 sampled papers, or every paper of a smaller graph (the stage's `neighbour_overlap`, here between
identical runs: how much of the overlap between the mining and the link-prediction run chance alone
explains). Two more runs with one worker show the baseline: with one worker a run repeats bit for bit.
Writes OUT/pbg_spread.json and .md.
Timings mean nothing on a shared machine; the spread does.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embed-graph", required=True, help="an embed_graph version folder")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="bench/results_windows")
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from citeflow.threads import describe

    # the load and the thread settings beside every figure: a shared machine changes them all
    print(f"machine: {json.dumps(describe())}", flush=True)

    from citeflow.config import EmbedGraphConfig
    from citeflow.evaluation.link_prediction import link_prediction
    from citeflow.evaluation.neighbours import nearest, normalize_rows, overlap
    from citeflow.models.pbg.importer import read_edges
    from citeflow.models.pbg.launch import pbg_settings
    from citeflow.models.pbg.train import load_embeddings, train_in_subprocess

    version = Path(args.embed_graph)
    manifest = json.loads((version / "_manifest.json").read_text())
    cfg = EmbedGraphConfig(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in manifest["config"]["embed_graph"].items()}
    )
    work = version / "pbg"
    if not (work / "edges_holdout").is_dir():
        raise SystemExit(f"{version} has no link-prediction run (embed_graph.link_prediction=false)")
    lhs, rhs = read_edges(work / "edges_holdout", work / "entities", cfg.num_partitions)

    def one_run(workers: int) -> tuple[float, np.ndarray]:
        with tempfile.TemporaryDirectory(prefix="citeflow-pbg-spread-") as tmp:
            settings = pbg_settings(cfg, work, "edges_train", "unused", workers)
            settings["checkpoint_path"] = f"{tmp}/checkpoint"
            train_in_subprocess(settings, Path(tmp) / "config.json", Path(tmp) / "train.log", seed=cfg.seed)
            _, vectors = load_embeddings(Path(tmp) / "checkpoint", work / "entities", cfg.num_partitions)
        scored = link_prediction(
            vectors, lhs, rhs, num_negatives=cfg.eval_negatives, comparator=cfg.comparator, seed=cfg.seed
        )
        return scored["mrr"], vectors

    hogwild = [one_run(args.workers) for _ in range(args.runs)]
    single = [one_run(1) for _ in range(2)]
    mrr = [m for m, _ in hogwild]
    # 1,000 papers, or every one of a smaller graph (a sample larger than the population cannot be drawn)
    papers = len(hogwild[0][1])
    sample = np.sort(np.random.default_rng(cfg.seed).choice(papers, min(1000, papers), replace=False))
    lists = [nearest(normalize_rows(v.copy()), sample, cfg.overlap_k) for _, v in hogwild]
    pairs = [overlap(lists[i], lists[j]) for i in range(len(lists)) for j in range(i + 1, len(lists))]
    result = {
        "embed_graph": str(version),
        "entities": int(len(hogwild[0][1])),
        "holdout_edges": int(len(lhs)),
        "workers": args.workers,
        "runs": args.runs,
        "mrr": [round(m, 5) for m in mrr],
        "mrr_min": round(min(mrr), 5),
        "mrr_max": round(max(mrr), 5),
        "vectors_identical_across_hogwild_runs": all(np.array_equal(hogwild[0][1], v) for _, v in hogwild[1:]),
        "neighbour_overlap_between_hogwild_runs": {
            "k": cfg.overlap_k,
            "min": round(min(pairs), 4) if pairs else None,
            "max": round(max(pairs), 4) if pairs else None,
        },
        "one_worker_mrr": [round(m, 5) for m, _ in single],
        "one_worker_vectors_identical": bool(np.array_equal(single[0][1], single[1][1])),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pbg_spread.json").write_text(json.dumps(result, indent=2) + "\n")
    text = (
        f"{args.runs} identical PBG runs with {args.workers} HOGWILD workers ({result['entities']:,} papers, "
        f"{result['holdout_edges']:,} held-out edges): MRR {result['mrr_min']:.4f} to {result['mrr_max']:.4f}, "
        f"top-{cfg.overlap_k} neighbours shared between two runs {result['neighbour_overlap_between_hogwild_runs']}; "
        f"with one worker: {result['one_worker_mrr']} (vectors identical: {result['one_worker_vectors_identical']})"
    )
    (out / "pbg_spread.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
