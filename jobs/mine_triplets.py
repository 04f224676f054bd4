"""Stage mine_triplets: SciNCL kNN triplets (FAISS) or SPECTER citation triplets, audited for leakage.

Reads: the embed_graph version of the run (`paper_embeddings`) and the
filter_leakage version it was trained from (`papers` for texts, `citations`,
`benchmark_ids` for the audit).
Writes `ARTIFACTS/<snapshot>/mine_triplets/<version>/`:
- `triplets`: query_id, positive_id, negative_id, negative_kind (hard / easy),
  strategy, positive_rank and negative_rank (neighbour ranks, SciNCL only):
  `positives` rows per query, positive i paired with negative i.
- `training_texts`: corpus_id, title, abstract of every paper in the triplets.
- `rank_histogram`: kind (positive / hard / easy), bin_low, bin_high, papers:
  exact graph-embedding neighbour ranks for a sample of queries, so SciNCL's
  windows and SPECTER's citations can be compared on one scale; also
  `rank_histogram.png`.
- `_manifest.json`: pool, queries, triplets per kind, collisions, index and
  its recall against exact search (approximate indexes), search throughput,
  leakage audit.

The candidate pool is the papers with a graph embedding and a title or an
abstract (seeded, `pool_size`); queries are drawn from it (SPECTER: from the
pool papers that cite a paper which cites another, since its reference
skips the rest; their number is counted; `specter_query_rule=parallel` also
skips those with fewer than three candidates, as SPECTER's parallel sampler
does). Draws are hashed per query (`models/triplets/mining.py`), and SciNCL's
easy-negative windows (`easy_negatives_sampling=window`) read one list
shuffled once for all queries: batch size and GPU use change nothing.
One strategy per version: mine both with `citeflow run --strategy both` or
the DAG's `triplet_strategy` param.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from citeflow import tables
from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import RunConfig, to_dict, versioned_dict
from citeflow.errors import CiteflowError
from citeflow.jobs.pipeline import StageContext, entry_point
from citeflow.jobs.triplet_strategies import STRATEGY_MINERS
from citeflow.registry import REGISTRY
from citeflow.stage import execute

STAGE = "mine_triplets"
STAGE_VERSION = 2
TABLES = list(REGISTRY[STAGE].tables)
READ_BATCH = 65_536

log = logging.getLogger("citeflow")

run = entry_point(STAGE)


def run_on(ctx: StageContext) -> Manifest:
    config, graph, store = ctx.config, ctx.inputs["embed_graph"], ctx.store
    store.require_local(STAGE)
    leakage = ctx.lineage["filter_leakage"]
    return execute(
        store=store,
        snapshot=config.snapshot,
        stage=STAGE,
        stage_version=STAGE_VERSION,
        config=versioned_dict(config.mine_triplets),
        resolved_config={"mine_triplets": to_dict(config.mine_triplets), "leakage_mode": leakage.metrics["mode"]},
        inputs=[graph.lineage(), leakage.lineage()],
        tables=TABLES,
        build=lambda path: build(config, store, graph, leakage, path),
    )


def build(config: RunConfig, store: ArtifactStore, graph: Manifest, leakage: Manifest, path: str) -> dict[str, Any]:
    import numpy as np

    from citeflow.threads import configure

    # FAISS' search: passive OpenMP waiting and pools from the usable cores (see citeflow/threads.py); the
    # environment part counts only where this process has not started OpenMP yet (a fresh task or CLI run)
    threads = configure()

    from citeflow.jobs.filter_leakage.audit import audit_no_benchmark_papers
    from citeflow.models.triplets import knn as knn
    from citeflow.models.triplets import mining as T
    from citeflow.models.triplets import ranks as rank_sample

    cfg = config.mine_triplets
    warnings: list[str] = []

    embedded, eligible, pool = _pool(cfg, store, graph, leakage, warnings)
    vectors = knn.l2_normalize(_vectors(store, graph.table_path("paper_embeddings"), pool))

    metrics: dict[str, Any] = {"strategy": cfg.strategy, "leakage_mode": leakage.metrics.get("mode")}
    miner = STRATEGY_MINERS[cfg.strategy](cfg, store, leakage, pool, vectors, metrics)
    candidates = miner.candidates
    wanted_queries = cfg.num_queries or len(candidates)
    if wanted_queries > len(candidates):
        warnings.append(f"num_queries {cfg.num_queries:,} > {len(candidates):,} possible queries: using all of them")
    query_rows = np.searchsorted(pool, T.hashed_sample(candidates, wanted_queries, cfg.seed, T.SALT_QUERY))
    miner.prepare(query_rows, warnings)
    for message in warnings:
        log.warning("%s: %s", STAGE, message)

    rank_queries = (
        np.searchsorted(pool, T.hashed_sample(pool[query_rows], cfg.rank_sample, cfg.seed, T.SALT_SAMPLE))
        if cfg.rank_sample
        else np.zeros(0, int)
    )
    mined = _mine(cfg, miner, pool, query_rows, Path(path) / "triplets", rank_queries)
    metrics.update(mined["metrics"])
    metrics["warnings"] = warnings
    metrics["threads"] = {k: v for k, v in threads.items() if k != "load_average"}
    metrics["pool"] = {
        "papers": len(pool),
        "embedded": len(embedded),
        "embedded_with_text": len(eligible),
        "embedded_without_text": int(len(embedded) - len(eligible)),
        "query_candidates": len(candidates),
    }
    miner.finish(metrics, query_rows)

    used = mined["used"]
    texts = _write_texts(store, leakage.table_path("papers"), pool[used], Path(path) / "training_texts")
    if texts != len(used):
        raise RuntimeError(f"training_texts holds {texts} papers, the triplets use {len(used)}")
    text_ids = _column(store, str(Path(path) / "training_texts"), "corpus_id")
    metrics["leakage_audit"] = [
        audit_no_benchmark_papers(pool[used], leakage, what="papers of the training triplets"),
        audit_no_benchmark_papers(text_ids, leakage, what="papers of the training texts"),
    ]

    ranks = rank_sample.sample_ranks(vectors, mined["rank_sample"])
    histogram = rank_sample.rank_histogram(ranks, len(pool))
    tables.write_table(histogram, Path(path) / "rank_histogram")
    _plot_ranks(histogram, Path(path) / "rank_histogram.png", cfg.strategy, config.snapshot, miner.windows)
    metrics["rank_summary"] = rank_sample.rank_summary(ranks)
    log.info(
        "%s: %s triplets from %s queries (%s hard, %s easy negatives), %d collisions",
        STAGE,
        f"{metrics['triplets']:,}",
        f"{metrics['queries']:,}",
        f"{metrics['negatives']['hard']:,}",
        f"{metrics['negatives']['easy']:,}",
        metrics["collisions"],
    )
    return metrics


def _pool(cfg, store: ArtifactStore, graph: Manifest, leakage: Manifest, warnings: list[str]):
    """(embedded ids, eligible ids, pool): the papers with a graph embedding and usable text, and a seeded
    (hashed) sample of them."""
    import numpy as np

    from citeflow.models.triplets import mining as T

    embedded = _column(store, graph.table_path("paper_embeddings"), "corpus_id")
    with_text = _ids_with_text(store, leakage.table_path("papers"))
    eligible = np.intersect1d(embedded, with_text, assume_unique=True)
    if len(eligible) == 0:
        raise CiteflowError("mine_triplets: no paper has both a graph embedding and a title or abstract")
    wanted = cfg.pool_size or len(eligible)
    if wanted > len(eligible):
        warnings.append(f"pool_size {cfg.pool_size:,} > {len(eligible):,} eligible papers: the pool is all of them")
    pool = T.hashed_sample(eligible, wanted, cfg.seed, T.SALT_POOL)
    log.info(
        "%s: pool of %s papers (%s embedded, %s with text)",
        STAGE,
        f"{len(pool):,}",
        f"{len(embedded):,}",
        f"{len(eligible):,}",
    )
    return embedded, eligible, pool


def _mine(cfg, miner, pool, query_rows, out: Path, rank_queries) -> dict[str, Any]:
    """Mine every query batch with the strategy's `miner`, streaming triplets to Parquet; returns metrics, used
    pool rows, rank sample."""
    import numpy as np
    import pyarrow as pa
    from tqdm import tqdm

    from citeflow.models.triplets import mining as T

    schema = pa.schema(
        [
            ("query_id", pa.int64()),
            ("positive_id", pa.int64()),
            ("negative_id", pa.int64()),
            ("negative_kind", pa.string()),
            ("strategy", pa.string()),
            ("positive_rank", pa.int32()),
            ("negative_rank", pa.int32()),
        ]
    )
    counts: dict[str, int] = {}
    hard = easy = collisions = 0
    used: list[np.ndarray] = []
    sample: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    t0 = time.monotonic()
    with (
        tables.table_writer(out, schema) as writer,
        tqdm(total=len(query_rows), desc=f"mine_triplets ({cfg.strategy})", unit="query", disable=None) as bar,
    ):
        for rows in T.batches(query_rows, cfg.batch_size):
            batch = miner.batch(rows)
            for key, value in batch.counts.items():
                counts[key] = counts.get(key, 0) + value
            hard += int(batch.hard.sum())
            easy += int((~batch.hard).sum())
            collisions += T.collisions(batch.query, batch.positive, batch.negative, len(pool))
            used.append(np.unique(np.concatenate([batch.query, batch.positive, batch.negative])))
            in_sample = np.isin(batch.query, rank_queries)
            if in_sample.any():
                sample.append(
                    (
                        batch.query[in_sample],
                        batch.positive[in_sample],
                        batch.negative[in_sample],
                        batch.hard[in_sample],
                    )
                )
            writer.write_table(
                pa.table(
                    {
                        "query_id": pool[batch.query],
                        "positive_id": pool[batch.positive],
                        "negative_id": pool[batch.negative],
                        "negative_kind": np.where(batch.hard, "hard", "easy"),
                        "strategy": pa.array([cfg.strategy] * len(batch.query), pa.string()),
                        "positive_rank": pa.array(batch.positive_rank, pa.int32(), mask=batch.positive_rank < 0),
                        "negative_rank": pa.array(batch.negative_rank, pa.int32(), mask=batch.negative_rank < 0),
                    },
                    schema=schema,
                )
            )
            bar.update(len(rows))
    seconds = time.monotonic() - t0
    used_rows = np.unique(np.concatenate(used)) if used else np.zeros(0, np.int64)
    triplets = hard + easy
    metrics = {
        "queries": counts.get("queries", 0),
        "triplets": triplets,
        "papers_used": len(used_rows),
        "negatives": {"hard": hard, "easy": easy},
        "collisions": collisions,
        "mining_seconds": round(seconds, 3),
        "queries_per_second": round(len(query_rows) / max(seconds, 1e-9), 1),
    }
    metrics.update(miner.batch_metrics(counts))
    return {"metrics": metrics, "used": used_rows, "rank_sample": _stack(sample)}


def _stack(parts):
    import numpy as np

    if not parts:
        return tuple(np.zeros(0, dtype=t) for t in (np.int64, np.int64, np.int64, bool))
    return tuple(np.concatenate(column) for column in zip(*parts, strict=True))


def _column(store: ArtifactStore, table: str, column: str):
    import pyarrow.dataset as ds

    values = ds.dataset(table, format="parquet", filesystem=store.fs).to_table(columns=[column]).column(column)
    return values.to_numpy()


def _ids_with_text(store: ArtifactStore, papers: str):
    """Sorted corpus ids of papers with a non-blank title or abstract, read in batches."""
    import numpy as np
    import pyarrow.compute as pc

    def present(column):
        return pc.fill_null(pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(column)), 0), False)

    parts = []
    for batch in tables.batches(store.fs, papers, ["corpus_id", "title", "abstract"], READ_BATCH):
        keep = pc.or_(present(batch.column("title")), present(batch.column("abstract")))
        parts.append(batch.column("corpus_id").filter(keep).to_numpy())
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def _vectors(store: ArtifactStore, embeddings: str, pool):
    """Embeddings of the pool papers, in pool order (float32, pool × dimension)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    dataset = ds.dataset(embeddings, format="parquet", filesystem=store.fs)
    dimension = dataset.schema.field("embedding").type.list_size
    out = np.empty((len(pool), dimension), dtype=np.float32)
    filled = 0
    wanted = pa.array(pool, pa.int64())
    for batch in dataset.to_batches(columns=["corpus_id", "embedding"], batch_size=READ_BATCH):
        keep = pc.is_in(batch.column("corpus_id"), value_set=wanted)
        ids = batch.column("corpus_id").filter(keep).to_numpy()
        values = batch.column("embedding").filter(keep).flatten().to_numpy(zero_copy_only=False)
        out[np.searchsorted(pool, ids)] = values.reshape(len(ids), dimension)
        filled += len(ids)
    if filled != len(pool):
        raise RuntimeError(f"found embeddings for {filled} of {len(pool)} pool papers")
    return out


