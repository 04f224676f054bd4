"""citeflow's SciRepEval scores against allenai/scirepeval's own output on the reference fixture
(`../shared/reference/`; tolerances: tests/support/reference.py and that folder's README): the tasks named by the
reference config, proximity per query, and the same tasks as flat record files. Apart from the SciDocs checks
(test_reference_fixture.py) so that the two files' scoring runs in parallel workers. The tests skip when the
fixture is absent, and fail when CI=true.
"""

from __future__ import annotations

import json

import pytest

from tests.support.reference import REFERENCE, check_scirepeval, expected, load_vectors
from tests.support.shared import missing

if not REFERENCE.is_dir():
    missing(f"reference fixture not found at {REFERENCE}")


@pytest.fixture(scope="module")
def vectors():
    return load_vectors()


@pytest.fixture(scope="module")
def scirepeval_rows(vectors):
    from citeflow.jobs.benchmark import score

    rows = score(vectors, None, (str(REFERENCE / "scirepeval" / "scirepeval_tasks.jsonl"),), None, n_jobs=1)
    return {(r["task"], r["metric"]): r for r in rows if r["task"].startswith("scirepeval/")}


@pytest.mark.parametrize(
    "name",
    [
        "Fixture Single-label",
        "Fixture Multi-label",
        "Fixture Binary",
        "Fixture Regression (years)",
        "Fixture Regression (log citations)",
        "Fixture Proximity",
    ],
)
def test_scirepeval_tasks_from_the_reference_config(scirepeval_rows, name):
    check_scirepeval(scirepeval_rows, name)
    details = expected("expected_scirepeval.json")["details"][name]
    got = next(r for (task, _), r in scirepeval_rows.items() if task == f"scirepeval/{name}")["details"]
    for key in ("n_train", "n_test", "chosen_C", "queries_in_qrels", "queries_scored", "candidates_without_embedding"):
        if key in details:
            assert got[key] == details[key], (name, key)
    if "queries_skipped" in details:
        assert sorted(got["queries_skipped"]) == sorted(details["queries_skipped"])


def test_scirepeval_proximity_per_query(scirepeval_rows):
    want = expected("expected_scirepeval.json")["details"]["Fixture Proximity"]["per_query"]
    for metric in ("map", "ndcg"):
        got = scirepeval_rows["scirepeval/Fixture Proximity", metric]["details"]["per_query"]
        assert set(got) == set(want)
        for qid, values in want.items():
            assert got[qid] == pytest.approx(values[metric], abs=1e-9), (metric, qid)


@pytest.mark.slow  # a second full grid search: make test, not make test-fast
def test_scirepeval_flat_record_files_score_the_same(vectors):
    """The same tasks as flat records (`corpus_id`, `split`, `labels` / `score`) give the reference's values."""
    from citeflow.jobs.benchmark import score

    lines = (REFERENCE / "scirepeval" / "scirepeval_tasks.jsonl").read_text().splitlines()
    tasks = [json.loads(line) for line in lines if line.strip()]
    files = {t["name"]: REFERENCE / "scirepeval" / t["fixture_records"] for t in tasks if t}
    rows = {}
    for name, file in files.items():
        for row in score(vectors, None, (str(file),), None, n_jobs=1):
            rows[row["task"].replace(f"scirepeval/{file.stem}", f"scirepeval/{name}"), row["metric"]] = row
    multi = rows["scirepeval/Fixture Multi-label", "f1_macro"]
    assert (
        multi["details"]["chosen_C"]
        == expected("expected_scirepeval.json")["details"]["Fixture Multi-label"]["chosen_C"]
    )
    binary = {metric for task, metric in rows if task == "scirepeval/Fixture Binary"}
    assert "f1" in binary  # a two-class 0/1 task is scored with binary F1, as the reference config names it
    for name in files:
        check_scirepeval(rows, name)
