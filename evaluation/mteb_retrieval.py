"""MTEB's retrieval scores (SCIDOCS and its kind) of fixed vectors on a BEIR folder, as mteb 2.26 computes them.

    from citeflow.evaluation.mteb_retrieval import TASKS, evaluate
    scores = evaluate(TASKS["SCIDOCS"], folder, doc_vectors, query_vectors)   # {"SCIDOCS_ndcg_at_10": 0.21641, ...}

Not SciDocs' `cite` task (evaluation/scidocs.py): MTEB's SCIDOCS searches the whole corpus with each paper's
title and reports nDCG@10 (docs/benchmarks-mteb.md). Writes nothing.

MTEB's conventions, kept (file:line in mteb 2.26.24: docs/benchmarks-mteb.md):
- the queries searched are those of queries.jsonl with judgments in the split's qrels; a qrels query absent from
  queries.jsonl is neither searched nor averaged; a query whose judgments are all 0 is kept (scores 0);
- exact search over the whole corpus in float32 (torch): cosine normalises both sides then multiplies, dot
  multiplies; each query keeps its top_k = max(k) documents, ranked by score descending and then by document
  id descending (string order: the (score, id) heap MTEB keeps, trec_eval's docno order and MTEB's MRR sort);
- `ignore_identical_ids` (False for SCIDOCS) drops a document whose id is the query's after the search, so the
  list is not refilled;
- nDCG / MAP / recall / precision / hit rate at each k come from pytrec_eval on the qrels as read (graded gain,
  relevance = score >= 1, judged ids missing from the corpus count in the denominators), averaged over the queries
  pytrec_eval returns with a plain sum / n and rounded to 5 decimals; `accuracy` is recall@1; MRR@k is MTEB's own
  (first document with a score > 0 within k), averaged over the searched queries and not rounded.
Left out: the nauc_* confidence scores MTEB also reports, and MTEB's cross-encoder and reranking paths.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from citeflow.errors import CiteflowError
from citeflow.evaluation.beir import BeirFolder

K_VALUES = (1, 3, 5, 10, 20, 100, 1000)
SIMILARITIES = ("cosine", "dot")
# pytrec_eval's measure -> MTEB's score name, each at every k
PYTREC_MEASURES = {"ndcg_cut": "ndcg_at", "map_cut": "map_at", "recall": "recall_at", "P": "precision_at"}
HIT_RATE = ("success", "hit_rate_at")
# a batch of queries scores at most this many (query, document) pairs at once (float32 scores + int64 order)
PAIRS_PER_BATCH = 1 << 22
SUITE = "mteb"
MTEB_VERSION = "2.26.24"


def score_names(k_values: Sequence[int] = K_VALUES) -> list[str]:
    """Every score name this scorer reports, in MTEB's order (nauc_* left out)."""
    names = [f"{name}_{k}" for name in ("ndcg_at", "map_at", "recall_at") for k in k_values]
    names += ["accuracy"]
    names += [f"{name}_{k}" for name in ("precision_at", "mrr_at", "hit_rate_at") for k in k_values]
    return names


@dataclass(frozen=True, kw_only=True)
class RetrievalTask:
    """One MTEB retrieval task on a BEIR folder: what MTEB's task definition fixes."""

    name: str = field(metadata={"help": "the task's MTEB name; every score is labelled with it"})
    split: str = field(default="test", metadata={"help": "the evaluation split: qrels/<split>.tsv"})
    main_score: str = field(default="ndcg_at_10", metadata={"help": "the score MTEB reports as main_score"})
    similarity: str = field(default="cosine", metadata={"help": "cosine or dot (a model's similarity function)"})
    ignore_identical_ids: bool = field(
        default=False, metadata={"help": "drop the document whose id is the query's from its ranking"}
    )
    k_values: tuple[int, ...] = field(default=K_VALUES, metadata={"help": "cut-offs of every score"})

    def __post_init__(self) -> None:
        if self.similarity not in SIMILARITIES:
            raise CiteflowError(f"similarity must be one of {', '.join(SIMILARITIES)}, not {self.similarity!r}")
        if not self.k_values or self.k_values[0] != 1 or list(self.k_values) != sorted(set(self.k_values)):
            # MTEB reports accuracy as recall@1, so 1 is always a cut-off
            raise CiteflowError(f"k_values must be increasing positive integers from 1, not {self.k_values!r}")
        if self.main_score not in score_names(self.k_values):
            raise CiteflowError(f"{self.main_score!r} is not one of the task's scores")

    @property
    def top_k(self) -> int:
        """How many documents each query keeps: MTEB searches for the largest cut-off."""
        return max(self.k_values)


# MTEB's registered retrieval tasks this scorer reproduces, by MTEB name
TASKS = {"SCIDOCS": RetrievalTask(name="SCIDOCS")}


