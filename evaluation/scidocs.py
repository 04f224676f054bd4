"""SciDocs in the original layout, scored on any embeddings as the reference evaluator scores them
(docs/reference.md §6).

    from citeflow.evaluation.scidocs import evaluate
    rows = evaluate(Path("scidocs"), embeddings, splits=("test", "val"))   # embeddings: {paper_id: vector}

Reads `{mag,mesh}/{train,val,test}.csv`, `{cite,cocite,coview,coread}/{val,test}.qrel` and, for recomm,
`recomm/`, `paper_metadata_recomm.json`; writes nothing. Reference: allenai/scidocs @ ebf239d.
- MAG, MeSH (`scidocs/classification.py`: `get_mag_mesh_metrics`, `classify`, `get_X_y_for_classification`): a
  paper without an embedding is a zero vector (in train and evaluation), the no-intercept squared-hinge SVM of
  `evaluation/svm.py` with C by accuracy-scored 3-fold stratified grid search over logspace(-4, 2, 7) on train,
  macro F1 x 100 on the split. Proven against the reference's output within 1.0 F1 (the SVM is scikit-learn's,
  not lightning's), tests/unit/test_reference_fixture.py.
- cite, cocite, coview, coread (`scidocs/user_activity_and_citations.py`: `make_run_from_embeddings`,
  `qrel_metrics`): a query with an embedding scores its candidates that have one (the others are dropped, not
  ranked last; a query with none scored is left out of the mean) by -L2 distance in float64, rounded to 5 decimals
  as the reference writes `str(np.round(-distance, 5))` into its run file; trec_eval's `map` and `ndcg` (no cut-off,
  ties by document id descending: `citeflow/ranking.py`) averaged over the scored queries, x 100. Exact against
  the reference's output, per query too.
- recomm (`scidocs/recomm_click_eval.py` and `scidocs/recommender/`): `evaluation/recomm.py`; Adj-nDCG and Adj-P@1.
Missing files make a task `missing` with a reason, not an error. Values are unrounded (x 100); the reference rounds
them to 2 decimals, and the report shows 2 decimals.

Each result row: task, split, metric, value, n (evaluated papers, scored queries or clicks), missing (papers,
candidate lines or clicks without an embedding), status (ok / missing), reason, and `details` (what was dropped,
the chosen C, per-query values).
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from citeflow.evaluation.metrics import score_row
from citeflow.ranking import evaluate_run, l2_run

log = logging.getLogger("citeflow")

CLASSIFICATION = ("mag", "mesh")
RANKING = ("cite", "cocite", "coview", "coread")
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
    ("recomm", "adj-ndcg"),
    ("recomm", "adj-p@1"),
]


def typed(values: list[str]) -> list:
    """Labels as pandas' `read_csv` types them in the reference: all integers -> int, all numbers -> float."""
    for kind in (int, float):
        try:
            return [kind(v) for v in values]
        except ValueError:
            continue
    return list(values)


def read_labels(path: Path) -> list[tuple[str, Any]]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or not {"pid", "class_label"} <= set(reader.fieldnames):
            raise ValueError(f"{path}: expected a pid,class_label header")
        rows = [(r["pid"], r["class_label"]) for r in reader]
    return list(zip([p for p, _ in rows], typed([y for _, y in rows]), strict=True))


def read_qrels(path: Path) -> tuple[dict[str, dict[str, int]], int]:
    """(judgments, number of candidate lines) of `qid 0 pid rel` lines (SciDocs) or `qid<TAB>pid<TAB>rel` (BEIR).

    A (query, paper) pair judged twice keeps its last relevance, as pytrec_eval's `parse_qrel` does."""
    qrels: dict[str, dict[str, int]] = {}
    lines = 0
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
            lines += 1
    return qrels, lines


def _matrix(ids: list[str], embeddings: Mapping[str, np.ndarray], dim: int) -> tuple[np.ndarray, int]:
    """Rows of the papers' vectors (float64, as the reference's JSON floats); a zero vector for a missing one."""
    out = np.zeros((len(ids), dim), dtype=np.float64)
    missing = 0
    for i, pid in enumerate(ids):
        vector = embeddings.get(pid)
        if vector is None:
            missing += 1
        else:
            out[i] = vector
    return out, missing


