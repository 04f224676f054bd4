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

The import is citeflow's own (`models/pbg/importer.py`, vectorised and
seeded); training runs `torchbiggraph` in its own process
(`models/pbg/train.py`), launched by `models/pbg/launch.py`. Defaults are
SciNCL's settings; `--profile demo` shrinks them.

Distributed PBG (`embed_graph.machines=N`, num_partitions >= 2N): each run
trains with PBG's own distributed mode, N ranks on one config in the version
folder, meeting at `embed_graph.rendezvous`. `launch=local` starts the N
ranks on this host (`citeflow.models.pbg.train.train_ranks`); `launch=external` runs
rank 0 here and `follow(config, rank)` runs rank R wherever it is called
(Airflow's `embed_graph_rank` tasks), the ranks watching each other through
the shared run folder (`models/pbg/ranks.py`). Either way a rank that dies
stops all of them and the stage fails with one line; nothing is committed.

Warm start (`embed_graph.warm_start`): the mining run can start
from a previous release's embeddings through PBG's `init_path`
(models/pbg/warm.py): surviving papers keep their vectors in the new entity
order, new papers start random, and the run trains `warm_epochs` of the
epochs. The source version enters this version's inputs, and the manifest's
`warm_start` names it. The link-prediction run always starts cold.

Run: `citeflow run ... --until embed_graph [--set embed_graph.num_partitions=4 --set embed_graph.machines=2]`.
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
from citeflow.jobs.pipeline import StageContext, entry_point
from citeflow.models.pbg.warm import warm_shape
from citeflow.registry import REGISTRY
from citeflow.stage import execute
from citeflow.tables import write_table

STAGE = "embed_graph"
STAGE_VERSION = 2
TABLES = list(REGISTRY[STAGE].tables)
# Papers whose nearest neighbours are compared between the two runs.
OVERLAP_QUERIES = 1000

log = logging.getLogger("citeflow")

run = entry_point(STAGE)


def _store(config: RunConfig) -> ArtifactStore:
    store = ArtifactStore(config.artifacts, config.store)
    store.require_local(STAGE)
    return store


def run_on(ctx: StageContext) -> Manifest:
    config, leakage, store = ctx.config, ctx.inputs["filter_leakage"], ctx.store
    store.require_local(STAGE)
    versioned, inputs, warm = definition(config, leakage, store)
    return execute(
        store=store,
        snapshot=config.snapshot,
        stage=STAGE,
        stage_version=STAGE_VERSION,
        config=versioned,
        resolved_config={
            "embed_graph": to_dict(config.embed_graph),
            "leakage_mode": leakage.metrics["mode"],
            "shape": warm_shape(config.embed_graph),
        },
        inputs=inputs,
        tables=TABLES,
        build=lambda path: build(config, leakage, Path(path), warm),
    )


def definition(
    config: RunConfig, upstream: Manifest, store: ArtifactStore
) -> tuple[dict[str, Any], list[dict[str, Any]], Manifest | None]:
    """(versioned config, inputs, warm-start source) of this run's version; `run` and `follow` agree on it."""
    from citeflow.models.pbg.warm import find_warm_start, warm_epochs

    versioned = versioned_dict(config.embed_graph)
    warm = find_warm_start(config, upstream, store)
    inputs = [upstream.lineage()]
    if warm is not None:
        versioned = {**versioned, "warm_epochs": warm_epochs(config.embed_graph)}
        inputs.append({**warm.lineage(), "snapshot": warm.snapshot})
    return versioned, inputs, warm


def follow(config: RunConfig, rank: int, leakage: Manifest) -> Manifest:
    """Rank `rank` (1..machines-1) of a distributed embed_graph whose rank 0 runs `run` with launch=external.

    Finds the version rank 0 builds (the same settings and upstream give the same version), joins each PBG run
    of rank 0's attempt as it is launched, and returns the committed manifest (`skipped` when the version was
    complete already). Fails with one line when rank 0 goes away, starts another attempt, or does not launch
    within `rank_wait_s`; its own PBG rank is stopped first. Reads the shared version folder; writes its rank's
    report and log into each run's folder (`pbg/<run>/rank-R.json`, `train-rankR.log`).
    """
    import dataclasses
    import time

    from citeflow.lease import is_being_built, read_holder
    from citeflow.manifest import compute_version
    from citeflow.models.pbg.ranks import follow as follow_run
    from citeflow.models.pbg.train import describe_exit, pbg_env, rank_command, rank_log

    cfg = config.embed_graph
    if not 1 <= rank < cfg.machines:
        raise CiteflowError(f"embed_graph rank {rank} does not exist: ranks 1..{cfg.machines - 1} follow rank 0")
    store = _store(config)
    version = compute_version(STAGE, STAGE_VERSION, *definition(config, leakage, store)[:2])
    path = store.version_path(config.snapshot, STAGE, version)
    stale_s = config.store.lease_stale_s

    def complete() -> Manifest | None:
        return store.read_manifest(config.snapshot, STAGE, version)

    def leader() -> str | None:
        holder = read_holder(path)
        return holder.token if holder is not None and is_being_built(path, stale_s) else None

    if (done := complete()) is not None:
        return dataclasses.replace(done, skipped=True)
    token = None
    for run_name in ("mining", "link_prediction") if cfg.link_prediction else ("mining",):
        folder = Path(path) / "pbg" / run_name
        log.info("%s: rank %d of %d waits for rank 0 to launch the %s run", STAGE, rank, cfg.machines, run_name)
        token = follow_run(
            folder,
            rank=rank,
            command=lambda launch, folder=folder: rank_command(folder / launch["config"], rank),
            log_path=rank_log(folder, rank),
            env=lambda launch: pbg_env(int(launch["seed"])),
            leader=leader,
            finished=lambda: complete() is not None,
            wait_s=cfg.rank_wait_s,
            heartbeat_s=config.store.lease_heartbeat_s,
            token=token,
            describe_exit=describe_exit,
        )
        if token is None:
            break
        log.info("%s: rank %d trained its share of the %s run", STAGE, rank, run_name)
    # rank 0 collects the checkpoint and commits; this rank's task succeeds only with the version
    while (done := complete()) is None:
        if token is not None and leader() != token:
            raise CiteflowError(f"{STAGE}: rank 0 ended without committing version {version}; nothing was committed")
        time.sleep(1.0)
    return done if token is not None else dataclasses.replace(done, skipped=True)


def build(config: RunConfig, upstream: Manifest, path: Path, warm: Manifest | None = None) -> dict[str, Any]:
    import numpy as np

    from citeflow.evaluation.neighbours import nearest, normalize_rows
    from citeflow.jobs.filter_leakage.audit import audit_no_benchmark_papers
    from citeflow.models.pbg.export import entity_ids, write_sorted
    from citeflow.models.pbg.importer import import_in_subprocess
    from citeflow.models.pbg.launch import train_run
    from citeflow.models.pbg.train import load_embeddings
    from citeflow.models.pbg.warm import warm_init

    cfg = config.embed_graph
    work = path / "pbg"
    log.info("%s: importing %s citations into PBG's format", STAGE, f"{upstream.tables['citations']['rows']:,}")
    imported = import_in_subprocess(
        upstream.table_path("citations"),
        work,
        num_partitions=cfg.num_partitions,
        holdout=cfg.holdout if cfg.link_prediction else 0.0,
        seed=cfg.seed,
        log_path=work / "import.log",
    )
    if imported["edges"] == 0 or (cfg.link_prediction and imported["train_edges"] == 0):
        raise CiteflowError("embed_graph: the filtered graph has no edges to train on")
    # HOGWILD workers per rank: ranks on this host share its cores; ranks elsewhere use their own (PBG: None)
    if cfg.machines > 1 and cfg.launch == "external":
        workers = cfg.workers or None
    else:
        workers = cfg.workers or max(1, (os.cpu_count() or 1) // cfg.machines)

    # The mining run: every edge, as SciNCL trains the embeddings it mines ("we need to use all training data").
    stale_s = config.store.lease_stale_s  # a rank elsewhere silent for longer is taken for dead
    warm_metrics, init = None, {}
    if warm is not None:
        warm_metrics = warm_init(cfg, warm, work)
        init = {"init_path": str(work / "init"), "num_epochs": warm_metrics["epochs"]}
    mining = train_run(
        cfg, work, "edges_all", "mining", imported["entities"], imported["edges"], workers, stale_s, **init
    )
    ids = entity_ids(work / "entities", cfg.num_partitions)
    if upstream.metrics.get("mode") == "exclude":
        audit_no_benchmark_papers(ids, upstream, what="papers of the graph embeddings")
    # one partition at a time: the driver holds no more vectors than PBG itself does (models/pbg/export.py)
    checkpoint, entities = work / "mining" / "checkpoint", work / "entities"
    write_sorted(checkpoint, entities, cfg.num_partitions, cfg.dimension, path / "paper_embeddings", work / "export")

    runs = {"mining": mining}
    metrics: dict[str, Any] = {}
    metric_rows: list[tuple[str, str, float]] = []
    if cfg.link_prediction:
        # the neighbour overlap of the two runs searches every paper's vector: the one step that holds them all
        _, vectors = load_embeddings(checkpoint, entities, cfg.num_partitions)  # rows in `ids`' order
        queries = min(OVERLAP_QUERIES, len(ids))
        sample = np.sort(np.random.default_rng(cfg.seed).choice(len(ids), queries, replace=False))
        mining_neighbours = nearest(normalize_rows(vectors), sample, cfg.overlap_k)
        del vectors
        runs["link_prediction"], metrics, metric_rows = _link_prediction(
            cfg, work, imported, workers, stale_s, ids, sample, mining_neighbours
        )
    else:
        log.info("%s: link prediction skipped (embed_graph.link_prediction=false)", STAGE)
        metrics["link_prediction"] = {"skipped": True}
    _write_run_tables(metric_rows, runs, path, config.snapshot)
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


def _write_run_tables(metric_rows: list[tuple[str, str, float]], runs: dict[str, Any], path: Path, snapshot: str):
    """`link_prediction` (model, metric, value) and `training_log` (each run's loss per epoch), and its plot;
    the runs' loss lists leave `runs` (the manifest keeps the rest)."""
    import pyarrow as pa

    write_table(
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
    write_table(
        pa.Table.from_pylist(
            losses,
            schema=pa.schema(
                [("run", pa.string()), ("epoch", pa.int64()), ("loss", pa.float64()), ("edges", pa.int64())]
            ),
        ),
        path / "training_log",
    )
    _plot_losses(losses, path / "training_loss.png", snapshot)


def _link_prediction(cfg, work: Path, imported: dict, workers, stale_s, ids, sample, mining_neighbours):
    """The link-prediction run: the same import without the held-out edges, scored on them against random
    vectors; returns (the run's info, its metrics, its `link_prediction` rows)."""
    import numpy as np

    from citeflow.evaluation.link_prediction import link_prediction
    from citeflow.evaluation.neighbours import nearest, normalize_rows, overlap
    from citeflow.models.pbg.importer import read_edges
    from citeflow.models.pbg.launch import train_run
    from citeflow.models.pbg.train import load_embeddings

    metrics: dict[str, Any] = {}
    run = train_run(
        cfg, work, "edges_train", "link_prediction", imported["entities"], imported["train_edges"], workers, stale_s
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
    return run, metrics, metric_rows


def _relative_paths(pbg_config: dict[str, Any], path: Path) -> dict[str, Any]:
    """PBG's config with its paths relative to the version folder: the manifest says what was computed, and
    a copy of the version (another root, a reused snapshot) says the same."""
    prefix = f"{path}/"

    def rel(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(prefix):
            return value[len(prefix) :]
        return [rel(v) for v in value] if isinstance(value, list) else value

    return {key: rel(value) for key, value in pbg_config.items()}


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
