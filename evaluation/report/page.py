"""report.html: the answer, every score's table, MTEB's table, the notes and the plot inlined, on one page that
fits its window (RESPONSIVE_CSS, which each Artifacts page keeps too)."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from citeflow.evaluation.report.answer import ANSWER_CSS, inline
from citeflow.evaluation.report.tables import MTEB_NOTE, fmt, mteb_published, published_value

# Rules every page of citeflow (this report, each Artifacts page) keeps so that it fits its window, 1,400 px wide
# or Airflow's narrower iframe: plots shrink, wide tables scroll inside their own box, long lines wrap.
RESPONSIVE_CSS = (
    "img{max-width:100%;height:auto}"
    ".scroll{overflow-x:auto;max-width:100%}"
    "pre{white-space:pre-wrap;overflow-wrap:anywhere;max-width:100%;overflow-x:auto}"
    "code{overflow-wrap:anywhere}"
    # break-word, not anywhere, in tables: it leaves a cell's narrowest width alone, so a table too wide for the
    # window scrolls in its box instead of being squeezed to a letter per line
    "td,th,caption{overflow-wrap:break-word}"
)


def _head(label: str) -> str:
    """A column's header; a model version in brackets on a line of its own, so the column stays narrow."""
    name, bracket, version = label.partition(" [")
    if not bracket:
        return html.escape(label)
    return f"{html.escape(name)}<br><small>[{html.escape(version)}</small>"


def _html_rows(header: list[str], keys, cells_of) -> str:
    body = ["<tr>" + "".join(f"<th>{_head(h)}</th>" for h in header) + "</tr>"]
    for task, metric in keys:
        body.append(
            f"<tr><td>{html.escape(task)}</td><td>{html.escape(metric)}</td>"
            + "".join(f"<td class=n>{c}</td>" for c in cells_of(task, metric))
            + "</tr>"
        )
    # a table wider than the window scrolls inside its own box instead of widening the page
    return f"<div class=scroll><table>{''.join(body)}</table></div>"


def html_page(
    title, intro, header, keys, labels, refs, values, published, notes, skipped, plot: Path, mteb, scidocs
) -> str:
    image = base64.b64encode(plot.read_bytes()).decode()
    m_labels, m_keys, m_values, m_refs = mteb
    sections = []
    if scidocs or not m_labels:
        sections.append(
            f"<h2>Every score</h2><p>{inline(intro)}</p>"
            + _html_rows(
                header,
                keys,
                lambda task, metric: (
                    [fmt(values.get((label, task, metric))) for label in labels]
                    + [fmt(published_value(published, ref, task, metric)) for ref in refs]
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
                    [fmt(m_values.get((label, task, metric))) for label in m_labels]
                    + [fmt(mteb_published(ref, task, metric)) for ref in m_refs]
                ),
            )
        )
    items = "".join(f"<li>{html.escape(label)}: {html.escape(note)}</li>" for label, note in notes.items() if note)
    missing = "".join(f"<li>{html.escape(t)}: {html.escape(s)} ({html.escape(r)})</li>" for t, s, r in skipped)
    return (
        f"<!doctype html><meta charset=utf-8><meta name=viewport content='width=device-width'>"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font:15px/1.45 system-ui,sans-serif;margin:1.5em;color:#222}"
        "table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left;"
        "vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
        f"{RESPONSIVE_CSS}{ANSWER_CSS}</style>"
        # the answer opens the page (`write_report` puts it here): what a reader came for, before the title
        "<!--answer-->"
        f"<h1>{html.escape(title)}</h1>{''.join(sections)}<ul>{items}</ul>"
        + (f"<h2>Not scored</h2><ul>{missing}</ul>" if missing else "")
        + f"<figure><img alt=scores src='data:image/png;base64,{image}'></figure>"
    )
