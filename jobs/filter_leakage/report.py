"""filter_leakage's report side: `benchmark_ids` and `leakage_report` written with pyarrow, the version's metrics
counted, and the stop when too many benchmark ids map to no corpus id."""

from __future__ import annotations

import posixpath

from citeflow.artifacts import Manifest
from citeflow.config import RunConfig
from citeflow.errors import CiteflowError


def write_benchmark_side(work, rows, counts) -> list[dict]:
    """Write `benchmark_ids` (`rows`) and `leakage_report` (pyarrow) once Spark's edge counts (`counts`,
    `transforms.reach`) are in; the report's rows."""
    import pyarrow as pa

    from citeflow.jobs.filter_leakage.mapping import REACH_COLUMNS, leakage_report

    collected = counts.collect()
    names = ["suite", "task", "split", *(c for c in REACH_COLUMNS if c in counts.columns)]
    reach = pa.table(
        {n: pa.array([r[n] for r in collected], pa.string() if n in names[:3] else pa.int64()) for n in names}
    )
    for column in REACH_COLUMNS:
        if column not in reach.column_names:
            reach = reach.append_column(column, pa.array([0] * reach.num_rows, pa.int64()))
    report_table = leakage_report(rows, reach)
    for name, table in (("benchmark_ids", rows), ("leakage_report", report_table)):
        work.write_arrow(name, table)
    return report_table.to_pylist()


def fail_unmapped(mapped, report: list[dict], metrics: dict, limit: float) -> None:
    """Stop the stage with the unmapped counts per task and a few unmapped ids (`mapped`: one row per id)."""
    import pyarrow.compute as pc

    unmapped = mapped.filter(pc.is_null(mapped["method"]))["id"]
    examples = pc.sort_indices(unmapped)[:5].to_pylist()
    examples = [unmapped[i].as_py() for i in examples]
    per_task = "; ".join(
        f"{r['suite']}/{r['task']}/{r['split']}: {r['unmapped']} of {r['total']}"
        for r in report
        if r["task"] != "all" and r["unmapped"]
    )
    raise CiteflowError(
        f"filter_leakage: {metrics['unmapped']} of {metrics['benchmark_ids']} benchmark ids "
        f"({metrics['unmapped_share']:.1%}) map to no corpus id, above the limit of {limit:.1%}. "
        f"Unmapped per task: {per_task}. Examples: {', '.join(examples)}. "
        "Supply the S2AG paper-ids table of this release (--paper-ids DIR: sha -> corpusid, .jsonl[.gz] shards), "
        "or raise filter_leakage.max_unmapped_share if these papers are known to be absent."
    )


def count_metrics(work, config: RunConfig, upstream: Manifest, mapped_table, report: list[dict], metrics: dict) -> None:
    """The version's metrics: the report per suite, what was mapped and how, what was removed; stops the stage
    when more than `max_unmapped_share` of the ids (`mapped_table`: one row per benchmark id, its corpus id and
    method) map to no corpus id. Clears the staging folder."""
    from citeflow.artifacts import table_stats
    from citeflow.jobs.filter_leakage.mapping import METHODS, suite_totals

    cfg, store = config.filter_leakage, work.store
    overall = next(r for r in report if r["suite"] == "all")
    metrics["report"] = report
    metrics["suites"] = suite_totals(report)
    if cfg.strict:
        metrics["strict"] = {"papers": overall["one_hop_papers"], "edges": overall["one_hop_edges"]}
    metrics["benchmark_ids"] = overall["total"]
    metrics["mapped"] = overall["total"] - overall["unmapped"]
    metrics["unmapped"] = overall["unmapped"]
    metrics["in_snapshot"] = overall["in_snapshot"]
    metrics["unmapped_share"] = round(overall["unmapped"] / overall["total"], 6) if overall["total"] else 0.0
    metrics["mapped_by"] = {m: overall[f"mapped_{m}"] for m in METHODS}
    reasons = mapped_table["unmapped_reason"].drop_null().value_counts().to_pylist()
    metrics["unmapped_reasons"] = {r["values"]: r["counts"] for r in reasons}
    if metrics["unmapped_share"] > cfg.max_unmapped_share:
        fail_unmapped(mapped_table, report, metrics, cfg.max_unmapped_share)

    work.clear_staging()
    after_papers = table_stats(store, posixpath.join(work.path, "papers"))["rows"]
    after_edges = table_stats(store, posixpath.join(work.path, "citations"))["rows"]
    metrics["removed_papers"] = upstream.tables["papers"]["rows"] - after_papers
    metrics["removed_citations"] = upstream.tables["citations"]["rows"] - after_edges
    metrics["papers"] = after_papers
    metrics["citations"] = after_edges
