"""filter_leakage's report side: `benchmark_ids` and `leakage_report` written with pyarrow, the version's metrics
counted, and the stop when too many benchmark ids map to no corpus id."""

from __future__ import annotations

import logging
import posixpath

from citeflow.artifacts import Manifest
from citeflow.config import RunConfig
from citeflow.errors import CiteflowError

log = logging.getLogger("citeflow")


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
    """Stop the stage with the unmapped counts per task and a few unmapped ids (`mapped`: `mapping.mapped_rows`)."""
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


# How the warnings name each step's key.
KEY_NAMES = {"doi": "DOI", "pubmed": "PubMed id", "arxiv": "arXiv id", "title": "folded title"}


def warn_doubts(found: dict[str, dict], paper_ids: dict | None, most_shared: int) -> None:
    """One warning line per kind of doubt the mapping resolved toward exclusion (`mapping.doubts`), with
    examples."""
    from citeflow.jobs.filter_leakage.mapping import SHA_CONFLICT, SHARED, STEPS, TITLE_CONFLICT, too_common

    def say(what: str, kind: str, entry: dict) -> None:
        log.warning("filter_leakage: %s (%s); e.g. %s", what, kind, ", ".join(entry["examples"]))

    if SHA_CONFLICT in found:
        e, lines = found[SHA_CONFLICT], (paper_ids or {}).get("conflicts", {}).get("lines", 0)
        say(
            f"{e['ids']} benchmark ids are shas that the paper-ids table gives several corpus ids ({lines} lines): "
            f"each maps to all of them, {e['papers']} papers of the graph",
            SHA_CONFLICT,
            e,
        )
    for step, method in SHARED.items():
        if method in found:
            e = found[method]
            say(
                f"{e['ids']} benchmark ids have a {KEY_NAMES[step]} that 2 to {most_shared} corpus papers share: "
                f"each maps to all of them, {e['papers']} papers of the graph",
                method,
                e,
            )
    if TITLE_CONFLICT in found:
        e = found[TITLE_CONFLICT]
        say(
            f"{e['ids']} benchmark ids have several titles; {e['matched']} of them map to every paper of every "
            f"title besides any other match, {e['papers']} papers of the graph",
            TITLE_CONFLICT,
            e,
        )
    for step in STEPS:
        if too_common(step) in found:
            e = found[too_common(step)]
            say(
                f"{e['ids']} benchmark ids stay unmapped: their {KEY_NAMES[step]} is shared by more than "
                f"{most_shared} corpus papers (filter_leakage.max_shared_matches), which counts toward "
                "max_unmapped_share",
                too_common(step),
                e,
            )


def count_metrics(
    work, config: RunConfig, upstream: Manifest, mapped_table, report: list[dict], metrics: dict, conflicts=None
) -> None:
    """The version's metrics: the report per suite, what was mapped and how, what was left in doubt and resolved
    toward exclusion (`doubts`), what was removed; stops the stage when more than `max_unmapped_share` of the
    ids (`mapped_table`: `mapping.mapped_rows`, a row per benchmark id and paper) map to no corpus id. Clears
    the staging folder. `conflicts`: the ids with several titles (`mapping.title_conflicts`)."""
    import pyarrow as pa

    from citeflow.artifacts import table_stats
    from citeflow.jobs.filter_leakage.mapping import METHODS, doubts, suite_totals

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
    if conflicts is None:
        conflicts = pa.table({"id": pa.array([], pa.string()), "folded_title": pa.array([], pa.string())})
    metrics["doubts"] = doubts(mapped_table, conflicts)
    warn_doubts(metrics["doubts"], metrics.get("paper_ids"), cfg.max_shared_matches)
    if metrics["unmapped_share"] > cfg.max_unmapped_share:
        fail_unmapped(mapped_table, report, metrics, cfg.max_unmapped_share)

    work.clear_staging()
    after_papers = table_stats(store, posixpath.join(work.path, "papers"))["rows"]
    after_edges = table_stats(store, posixpath.join(work.path, "citations"))["rows"]
    metrics["removed_papers"] = upstream.tables["papers"]["rows"] - after_papers
    metrics["removed_citations"] = upstream.tables["citations"]["rows"] - after_edges
    metrics["papers"] = after_papers
    metrics["citations"] = after_edges
