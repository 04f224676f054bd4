"""One readable report of every benchmarked model of a snapshot, next to the published numbers.

`write_report(rows, folder, title)` writes `report.md`, `report.html` (self-contained, the plot
inlined) and `scores.png` (per-task bars, one bar per model) from score rows (`scores` tables: task,
split, metric, value, model label, model_version, ...). Published reference numbers (docs/reference.md §6) are shown for
orientation: they come from other corpora and models, not from this snapshot.

MTEB's retrieval scores (suite "mteb": task SCIDOCS, a whole-corpus search with paper titles, nDCG@10) are
another benchmark: they get a table of their own, next to MTEB's published results, and never enter the SciDocs
table, its averages or its plot.

Averages are honest: the row "average of 12" holds a model's SciDocs average only when all 12 numbers exist
(and the published averages); a model with N < 12 numbers gets a row "mean of N of 12", compared only with the
published mean of the same N numbers (SPECTER's per-task numbers give it; the other published models report only
their 12-number average, so their cell stays empty). Each model column names its model version.
"""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path
from typing import Any

from evaluation.mteb_retrieval import SUITE
from evaluation.scidocs import HEADLINE

# docs/reference.md §6, test split. SPECTER has per-task numbers; the others only their average.
REFERENCE = {
    "SPECTER (published)": {
        ("mag", "f1"): 82.0,
        ("mesh", "f1"): 86.4,
        ("coview", "map"): 83.6,
        ("coview", "ndcg"): 91.5,
        ("coread", "map"): 84.5,
        ("coread", "ndcg"): 92.4,
        ("cite", "map"): 88.3,
        ("cite", "ndcg"): 94.9,
        ("cocite", "map"): 88.1,
        ("cocite", "ndcg"): 94.8,
        ("recomm", "adj-ndcg"): 53.9,
        ("recomm", "adj-p@1"): 20.0,
        ("average", "avg"): 80.0,
    },
    "SciNCL (published, w/ leakage)": {("average", "avg"): 81.8},
    "SciNCL (published, w/o leakage)": {("average", "avg"): 79.4},
    "SPECTER (published, w/o leakage)": {("average", "avg"): 77.7},
    "SciBERT (published)": {("average", "avg"): 59.6},
}


# MTEB's published SCIDOCS results, × 100: embeddings-benchmark/results @ 87b30e9,
# results/sentence-transformers__all-MiniLM-L6-v2/8b3219a92973c328a8e22fadcfa821b5dc75636a/SCIDOCS.json
# (mteb 1.12.75, the registered dataset revision f8c2fcf).
MTEB_REFERENCE = {
    "SCIDOCS": {
        "all-MiniLM-L6-v2 (MTEB results)": {
            "ndcg_at_10": 21.641,
            "map_at_10": 12.938,
            "recall_at_10": 23.087,
            "precision_at_10": 11.4,
            "mrr_at_10": 35.941984126984083,
        }
    }
}


def is_mteb(row: dict[str, Any]) -> bool:
    return row.get("suite") == SUITE


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{value:.2f}"


def mean_rows(rows: list[dict[str, Any]]) -> tuple[dict, dict]:
    """The average rows: ({row key: {label: value}}, {row key: {reference: value}}).

    ("average", "avg"): the 12-number average, for models that have all 12 and every published model;
    ("average", "mean of N of 12"): per distinct set of N < 12 numbers, the models' means over exactly those
    numbers and the published mean of the same numbers where the published per-task numbers give it."""
    have: dict[str, dict] = {}
    for r in rows:
        if r["split"] == "test" and r["status"] == "ok" and (r["task"], r["metric"]) in HEADLINE:
            have.setdefault(r["label"], {})[(r["task"], r["metric"])] = r["value"]
    ours: dict[tuple[str, str], dict[str, float]] = {("average", "avg"): {}}
    published: dict[tuple[str, str], dict[str, float]] = {
        ("average", "avg"): {ref: v[("average", "avg")] for ref, v in REFERENCE.items() if ("average", "avg") in v}
    }
    for label, values in have.items():
        if len(values) == len(HEADLINE):
            ours["average", "avg"][label] = sum(values.values()) / len(values)
            continue
        keys = [k for k in HEADLINE if k in values]
        row = ("average", f"mean of {len(keys)} of 12: " + ", ".join(f"{t} {m}" for t, m in keys))
        ours.setdefault(row, {})[label] = sum(values[k] for k in keys) / len(keys)
        published[row] = {
            ref: sum(v[k] for k in keys) / len(keys) for ref, v in REFERENCE.items() if all(k in v for k in keys)
        }
    return ours, published


