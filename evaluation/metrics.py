"""A row of a benchmark's `scores` table. The ranking metrics themselves are in the core: `citeflow.ranking`."""

from __future__ import annotations


def score_row(task, split, metric, value, n=0, missing=0, status="ok", reason="", details=None):
    """One row of a benchmark's `scores` table (SciDocs and its recomm task alike)."""
    return {
        "task": task,
        "split": split,
        "metric": metric,
        "value": value,
        "n": n,
        "missing": missing,
        "status": status,
        "reason": reason,
        "details": details or {},
    }
