"""`write_report`: report.md, report.html and scores.png of a set of score rows, each written whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from citeflow.evaluation.report.answer import answer, answer_html, answer_markdown
from citeflow.evaluation.report.origin import GENERATED, origin_note, scidocs_origin
from citeflow.evaluation.report.page import html_page
from citeflow.evaluation.report.plot import plot_scores
from citeflow.evaluation.report.tables import (
    MTEB_NOTE,
    REFERENCE,
    fmt,
    is_mteb,
    mean_rows,
    mteb_published,
    mteb_table,
    published_value,
    table,
)


def report_paths(folder: Path) -> dict[str, str]:
    """The files `write_report` writes into `folder`."""
    return {
        "markdown": str(folder / "report.md"),
        "html": str(folder / "report.html"),
        "plot": str(folder / "scores.png"),
    }


def write_report(rows: list[dict[str, Any]], folder: Path, title: str, *, scidocs: str | None = None) -> dict[str, str]:
    """report.md, report.html and scores.png of score `rows` in `folder`; `scidocs`: the SciDocs folder the rows
    were scored on, which decides whether published numbers stand beside them (`scidocs_origin`)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows = [dict(r) for r in rows]
    origin = scidocs_origin(scidocs)
    found = answer(rows, origin=origin, scidocs=scidocs)  # before `table` puts the model versions in the labels
    labels, keys, values = table(rows)
    mteb = mteb_table(rows)
    rows = [r for r in rows if not is_mteb(r)]
    notes = {r["label"]: r.get("average_label", "") for r in rows if r["task"] == "average"}
    refs = [] if origin == GENERATED else list(REFERENCE)
    _, published = mean_rows(rows)
    header = ["task", "metric", *labels, *refs]
    intro = (
        "Test split, × 100. "
        + ("" if origin == GENERATED else origin_note(origin, scidocs) + " ")
        + '"average of 12" is SciDocs\' average; a "mean of N of 12" row is a different quantity'
        + ("." if origin == GENERATED else ", next to the published mean of the same N numbers.")
    )
    lines = [f"# {title}", "", *answer_markdown(found)]
    if rows or not mteb[0]:
        lines += [
            "## Every score",
            "",
            intro,
            "",
            "| " + " | ".join(header) + " |",
            "|" + "---|" * 2 + "---:|" * (len(header) - 2),
        ]
        for task, metric in keys:
            cells = [fmt(values.get((label, task, metric))) for label in labels]
            cells += [fmt(published_value(published, ref, task, metric)) for ref in refs]
            lines.append(f"| {task} | {metric} | " + " | ".join(cells) + " |")
        lines += ["", *[f"- {label}: {note}" for label, note in notes.items() if note]]
    m_labels, m_keys, m_values, m_refs = mteb
    if m_labels:
        m_header = ["MTEB task", "score", *m_labels, *m_refs]
        lines += ["", "## MTEB retrieval (not SciDocs)", "", MTEB_NOTE, ""]
        lines += ["| " + " | ".join(m_header) + " |", "|" + "---|" * 2 + "---:|" * (len(m_header) - 2)]
        for task, metric in m_keys:
            cells = [fmt(m_values.get((label, task, metric))) for label in m_labels]
            cells += [fmt(mteb_published(ref, task, metric)) for ref in m_refs]
            lines.append(f"| {task} | {metric} | " + " | ".join(cells) + " |")
    skipped = sorted({(r["task"], r["status"], r["reason"]) for r in rows if r["status"] != "ok"})
    if skipped:
        lines += ["", "Not scored:", *[f"- {t}: {s} ({reason})" for t, s, reason in skipped]]
    plot = folder / "scores.png"
    if rows or not m_labels:
        plot_scores(labels, keys, values, plot, title)
    else:  # only MTEB's scores: their own plot, under their own name
        plot_scores(m_labels, m_keys, m_values, plot, f"{title}: MTEB retrieval (not SciDocs)")
    lines += ["", "![scores](scores.png)", ""]
    _atomic_write(folder / "report.md", "\n".join(lines))
    page = html_page(
        title, intro, header, keys, labels, refs, values, published, notes, skipped, plot, mteb, bool(rows)
    )
    _atomic_write(folder / "report.html", page.replace("<!--answer-->", answer_html(found), 1))
    return report_paths(folder)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
