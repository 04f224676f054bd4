"""The report's numbers: the published reference scores, the SciDocs table with its honest averages
(`mean_rows`, `table`) and MTEB's table of its own (`mteb_table`)."""

from __future__ import annotations

from typing import Any

from citeflow.evaluation.mteb_retrieval import SUITE
from citeflow.evaluation.scidocs import HEADLINE

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


def fmt(value: Any) -> str:
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


def mteb_published(ref: str, task: str, metric: str):
    return MTEB_REFERENCE.get(task, {}).get(ref, {}).get(metric)


MTEB_NOTE = (
    "MTEB retrieval, test split, × 100 of MTEB's numbers: each query (a paper's title) searches the whole corpus, "
    "nDCG@10 is the main score. Not SciDocs' cite task (about 30 candidates per query, MAP / nDCG) and never part "
    "of SciDocs' average; compare only with MTEB results for the same task."
)


def published_value(published: dict, ref: str, task: str, metric: str):
    if (task, metric) in published:
        return published[task, metric].get(ref)
    return REFERENCE[ref].get((task, metric))
