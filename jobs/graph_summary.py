"""build_graph's summary of the tables a version wrote, shared by the full build (jobs/build_graph.py) and the
build from a diff (jobs/build_graph_diff.py): the degree histogram (table and plot) and the manifest metrics."""

from __future__ import annotations

import logging
import posixpath
from typing import Any

from citeflow.artifacts import ArtifactStore
from citeflow.config import RunConfig
from citeflow.tables import write_table

STAGE = "build_graph"

log = logging.getLogger("citeflow")


def summarize(spark, store: ArtifactStore, path: str, config: RunConfig, text=None) -> dict[str, Any]:
    """The degree histogram (table and plot) and the manifest metrics of the tables written into `path`, read
    back; `text` (no_title, no_abstract and lossy per paper, or their `graph_stats.text_counts`) defaults to reading the
    written papers, in the one aggregation that counts them. Removes the version's staging folder."""
    from citeflow.spark import graph_stats as GS
    from citeflow.spark import scans as S
    from citeflow.spark.engine.session import concurrently

    written = lambda table: S.read_stored(spark, store, posixpath.join(path, table))  # noqa: E731
    degrees = written("degrees")
    if text is None:
        text = GS.summary_stats(written("papers"))

    # The statistics' small jobs run at once, since one after another they leave a core idle;
    # the histogram (a few hundred rows) is written and plotted by the driver while the others run
    histogram, reasons, nodes, flags = concurrently(
        spark,
        lambda: write_histogram(store, path, config, GS.degree_histogram(degrees).toArrow()),
        lambda: written("rejected").groupBy("kind", "reason").count().collect(),
        lambda: GS.graph_nodes(degrees),
        lambda: text if isinstance(text, dict) else GS.text_counts(text),
    )
    rejected = {f"{r['kind']}.{r['reason']}": int(r["count"]) for r in reasons}
    return metrics_of(store, path, histogram, nodes, flags, rejected)


def write_histogram(store: ArtifactStore, path: str, config: RunConfig, histogram):
    """Write `histogram` (a pyarrow table of `graph_stats.degree_histogram` rows) as the `degree_histogram` table and
    plot it (matplotlib's object API: no pyplot state is shared with the threads beside it); returns it."""
    write_table(histogram, posixpath.join(path, "degree_histogram"), store.fs)
    _plot_degrees(store, path, histogram, config.snapshot)
    return histogram


def metrics_of(
    store: ArtifactStore, path: str, histogram, nodes: int, text: dict[str, Any], rejected: dict[str, int]
) -> dict[str, Any]:
    """The manifest metrics of a version's graph (`graph_stats.histogram_summary` of its degree histogram, papers with
    an edge and text counts; `lossy_text`: the papers per field holding U+FFFD, `graph_stats.text_counts`; `rejected`:
    its rejected rows counted by `kind.reason`); removes the version's staging folder."""
    from citeflow.spark import graph_stats as GS

    store.fs.delete_dir(posixpath.join(path, "_staging"))
    metrics = GS.histogram_summary(histogram, nodes, text)
    metrics[GS.LOSSY_TEXT] = dict(text[GS.LOSSY_TEXT])
    warn_lossy(metrics[GS.LOSSY_TEXT])
    metrics["rejected"] = {k: n for k, n in sorted(rejected.items()) if n}
    metrics["rejected_total"] = sum(metrics["rejected"].values())
    return metrics


def warn_lossy(lossy: dict[str, int]) -> None:
    """One warning line naming the papers per field that hold U+FFFD, when any does: the records are kept, so
    the replaced bytes would otherwise pass unnoticed."""
    if lossy:
        counts = ", ".join(f"{field} {n:,}" for field, n in lossy.items())
        log.warning(
            "%s: bytes that are not UTF-8 were replaced by U+FFFD in kept papers (papers per field: %s; "
            "metrics lossy_text)",
            STAGE,
            counts,
        )


def _plot_degrees(store: ArtifactStore, path: str, histogram, snapshot: str) -> None:
    """degree_distribution.png: log-log in- and out-degree distributions (matplotlib's object API, no pyplot
    state: it runs in a thread beside Spark's work)."""
    import io

    from matplotlib.figure import Figure

    data = histogram.to_pydict()
    fig = Figure(figsize=(6, 4), dpi=110)
    ax = fig.subplots()
    for direction, marker in (("out", "o"), ("in", "s")):
        points = sorted(
            (d, n)
            for dr, d, n in zip(data["direction"], data["degree"], data["papers"], strict=True)
            if dr == direction and d > 0
        )
        if points:
            ax.loglog([p[0] for p in points], [p[1] for p in points], marker, ms=3, label=f"{direction}-degree")
    ax.set_xlabel("degree")
    ax.set_ylabel("papers")
    ax.set_title(f"Citation degree distribution — {snapshot}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no citation edges", ha="center", va="center", transform=ax.transAxes)
    ax.grid(True, which="both", alpha=0.3)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    with store.fs.open_output_stream(posixpath.join(path, "degree_distribution.png")) as fh:
        fh.write(buf.getvalue())
