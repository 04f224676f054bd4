"""Stage embed_graph: PyTorch-BigGraph embeddings of the filtered citation graph.

Reads: the `citations` table of the filter_leakage version of the same run.
Writes `ARTIFACTS/<snapshot>/embed_graph/<version>/`:
- `paper_embeddings`: corpus_id (int64), embedding (float32 list of
  `dimension`): the table every later stage reads, from the *mining run*,
  trained on every edge as SciNCL trains the embeddings it mines.
- `link_prediction`: model (pbg / random baseline), metric, value (MRR,
  Hits@1, Hits@10, AUC) of the *link-prediction run*: a second PBG run on
  the same import without the held-out edges, scored on them
  (`embed_graph.link_prediction=false` skips it; the table is then empty).
- `training_log`: run, epoch, loss (edge-weighted mean), edges.
- `training_loss.png`, and `pbg/` with PBG's entity files, edge buckets and
  one folder per run (config, log, checkpoint).
The manifest records both runs, the resolved PBG config, and how many of
each paper's nearest neighbours the two runs share.

The import is citeflow's own (`models/pbg_import.py`, vectorised and
seeded); training runs `torchbiggraph` in its own process
(`models/pbg_train.py`). Defaults are SciNCL's settings; `--profile demo`
shrinks them. Distributed PBG: see the README (needs num_partitions >= 2 per
machine).

Warm start (issue 19, `embed_graph.warm_start`): the mining run can start
from a previous release's embeddings through PBG's `init_path`
(models/pbg_warm.py): surviving papers keep their vectors in the new entity
order, new papers start random, and the run trains `warm_epochs` of the
epochs. The source version enters this version's inputs, and the manifest's
`warm_start` names it. The link-prediction run always starts cold.

Run: `citeflow run ... --until embed_graph`.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import EmbedGraphConfig, RunConfig, to_dict, versioned_dict
from citeflow.errors import CiteflowError
from citeflow.stage import execute

STAGE = "embed_graph"
STAGE_VERSION = 2
TABLES = ["paper_embeddings", "link_prediction", "training_log"]
# Papers whose nearest neighbours are compared between the two runs.
OVERLAP_QUERIES = 1000

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
    versioned = versioned_dict(config.embed_graph)
    warm = find_warm_start(config, upstream, store, versioned)
    inputs = [upstream.lineage()]
    if warm is not None:
        versioned = {**versioned, "warm_epochs": warm_epochs(config.embed_graph)}
        inputs.append({**warm.lineage(), "snapshot": warm.snapshot})
    return execute(
        store=store,
        snapshot=config.snapshot,
        stage=STAGE,
        stage_version=STAGE_VERSION,
        config=versioned,
        resolved_config={
            "embed_graph": to_dict(config.embed_graph),
            "leakage_mode": upstream.metrics["mode"],
            "shape": _shape(config.embed_graph),
        },
        inputs=inputs,
        tables=TABLES,
        build=lambda path: build(config, upstream, Path(path), warm),
    )


def _shape(cfg: EmbedGraphConfig) -> dict[str, Any]:
    """What a warm-start source must share with this run: the embedding space and its partitioning."""
    return {"dimension": cfg.dimension, "comparator": cfg.comparator, "num_partitions": cfg.num_partitions}


def warm_epochs(cfg: EmbedGraphConfig) -> int:
    import math

    return max(1, math.ceil(cfg.warm_epochs * cfg.num_epochs - 1e-9))


def find_warm_start(
    config: RunConfig, upstream: Manifest, store: ArtifactStore, versioned: dict[str, Any]
) -> Manifest | None:
    """The embed_graph version to warm-start from (`embed_graph.warm_start`), or None, with one log line
    saying why when a warm start was asked for. auto: the base release of this release's build_graph diff."""
    setting = config.embed_graph.warm_start
    if setting == "off":
        return None
    source = setting
    if setting == "auto":
        graph = store.upstream(upstream, "build_graph")
        diff = graph.metrics.get("from_diff")
        if not isinstance(diff, dict):
            log.info("%s: warm_start=auto, but build_graph was not built from a diff: cold start", STAGE)
            return None
        source = diff["base"]["snapshot"]
    if source == config.snapshot:
        raise CiteflowError(f"embed_graph.warm_start names this run's own snapshot {source!r}")
    shape = _shape(config.embed_graph)
    found = [m for m in store.list_versions(source, STAGE) if m.config.get("shape") == shape]
    if not found:
        log.info(
            "%s: no embed_graph version of snapshot %s with %s to warm-start from: cold start", STAGE, source, shape
        )
        return None
    return found[-1]  # the most recent