@dataclass(frozen=True)
class RetrievalScores:
    task: RetrievalTask
    reported: dict[str, float]  # as MTEB reports them (rounded as MTEB rounds), plus main_score
    unrounded: dict[str, float]  # the means before rounding
    per_query: dict[str, dict[str, float]]  # pytrec_eval's names (ndcg_cut_10, ...) and mrr_at_k, per query
    searched: int  # queries searched (in queries.jsonl and judged)
    evaluated: int  # queries pytrec_eval returned (the mean's n)
    not_searched: int  # judged queries absent from queries.jsonl
    unjudged: int  # queries of queries.jsonl without judgments


def evaluated_queries(folder: BeirFolder, split: str) -> tuple[list[str], int, int]:
    """(query ids searched, in queries.jsonl order; judged ids not in queries.jsonl; queries without judgments)."""
    if split not in folder.qrels:
        raise CiteflowError(f"{folder.root} has no qrels/{split}.tsv, the split the task is scored on")
    qrels = folder.qrels[split]
    listed = set(folder.queries.ids)
    searched = [q for q in folder.queries.ids if qrels.get(q)]
    return searched, sum(1 for q in qrels if q not in listed), len(folder.queries.ids) - len(searched)


def matrix(ids: Sequence[str], vectors: Mapping[str, Any], what: str) -> np.ndarray:
    """The float32 rows of `ids`; a missing id or a non-finite vector is the user's mistake."""
    missing = [i for i in ids if i not in vectors]
    if missing:
        raise CiteflowError(
            f"{len(missing)} of {len(ids)} {what} have no vector (first: {', '.join(map(repr, missing[:3]))}); "
            f"embed every one of them"
        )
    try:
        out = np.stack([np.asarray(vectors[i], dtype=np.float32) for i in ids])
    except ValueError:
        out = np.zeros(0)
    if out.ndim != 2:
        raise CiteflowError(f"the {what} vectors are not vectors of one length")
    if not np.isfinite(out).all():
        raise CiteflowError(f"a {what} vector holds NaN or infinity")
    return out


