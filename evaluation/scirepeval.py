"""SciRepEval tasks, each scored with the reference protocol of its format (docs/reference.md §7).

    tasks = read_tasks(Path("scirepeval_tasks.jsonl"))      # or task_from_records(Path("fos_small.json"))
    rows = evaluate_task(tasks[0], vectors, embed)           # vectors: {id: vector}; embed: None or a model's

Reads SciRepEval's own task list (`scirepeval_tasks.jsonl`: name, type, data.meta / data.test, metrics,
multi_label, fields) with each task's data in the reference layout, local paths relative to the task list:
`<test>/train.csv` + `test.csv` (`paper_id,label`) or `train.jsonl` + `test.jsonl` (multi-hot `label`) for
classification and regression, `<test>/test_qrel.jsonl` (`query_id, cand_id, score`) and the `meta` records for
proximity and ad-hoc search. A task whose data names a Hugging Face dataset (`{name, config}`) cannot be read
offline and is reported `missing`. Flat record files (the layout of `shared/data/scirepeval/`: `corpus_id`, title,
abstract, `label(s)` / `score`, optional `split`; proximity and search `{query, candidates}`) are read as tasks too.
Writes nothing.

Reference: allenai/scirepeval @ e04594e, `evaluation/evaluator.py` (`SupervisedEvaluator.read_dataset / classify /
regression / calc_metrics`, `IREvaluator.get_qc_pairs / retrieval / calc_metrics`) and `evaluation/eval_datasets.py`:
- papers are looked up by `str(paper_id)` (also `corpus_id`, `doc_id`); a paper without an embedding is dropped;
- classification: `evaluation/svm.py` (C per label for multi-label); regression: lightning's LinearSVR
  (`evaluation/lightning_svr.py`); metrics as the task names them — `f1_macro`, `f1` (binary), `accuracy`,
  `precision_*`, `recall_*`; `kendalltau`, `pearsonr` — x 100;
- proximity and search: a repeated (query, candidate) pair keeps its first score, a repeated query gathers the
  candidates of all its rows; candidates ranked by Euclidean distance (scikit-learn's `euclidean_distances` on
  float32, as the reference), trec_eval measures as named (`map`, `ndcg`, `P_5`, ...) averaged over the scored
  queries. A query without an embedding is left out; one whose candidates all lack one is left out too (the
  reference crashes on it);
- search embeds the query text and the documents from the task's `fields` (default title, abstract) joined by the
  model's separator, as `SimpleDataset` does.
Proven against the reference's own output for classification (within 0.01), regression and proximity (exact):
tests/unit/test_reference_scirepeval.py. Search has no fixture. Flat records without a `split` are split by a hash
of the paper id (80% train, 20% test), since they carry no split of the benchmark's own.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from citeflow.evaluation.scidocs import typed
from citeflow.ranking import check_measures, evaluate_run

FORMATS = ("classification", "regression", "proximity", "adhoc_search")
DEFAULT_METRICS = {"classification": ["f1_macro"], "regression": ["kendalltau"], "proximity": ["map", "ndcg"]}
DEFAULT_METRICS["adhoc_search"] = ["ndcg"]
# embed(records, fields) -> {id: vector}; records: {"doc_id": id, field: value, ...}
Embed = Callable[[list[dict[str, Any]], list[str]], dict[str, np.ndarray]]


@dataclass(frozen=True, kw_only=True)
class Task:
    name: str
    type: str
    metrics: tuple[str, ...]
    multi_label: bool = False
    fields: tuple[str, ...] = ("title", "abstract")
    meta: Path | None = None  # reference layout: metadata records
    test: Path | None = None  # reference layout: labelled data folder
    records: Path | None = None  # flat record file
    unavailable: str = ""  # why the task cannot be read here
    extra: dict = field(default_factory=dict)


def _key(record: Mapping[str, Any]) -> str | None:
    for name in ("paper_id", "corpus_id", "doc_id"):
        if record.get(name) is not None:
            return str(record[name])
    return None


def _id(record: Mapping[str, Any]) -> str:
    """`_key` of a record that must have one (a labelled example, a query paper): ValueError without."""
    key = _key(record)
    if key is None:
        raise ValueError(f"a record without paper_id, corpus_id or doc_id (keys: {', '.join(sorted(record))})")
    return key


def read_json_records(path: Path) -> list[dict[str, Any]]:
    text = Path(path).read_text(encoding="utf-8").lstrip()
    if text.startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def read_tasks(path: Path) -> list[Task]:
    """The tasks of a `scirepeval_tasks.jsonl` (a file, or a folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "scirepeval_tasks.jsonl"
    root = path.parent
    tasks = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        config = json.loads(line)
        if config.get("type") not in FORMATS or not config.get("name"):
            raise ValueError(f"{path}:{number}: a task needs a name and a type in {', '.join(FORMATS)}")
        data = config.get("data") or {}
        meta, test = data.get("meta"), data.get("test")
        remote = [d for d in (meta, test) if isinstance(d, dict)]
        unavailable = ""
        if remote:
            unavailable = f"Hugging Face dataset {remote[0].get('name')}:{remote[0].get('config')} is not read offline"
        elif not test:
            unavailable = "the task names no local test data"
        tasks.append(
            Task(
                name=config["name"],
                type=config["type"],
                metrics=tuple(
                    check_measures(config["metrics"])
                    if config["type"] in ("proximity", "adhoc_search")
                    else config["metrics"]
                ),
                multi_label=bool(config.get("multi_label")),
                fields=tuple(config.get("fields") or ("title", "abstract")),
                meta=root / meta if isinstance(meta, str) else None,
                test=root / test if isinstance(test, str) else None,
                unavailable=unavailable,
                extra={"simple_format": bool(data.get("simple_format"))},
            )
        )
    return tasks


def detect_format(record: dict[str, Any]) -> str:
    if "candidates" in record:
        return "adhoc_search" if isinstance(record.get("query"), str) else "proximity"
    if any(k in record for k in ("labels", "label", "descriptor", "class_label")):
        return "classification"
    if any(k in record for k in ("score", "target")):
        return "regression"
    raise ValueError(f"cannot tell the SciRepEval format of a record with keys {sorted(record)}")


def task_from_records(path: Path) -> Task:
    """A flat record file as a task: its format from its first record, the default metrics of that format
    (binary F1 for 0/1 labels)."""
    records = read_json_records(path)
    if not records:
        raise ValueError(f"{path}: no records")
    kind = detect_format(records[0])
    metrics = DEFAULT_METRICS[kind]
    multi = kind == "classification" and isinstance(records[0].get("labels"), list)
    if kind == "classification" and not multi:
        values = {str(_label(r)) for r in records}
        metrics = ["f1"] if values <= {"0", "1"} and len(values) == 2 else metrics
    return Task(name=Path(path).stem, type=kind, metrics=tuple(metrics), multi_label=multi, records=Path(path))


def discover(paths: Iterable[str]) -> list[Task]:
    """Tasks of each path: a scirepeval_tasks.jsonl file; a folder: the task list it holds (if any) and its flat
    record files; a flat record file."""
    found: list[Task] = []
    for item in paths:
        path = Path(item)
        if path.is_file() and path.name.endswith("_tasks.jsonl"):
            found += read_tasks(path)
            continue
        if path.is_dir() and (path / "scirepeval_tasks.jsonl").is_file():
            found += read_tasks(path)
        files = (
            sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl") and not p.stem.endswith("_tasks"))
            if path.is_dir()
            else [path]
        )
        for file in files:
            try:
                found.append(task_from_records(file))
            except (ValueError, IndexError, KeyError, AttributeError, TypeError, json.JSONDecodeError):
                continue  # not a task file (e.g. training triplets, metadata)
    return found


def _label(record: dict[str, Any]):
    for key in ("labels", "label", "descriptor", "class_label", "score", "target"):
        if record.get(key) is not None:
            return record[key]
    return None


def _hash_split(pid: str) -> str:
    return "test" if hashlib.sha256(pid.encode()).digest()[0] < 256 * 0.2 else "train"


def _read_labelled(folder: Path, split: str) -> list[tuple[str | None, Any]]:
    """(paper id, label) of `<split>.csv` or `<split>.jsonl`, ids and labels typed as `datasets` types them."""
    if (folder / f"{split}.jsonl").is_file():
        rows = read_json_records(folder / f"{split}.jsonl")
        return [(_key(r), r["label"]) for r in rows]
    with open(folder / f"{split}.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    ids = typed([r["paper_id"] for r in rows])  # an int64 column: str(123) drops leading zeros, as there
    return list(zip([str(i) for i in ids], typed([r["label"] for r in rows]), strict=True))


def _supervised_data(task: Task) -> tuple[dict[str, list], list[dict[str, Any]]]:
    """({train, test: [(id, label)]}, paper records to embed)."""
    if task.records is not None:
        records = read_json_records(task.records)
        split: dict[str, list] = {"train": [], "test": []}
        for r in records:
            pid = _id(r)
            chosen = r.get("split")
            chosen = ("test" if chosen in ("test", "evaluation") else "train") if chosen else _hash_split(pid)
            split[chosen].append((pid, _label(r)))
        if task.type == "classification" and not task.multi_label:
            for s in split:
                split[s] = list(zip([p for p, _ in split[s]], typed([str(y) for _, y in split[s]]), strict=True))
        return split, [{**r, "doc_id": _key(r)} for r in records]
    assert task.test is not None  # without records or test data a task is unavailable (read_tasks), never read
    split = {s: _read_labelled(task.test, s) for s in ("train", "test")}
    papers = read_json_records(task.meta) if task.meta and task.meta.is_file() else []
    return split, [{**r, "doc_id": _key(r)} for r in papers]


def _vectors(
    papers: list[dict], fields, vectors: Mapping[str, np.ndarray], embed: Embed | None
) -> Mapping[str, np.ndarray]:
    """The given vectors, plus the model's for papers that have none (when a model is given)."""
    todo = [p for p in papers if p.get("doc_id") is not None and p["doc_id"] not in vectors]
    if embed is None or not todo:
        return vectors
    return {**vectors, **embed(todo, list(fields))}


def _row(task: Task, metric, value, n=0, missing=0, status="ok", reason="", details=None):
    return {
        "task": f"scirepeval/{task.name}",
        "split": "test",
        "metric": metric,
        "value": value,
        "n": n,
        "missing": missing,
        "status": status,
        "reason": reason or task.type,
        "details": details or {},
    }


def supervised(task: Task, vectors: Mapping[str, np.ndarray], embed: Embed | None, n_jobs=None) -> list[dict]:
    from citeflow.evaluation import svm

    split, papers = _supervised_data(task)
    vectors = _vectors(papers, task.fields, vectors, embed)
    kept = {s: [(p, y) for p, y in rows if p in vectors] for s, rows in split.items()}
    missing = sum(len(split[s]) - len(kept[s]) for s in split)
    if not kept["train"] or not kept["test"]:
        reason = "needs train and test papers with embeddings"
        return [_row(task, m, None, status="missing", reason=reason) for m in task.metrics]
    x = {s: np.array([vectors[p] for p, _ in kept[s]], dtype=np.float32) for s in kept}
    labels = {s: [label for _, label in kept[s]] for s in kept}
    if task.multi_label and task.records is not None:  # flat records: label lists -> multi-hot over the labels used
        from sklearn.preprocessing import MultiLabelBinarizer

        binarizer = MultiLabelBinarizer().fit(labels["train"] + labels["test"])
        y = {s: binarizer.transform(v) for s, v in labels.items()}
    else:
        y = {s: np.array(v) for s, v in labels.items()}
    details: dict[str, Any] = {"n_train": len(kept["train"]), "n_test": len(kept["test"])}
    if task.type == "regression":
        model, chosen = svm.fit_regressor(
            x["train"], y["train"].astype(np.float64), grid=svm.SCIREPEVAL_REGRESSION_C_GRID
        )
        details["chosen_C"] = [chosen]
    elif task.multi_label:
        model, chosen_per_label = svm.fit_multilabel(x["train"], y["train"], n_jobs=n_jobs)
        details["chosen_C"] = chosen_per_label
    else:
        model, chosen = svm.fit_classifier(
            x["train"], y["train"], grid=svm.SCIREPEVAL_CLASSIFICATION_C_GRID, n_jobs=n_jobs
        )
        details["chosen_C"] = [chosen]
    predicted = model.predict(x["test"])
    reason = f"{task.type}{' (multi-label)' if task.multi_label else ''}; {missing} papers without embedding dropped"
    return [
        _row(task, m, value, n=len(kept["test"]), missing=missing, reason=reason, details=details)
        for m, value in supervised_metrics(task, y["test"], predicted).items()
    ]


def supervised_metrics(task: Task, truth, predicted) -> dict[str, float | None]:
    """`calc_metrics` of the reference: metric names as the task config gives them, x 100."""
    from scipy.stats import kendalltau, pearsonr
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

    out: dict[str, float | None] = {}
    for name in task.metrics:
        if task.type == "regression":
            function = {"kendalltau": kendalltau, "pearsonr": pearsonr}.get(name)
            out[name] = None if function is None else 100 * float(function(truth, predicted)[0])
            continue
        base, _, average = name.partition("_")
        function = {"f1": f1_score, "accuracy": accuracy_score, "precision": precision_score, "recall": recall_score}
        if base not in function:
            out[name] = None
            continue
        out[name] = 100 * float(
            function[base](truth, predicted, average=average) if average else function[base](truth, predicted)
        )
    return out


def _ranking_data(task: Task) -> tuple[dict[str, dict[str, int]], list[dict], list[dict]]:
    """(judgments with the first score of a repeated pair, papers to embed, search queries to embed)."""
    qrels: dict[str, dict[str, int]] = {}
    papers: list[dict] = []
    queries: list[dict] = []

    def judge(qid, cid, score):
        qrels.setdefault(str(qid), {}).setdefault(str(cid), int(score))

    if task.records is not None:
        for i, record in enumerate(read_json_records(task.records)):
            if isinstance(record["query"], str):
                qid = str(record.get("doc_id") or f"query:{i}")
                queries.append({"doc_id": qid, "title": record["query"]})
            else:
                qid = _id(record["query"])
                papers.append({**record["query"], "doc_id": qid})
            qrels.setdefault(qid, {})
            for candidate in record["candidates"]:
                papers.append({**candidate, "doc_id": _key(candidate)})
                judge(qid, _key(candidate), candidate.get("score", 0))
        return qrels, papers, queries
    assert task.test is not None  # without records or test data a task is unavailable (read_tasks), never read
    for row in read_json_records(task.test / "test_qrel.jsonl"):
        judge(row["query_id"], row["cand_id"], row["score"])
    if task.meta and task.meta.is_file():
        for record in read_json_records(task.meta):
            if "candidates" not in record:  # simple_format: one paper a line
                papers.append({**record, "doc_id": _key(record)})
                continue
            if isinstance(record["query"], str):
                queries.append({"doc_id": str(record.get("doc_id")), "title": record["query"]})
            else:
                papers.append({**record["query"], "doc_id": _key(record["query"])})
            papers += [{**c, "doc_id": _key(c)} for c in record["candidates"]]
    return qrels, papers, queries


def proximity(task: Task, vectors: Mapping[str, np.ndarray], embed: Embed | None) -> list[dict]:
    from sklearn.metrics.pairwise import euclidean_distances

    qrels, papers, queries = _ranking_data(task)
    if task.type == "adhoc_search":
        if embed is None:
            return [
                _row(task, m, None, status="missing", reason="ad-hoc search embeds its queries: needs --model")
                for m in task.metrics
            ]
        vectors = {k: v for k, v in vectors.items() if k not in qrels}  # a query id is a query, not a paper
        vectors = {**_vectors(papers, task.fields, vectors, embed), **embed(queries, list(task.fields))}
    else:
        vectors = _vectors(papers, task.fields, vectors, embed)
    run: dict[str, dict[str, float]] = {}
    skipped, unembedded = [], 0
    for qid, candidates in qrels.items():
        have = [c for c in candidates if c in vectors]
        unembedded += len(candidates) - len(have)
        if qid not in vectors or not have:
            skipped.append(qid)
            continue
        distances = euclidean_distances(
            np.array([vectors[c] for c in have], dtype=np.float32), np.array([vectors[qid]], dtype=np.float32)
        ).ravel()
        run[qid] = {c: float(-d) for c, d in zip(have, distances, strict=True)}
    result = evaluate_run(run, qrels, task.metrics)
    details = {
        "queries_in_qrels": len(qrels),
        "queries_scored": result["queries"],
        "queries_skipped": skipped,
        "candidates_without_embedding": unembedded,
    }
    reason = f"{task.type}; {len(skipped)} queries and {unembedded} candidates without embedding left out"
    return [
        _row(
            task,
            m,
            100 * result[m],
            n=result["queries"],
            missing=len(skipped),
            reason=reason,
            details={**details, "per_query": result["per_query"][m]},
        )
        for m in task.metrics
    ]


def task_papers(task: Task) -> list[tuple[str, str, str | None]]:
    """(paper id, split, title) of every paper `task` scores, as its evaluation reads them: the labelled papers
    by split (classification, regression: `train` and `test`, the fit's papers too), the query papers and
    candidates of a ranking task (`test`; an ad-hoc search query is text, not a paper). Titles where the task's
    records give one. Nothing for a task that cannot be read here (`unavailable`): the caller says so."""
    if task.unavailable:
        return []
    if task.type in ("classification", "regression"):
        split, papers = _supervised_data(task)
        titles = {p["doc_id"]: p.get("title") for p in papers}
        return [(pid, name, titles.get(pid)) for name, rows in split.items() for pid, _ in rows if pid is not None]
    qrels, papers, queries = _ranking_data(task)
    titles = {p["doc_id"]: p.get("title") for p in papers}
    texts = {q["doc_id"] for q in queries}
    found = [(qid, "test", titles.get(qid)) for qid in qrels if qid not in texts]
    found += [(cid, "test", titles.get(cid)) for candidates in qrels.values() for cid in candidates]
    return [row for row in found if row[0] is not None]


def evaluate_task(task: Task, vectors: Mapping[str, np.ndarray], embed: Embed | None = None, n_jobs=None) -> list[dict]:
    if task.unavailable:
        return [_row(task, m, None, status="missing", reason=task.unavailable) for m in task.metrics]
    if task.type in ("classification", "regression"):
        return supervised(task, vectors, embed, n_jobs=n_jobs)
    return proximity(task, vectors, embed)
