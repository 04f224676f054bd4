"""evaluation/drift.py on hand-made tables: the counts worked out by hand."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from citeflow.errors import CiteflowError
from citeflow.evaluation import drift as D
from citeflow.jobs import drift as D_job


class Version:
    def __init__(self, root, **tables):
        self.root = root
        for name, table in tables.items():
            (root / name).mkdir(parents=True)
            pq.write_table(table, root / name / "part-0.parquet")

    def table_path(self, name):
        return str(self.root / name)


def papers(ids, titles):
    return pa.table({"corpus_id": pa.array(ids, pa.int64()), "title": titles, "year": [2000] * len(ids)})


def edges(pairs):
    return pa.table({"citing": [a for a, _ in pairs], "cited": [b for _, b in pairs]})


def test_the_graph_delta_counts_added_removed_and_changed(tmp_path):
    old = Version(tmp_path / "a", papers=papers([1, 2, 3], ["x", "y", None]), citations=edges([(1, 2), (2, 3)]))
    new = Version(
        tmp_path / "b", papers=papers([2, 3, 4], ["y!", None, "w"]), citations=edges([(2, 3), (4, 2), (2, 4)])
    )
    got = {r["name"]: r["value"] for r in D.graph_delta(old, new)}
    # 4 added, 1 removed, 2 changed (title), 3 kept its null title; edge (1,2) left, (4,2) and (2,4) came
    assert (got["papers added"], got["papers removed"], got["papers changed"]) == (1, 1, 1)
    assert (got["edges added"], got["edges removed"], got["edges"]) == (2, 1, 1)


def vectors(ids, rows):
    return pa.table(
        {"corpus_id": ids, "embedding": pa.array([list(map(float, r)) for r in rows], pa.list_(pa.float32()))}
    )


def test_embedding_drift_measures_the_papers_of_both_releases():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(30, 8))
    rotated = base @ np.linalg.qr(rng.normal(size=(8, 8)))[0]  # the same space, turned: neighbours kept
    rows, histogram = D.embedding_drift(
        "g",
        vectors(list(range(30)), base),
        vectors(list(range(5, 35)), np.vstack([rotated[5:], rng.normal(size=(5, 8))])),
        "corpus_id",
    )
    got = {r["name"]: r for r in rows}
    assert got["papers in both"]["value"] == 25 and (
        got["papers in both"]["before"],
        got["papers in both"]["after"],
    ) == (30, 30)
    assert got["top-10 neighbour overlap mean"]["value"] == pytest.approx(1.0)  # a rotation keeps every neighbour
    assert got["cosine old-new q95"]["value"] < 0.99  # but moves the vectors
    assert sum(h["papers"] for h in histogram) == 25
    same, _ = D.embedding_drift("g", vectors([1, 2, 3], base[:3]), vectors([1, 2, 3], base[:3]), "corpus_id")
    assert {r["name"]: r["value"] for r in same}["cosine old-new q05"] == pytest.approx(1.0)
    with pytest.raises(CiteflowError, match="no paper in common"):
        D.embedding_drift("g", vectors([1], base[:1]), vectors([2], base[:1]), "corpus_id")


def triplets(rows):
    return pa.table({name: [r[i] for r in rows] for i, name in enumerate(["query_id", "positive_id", "negative_id"])})


def score(value, model="trained"):
    return {"task": "cite", "split": "test", "metric": "map", "value": value, "model": model, "status": "ok"}


def test_triplet_overlap_and_score_deltas():
    got = D.triplet_overlap(triplets([(1, 2, 3), (1, 4, 5)]), triplets([(1, 2, 3), (1, 2, 6), (7, 8, 9), (1, 4, 9)]))
    got = {r["name"]: r["value"] for r in got}
    assert got["share of the new triplets mined before"] == pytest.approx(1 / 4)
    # positive pairs (1,2), (7,8), (1,4): two mined before
    assert got["share of the new positive pairs mined before"] == pytest.approx(2 / 3)
    rows = D.score_delta(pa.Table.from_pylist([score(70.0), score(60.0, "base")]), pa.Table.from_pylist([score(72.5)]))
    assert rows == [{"section": "scores", "name": "cite test map", "before": 70.0, "after": 72.5, "value": 2.5}]
    # with the queries' own values (the same queries in both releases) the change gets its interval: one query of
    # two gains 10 points, so a draw's mean runs from 0 to 10
    import json

    def kept(value, per_query):
        return score(value) | {"details": json.dumps({"per_query": per_query})}

    rows = D.score_delta(
        pa.Table.from_pylist([kept(70.0, {"q1": 0.7, "q2": 0.7})]),
        pa.Table.from_pylist([kept(75.0, {"q1": 0.8, "q2": 0.7, "q3": 1.0})]),
    )
    assert rows == [
        {"section": "scores", "name": "cite test map", "before": 70.0, "after": 75.0, "value": 5.0}
        | {"low": pytest.approx(0.0), "high": pytest.approx(10.0)}
    ]
    assert D_job.interval_text(rows[0]).startswith("[+0.00, +10.00]") and "not shown" in D_job.interval_text(rows[0])
