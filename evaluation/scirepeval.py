"""SciRepEval's four task formats, on papers embedded by a given encoder (SPEC §7).

A task is a JSON array or JSON lines file of records in SciRepEval's layout
(the samples in `shared/data/scirepeval/` beside the checkout):
- classification: {corpus_id, title, abstract, labels: [..]} (multi-label,
  one-vs-rest) or {..., label | descriptor | class_label: x} (single-label);
  LinearSVC (one-vs-rest for multi-label), C by 5-fold grid search over
  {1e-2, 1e-1, 1, 1e1, 1e2}, macro F1 × 100 on test;
- regression: {corpus_id, title, abstract, score | target: number}; LinearSVR,
  same grid, Kendall's τ × 100 on test;
- proximity: {query: paper, candidates: [paper + score]}; candidates ranked
  by Euclidean distance to the query paper, MAP × 100;
- adhoc_search: {query: text, candidates: [paper + score]}; the query text is
  embedded by the same encoder, candidates ranked by Euclidean distance,
  nDCG × 100.
Records with a `split` field (train / test) keep it; otherwise a paper's
split is a hash of its id (80% train, 20% test), stable across runs. Papers
without an embedding are dropped and counted, never zero-filled.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.metrics import evaluate_run

C_GRID = [1e-2, 1e-1, 1.0, 1e1, 1e2]
FORMATS = ("classification", "regression", "proximity", "adhoc_search")
Embed = Callable[[list[tuple[str, str | None, str | None]]], dict[str, np.ndarray]]


def read_records(path: Path) -> list[dict[str, Any]]:
    text = Path(path).read_text(encoding="utf-8").lstrip()
    if text.startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def detect_format(record: dict[str, Any]) -> str:
    if "candidates" in record:
        return "adhoc_search" if isinstance(record.get("query"), str) else "proximity"
    if any(k in record for k in ("labels", "label", "descriptor", "class_label")):
        return "classification"
    if any(k in record for k in ("score", "target")):
        return "regression"
    raise ValueError(f"cannot tell the SciRepEval format of a record with keys {sorted(record)}")


def _split(record: dict[str, Any]) -> str:
    if record.get("split"):
        return "test" if record["split"] in ("test", "evaluation") else "train"
    digest = hashlib.sha256(str(record.get("corpus_id") or record.get("doc_id")).encode()).digest()
    return "test" if digest[0] < 256 * 0.2 else "train"


def _paper(record: dict[str, Any]) -> tuple[str, str | None, str | None]:
    return str(record.get("corpus_id") or record.get("doc_id")), record.get("title"), record.get("abstract")


def evaluate_task(name: str, path: Path, embed: Embed, kind: str | None = None) -> list[dict[str, Any]]:
    records = read_records(path)
    if not records:
        return [_row(name, kind or "?", "n/a", None, status="missing", reason="no records")]
    kind = kind or detect_format(records[0])
    if kind in ("classification", "regression"):
        return _supervised(name, kind, records, embed)
    return _ranking(name, kind, records, embed)


def _row(task, kind, metric, value, n=0, missing=0, status="ok", reason=""):
    return {
        "task": f"scirepeval/{task}",
        "split": "test",
        "metric": metric,
        "value": value,
        "n": n,
        "missing": missing,
        "status": status,
        "reason": reason if reason else kind,
    }


def _supervised(name: str, kind: str, records: list[dict], embed: Embed) -> list[dict[str, Any]]:
    import warnings

    from scipy.stats import kendalltau
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.metrics import f1_score
    from sklearn.model_selection import GridSearchCV
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.preprocessing import MultiLabelBinarizer
    from sklearn.svm import LinearSVC, LinearSVR

    vectors = embed([_paper(r) for r in records])
    kept = [r for r in records if _paper(r)[0] in vectors]
    missing = len(records) - len(kept)
    x = {
        s: np.stack([vectors[_paper(r)[0]] for r in kept if _split(r) == s])
        for s in ("train", "test")
        if any(_split(r) == s for r in kept)
    }
    if set(x) != {"train", "test"}:
        return [
            _row(
                name,
                kind,
                "f1" if kind == "classification" else "kendall_tau",
                None,
                status="missing",
                reason="needs train and test papers with embeddings",
            )
        ]
    split = {s: [r for r in kept if _split(r) == s] for s in ("train", "test")}
    folds = 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)  # small samples: a label absent from a fold, tiny classes
        if kind == "regression":
            y = {s: np.array([float(r.get("score", r.get("target"))) for r in split[s]]) for s in split}
            search = GridSearchCV(LinearSVR(random_state=42, dual=True), {"C": C_GRID}, cv=min(folds, len(y["train"])))
            search.fit(x["train"], y["train"])
            tau = kendalltau(y["test"], search.predict(x["test"])).statistic
            return [_row(name, kind, "kendall_tau", 100 * float(tau), n=len(y["test"]), missing=missing)]
        labels = [_labels(r) for r in kept]
        multi = any(isinstance(r.get("labels"), list) for r in kept)
        if multi:
            binarizer = MultiLabelBinarizer().fit(labels)
            y = {s: binarizer.transform([_labels(r) for r in split[s]]) for s in split}
            model = OneVsRestClassifier(LinearSVC(random_state=42, dual=True))
            grid, scoring = {"estimator__C": C_GRID}, "f1_macro"
        else:
            y = {s: np.array([_labels(r)[0] for r in split[s]]) for s in split}
            model, grid, scoring = LinearSVC(random_state=42, dual=True), {"C": C_GRID}, "f1_macro"
            smallest = min(np.unique(y["train"], return_counts=True)[1])
            folds = max(2, min(folds, int(smallest)))
        search = GridSearchCV(model, grid, cv=folds, scoring=scoring, error_score=0.0)
        search.fit(x["train"], y["train"])
        predicted = search.predict(x["test"])
    f1 = f1_score(y["test"], predicted, average="macro", zero_division=0)
    return [
        _row(
            name,
            kind,
            "f1",
            100 * float(f1),
            n=len(split["test"]),
            missing=missing,
            reason=f"{'multi-label ' if multi else ''}classification",
        )
    ]


def _labels(record: dict[str, Any]) -> list[str]:
    for key in ("labels", "label", "descriptor", "class_label"):
        if key in record and record[key] is not None:
            value = record[key]
            return [str(v) for v in value] if isinstance(value, list) else [str(value)]
    return []


def _ranking(name: str, kind: str, records: list[dict], embed: Embed) -> list[dict[str, Any]]:
    papers: dict[str, tuple[str, str | None, str | None]] = {}
    queries: list[tuple[str, str | None, str | None]] = []
    qrels: dict[str, dict[str, int]] = {}
    for i, record in enumerate(records):
        if kind == "adhoc_search":
            qid = f"query:{i}"
            queries.append((qid, record["query"], None))
        else:
            qid = _paper(record["query"])[0]
            papers[qid] = _paper(record["query"])
        qrels[qid] = {}
        for candidate in record["candidates"]:
            pid = _paper(candidate)[0]
            papers[pid] = _paper(candidate)
            qrels[qid][pid] = int(float(candidate.get("score", 0)))
    vectors = embed(list(papers.values()) + queries)
    run: dict[str, dict[str, float]] = {}
    missing = 0
    for qid, candidates in qrels.items():
        if qid not in vectors:
            missing += 1
            continue
        scores = {pid: -float(np.linalg.norm(vectors[qid] - vectors[pid])) for pid in candidates if pid in vectors}
        missing += len(candidates) - len(scores)
        run[qid] = scores
    result = evaluate_run(run, qrels)
    metric = "ndcg" if kind == "adhoc_search" else "map"
    return [_row(name, kind, metric, 100 * result[metric], n=result["queries"], missing=missing)]


def discover(paths: Iterable[str]) -> list[tuple[str, Path]]:
    """(task name, file) for each SciRepEval task file or folder of them."""
    found = []
    for item in paths:
        path = Path(item)
        files = (
            sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl") and p.stem != "scirepeval_tasks")
            if path.is_dir()
            else [path]
        )
        for file in files:
            try:
                detect_format(read_records(file)[0])
            except (ValueError, IndexError, KeyError, json.JSONDecodeError):
                continue
            found.append((file.stem, file))
    return found