def pbg_settings(
    cfg: EmbedGraphConfig,
    work: Path,
    edges: str,
    run: str,
    workers: int,
    init_path: str | None = None,
    num_epochs: int | None = None,
) -> dict[str, Any]:
    """The PBG config of one run: `edges` (a folder under `work`) in, `work/run/checkpoint` out; a warm start
    sets PBG's `init_path` and fewer epochs."""
    from models.pbg_train import pbg_config

    extra = {}
    for item in cfg.pbg:
        key, value = item.split("=", 1)
        try:
            extra[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            extra[key.strip()] = value
    return pbg_config(
        entities=str(work / "entities"),
        train_edges=str(work / edges),
        checkpoint=str(work / run / "checkpoint"),
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
        global_emb=cfg.global_emb,
        extra={**extra, **({"init_path": init_path} if init_path else {})},
    ) | ({"num_epochs": num_epochs} if num_epochs else {})


def build(config: RunConfig, upstream: Manifest, path: Path, warm: Manifest | None = None) -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa

    from citeflow.leakage import audit_no_benchmark_papers
    from evaluation.link_prediction import link_prediction
    from evaluation.neighbours import nearest, normalize_rows, overlap
    from models.pbg_import import import_citations, read_edges
    from models.pbg_train import load_embeddings

    cfg = config.embed_graph
    work = path / "pbg"
    log.info("%s: importing %s citations into PBG's format", STAGE, f"{upstream.tables['citations']['rows']:,}")
    imported = import_citations(
        upstream.table_path("citations"),
        work,
        num_partitions=cfg.num_partitions,
        holdout=cfg.holdout if cfg.link_prediction else 0.0,
        seed=cfg.seed,
    )
    if imported["edges"] == 0 or (cfg.link_prediction and imported["train_edges"] == 0):
        raise CiteflowError("embed_graph: the filtered graph has no edges to train on")
    workers = cfg.workers or os.cpu_count() or 1

    warm_metrics, init = None, {}
    if warm is not None:
        warm_metrics = _warm_init(cfg, warm, work)
        init = {"init_path": str(work / "init"), "num_epochs": warm_metrics["epochs"]}
    # The mining run: every edge, as SciNCL trains the embeddings it mines ("we need to use all training data").
    mining = _train(cfg, work, "edges_all", "mining", imported["entities"], imported["edges"], workers, **init)
    ids, vectors = load_embeddings(work / "mining" / "checkpoint", work / "entities", cfg.num_partitions)
    if upstream.metrics.get("mode") == "exclude":
        audit_no_benchmark_papers(ids, upstream, what="graph-embedding entities")
    order = np.argsort(ids, kind="stable")
    flat = pa.array(vectors[order].reshape(-1), pa.float32())
    table = pa.table(
        {
            "corpus_id": pa.array(ids[order], pa.int64()),
            "embedding": pa.FixedSizeListArray.from_arrays(flat, cfg.dimension),
        }
    )
    _write(table, path / "paper_embeddings")
    del table, flat
    sample = np.sort(np.random.default_rng(cfg.seed).choice(len(ids), min(OVERLAP_QUERIES, len(ids)), replace=False))
    mining_neighbours = nearest(normalize_rows(vectors), sample, cfg.overlap_k)
    del vectors

    # The link-prediction run: the same import without the held-out edges, scored on them.
    runs = {"mining": mining}
    metrics: dict[str, Any] = {}
    metric_rows: list[tuple[str, str, float]] = []
    if cfg.link_prediction:
        runs["link_prediction"] = _train(
            cfg, work, "edges_train", "link_prediction", imported["entities"], imported["train_edges"], workers
        )
        held_ids, held = load_embeddings(work / "link_prediction" / "checkpoint", work / "entities", cfg.num_partitions)
        if not np.array_equal(held_ids, ids):
            raise RuntimeError("the two PBG runs disagree on the entity order of their shared import")
        lhs, rhs = read_edges(work / "edges_holdout", work / "entities", cfg.num_partitions)
        scored = dict(num_negatives=cfg.eval_negatives, comparator=cfg.comparator, seed=cfg.seed)
        trained = link_prediction(held, lhs, rhs, **scored)
        rng = np.random.default_rng(cfg.seed)
        baseline = link_prediction(rng.normal(size=held.shape).astype(np.float32), lhs, rhs, **scored)
        shared = overlap(mining_neighbours, nearest(normalize_rows(held), sample, cfg.overlap_k))
        metric_rows = [
            (model, name, float(value))
            for model, values in (("pbg", trained), ("random", baseline))
            for name, value in values.items()
            if name != "edges"
        ]
        metrics["link_prediction"] = {k: round(v, 6) for k, v in trained.items() if k != "edges"}
        metrics["random_baseline"] = {k: round(v, 6) for k, v in baseline.items() if k != "edges"}
        metrics["neighbour_overlap"] = {"k": cfg.overlap_k, "papers": len(sample), "share": round(shared, 4)}
        log.info(
            "%s: held-out MRR %.3f (random %.3f), AUC %.3f; the runs share %.0f%% of the top-%d neighbours",
            STAGE,
            trained["mrr"],
            baseline["mrr"],
            trained["auc"],
            100 * shared,
            cfg.overlap_k,
        )
    else:
        log.info("%s: link prediction skipped (embed_graph.link_prediction=false)", STAGE)
        metrics["link_prediction"] = {"skipped": True}
    _write(
        pa.table(
            {
                "model": pa.array([r[0] for r in metric_rows], pa.string()),
                "metric": pa.array([r[1] for r in metric_rows], pa.string()),
                "value": pa.array([r[2] for r in metric_rows], pa.float64()),
            }
        ),
        path / "link_prediction",
    )
    losses = [{"run": run, **row} for run, info in runs.items() for row in info.pop("losses")]
    _write(
        pa.Table.from_pylist(
            losses,
            schema=pa.schema(
                [("run", pa.string()), ("epoch", pa.int64()), ("loss", pa.float64()), ("edges", pa.int64())]
            ),
        ),
        path / "training_log",
    )
    _plot_losses(losses, path / "training_loss.png", config.snapshot)
    return {
        "leakage_mode": upstream.metrics.get("mode"),
        "entities": imported["entities"],
        "edges": imported["edges"],
        "train_edges": imported["train_edges"],
        "holdout_edges": imported["holdout_edges"],
        "dimension": cfg.dimension,
        **metrics,
        "runs": runs,
        "pbg_config": _relative_paths(json.loads((work / "mining" / "config.json").read_text()), path),
        "train_seconds": round(sum(r["train_seconds"] for r in runs.values()), 2),
        "final_loss": mining["final_loss"],
        **({"warm_start": warm_metrics} if warm_metrics else {}),
    }


def _warm_init(cfg: EmbedGraphConfig, warm: Manifest, work: Path) -> dict[str, Any]:
    """PBG's init_path folder (`work/init`) from the source version's paper embeddings, for this import's
    entity order; returns the manifest's `warm_start`."""
    import numpy as np
    import pyarrow.parquet as pq

    from models.pbg_warm import pbg_init_scale, write_init

    table = pq.read_table(warm.table_path("paper_embeddings"))
    ids = table.column("corpus_id").to_numpy()
    vectors = np.asarray(table.column("embedding").combine_chunks().flatten().to_numpy(), dtype=np.float32)
    vectors = vectors.reshape(len(ids), cfg.dimension)
    extra = dict(item.split("=", 1) for item in cfg.pbg)
    scale = float(extra["init_scale"]) if "init_scale" in extra else pbg_init_scale()
    counts = write_init(
        work / "init", work / "entities", cfg.num_partitions, ids, vectors, init_scale=scale, seed=cfg.seed
    )
    epochs = warm_epochs(cfg)
    log.info(
        "%s: warm start from version %s of snapshot %s: %s papers keep their vectors, %s start random; %d of %d epochs",
        STAGE,
        warm.version,
        warm.snapshot,
        f"{counts['kept']:,}",
        f"{counts['new']:,}",
        epochs,
        cfg.num_epochs,
    )
    return {"snapshot": warm.snapshot, "version": warm.version, "epochs": epochs, "of_epochs": cfg.num_epochs, **counts}


def _relative_paths(pbg_config: dict[str, Any], path: Path) -> dict[str, Any]:
    """PBG's config with its paths relative to the version folder: the manifest says what was computed, and
    a copy of the version (another root, a reused snapshot) says the same."""
    prefix = f"{path}/"

    def rel(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(prefix):
            return value[len(prefix) :]
        return [rel(v) for v in value] if isinstance(value, list) else value

    return {key: rel(value) for key, value in pbg_config.items()}


def _train(
    cfg: EmbedGraphConfig,
    work: Path,
    edges: str,
    run: str,
    entities: int,
    edge_count: int,
    workers: int,
    init_path: str | None = None,
    num_epochs: int | None = None,
):
    """One PBG training run in its own process; returns its summary (losses popped by the caller)."""
    import time

    from models.pbg_train import train_in_subprocess, training_losses

    folder = work / run
    folder.mkdir(parents=True, exist_ok=True)
    settings = pbg_settings(cfg, work, edges, run, workers, init_path, num_epochs)
    epochs = settings["num_epochs"]
    log.info(
        "%s: %s run: %d-d embeddings of %s papers on %s edges for %d epochs (%d workers)",
        STAGE,
        run,
        cfg.dimension,
        f"{entities:,}",
        f"{edge_count:,}",
        epochs,
        workers,
    )
    t0 = time.monotonic()
    train_in_subprocess(settings, folder / "config.json", folder / "train.log", seed=cfg.seed)
    seconds = time.monotonic() - t0
    losses = training_losses(folder / "checkpoint")
    return {
        "edges": edge_count,
        "edge_path": edges,
        "train_seconds": round(seconds, 2),
        "epochs": epochs,
        "edges_per_second": round(edge_count * epochs / max(seconds, 1e-9), 1),
        "final_loss": losses[-1]["loss"] if losses else None,
        "losses": losses,
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
    for run in dict.fromkeys(r["run"] for r in losses):
        rows = [r for r in losses if r["run"] == run]
        ax.plot([r["epoch"] for r in rows], [r["loss"] for r in rows], marker="o", label=f"{run} run")
    ax.legend()
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss (mean per edge)")
    ax.set_title(f"PBG training loss — {snapshot}")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(target)
    plt.close(fig)
