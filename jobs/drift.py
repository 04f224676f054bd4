"""The drift report between two releases of one strategy: what the later release changed (evaluation/drift.py).

    citeflow compare --snapshot A --snapshot B [--strategy scincl] [--artifacts ROOT]

Reads each release's benchmark version of the strategy (the only one; never "the newest" of several) and its
lineage: build_graph, embed_graph, mine_triplets, embed_papers (trained model) and the benchmark's scores.
Writes `ARTIFACTS/<B>/drift/<version>/` (the version a hash of both lineages): `summary` (section, name, before,
after, value: graph deltas, embedding drift of the graph and encoder embeddings, triplet overlap, score
deltas), `histogram` (the cosine of each paper's old and new vector, binned) and `drift.png`; the manifest's
metrics carry the headline numbers. The releases DAG writes it after the benchmark of a release built from a
diff, against the release the diff starts from.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import validate_snapshot_id
from citeflow.errors import CiteflowError
from citeflow.registry import REPORTS, undeclared_reads
from citeflow.stage import execute
from citeflow.tables import write_table

STAGE = "drift"
STAGE_VERSION = 1
TABLES = ["summary", "histogram"]
PLOT = "drift.png"
HEADLINE = (
    ("graph", "papers added"),
    ("graph", "papers removed"),
    ("graph", "papers changed"),
    ("graph", "edges added"),
    ("graph", "edges removed"),
    ("graph embeddings", "top-10 neighbour overlap mean"),
    ("encoder embeddings", "top-10 neighbour overlap mean"),
    ("encoder embeddings", "cosine old-new q50"),
    ("triplets", "share of the new triplets mined before"),
)

log = logging.getLogger("citeflow")


def release(store: ArtifactStore, snapshot: str, strategy: str | None) -> dict[str, Manifest]:
    """{stage: version} of the release's current benchmark of `strategy` (`citeflow.currency`: one built on a
    superseded version is passed over, saying why) and the versions it came from."""
    from citeflow.currency import status_of

    validate_snapshot_id(snapshot)
    versions = store.list_versions(snapshot, "benchmark")
    if strategy:
        versions = [m for m in versions if m.metrics.get("strategy") == strategy]
    for m in versions:
        status = status_of(store, m)
        if not status.current:
            log.info(
                "drift: benchmark %s of snapshot %s is not current (%s): passed over", m.version, snapshot, status.why
            )
    versions = [m for m in versions if status_of(store, m).current]
    if not versions:
        what = f" of strategy {strategy}" if strategy else ""
        raise CiteflowError(
            f"snapshot {snapshot!r} has no benchmark{what} under {store.uri}: run it to the benchmark first"
        )
    if len(versions) > 1:
        listed = ", ".join(f"{m.version} ({m.metrics.get('strategy')})" for m in versions)
        raise CiteflowError(
            f"snapshot {snapshot!r} has {len(versions)} benchmarks ({listed}): name the strategy with --strategy"
        )
    found: dict[str, Manifest] = {}
    for m in store.lineage(versions[0], REPORTS[STAGE].reads):
        if m.stage == "embed_papers" and m.metrics.get("model") != "trained":
            continue
        found.setdefault(m.stage, m)
    if "embed_graph" not in found:  # the SPECTER strategy mines from citations: the graph's embeddings beside it
        leak = found["filter_leakage"].version
        graphs = [
            m
            for m in store.list_versions(snapshot, "embed_graph")
            if any(i.get("stage") == "filter_leakage" and i.get("version") == leak for i in m.inputs)
        ]
        if len(graphs) == 1:
            found["embed_graph"] = graphs[0]
    return found


def previous_release(store: ArtifactStore, snapshot: str, strategy: str | None) -> str | None:
    """The release `snapshot`'s graph was merged from by a diff (the releases DAG compares against it); None for a
    release built from its shards."""
    graph = release(store, snapshot, strategy)["build_graph"]
    base = (graph.metrics.get("from_diff") or {}).get("base")
    return base["snapshot"] if base else None


def run(store: ArtifactStore, before: str, after: str, strategy: str | None = None) -> Manifest:
    if before == after:
        raise CiteflowError(f"compare two different snapshots, not {before!r} with itself")
    old, new = release(store, before, strategy), release(store, after, strategy)
    strategies = {old["benchmark"].metrics.get("strategy"), new["benchmark"].metrics.get("strategy")}
    if len(strategies) > 1:
        named = ", ".join(sorted(map(str, strategies)))
        raise CiteflowError(
            f"snapshots {before!r} and {after!r} were benchmarked with different strategies ({named}): "
            "compare releases of one strategy (--strategy)"
        )
    inputs = [
        {**m.lineage(), "snapshot": m.snapshot, "side": side}
        for side, r in (("before", old), ("after", new))
        for m in r.values()
    ]
    if undeclared := undeclared_reads(STAGE, after, inputs):
        raise RuntimeError(f"{STAGE} reads {', '.join(undeclared)}, which citeflow.registry.REPORTS does not declare")
    return execute(
        store=store,
        snapshot=after,
        stage=STAGE,
        stage_version=STAGE_VERSION,
        config={"before": before},
        resolved_config={"before": before, "after": after, "strategy": strategies.pop()},
        inputs=inputs,
        tables=TABLES,
        build=lambda path: build(old, new, Path(path)),
    )


def build(old: dict[str, Manifest], new: dict[str, Manifest], path: Path) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from citeflow.evaluation import drift as D

    rows = D.graph_delta(old["build_graph"], new["build_graph"])
    histogram: list[dict] = []
    kinds = (("graph embeddings", "embed_graph", "paper_embeddings", "corpus_id"),)
    kinds += (("encoder embeddings", "embed_papers", "embeddings", "paper_id"),)
    for kind, stage, table, column in kinds:
        if stage not in old or stage not in new:
            log.info("drift: no %s version in both lineages: its drift is left out", stage)
            continue
        more, bins = D.embedding_drift(
            kind, pq.read_table(old[stage].table_path(table)), pq.read_table(new[stage].table_path(table)), column
        )
        rows += more
        histogram += bins
    rows += D.triplet_overlap(*(pq.read_table(r["mine_triplets"].table_path("triplets")) for r in (old, new)))
    rows += D.score_delta(*(pq.read_table(r["benchmark"].table_path("scores")) for r in (old, new)))
    for name, data, schema in (
        (
            "summary",
            rows,
            {
                "section": pa.string(),
                "name": pa.string(),
                "before": pa.float64(),
                "after": pa.float64(),
                "value": pa.float64(),
                # scores: the change's 95% paired bootstrap interval over the units both releases scored
                "low": pa.float64(),
                "high": pa.float64(),
            },
        ),
        ("histogram", histogram, {"kind": pa.string(), "lo": pa.float64(), "hi": pa.float64(), "papers": pa.int64()}),
    ):
        write_table(pa.Table.from_pylist(data, schema=pa.schema(schema)), path / name)
    plot(rows, histogram, path / PLOT, old["benchmark"].snapshot, new["benchmark"].snapshot)
    by_key = {(r["section"], r["name"]): r["value"] for r in rows}
    metrics = {f"{s}.{n}": by_key[(s, n)] for s, n in HEADLINE if (s, n) in by_key}
    scores = [r["value"] for r in rows if r["section"] == "scores"]
    metrics["scores.mean_delta"] = sum(scores) / len(scores) if scores else None
    metrics["before"], metrics["after"] = old["benchmark"].snapshot, new["benchmark"].snapshot
    return metrics


def plot(rows: list[dict], histogram: list[dict], out: Path, before: str, after: str) -> None:
    """The cosine histograms and the score deltas, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for kind in sorted({h["kind"] for h in histogram}):
        bins = [h for h in histogram if h["kind"] == kind]
        left.step([h["lo"] for h in bins], [h["papers"] for h in bins], where="post", label=kind)
    left.set(title=f"cosine of each paper's {before} and {after} vectors", xlabel="cosine", ylabel="papers")
    if histogram:
        left.legend()
    scores = [r for r in rows if r["section"] == "scores" and r["name"].split()[1] == "test"]
    right.barh([r["name"] for r in scores], [r["value"] for r in scores], color="tab:green")
    right.axvline(0, color="black", linewidth=0.8)
    right.set(title=f"test score change, {after} minus {before}", xlabel="points")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def table_text(manifest: Manifest) -> str:
    """The summary as a text table, for the terminal (`citeflow compare`, `citeflow artifacts`)."""
    import pyarrow.parquet as pq

    rows = pq.read_table(manifest.table_path("summary")).to_pylist()
    fmt = lambda v: "" if v is None else (f"{v:,.0f}" if float(v).is_integer() and abs(v) >= 1 else f"{v:.4g}")  # noqa: E731
    lines = [f"{'section':<20}{'measure':<48}{'before':>12}{'after':>12}{'value':>12}  95% interval"]
    lines += [
        f"{r['section']:<20}{r['name']:<48}{fmt(r['before']):>12}{fmt(r['after']):>12}{fmt(r['value']):>12}"
        + (f"  {interval_text(r)}" if r.get("low") is not None else "")
        for r in rows
    ]
    return "\n".join(lines)


def interval_text(row: dict) -> str:
    """'[+0.31, +3.53]' of a score change, marked where it holds 0 (`citeflow.evaluation.paired`)."""
    from citeflow.evaluation.paired import NOT_SHOWN, crosses_zero

    mark = f" {NOT_SHOWN} not shown" if crosses_zero(row["low"], row["high"]) else ""
    return f"[{row['low']:+.2f}, {row['high']:+.2f}]{mark}"
