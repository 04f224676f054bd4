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
does). Draws are hashed per query (`models/triplets.py`), and SciNCL's
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
from citeflow.registry import REGISTRY
from citeflow.stage import execute
from jobs.pipeline import Upstream, entry_point

STAGE = "mine_triplets"
STAGE_VERSION = 2
TABLES = list(REGISTRY[STAGE].tables)
READ_BATCH = 65_536

log = logging.getLogger("citeflow")

run = entry_point(STAGE)


def run_on(config: RunConfig, upstream: Upstream) -> Manifest:
    graph = upstream["embed_graph"]
    store = ArtifactStore(config.artifacts, config.store)
    store.require_local(STAGE)
    leakage = store.upstream(graph, "filter_leakage")
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

    from citeflow.leakage import audit_no_benchmark_papers
    from models import rank_sample
    from models import triplets as T

    cfg = config.mine_triplets
    warnings: list[str] = []

    # Pool: papers with a graph embedding and usable text, a seeded (hashed) sample of them.
    embedded = _column(store, graph.table_path("paper_embeddings"), "corpus_id")
    with_text = _ids_with_text(store, leakage.table_path("papers"))
    eligible = np.intersect1d(embedded, with_text, assume_unique=True)
    if len(eligible) == 0:
        raise CiteflowError("mine_triplets: no paper has both a graph embedding and a title or abstract")
    wanted = cfg.pool_size or len(eligible)
    if wanted > len(eligible):
        warnings.append(f"pool_size {cfg.pool_size:,} > {len(eligible):,} eligible papers: the pool is all of them")
    pool = T.hashed_sample(eligible, wanted, cfg.seed, T.SALT_POOL)
    vectors = T.l2_normalize(_vectors(store, graph.table_path("paper_embeddings"), pool))
    log.info(
        "%s: pool of %s papers (%s embedded, %s with text)",
        STAGE,
        f"{len(pool):,}",
        f"{len(embedded):,}",
        f"{len(eligible):,}",
    )

    metrics: dict[str, Any] = {"strategy": cfg.strategy, "leakage_mode": leakage.metrics.get("mode")}
    cites = windows = index = None
    candidates = pool  # SciNCL's queries: any pool paper
    if cfg.strategy == "specter":
        candidates, cites = _specter_candidates(cfg, store, leakage, pool, metrics)
    wanted_queries = cfg.num_queries or len(candidates)
    if wanted_queries > len(candidates):
        warnings.append(f"num_queries {cfg.num_queries:,} > {len(candidates):,} possible queries: using all of them")
    query_rows = np.searchsorted(pool, T.hashed_sample(candidates, wanted_queries, cfg.seed, T.SALT_QUERY))
    if cfg.strategy == "scincl":
        windows, index = _scincl_index(cfg, vectors, metrics, warnings)
    for message in warnings:
        log.warning("%s: %s", STAGE, message)

    easy_from = easy_window = None
    if cfg.strategy == "scincl" and cfg.easy_negatives_sampling == "window":
        # one list for the whole query list, so a query's window does not depend on its batch
        easy_window = T.EasyWindow.shuffled(query_rows, 2 * cfg.easy_negatives, cfg.seed)
    elif cfg.strategy == "scincl" and cfg.easy_negatives_from == "queries":
        easy_from = query_rows
    rank_queries = (
        np.searchsorted(pool, T.hashed_sample(pool[query_rows], cfg.rank_sample, cfg.seed, T.SALT_SAMPLE))
        if cfg.rank_sample
        else np.zeros(0, int)
    )
    out = Path(path) / "triplets"
    mined = _mine(cfg, pool, vectors, query_rows, windows, index, cites, (easy_from, easy_window), out, rank_queries)
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
    if cfg.strategy == "scincl" and cfg.index != "flat" and cfg.recall_sample:
        metrics["index"]["recall"] = _recall(index, vectors, query_rows, windows, cfg)
        log.info("%s: %s recall against exact search: %s", STAGE, cfg.index, metrics["index"]["recall"])

    used = mined["used"]
    texts = _write_texts(store, leakage.table_path("papers"), pool[used], Path(path) / "training_texts")
    if texts != len(used):
        raise RuntimeError(f"training_texts holds {texts} papers, the triplets use {len(used)}")
    text_ids = _column(store, str(Path(path) / "training_texts"), "corpus_id")
    metrics["leakage_audit"] = [
        audit_no_benchmark_papers(pool[used], leakage, what="training triplets"),
        audit_no_benchmark_papers(text_ids, leakage, what="training texts"),
    ]

    ranks = rank_sample.sample_ranks(vectors, mined["rank_sample"])
    histogram = rank_sample.rank_histogram(ranks, len(pool))
    _write_table(histogram, Path(path) / "rank_histogram")
    _plot_ranks(histogram, Path(path) / "rank_histogram.png", cfg.strategy, config.snapshot, windows)
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


