"""The report's opening (`answer`): the trained model against its untrained base on SciDocs' average and per task,
in one sentence and one small table per comparison, as report.md's first lines (`answer_markdown`) and as the
first thing on a page (`answer_html`, styled by ANSWER_CSS; the Artifacts tab shows it too)."""

from __future__ import annotations

import html
import re
from typing import Any

from citeflow.evaluation.report.origin import GENERATED, GIVEN, UNKNOWN, origin_note
from citeflow.evaluation.report.tables import REFERENCE, is_mteb
from citeflow.evaluation.scidocs import HEADLINE

# The unit of a score row's `n`, per task: the test papers classified, the clicks ranked, else the queries ranked.
N_UNIT = {"mag": "papers", "mesh": "papers", "recomm": "clicks"}

ANSWER_CSS = (
    ".answer .lede{font-size:1.3em;line-height:1.35;margin:0 0 .5em;max-width:60em}"
    ".answer table{border-collapse:collapse;margin:.3em 0}"
    ".answer caption{text-align:left;color:#555;padding-bottom:.2em}"
    ".answer tr.main td{font-weight:bold}.answer th.n{text-align:right}"
    ".answer .note{color:#555;max-width:60em}"
)


def _comparisons(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """(model, base) label pairs in row order: each trained model with the untrained base scored after it (a
    benchmark version writes its trained rows, then its base's; `citeflow report` puts versions one after
    another); any other model alone."""
    pairs: list[dict[str, Any]] = []
    for label, role in dict.fromkeys((r["label"], r.get("model") or "") for r in rows):
        if role == "base" and pairs and pairs[-1]["base"] is None and pairs[-1]["role"] == "trained":
            pairs[-1]["base"] = label
        else:
            pairs.append({"model": label, "base": None, "role": role})
    return pairs


def _n(rows: list[dict[str, Any] | None], task: str) -> str:
    counts = list(dict.fromkeys(r.get("n") for r in rows if r is not None))
    unit = N_UNIT.get(task, "queries")
    return " / ".join(f"{c:,}" if isinstance(c, int) else "?" for c in counts) + f" {unit}"


def answer(rows: list[dict[str, Any]], *, origin: str = UNKNOWN, scidocs: str | None = None) -> dict[str, Any]:
    """The report's opening: per comparison (a trained model and its base, or a model alone) SciDocs' average
    and each of its numbers, test split, with the queries (papers, clicks) scored and the difference; the values
    as printed, rounded to two decimals, and the difference of the printed values, so the table adds up as read.

    Only the numbers both models of a comparison have are compared: with all 12, SciDocs' average; with fewer,
    the mean of those N (a different quantity, named so). `published` holds the published models' value of the
    same measure, only where `origin` says the data may be the published SciDocs (GIVEN)."""
    ok = {}
    for r in rows:
        key = (r["task"], r["metric"])
        if not is_mteb(r) and r["split"] == "test" and r["status"] == "ok" and r["value"] is not None:
            if key in HEADLINE:
                ok.setdefault(r["label"], {})[key] = r
    comparisons = []
    for pair in _comparisons([r for r in rows if not is_mteb(r)]):
        mine = ok.get(pair["model"], {})
        base = ok.get(pair["base"], {}) if pair["base"] else {}
        keys = [k for k in HEADLINE if k in mine and (not pair["base"] or k in base)]
        if pair["base"] and not keys:  # nothing in common: the model alone
            pair["base"], keys = None, [k for k in HEADLINE if k in mine]
        if not keys:
            continue
        measure = "average of 12" if len(keys) == len(HEADLINE) else f"mean of {len(keys)} of 12"

        def line(task: str, metric: str, values: list[float], others: list[float], n: str) -> dict[str, Any]:
            model = round(sum(values) / len(values), 2)
            other = round(sum(others) / len(others), 2) if others else None
            delta = None if other is None else round(model - other, 2)
            return {"task": task, "metric": metric, "n": n, "model": model, "base": other, "delta": delta}

        table_rows = [
            line(
                "all tasks",
                measure,
                [mine[k]["value"] for k in keys],
                [base[k]["value"] for k in keys] if base else [],
                f"{len(keys)} of 12 numbers",
            )
        ]
        table_rows += [
            line(
                t,
                m,
                [mine[t, m]["value"]],
                [base[t, m]["value"]] if base else [],
                _n([mine[t, m], base.get((t, m))], t),
            )
            for t, m in keys
        ]
        comparisons.append(
            {"model": pair["model"], "base": pair["base"], "measure": measure, "keys": keys, "rows": table_rows}
        )
    published = {}
    if origin == GIVEN and comparisons:
        keys = comparisons[0]["keys"]
        for ref, numbers in REFERENCE.items():
            if len(keys) == len(HEADLINE) and ("average", "avg") in numbers:
                published[ref] = numbers["average", "avg"]
            elif all(k in numbers for k in keys):
                published[ref] = round(sum(numbers[k] for k in keys) / len(keys), 2)
    found = {"split": "test", "origin": origin, "scidocs": scidocs, "comparisons": comparisons}
    return {**found, "published": published, "sentence": _sentence(comparisons, origin)}


def _measure_words(measure: str) -> str:
    if measure == "average of 12":
        return "SciDocs' average of 12"
    return f"the {measure} SciDocs numbers (not SciDocs' average)"


def _sentence(comparisons: list[dict[str, Any]], origin: str) -> str:
    where = "test split" + (", a generated snapshot, not the published SciDocs" if origin == GENERATED else "")
    if not comparisons:
        return "No SciDocs scores here: these rows hold none of SciDocs' 12 test numbers."
    if len(comparisons) == 1:
        c = comparisons[0]
        head = c["rows"][0]
        if c["base"]:
            return (
                f"The trained model scores {head['model']:.2f} against {head['base']:.2f} for its untrained base, "
                f"{head['delta']:+.2f}, on {_measure_words(c['measure'])} ({where})."
            )
        return f"{c['model']} scores {head['model']:.2f} on {_measure_words(c['measure'])} ({where})."
    parts = []
    for c in comparisons:
        head = c["rows"][0]
        versus = f" against {head['base']:.2f} for its base, {head['delta']:+.2f}" if c["base"] else ""
        parts.append(f"{c['model']} {head['model']:.2f}{versus} ({c['measure']})")
    return f"On SciDocs ({where}): " + "; ".join(parts) + "."


def _cell(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def _caption(c: dict[str, Any]) -> str:
    return f"trained: {c['model']} · base: {c['base']}" if c["base"] else c["model"]


def _answer_table(c: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of one comparison's table: task, metric and n, then the numbers; the average first."""
    header = ["SciDocs task", "metric", "n (test)", "trained" if c["base"] else "score"]
    header += ["base (untrained)", "Δ"] if c["base"] else []
    rows = [
        [r["task"], r["metric"], r["n"], _cell(r["model"])]
        + ([_cell(r["base"]), _cell(r["delta"], signed=True)] if c["base"] else [])
        for r in c["rows"]
    ]
    return header, rows


def _published_line(found: dict[str, Any]) -> str:
    listed = ", ".join(f"{ref} {value:.2f}" for ref, value in found["published"].items())
    return f"Published, {found['comparisons'][0]['measure']} on the published SciDocs test split: {listed}."


def inline(text: str) -> str:
    """Escaped text with its `code` spans as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def answer_html(found: dict[str, Any]) -> str:
    """The answer as the first thing on a page: the sentence, one small table per comparison, the data's note."""
    e = html.escape
    parts = [f"<section class=answer><p class=lede>{e(found['sentence'])}</p>"]
    for c in found["comparisons"]:
        header, rows = _answer_table(c)
        kind = lambda i: " class=n" if i >= 2 else ""  # noqa: E731  (n and the numbers: right-aligned)
        body = "".join(
            ("<tr class=main>" if i == 0 else "<tr>")
            + "".join(f"<td{kind(j)}>{e(x)}</td>" for j, x in enumerate(row))
            + "</tr>"
            for i, row in enumerate(rows)
        )
        parts.append(
            f"<div class=scroll><table><caption>{e(_caption(c))}</caption><tr>"
            + "".join(f"<th{kind(j)}>{e(h)}</th>" for j, h in enumerate(header))
            + f"</tr>{body}</table></div>"
        )
    if found["published"]:
        parts.append(f"<p class=note>{e(_published_line(found))}</p>")
    if found["comparisons"]:
        parts.append(f"<p class=note>{inline(origin_note(found['origin'], found['scidocs']))}</p>")
    return "".join(parts) + "</section>"


def answer_markdown(found: dict[str, Any]) -> list[str]:
    """The answer as the first lines of report.md."""
    lines = [found["sentence"], ""]
    for c in found["comparisons"]:
        header, rows = _answer_table(c)
        lines += [f"{_caption(c)}:", "", "| " + " | ".join(header) + " |", "|---|---|" + "---:|" * (len(header) - 2)]
        for i, row in enumerate(rows):
            if i == 0:  # the average, in bold as in the HTML
                row = row[:3] + [f"**{x}**" for x in row[3:]]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    if found["published"]:
        lines += [_published_line(found), ""]
    if found["comparisons"]:
        lines += [origin_note(found["origin"], found["scidocs"]), ""]
    return lines