def table(rows: list[dict[str, Any]]) -> tuple[list[str], list[tuple[str, str]], dict]:
    """(model labels, (task, metric) keys in display order, {(label, task, metric): value}); model labels carry the
    model version when the rows give one."""
    for r in rows:
        version = r.get("model_version") or ""
        if version and version not in r["label"]:
            r["label"] = f"{r['label']} [{version}]"
    rows = [r for r in rows if not is_mteb(r)]  # MTEB's scores are another benchmark: `mteb_table`
    labels = list(dict.fromkeys(r["label"] for r in rows))
    values = {
        (r["label"], r["task"], r["metric"]): r["value"]
        for r in rows
        if r["split"] == "test" and r["task"] != "average"
    }
    keys = [k for k in HEADLINE]
    extra = sorted(
        {(r["task"], r["metric"]) for r in rows if r["split"] == "test" and r["task"] != "average"} - set(keys)
    )
    ours, _ = mean_rows(rows)
    for key, by_label in ours.items():
        for label, value in by_label.items():
            values[label, *key] = value
    return labels, keys + extra + list(ours), values


def report_paths(folder: Path) -> dict[str, str]:
    """The files `write_report` writes into `folder`."""
    return {
        "markdown": str(folder / "report.md"),
        "html": str(folder / "report.html"),
        "plot": str(folder / "scores.png"),
    }


def mteb_table(rows: list[dict[str, Any]]) -> tuple[list[str], list[tuple[str, str]], dict, list[str]]:
    """The MTEB rows' (model labels, (task, metric) keys: main score, then the @10 scores, {(label, task, metric):
    value x 100}, published reference names). Call after `table`, which puts the model versions in the labels."""
    mteb = [r for r in rows if is_mteb(r)]
    labels = list(dict.fromkeys(r["label"] for r in mteb))
    values = {(r["label"], r["task"], r["metric"]): r["value"] for r in mteb}
    keys: list[tuple[str, str]] = []
    for r in mteb:
        if r.get("details", {}).get("main_score") and (r["task"], r["metric"]) not in keys:
            keys.append((r["task"], r["metric"]))
    for r in mteb:
        if r["metric"].endswith("_at_10") and (r["task"], r["metric"]) not in keys:
            keys.append((r["task"], r["metric"]))
    refs = list(dict.fromkeys(ref for task, _ in keys for ref in MTEB_REFERENCE.get(task, {})))
    return labels, keys, values, refs


def _mteb_published(ref: str, task: str, metric: str):
    return MTEB_REFERENCE.get(task, {}).get(ref, {}).get(metric)


MTEB_NOTE = (
    "MTEB retrieval, test split, × 100 of MTEB's numbers: each query (a paper's title) searches the whole corpus, "
    "nDCG@10 is the main score. Not SciDocs' cite task (about 30 candidates per query, MAP / nDCG) and never part "
    "of SciDocs' average; compare only with MTEB results for the same task."
)


def write_report(rows: list[dict[str, Any]], folder: Path, title: str) -> dict[str, str]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows = [dict(r) for r in rows]
    labels, keys, values = table(rows)
    mteb = mteb_table(rows)
    rows = [r for r in rows if not is_mteb(r)]
    notes = {r["label"]: r.get("average_label", "") for r in rows if r["task"] == "average"}
    refs = list(REFERENCE)
    _, published = mean_rows(rows)
    header = ["task", "metric", *labels, *refs]
    lines = [f"# {title}", ""]
    if rows or not mteb[0]:
        lines += [
            "Test split, × 100. Published numbers are for orientation only: other corpora, other models. "
            '"average of 12" is SciDocs\' average; a "mean of N of 12" row is a different quantity, next to the '
            "published mean of the same N numbers.",
            "",
            "| " + " | ".join(header) + " |",
            "|" + "---|" * 2 + "---:|" * (len(header) - 2),
        ]
        for task, metric in keys:
            cells = [_fmt(values.get((label, task, metric))) for label in labels]
            cells += [_fmt(_published(published, ref, task, metric)) for ref in refs]
            lines.append(f"| {task} | {metric} | " + " | ".join(cells) + " |")
        lines += ["", *[f"- {label}: {note}" for label, note in notes.items() if note]]
    m_labels, m_keys, m_values, m_refs = mteb
    if m_labels:
        m_header = ["MTEB task", "score", *m_labels, *m_refs]
        lines += ["", "## MTEB retrieval (not SciDocs)", "", MTEB_NOTE, ""]
        lines += ["| " + " | ".join(m_header) + " |", "|" + "---|" * 2 + "---:|" * (len(m_header) - 2)]
        for task, metric in m_keys:
            cells = [_fmt(m_values.get((label, task, metric))) for label in m_labels]
            cells += [_fmt(_mteb_published(ref, task, metric)) for ref in m_refs]
            lines.append(f"| {task} | {metric} | " + " | ".join(cells) + " |")
    skipped = sorted({(r["task"], r["status"], r["reason"]) for r in rows if r["status"] != "ok"})
    if skipped:
        lines += ["", "Not scored:", *[f"- {t}: {s} ({reason})" for t, s, reason in skipped]]
    plot = folder / "scores.png"
    if rows or not m_labels:
        _plot(labels, keys, values, plot, title)
    else:  # only MTEB's scores: their own plot, under their own name
        _plot(m_labels, m_keys, m_values, plot, f"{title}: MTEB retrieval (not SciDocs)")
    lines += ["", "![scores](scores.png)", ""]
    _atomic_write(folder / "report.md", "\n".join(lines))
    _atomic_write(
        folder / "report.html",
        _html(title, header, keys, labels, refs, values, published, notes, skipped, plot, mteb, bool(rows)),
    )
    return report_paths(folder)