def _write_texts(store: ArtifactStore, papers: str, ids, out: Path) -> int:
    """Stream the filtered papers table, keeping the texts of `ids`, and write them sorted by corpus id;
    returns rows written.

    The papers table comes from Spark, whose row order changes from run to run; the small encoder's
    WordPiece trainer reads these texts in order and breaks ties at its vocabulary cut-off by that order
    (two builds differed by one token), so the order is made canonical here. Only the kept texts are held
    (SciNCL's 684k triplets touch at most its 681k-paper pool: ~0.7 GB of titles and abstracts).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    out.mkdir(parents=True)
    wanted = pa.array(ids, pa.int64())
    schema = pa.schema([("corpus_id", pa.int64()), ("title", pa.string()), ("abstract", pa.string())])
    parts = [schema.empty_table()]
    for batch in tables.batches(store.fs, papers, ["corpus_id", "title", "abstract"], READ_BATCH):
        keep = pc.is_in(batch.column("corpus_id"), value_set=wanted)
        if pc.any(keep).as_py():
            parts.append(pa.Table.from_batches([batch]).filter(keep).cast(schema))
    table = pa.concat_tables(parts).sort_by("corpus_id")
    tables.write_table(table, out, row_group_size=READ_BATCH)
    return table.num_rows


def _plot_ranks(histogram, target: Path, strategy: str, snapshot: str, windows) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    data = histogram.to_pydict()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    kinds = ["positive", "hard", "easy"]
    for offset, kind in zip((-0.27, 0, 0.27), kinds, strict=True):
        rows = [i for i, k in enumerate(data["kind"]) if k == kind]
        counts = np.array([data["papers"][i] for i in rows], dtype=float)
        total = counts.sum()
        if total:
            ax.bar(np.arange(len(rows)) + offset, counts / total, width=0.27, label=f"{kind} (n={int(total):,})")
    rows = [i for i, k in enumerate(data["kind"]) if k == kinds[0]]
    ax.set_xticks(np.arange(len(rows)))
    ax.set_xticklabels([f"{data['bin_low'][i]:,}" for i in rows], rotation=60, fontsize=7)
    ax.set_xlabel("exact neighbour rank in the graph-embedding space (bin start, log2 bins)")
    ax.set_ylabel("share of the kind's papers")
    title = f"{strategy} triplets — {snapshot}"
    if windows is not None:
        title += f" (k_pos={windows.k_pos}, k_hard={windows.k_hard})"
    ax.set_title(title)
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(target)
    plt.close(fig)