def _specter_candidates(cfg, store: ArtifactStore, leakage: Manifest, pool, metrics: dict[str, Any]):
    """(SPECTER's query candidates, the pool's citation index): papers with a citation and a citation of a
    citation (the reference skips the others), as `specter_query_rule` counts them."""
    import numpy as np

    from models import specter_sampling as S
    from models import triplets as T

    cites = _citation_index(store, leakage.table_path("citations"), pool)
    citing = np.flatnonzero(cites.degree(np.arange(len(pool))) > 0)
    counted = [S.specter_candidate_counts(rows, cites) for rows in T.batches(citing, cfg.batch_size)]
    n_cited, n_coc = (np.concatenate(c) for c in zip(*counted, strict=True)) if counted else (citing, citing)
    # its own name: `eligible` (the papers with an embedding and text) is reported in the manifest
    gives_triplets = S.specter_rule(n_cited, n_coc, cfg.specter_query_rule)
    candidates = pool[citing[gives_triplets]]
    metrics["queries_without_citation_of_citation"] = int((n_coc == 0).sum())
    if cfg.specter_query_rule != "generator":
        metrics["specter_query_rule"] = cfg.specter_query_rule
        # the parallel file's `len(candidates) > 2`: one citation with one citation of a citation is too few
        metrics["queries_with_too_few_candidates"] = int(((n_coc > 0) & ~gives_triplets).sum())
    if len(candidates) == 0:
        too_few = (
            " and has three candidates (specter_query_rule=parallel)" if cfg.specter_query_rule == "parallel" else ""
        )
        raise CiteflowError(
            f"mine_triplets: no pool paper cites a paper that cites another{too_few}; "
            "SPECTER needs citations of citations"
        )
    return candidates, cites


def _scincl_index(cfg, vectors, metrics: dict[str, Any], warnings: list[str]):
    """(SciNCL's rank windows fitted to the pool, the FAISS index of the pool's graph embeddings)."""
    from models import triplets as T

    windows, fitted = T.fit_windows(
        len(vectors),
        cfg.k_pos,
        cfg.k_hard,
        cfg.positives,
        cfg.hard_negatives,
        cfg.easy_negatives,
        relative=cfg.windows == "relative",
        reference_pool=cfg.reference_pool,
    )
    warnings += fitted
    t0 = time.monotonic()
    index, description = T.build_index(
        vectors,
        cfg.index,
        k_max=windows.k_max,
        nlist=cfg.nlist,
        nprobe=cfg.nprobe,
        hnsw_m=cfg.hnsw_m,
        ef_search=cfg.ef_search,
        pq_m=cfg.pq_m,
        seed=cfg.seed,
        use_gpu=cfg.gpu,
    )
    metrics["index"] = {"kind": cfg.index, "description": description, "build_seconds": round(time.monotonic() - t0, 3)}
    metrics["windows"] = {
        "mode": cfg.windows,
        "k_pos": windows.k_pos,
        "k_hard": windows.k_hard,
        "k_max": windows.k_max,
        "positive_ranks": [int(windows.positive_ranks[0]), int(windows.positive_ranks[-1])],
        "hard_ranks": [int(windows.hard_ranks[0]), int(windows.hard_ranks[-1])],
    }
    return windows, index


