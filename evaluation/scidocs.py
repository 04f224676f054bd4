"""SciDocs in the original layout, scored on any embeddings (SPEC §6).

    from evaluation.scidocs import evaluate
    rows = evaluate(Path("scidocs"), embeddings)   # embeddings: {paper_id: float32 vector}

- MAG, MeSH (`{mag,mesh}/{train,test}.csv`): LinearSVC on the raw
  embeddings (liblinear's dual solver, 1,000 iterations at most: the
  reference evaluator's defaults), C by 3-fold grid search over 1e-4 ... 1e2
  (7 log-spaced values) on train (GridSearchCV's default scoring, as the
  reference evaluator), macro F1 × 100 on test. A paper without an embedding is a zero vector
  (counted as `missing`).
- cite, cocite, coview, coread (`{task}/{val,test}.qrel`): each query's
  candidates ranked by L2 distance (closest first; trec_eval tie rule), MAP
  and nDCG over the whole list × 100. A query without an embedding is skipped
  (counted); a candidate without one is ranked last (counted).
- recomm: needs the SciDocs recommendation ranker; when `recomm/` is present it
  is reported as not evaluated, never silently dropped.
Missing files make a task `missing` with a reason, not an error.

Each result row: task, split, metric, value, n (test papers or queries),
missing (papers or queries without embedding), status (ok / missing /
not_evaluated) and reason.
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.metrics import evaluate_run

log = logging.getLogger("citeflow")

CLASSIFICATION = ("mag", "mesh")
RANKING = ("cite", "cocite", "coview", "coread")
C_GRID = np.logspace(-4, 2, 7)
# The 12 numbers of SciDocs' average, in the papers' order.
HEADLINE = [
    ("mag", "f1"),
    ("mesh", "f1"),
    ("coview", "map"),
    ("coview", "ndcg"),
    ("coread", "map"),
    ("coread", "ndcg"),
    ("cite", "map"),
    ("cite", "ndcg"),
    ("cocite", "map"),
    ("cocite", "ndcg"),
    ("recomm", "ndcg"),
    ("recomm", "p@1"),
]


def _row(task, split, metric, value, n=0, missing=0, status="ok", reason=""):
    return {
        "task": task,
        "split": split,
        "metric": metric,
        "value": value,
        "n": n,
        "missing": missing,
        "status": status,
        "reason": reason,
    }


def read_labels(path: Path) -> list[tuple[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or not {"pid", "class_label"} <= set(reader.fieldnames):
            raise ValueError(f"{path}: expected a pid,class_label header")
        return [(r["pid"], r["class_label"]) for r in reader]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """`qid 0 pid rel` lines (SciDocs) or `qid<TAB>pid<TAB>rel` (BEIR)."""
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            parts = line.split()
            if not parts or parts[0] in ("query-id", "qid"):
                continue
            if len(parts) == 4:
                qid, _, pid, rel = parts
            elif len(parts) == 3:
                qid, pid, rel = parts
            else:
                raise ValueError(f"{path}:{number}: expected 'qid 0 pid rel', got {line.strip()!r}")
            qrels.setdefault(qid, {})[pid] = int(float(rel))
    return qrels


def _matrix(ids: list[str], embeddings: Mapping[str, np.ndarray], dim: int) -> tuple[np.ndarray, int]:
    out = np.zeros((len(ids), dim), dtype=np.float32)
    missing = 0
    for i, pid in enumerate(ids):
        vector = embeddings.get(pid)
        if vector is None:
            missing += 1
        else:
            out[i] = vector
    return out, missing


def classify(train_x, train_y, test_x, test_y, *, grid=C_GRID, folds=3, seed=42, n_jobs=None) -> tuple[float, float]:
    """(macro F1 x 100 on test, chosen C) of a LinearSVC tuned on train."""
    from sklearn.metrics import f1_score
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import LinearSVC

    search = GridSearchCV(LinearSVC(random_state=seed, dual=True), {"C": list(grid)}, cv=folds, n_jobs=n_jobs)
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(train_x, train_y)
    predicted = search.predict(test_x)
    return 100 * f1_score(test_y, predicted, average="macro"), float(search.best_params_["C"])


def l2_run(qrels: dict[str, dict[str, int]], embeddings: Mapping[str, np.ndarray]) -> tuple[dict, int, int]:
    """Scores (negative L2 distance) per query and candidate; (run, skipped queries, unembedded candidates)."""
    run: dict[str, dict[str, float]] = {}
    skipped = unembedded = 0
    for qid, candidates in qrels.items():
        query = embeddings.get(qid)
        if query is None:
            skipped += 1
            continue
        scores = {}
        for pid in candidates:
            vector = embeddings.get(pid)
            if vector is None:
                unembedded += 1
                scores[pid] = -np.inf
            else:
                scores[pid] = -float(np.linalg.norm(query - vector))
        run[qid] = scores
    return run, skipped, unembedded


def evaluate(
    root: Path, embeddings: Mapping[str, np.ndarray], *, splits=("test",), n_jobs=None
) -> list[dict[str, Any]]:
    root = Path(root)
    dim = len(next(iter(embeddings.values())))
    rows: list[dict[str, Any]] = []
    for task in CLASSIFICATION:
        train, test = root / task / "train.csv", root / task / "test.csv"
        if not (train.is_file() and test.is_file()):
            rows.append(_row(task, "test", "f1", None, status="missing", reason=f"{task}/train.csv or test.csv absent"))
            continue
        tr, te = read_labels(train), read_labels(test)
        train_x, miss_tr = _matrix([p for p, _ in tr], embeddings, dim)
        test_x, miss_te = _matrix([p for p, _ in te], embeddings, dim)
        f1, c = classify(train_x, [y for _, y in tr], test_x, [y for _, y in te], n_jobs=n_jobs)
        rows.append(_row(task, "test", "f1", f1, n=len(te), missing=miss_tr + miss_te, reason=f"C={c:g}"))
        log.info("scidocs %s: macro F1 %.2f (C=%g, %d papers without embedding)", task, f1, c, miss_tr + miss_te)
    for task in RANKING:
        for split in splits:
            path = root / task / f"{split}.qrel"
            if not path.is_file():
                rows += [
                    _row(task, split, m, None, status="missing", reason=f"{task}/{split}.qrel absent")
                    for m in ("map", "ndcg")
                ]
                continue
            qrels = read_qrels(path)
            run, skipped, unembedded = l2_run(qrels, embeddings)
            result = evaluate_run(run, qrels)
            reason = f"{unembedded} candidates without embedding ranked last" if unembedded else ""
            rows += [
                _row(task, split, m, 100 * result[m], n=result["queries"], missing=skipped, reason=reason)
                for m in ("map", "ndcg")
            ]
    if (root / "recomm").is_dir():
        rows += [
            _row(
                "recomm",
                "test",
                m,
                None,
                status="not_evaluated",
                reason="recomm needs SciDocs' recommendation ranker, which citeflow does not implement",
            )
            for m in ("ndcg", "p@1")
        ]
    else:
        rows += [_row("recomm", "test", m, None, status="missing", reason="recomm/ absent") for m in ("ndcg", "p@1")]
    return rows


def average(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean of the available headline numbers, and how many of the 12 it covers."""
    values = {(r["task"], r["metric"]): r["value"] for r in rows if r["split"] == "test" and r["status"] == "ok"}
    have = [values[k] for k in HEADLINE if k in values and values[k] is not None]
    return {
        "value": float(np.mean(have)) if have else None,
        "of": len(have),
        "total": len(HEADLINE),
        "label": "average of 12" if len(have) == len(HEADLINE) else f"average of {len(have)} of 12 (rest missing)",
    }
