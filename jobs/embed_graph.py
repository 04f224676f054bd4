"""Stage embed_graph: PyTorch-BigGraph embeddings of the filtered citation graph.

Reads: the `citations` table of the filter_leakage version of the same run.
Writes `ARTIFACTS/<snapshot>/embed_graph/<version>/`:
- `paper_embeddings`: corpus_id (int64), embedding (float32 list of
  `dimension`): the table every later stage reads.
- `link_prediction`: model (pbg / random baseline), metric, value on the
  held-out edges (MRR, Hits@1, Hits@10, AUC).
- `training_log`: epoch, loss (edge-weighted mean), edges.
- `training_loss.png`, and `pbg/` with PBG's entity files, edge buckets,
  config, log and checkpoint.

The import is citeflow's own (`models/pbg_import.py`, vectorised and
seeded); training runs `torchbiggraph` in its own process
(`models/pbg_train.py`). Defaults are SciNCL's settings; `--profile demo`
shrinks them. Distributed PBG: see the README (needs num_partitions >= 2 per
machine).

Run: `citeflow run ... --until embed_graph`.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import RunConfig, to_dict, versioned_dict
from citeflow.errors import CiteflowError
from citeflow.stage import execute

STAGE = "embed_graph"
STAGE_VERSION = 1
TABLES = ["paper_embeddings", "link_prediction", "training_log"]

log = logging.getLogger("citeflow")


def run(config: RunConfig) -> Manifest:
    from jobs import filter_leakage

    upstream = filter_leakage.run(config)
    store = ArtifactStore(config.artifacts, config.store)
    if not store.local:
        raise CiteflowError(
            "embed_graph trains with PBG on local files: use a local --artifacts root "
            "(or a mounted filesystem) for this stage"
        )
    return execute(
        store=store,
        snapshot=config.snapshot,
        stage=STAGE,
        stage_version=STAGE_VERSION,
        config=versioned_dict(config.embed_graph),
        resolved_config={"embed_graph": to_dict(config.embed_graph), "leakage_mode": upstream.metrics["mode"]},
        inputs=[upstream.lineage()],
        tables=TABLES,
        build=lambda path: build(config, upstream, Path(path)),
    )


def build(config: RunConfig, upstream: Manifest, path: Path) -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa

    from citeflow.leakage import audit_no_benchmark_papers
    from evaluation.link_prediction import link_prediction
    from models.pbg_import import import_citations, read_edges
    from models.pbg_train import load_embeddings, pbg_config, train_in_subprocess, training_losses

    cfg = config.embed_graph
    work = path / "pbg"
    log.info("%s: importing %s citations into PBG's format", STAGE, f"{upstream.tables['citations']['rows']:,}")
    imported = import_citations(
        upstream.table_path("citations"), work, num_partitions=cfg.num_partitions, holdout=cfg.holdout, seed=cfg.seed
    )
    if imported["train_edges"] == 0:
        raise CiteflowError("embed_graph: the filtered graph has no edges to train on")
    extra = {}
    for item in cfg.pbg:
        key, value = item.split("=", 1)
        try:
            extra[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            extra[key.strip()] = value
    workers = cfg.workers or os.cpu_count() or 1
    pbg = pbg_config(
        entities=str(work / "entities"),
        train_edges=str(work / "edges_train"),
        checkpoint=str(work / "checkpoint"),
        num_partitions=cfg.num_partitions,
        dimension=cfg.dimension,
        comparator=cfg.comparator,
        loss_fn=cfg.loss_fn,
        margin=cfg.margin,
        lr=cfg.lr,
        num_epochs=cfg.num_epochs,
        batch_size=cfg.batch_size,
        num_edge_chunks=cfg.num_edge_chunks,
        max_norm=cfg.max_norm or None,
        workers=workers,
        num_uniform_negs=cfg.num_uniform_negs,
        num_batch_negs=cfg.num_batch_negs,
        extra=extra,
    )
    log.info(
        "%s: training %d-d embeddings of %s papers for %d epochs (%d workers)",
        STAGE,
        cfg.dimension,
        f"{imported['entities']:,}",
        cfg.num_epochs,
        workers,
    )
    import time

    t0 = time.monotonic()
    train_in_subprocess(pbg, work / "config.json", work / "train.log", seed=cfg.seed)
    train_seconds = time.monotonic() - t0
    ids, vectors = load_embeddings(work / "checkpoint", work / "entities", cfg.num_partitions)
    if upstream.metrics.get("mode") == "exclude":
        audit_no_benchmark_papers(ids, upstream, what="graph-embedding entities")

    lhs, rhs = read_edges(work / "edges_holdout", work / "entities", cfg.num_partitions)
    trained = link_prediction(
        vectors, lhs, rhs, num_negatives=cfg.eval_negatives, comparator=cfg.comparator, seed=cfg.seed
    )
    rng = np.random.default_rng(cfg.seed)
    baseline = link_prediction(
        rng.normal(size=vectors.shape).astype(np.float32),
        lhs,
        rhs,
        num_negatives=cfg.eval_negatives,
        comparator=cfg.comparator,
        seed=cfg.seed,
    )

    order = np.argsort(ids, kind="stable")
    flat = pa.array(vectors[order].reshape(-1), pa.float32())
    table = pa.table(
        {
            "corpus_id": pa.array(ids[order], pa.int64()),
            "embedding": pa.FixedSizeListArray.from_arrays(flat, cfg.dimension),
        }
    )
    _write(table, path / "paper_embeddings")
    metric_rows = [
        (model, name, float(value))
        for model, values in (("pbg", trained), ("random", baseline))
        for name, value in values.items()
        if name != "edges"
    ]
    _write(
        pa.table(
            {
                "model": [r[0] for r in metric_rows],
                "metric": [r[1] for r in metric_rows],
                "value": [r[2] for r in metric_rows],
            }
        ),
        path / "link_prediction",
    )
    losses = training_losses(work / "checkpoint")
    _write(
        pa.Table.from_pylist(
            losses, schema=pa.schema([("epoch", pa.int64()), ("loss", pa.float64()), ("edges", pa.int64())])
        ),
        path / "training_log",
    )
    _plot_losses(losses, path / "training_loss.png", config.snapshot)
    log.info("%s: held-out MRR %.3f (random %.3f), AUC %.3f", STAGE, trained["mrr"], baseline["mrr"], trained["auc"])
    return {
        "leakage_mode": upstream.metrics.get("mode"),
        "entities": imported["entities"],
        "train_edges": imported["train_edges"],
        "holdout_edges": imported["holdout_edges"],
        "dimension": cfg.dimension,
        "link_prediction": {k: round(v, 6) for k, v in trained.items() if k != "edges"},
        "random_baseline": {k: round(v, 6) for k, v in baseline.items() if k != "edges"},
        "train_seconds": round(train_seconds, 2),
        "edges_per_second": round(imported["train_edges"] * cfg.num_epochs / max(train_seconds, 1e-9), 1),
        "final_loss": losses[-1]["loss"] if losses else None,
    }


def _write(table, folder: Path) -> None:
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    pq.write_table(table, folder / "part-0.parquet", compression="zstd")


def _plot_losses(losses: list[dict], target: Path, snapshot: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    ax.plot([r["epoch"] for r in losses], [r["loss"] for r in losses], marker="o")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss (mean per edge)")
    ax.set_title(f"PBG training loss — {snapshot}")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(target)
    plt.close(fig)
