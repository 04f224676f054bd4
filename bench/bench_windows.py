"""Absolute vs relative SciNCL windows: how topical are the mined positives on generated snapshots?

    python bench/bench_windows.py --papers 20000 --work /tmp/windows20k --out bench/results_windows
    python bench/bench_windows.py --papers 200000 --work /data/windows200k --out bench/results_windows
    python bench/bench_windows.py --score ARTIFACTS/<snap>/mine_triplets/<version> \
        --topics SNAPSHOT/paper_topics.parquet

Generates a snapshot of --papers papers (`citeflow generate`, seed --seed; reused when --work already holds
it), runs the pipeline up to embed_graph with the demo profile's PBG settings and the whole graph
(`filter_leakage.mode=report_only`: on a small corpus the generator's SciDocs set takes most edges with it),
then mines SciNCL triplets twice from the same embeddings: `windows=absolute` (k_pos 25, k_hard 4000: ranks)
and `windows=relative` (the same values as shares of SciNCL's 680,967-paper pool). The generator's truth
(`paper_topics.parquet`, column `community`: the global subtopic of each paper) scores each version: the
share of (query, positive) pairs in the same subtopic, the same for hard and easy negatives, and chance
(sum of squared subtopic shares over the pool). --score scores one existing mine_triplets version the same
way (e.g. one built by another citeflow commit). Writes OUT/windows_<papers>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def topic_shares(triplets_dir: str, topics_path: str) -> dict[str, float]:
    """Same-subtopic shares of positives, hard and easy negatives of a triplets table, and chance."""
    topics = pq.read_table(topics_path, columns=["corpus_id", "community"])
    ids, community = topics["corpus_id"].to_numpy(), topics["community"].to_numpy()
    order = np.argsort(ids)
    ids, community = ids[order], community[order]

    def topic(values):
        at = np.searchsorted(ids, values)
        if not (ids[np.minimum(at, len(ids) - 1)] == values).all():
            raise SystemExit("triplet papers missing from paper_topics.parquet: wrong --topics?")
        return community[at]

    t = pq.read_table(f"{triplets_dir}/triplets")
    q = topic(t["query_id"].to_numpy())
    hard = np.asarray(t["negative_kind"].to_pylist()) == "hard"
    negative = topic(t["negative_id"].to_numpy())
    texts = topic(pq.read_table(f"{triplets_dir}/training_texts", columns=["corpus_id"])["corpus_id"].to_numpy())
    _, counts = np.unique(texts, return_counts=True)
    return {
        "queries": int(len(np.unique(t["query_id"].to_numpy()))),
        "positive_same_subtopic": round(float(np.mean(q == topic(t["positive_id"].to_numpy()))), 4),
        "hard_same_subtopic": round(float(np.mean(q[hard] == negative[hard])), 4) if hard.any() else None,
        "easy_same_subtopic": round(float(np.mean(q[~hard] == negative[~hard])), 4),
        "chance": round(float(np.sum((counts / counts.sum()) ** 2)), 4),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--work", help="folder for the snapshot and the artifacts")
    parser.add_argument("--queries", type=int, default=2000, help="mine_triplets.num_queries")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="more stage.key=value")
    parser.add_argument("--score", help="score this mine_triplets version folder instead (needs --topics)")
    parser.add_argument("--topics", help="paper_topics.parquet of the snapshot --score belongs to")
    parser.add_argument("--out", default="bench/results_windows")
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from citeflow.threads import describe

    # the load and the thread settings beside every figure: a shared machine changes them all
    print(f"machine: {json.dumps(describe())}", flush=True)

    if args.score:
        print(json.dumps(topic_shares(args.score, args.topics), indent=2))
        return 0
    from citeflow.config import RunConfig, apply_overrides, profile_overrides
    from citeflow.jobs import embed_graph, mine_triplets

    work = Path(args.work)
    snapshot = work / "snapshot"
    if not (snapshot / "generator.json").is_file():
        generate = ["generate", "--papers", str(args.papers), "--out", str(snapshot), "--seed", str(args.seed)]
        subprocess.run([sys.executable, "-m", "citeflow.jobs.cli", *generate, "--format", "s2orc"], check=True)
    base = RunConfig(
        snapshot=f"windows{args.papers}",
        corpus=str(snapshot / "corpus"),
        scidocs=str(snapshot / "scidocs"),
        paper_ids=str(snapshot / "paper-ids"),
        artifacts=str(work / "artifacts"),
    )
    config = apply_overrides(
        base,
        [
            *profile_overrides("demo"),
            "filter_leakage.mode=report_only",
            "mine_triplets.pool_size=0",
            f"mine_triplets.num_queries={args.queries}",
            "mine_triplets.k_pos=25",
            "mine_triplets.k_hard=4000",
            *args.overrides,
        ],
    )
    t0 = time.monotonic()
    graph = embed_graph.run(config)
    rows = {}
    for windows in ("absolute", "relative"):
        mined = mine_triplets.run(apply_overrides(config, [f"mine_triplets.windows={windows}"]))
        rows[windows] = {
            "windows": mined.metrics["windows"],
            "collisions": mined.metrics["collisions"],
            **topic_shares(mined.path, str(snapshot / "paper_topics.parquet")),
        }
    result = {
        "papers": args.papers,
        "seed": args.seed,
        "pool": mined.metrics["pool"]["papers"],
        "embed_graph": {
            "version": graph.version,
            "link_prediction": graph.metrics.get("link_prediction"),
            "neighbour_overlap": graph.metrics.get("neighbour_overlap"),
            "pbg": {k: graph.config["embed_graph"][k] for k in ("dimension", "num_epochs", "global_emb")},
        },
        "windows": rows,
        "seconds": round(time.monotonic() - t0, 1),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"windows_{args.papers}.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"# SciNCL windows on a generated snapshot of {args.papers:,} papers (pool {result['pool']:,})",
        "",
        "| windows | k_pos | k_hard | positives in the query's subtopic | hard | easy | chance |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['windows']['k_pos']} | {r['windows']['k_hard']} | {r['positive_same_subtopic']:.3f} "
            f"| {r['hard_same_subtopic']:.3f} | {r['easy_same_subtopic']:.3f} | {r['chance']:.3f} |"
        )
    (out / f"windows_{args.papers}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