def _mine(
    cfg, pool, vectors, query_rows, windows, index, cites, easy_source, out: Path, rank_queries
) -> dict[str, Any]:
    """Mine every query batch, streaming triplets to Parquet; returns metrics, used pool rows, rank sample.

    `easy_source`: (easy_from, easy_window) of `models.triplets.scincl_batch`."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from tqdm import tqdm

    from models import specter_sampling as S
    from models import triplets as T

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
    out.mkdir(parents=True)
    counts: dict[str, int] = {}
    hard = easy = collisions = 0
    used: list[np.ndarray] = []
    sample: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    search_seconds = 0.0
    t0 = time.monotonic()
    with (
        pq.ParquetWriter(out / "part-0.parquet", schema, compression="zstd") as writer,
        tqdm(total=len(query_rows), desc=f"mine_triplets ({cfg.strategy})", unit="query", disable=None) as bar,
    ):
        for rows in T.batches(query_rows, cfg.batch_size):
            if cfg.strategy == "scincl":
                s0 = time.monotonic()
                neighbours = T.search_neighbours(index, vectors, rows, windows.k_max)
                search_seconds += time.monotonic() - s0
                batch = T.scincl_batch(
                    rows,
                    neighbours,
                    windows,
                    pool,
                    cfg.seed,
                    easy_from=easy_source[0],
                    easy_window=easy_source[1],
                    distinct=cfg.distinct_easy_negatives,
                )
            else:
                batch = S.specter_batch(
                    rows,
                    cites,
                    pool,
                    cfg.positives,
                    cfg.hard_negatives,
                    cfg.easy_negatives,
                    cfg.seed,
                    distinct=cfg.distinct_easy_negatives,
                    rule=cfg.specter_query_rule,
                )
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
    if cfg.strategy == "scincl":
        metrics["search_seconds"] = round(search_seconds, 3)
        if cfg.easy_negatives_sampling == "window":
            metrics["easy_negatives_window"] = {
                "width": 2 * cfg.easy_negatives,
                "queries_reading_past_their_window": counts.get("easy_window_overruns", 0),
                "queries_whose_easy_negative_is_itself": counts.get("easy_negative_is_query", 0),
            }
    else:
        metrics["positive_repeats"] = counts.get("positive_repeats", 0)
        metrics["hard_negative_shortfall"] = counts.get("hard_negative_shortfall", 0)
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


def _citation_index(store: ArtifactStore, citations: str, pool):
    """Citations among pool papers, as CSR over pool positions, the table read in batches (citeflow/tables.py
    `batches`)."""
    import numpy as np

    from models.specter_sampling import CitationIndex

    src, dst = [], []
    for batch in tables.batches(store.fs, citations, ["citing", "cited"], 1 << 20):
        citing, cited = batch.column("citing").to_numpy(), batch.column("cited").to_numpy()
        a = np.minimum(np.searchsorted(pool, citing), len(pool) - 1)
        b = np.minimum(np.searchsorted(pool, cited), len(pool) - 1)
        keep = (pool[a] == citing) & (pool[b] == cited)
        src.append(a[keep])
        dst.append(b[keep])
    src = np.concatenate(src) if src else np.zeros(0, np.int64)
    dst = np.concatenate(dst) if dst else np.zeros(0, np.int64)
    return CitationIndex.from_edges(src, dst, len(pool))


def _recall(index, vectors, query_rows, windows, cfg) -> dict[str, Any]:
    """Recall of the approximate index against exact search (faiss.knn) on a sample of queries."""
    import faiss
    import numpy as np

    from models import triplets as T

    sample = np.searchsorted(query_rows, T.hashed_sample(query_rows, cfg.recall_sample, cfg.seed, T.SALT_SAMPLE))
    rows = query_rows[sample]
    approx = T.search_neighbours(index, vectors, rows, windows.k_max)
    _, exact = faiss.knn(
        np.ascontiguousarray(vectors[rows]), vectors, windows.k_max + 1, metric=faiss.METRIC_INNER_PRODUCT
    )
    keep = exact != rows[:, None]
    keep[keep.all(axis=1), -1] = False
    exact = exact[keep].reshape(len(rows), windows.k_max)
    return {
        "queries": len(rows),
        f"at_{windows.k_pos}": round(T.neighbour_recall(approx, exact, windows.k_pos), 4),
        f"at_{windows.k_max}": round(T.neighbour_recall(approx, exact, windows.k_max), 4),
        "positive_window": round(_window_recall(approx, exact, windows.positive_ranks - 1), 4),
    }


def _window_recall(approx, exact, columns) -> float:
    import numpy as np

    hits = sum(np.intersect1d(a[columns], e[columns]).size for a, e in zip(approx, exact, strict=True))
    return hits / (len(columns) * len(exact)) if len(exact) else 1.0


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
    import pyarrow.parquet as pq

    out.mkdir(parents=True)
    wanted = pa.array(ids, pa.int64())
    schema = pa.schema([("corpus_id", pa.int64()), ("title", pa.string()), ("abstract", pa.string())])
    parts = [schema.empty_table()]
    for batch in tables.batches(store.fs, papers, ["corpus_id", "title", "abstract"], READ_BATCH):
        keep = pc.is_in(batch.column("corpus_id"), value_set=wanted)
        if pc.any(keep).as_py():
            parts.append(pa.Table.from_batches([batch]).filter(keep).cast(schema))
    table = pa.concat_tables(parts).sort_by("corpus_id")
    pq.write_table(table, out / "part-0.parquet", compression="zstd", row_group_size=READ_BATCH)
    return table.num_rows


def _write_table(table, folder: Path) -> None:
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    pq.write_table(table, folder / "part-0.parquet", compression="zstd")


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