def search(
    query_ids: Sequence[str],
    queries: np.ndarray,
    doc_ids: Sequence[str],
    docs: np.ndarray,
    *,
    similarity: str,
    top_k: int,
    pairs_per_batch: int = PAIRS_PER_BATCH,
) -> dict[str, list[tuple[str, float]]]:
    """{query id: [(doc id, score)] best first, at most top_k}: exact float32 search, ties by doc id descending."""
    import torch

    if queries.shape[1] != docs.shape[1]:
        raise CiteflowError(f"query vectors have {queries.shape[1]} dimensions, document vectors {docs.shape[1]}")
    # the documents in id-descending order, so a stable sort by score leaves ties in MTEB's order
    order = sorted(range(len(doc_ids)), key=doc_ids.__getitem__, reverse=True)
    ranked_ids = [doc_ids[i] for i in order]
    d = torch.from_numpy(np.ascontiguousarray(docs[order]))
    q = torch.from_numpy(np.ascontiguousarray(queries))
    if similarity == "cosine":
        d = torch.nn.functional.normalize(d, p=2, dim=1)
        q = torch.nn.functional.normalize(q, p=2, dim=1)
    keep = min(top_k, len(ranked_ids))
    step = max(1, pairs_per_batch // max(1, len(ranked_ids)))
    out: dict[str, list[tuple[str, float]]] = {}
    with torch.inference_mode():
        for start in range(0, len(query_ids), step):
            scores = q[start : start + step] @ d.T
            values, index = torch.sort(scores, dim=1, descending=True, stable=True)
            values, index = values[:, :keep].tolist(), index[:, :keep].tolist()
            for row, qid in enumerate(query_ids[start : start + step]):
                out[qid] = [(ranked_ids[j], v) for j, v in zip(index[row], values[row], strict=True)]
    return out


def mrr(ranking: Sequence[tuple[str, float]], judged: Mapping[str, int], k_values: Sequence[int]) -> dict[str, float]:
    """MTEB's MRR@k of one ranked list: 1 / rank of its first document judged > 0 within k, else 0."""
    first = next((rank for rank, (doc, _) in enumerate(ranking, 1) if judged.get(doc, 0) > 0), None)
    return {f"mrr_at_{k}": (1.0 / first if first is not None and first <= k else 0.0) for k in k_values}


def score_run(
    task: RetrievalTask, run: dict[str, list[tuple[str, float]]], qrels: dict[str, dict[str, int]]
) -> tuple[dict[str, float], dict[str, float], dict[str, dict[str, float]], int]:
    """(reported, unrounded, per query, evaluated queries) of ranked lists against the split's qrels."""
    import pytrec_eval

    ks = ",".join(str(k) for k in task.k_values)
    measures = {f"{m}.{ks}" for m in (*PYTREC_MEASURES, HIT_RATE[0])}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(
        {qid: dict(ranking) for qid, ranking in run.items()}
    )
    n = len(per_query)
    if n == 0:
        raise CiteflowError("no query could be evaluated: none of the searched queries has a ranked document")
    unrounded: dict[str, float] = {}
    for measure, name in [*PYTREC_MEASURES.items(), HIT_RATE]:
        for k in task.k_values:
            # MTEB: the plain sum over pytrec_eval's queries, in its order, divided by their number
            unrounded[f"{name}_{k}"] = sum(values[f"{measure}_{k}"] for values in per_query.values()) / n
    reciprocal = {qid: mrr(ranking, qrels[qid], task.k_values) for qid, ranking in run.items()}
    for k in task.k_values:
        unrounded[f"mrr_at_{k}"] = sum(r[f"mrr_at_{k}"] for r in reciprocal.values()) / len(reciprocal)
    unrounded["accuracy"] = unrounded["recall_at_1"]
    reported = {
        name: (unrounded[name] if name.startswith("mrr_at_") else round(unrounded[name], 5))
        for name in score_names(task.k_values)
    }
    reported["main_score"] = reported[task.main_score]
    for qid in per_query:
        per_query[qid].update(reciprocal[qid])
    return reported, unrounded, per_query, n


def retrieval_scores(
    task: RetrievalTask,
    folder: BeirFolder,
    doc_vectors: Mapping[str, Any],
    query_vectors: Mapping[str, Any],
    *,
    pairs_per_batch: int = PAIRS_PER_BATCH,
) -> RetrievalScores:
    """Every score of `task` on `folder`: documents' vectors by corpus id, queries' by query id."""
    searched, not_searched, unjudged = evaluated_queries(folder, task.split)
    qrels = folder.qrels[task.split]
    if not searched:
        raise CiteflowError(f"no query of {folder.root}/queries.jsonl is judged in qrels/{task.split}.tsv")
    docs = matrix(folder.corpus.ids, doc_vectors, "corpus documents")
    queries = matrix(searched, query_vectors, f"{task.split} queries")
    run = search(
        searched,
        queries,
        folder.corpus.ids,
        docs,
        similarity=task.similarity,
        top_k=task.top_k,
        pairs_per_batch=pairs_per_batch,
    )
    if task.ignore_identical_ids:
        run = {qid: [(doc, s) for doc, s in ranking if doc != qid] for qid, ranking in run.items()}
    reported, unrounded, per_query, n = score_run(task, run, qrels)
    return RetrievalScores(task, reported, unrounded, per_query, len(searched), n, not_searched, unjudged)


def evaluate(
    task: RetrievalTask,
    folder: BeirFolder,
    doc_vectors: Mapping[str, Any],
    query_vectors: Mapping[str, Any],
) -> dict[str, float]:
    """The evaluator: every score as MTEB reports it (0-1), keyed `{task}_{score}` ("SCIDOCS_ndcg_at_10")."""
    scores = retrieval_scores(task, folder, doc_vectors, query_vectors)
    return {f"{task.name}_{name}": value for name, value in scores.reported.items()}


def with_settings(task: RetrievalTask, *, similarity: str | None = None, ignore_identical_ids: bool | None = None):
    """`task` with the similarity / identical-id handling of a model or a variant, where given."""
    changes: dict[str, Any] = {}
    if similarity is not None:
        changes["similarity"] = similarity
    if ignore_identical_ids is not None:
        changes["ignore_identical_ids"] = ignore_identical_ids
    return dataclasses.replace(task, **changes)


def score_rows(scores: RetrievalScores) -> list[dict[str, Any]]:
    """Score rows for a `scores` table: task = the MTEB name, suite "mteb", value x 100 of what MTEB reports."""
    task = scores.task
    settings = {
        "suite": SUITE,
        "mteb_task": task.name,
        "mteb_version_matched": MTEB_VERSION,
        "similarity": task.similarity,
        "ignore_identical_ids": task.ignore_identical_ids,
        "top_k": task.top_k,
        "queries_searched": scores.searched,
        "queries_evaluated": scores.evaluated,
        "judged_queries_not_in_queries_jsonl": scores.not_searched,
        "queries_without_judgments": scores.unjudged,
    }
    reason = (
        f"MTEB {task.name} (retrieval over the whole corpus, main score {task.main_score}): not SciDocs, "
        f"not in SciDocs' average"
    )
    rows = []
    for name in score_names(task.k_values):
        value = scores.reported[name]
        details = {**settings, "mteb_value": value, "unrounded": scores.unrounded.get(name, value)}
        if name == task.main_score:
            details["main_score"] = True
            details["per_query"] = {qid: v[_pytrec_name(name)] for qid, v in scores.per_query.items()}
        rows.append(
            {
                "task": task.name,
                "suite": SUITE,
                "split": task.split,
                "metric": name,
                "value": 100 * value,
                "n": scores.evaluated,
                "missing": 0,
                "status": "ok",
                "reason": reason,
                "average_label": "",
                "details": details,
            }
        )
    return rows


def _pytrec_name(name: str) -> str:
    """pytrec_eval's per-query key of an MTEB score name (ndcg_at_10 -> ndcg_cut_10)."""
    if name.startswith("mrr_at_"):
        return name
    if name == "accuracy":
        return "recall_1"
    for measure, mteb in [*PYTREC_MEASURES.items(), HIT_RATE]:
        if name.startswith(mteb + "_"):
            return f"{measure}_{name.removeprefix(mteb + '_')}"
    raise KeyError(name)