def classification(
    root: Path, task: str, embeddings: Mapping[str, np.ndarray], splits, *, n_jobs=None
) -> list[dict[str, Any]]:
    from sklearn.metrics import f1_score

    from citeflow.evaluation.svm import fit_classifier

    files = {s: root / task / f"{s}.csv" for s in ("train", *splits)}
    absent = [f"{task}/{p.name}" for p in files.values() if not p.is_file()]
    if absent:
        return [score_row(task, s, "f1", None, status="missing", reason=f"{', '.join(absent)} absent") for s in splits]
    dim = len(next(iter(embeddings.values())))
    train = read_labels(files["train"])
    train_x, zero_train = _matrix([p for p, _ in train], embeddings, dim)
    search, chosen = fit_classifier(train_x, np.array([y for _, y in train]), n_jobs=n_jobs)
    rows = []
    for split in splits:
        labelled = read_labels(files[split])
        x, zero = _matrix([p for p, _ in labelled], embeddings, dim)
        predicted = search.predict(x)
        f1 = 100 * f1_score(np.array([y for _, y in labelled]), predicted, average="macro")
        details = {
            "best_C": chosen,
            "n_train": len(train),
            "n_eval": len(labelled),
            "zero_vectors_train": zero_train,
            "zero_vectors_eval": zero,
            # each paper's true and predicted label: the units a paired bootstrap redraws (evaluation/paired.py)
            "per_paper": {str(p): [_plain(y), _plain(q)] for (p, y), q in zip(labelled, predicted, strict=True)},
        }
        reason = f"C={chosen:g}; {zero_train} train and {zero} {split} papers without embedding were zero vectors"
        rows.append(
            score_row(task, split, "f1", f1, n=len(labelled), missing=zero_train + zero, reason=reason, details=details)
        )
        log.info("scidocs %s/%s: macro F1 %.2f (%s)", task, split, f1, reason)
    return rows


def _plain(label: Any) -> Any:
    """A label as JSON holds it (numpy scalars as Python's)."""
    return label.item() if hasattr(label, "item") else label


def ranking(root: Path, task: str, split: str, embeddings: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    path = root / task / f"{split}.qrel"
    if not path.is_file():
        return [
            score_row(task, split, m, None, status="missing", reason=f"{task}/{split}.qrel absent")
            for m in ("map", "ndcg")
        ]
    qrels, lines = read_qrels(path)
    run, dropped = l2_run(qrels, embeddings)
    result = evaluate_run(run, qrels, ("map", "ndcg"))
    details = {
        "queries_in_qrel": len(qrels),
        "queries_scored": result["queries"],
        "candidate_lines": lines,
        **dropped,
    }
    reason = (
        f"{dropped['candidates_without_embedding']} candidate lines without embedding dropped; "
        f"{len(dropped['queries_skipped'])} of {len(qrels)} queries left out (no embedding or no scored candidate)"
    )
    return [
        score_row(
            task,
            split,
            m,
            100 * result[m],
            n=result["queries"],
            missing=dropped["candidates_without_embedding"],
            reason=reason,
            details={**details, "per_query": result["per_query"][m]},
        )
        for m in ("map", "ndcg")
    ]


def evaluate(
    root: Path,
    embeddings: Mapping[str, np.ndarray],
    *,
    splits=("test",),
    n_jobs=None,
    recomm=None,
) -> list[dict[str, Any]]:
    """Rows of every SciDocs number of `splits` (test and/or val); `recomm`: a RecommConfig, None for its defaults."""
    from citeflow.evaluation import recomm as recommendation

    root = Path(root)
    rows: list[dict[str, Any]] = []
    for task in CLASSIFICATION:
        rows += classification(root, task, embeddings, splits, n_jobs=n_jobs)
    for task in RANKING:
        for split in splits:
            rows += ranking(root, task, split, embeddings)
    for split in splits:
        rows += recommendation.evaluate(root, embeddings, split=split, config=recomm)
    return rows


def average(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """SciDocs' average: the plain mean of the 12 test numbers, only when all 12 exist.

    With fewer, `value` is None and `partial` the mean of the N numbers there are — a different quantity, to be
    compared only with the published mean of the same N numbers (`evaluation/report/`)."""
    values = {(r["task"], r["metric"]): r["value"] for r in rows if r["split"] == "test" and r["status"] == "ok"}
    have = [k for k in HEADLINE if values.get(k) is not None]
    partial = float(np.mean([values[k] for k in have])) if have else None
    complete = len(have) == len(HEADLINE)
    return {
        "value": partial if complete else None,
        "partial": partial,
        "of": len(have),
        "total": len(HEADLINE),
        "keys": have,
        "label": "average of 12" if complete else f"mean of {len(have)} of 12",
    }