def _published(published: dict, ref: str, task: str, metric: str):
    if (task, metric) in published:
        return published[task, metric].get(ref)
    return REFERENCE[ref].get((task, metric))


def _html_rows(header: list[str], keys, cells_of) -> str:
    body = ["<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for task, metric in keys:
        body.append(
            f"<tr><td>{html.escape(task)}</td><td>{html.escape(metric)}</td>"
            + "".join(f"<td class=n>{c}</td>" for c in cells_of(task, metric))
            + "</tr>"
        )
    return f"<table>{''.join(body)}</table>"


def _html(title, header, keys, labels, refs, values, published, notes, skipped, plot: Path, mteb, scidocs) -> str:
    image = base64.b64encode(plot.read_bytes()).decode()
    m_labels, m_keys, m_values, m_refs = mteb
    sections = []
    if scidocs or not m_labels:
        sections.append(
            "<p>Test split, × 100. Published numbers are for orientation only.</p>"
            + _html_rows(
                header,
                keys,
                lambda task, metric: (
                    [_fmt(values.get((label, task, metric))) for label in labels]
                    + [_fmt(_published(published, ref, task, metric)) for ref in refs]
                ),
            )
        )
    if m_labels:
        sections.append(
            f"<h2>MTEB retrieval (not SciDocs)</h2><p>{html.escape(MTEB_NOTE)}</p>"
            + _html_rows(
                ["MTEB task", "score", *m_labels, *m_refs],
                m_keys,
                lambda task, metric: (
                    [_fmt(m_values.get((label, task, metric))) for label in m_labels]
                    + [_fmt(_mteb_published(ref, task, metric)) for ref in m_refs]
                ),
            )
        )
    items = "".join(f"<li>{html.escape(label)}: {html.escape(note)}</li>" for label, note in notes.items() if note)
    missing = "".join(f"<li>{html.escape(t)}: {html.escape(s)} ({html.escape(r)})</li>" for t, s, r in skipped)
    return (
        f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;border-bottom:1px solid #ddd}"
        "td.n{text-align:right}</style>"
        f"<h1>{html.escape(title)}</h1>{''.join(sections)}<ul>{items}</ul>"
        + (f"<h2>Not scored</h2><ul>{missing}</ul>" if missing else "")
        + f"<img alt=scores src='data:image/png;base64,{image}'>"
    )


def _plot(labels, keys, values, target: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    shown = [k for k in keys if k[0] != "average" and any(values.get((label, *k)) is not None for label in labels)]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(shown) + 2), 4.5), dpi=110)
    width = 0.8 / max(1, len(labels))
    for i, label in enumerate(labels):
        heights = [values.get((label, *k)) or 0.0 for k in shown]
        ax.bar(np.arange(len(shown)) + (i - (len(labels) - 1) / 2) * width, heights, width=width, label=label)
    ax.set_xticks(np.arange(len(shown)))
    ax.set_xticklabels([f"{t}\n{m}" for t, m in shown], fontsize=7)
    ax.set_ylabel("score × 100")
    ax.set_title(title)
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    tmp = target.with_name(target.name + ".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, target)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
