"""One readable report of every benchmarked model of a snapshot, next to the published numbers.

`write_report(rows, folder, title)` writes `report.md`, `report.html` (self-contained, the plot
inlined) and `scores.png` (per-task bars, one bar per model) from score rows (`scores` tables: task,
split, metric, value, model label, ...). Published reference numbers (SPEC §6) are shown for
orientation: they come from other corpora and models, not from this snapshot.
"""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path
from typing import Any

from evaluation.scidocs import HEADLINE

# SPEC §6, test split. SPECTER has per-task numbers; the others only their average.
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
        ("recomm", "ndcg"): 53.9,
        ("recomm", "p@1"): 20.0,
        ("average", "avg"): 80.0,
    },
    "SciNCL (published, w/ leakage)": {("average", "avg"): 81.8},
    "SciNCL (published, w/o leakage)": {("average", "avg"): 79.4},
    "SPECTER (published, w/o leakage)": {("average", "avg"): 77.7},
    "SciBERT (published)": {("average", "avg"): 59.6},
}


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{value:.1f}"


def table(rows: list[dict[str, Any]]) -> tuple[list[str], list[tuple[str, str]], dict]:
    """(model labels, (task, metric) keys in display order, {(label, task, metric): value})."""
    labels = list(dict.fromkeys(r["label"] for r in rows))
    values = {(r["label"], r["task"], r["metric"]): r["value"] for r in rows if r["split"] == "test"}
    keys = [k for k in HEADLINE]
    extra = sorted({(r["task"], r["metric"]) for r in rows if r["split"] == "test"} - set(keys) - {("average", "avg")})
    return labels, keys + extra + [("average", "avg")], values


def report_paths(folder: Path) -> dict[str, str]:
    """The files `write_report` writes into `folder`."""
    return {
        "markdown": str(folder / "report.md"),
        "html": str(folder / "report.html"),
        "plot": str(folder / "scores.png"),
    }


def write_report(rows: list[dict[str, Any]], folder: Path, title: str) -> dict[str, str]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    labels, keys, values = table(rows)
    notes = {r["label"]: r.get("average_label", "") for r in rows if r["task"] == "average"}
    refs = list(REFERENCE)
    header = ["task", "metric", *labels, *refs]
    lines = [
        f"# {title}",
        "",
        "Test split, × 100. Published numbers are for orientation only: other corpora, other models.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * 2 + "---:|" * (len(header) - 2),
    ]
    for task, metric in keys:
        cells = [_fmt(values.get((label, task, metric))) for label in labels]
        cells += [_fmt(REFERENCE[ref].get((task, metric))) for ref in refs]
        lines.append(f"| {task} | {metric} | " + " | ".join(cells) + " |")
    lines += ["", *[f"- {label}: {note}" for label, note in notes.items() if note]]
    skipped = sorted({(r["task"], r["status"], r["reason"]) for r in rows if r["status"] != "ok"})
    if skipped:
        lines += ["", "Not scored:", *[f"- {t}: {s} ({reason})" for t, s, reason in skipped]]
    plot = folder / "scores.png"
    _plot(labels, keys, values, plot, title)
    lines += ["", "![scores](scores.png)", ""]
    _atomic_write(folder / "report.md", "\n".join(lines))
    _atomic_write(folder / "report.html", _html(title, header, keys, labels, refs, values, notes, skipped, plot))
    return report_paths(folder)


def _html(title, header, keys, labels, refs, values, notes, skipped, plot: Path) -> str:
    image = base64.b64encode(plot.read_bytes()).decode()
    body = ["<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for task, metric in keys:
        cells = [_fmt(values.get((label, task, metric))) for label in labels]
        cells += [_fmt(REFERENCE[ref].get((task, metric))) for ref in refs]
        body.append(
            f"<tr><td>{html.escape(task)}</td><td>{html.escape(metric)}</td>"
            + "".join(f"<td class=n>{c}</td>" for c in cells)
            + "</tr>"
        )
    items = "".join(f"<li>{html.escape(label)}: {html.escape(note)}</li>" for label, note in notes.items() if note)
    missing = "".join(f"<li>{html.escape(t)}: {html.escape(s)} ({html.escape(r)})</li>" for t, s, r in skipped)
    return (
        f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;border-bottom:1px solid #ddd}"
        "td.n{text-align:right}</style>"
        f"<h1>{html.escape(title)}</h1><p>Test split, × 100. Published numbers are for orientation only.</p>"
        f"<table>{''.join(body)}</table><ul>{items}</ul>"
        + (f"<h2>Not scored</h2><ul>{missing}</ul>" if missing else "")
        + f"<img alt=scores src='data:image/png;base64,{image}'>"
    )


def _plot(labels, keys, values, target: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    shown = [k for k in keys if any(values.get((label, *k)) is not None for label in labels)]
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
