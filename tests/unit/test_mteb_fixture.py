"""MTEB's SCIDOCS retrieval scores against mteb 2.26.24's own output (`../shared/reference/mteb/`).

The oracle: `expected.json` holds every score MTEB's evaluation returned for its registered SCIDOCS task on the
fixture's BEIR folder and fixed vectors, in four variants (as registered; queries from the paper vectors;
ignore_identical_ids; dot product), `expected_per_query.json` pytrec_eval's and MTEB's per-query values, and
`mteb_predictions_scidocs.json` MTEB's saved run. Rounded scores must be equal, unrounded means and per-query values
within 1e-12 (README of the fixture). Without the fixture these tests skip, and fail when CI=true.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from citeflow.evaluation.beir import read_beir
from citeflow.evaluation.mteb_retrieval import (
    TASKS,
    evaluate,
    retrieval_scores,
    score_names,
    score_run,
    search,
    with_settings,
)
from tests.support.shared import missing

FIXTURE = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "mteb"
VARIANTS = ("scidocs", "scidocs_paper_vectors", "ignore_identical_ids", "dot")
# what MTEB's result holds besides scores
NOT_SCORES = {"hf_subset", "languages", "mteb_version", "main_score"}
EXACT = 1e-12


@pytest.fixture(scope="module")
def fixture_dir() -> Path:
    if not FIXTURE.is_dir():
        missing(f"MTEB reference fixture not found at {FIXTURE}")
    return FIXTURE


@pytest.fixture(scope="module")
def expected(fixture_dir):
    return json.loads((fixture_dir / "expected.json").read_text())


@pytest.fixture(scope="module")
def folder(fixture_dir):
    return read_beir(fixture_dir)


@pytest.fixture(scope="module")
def vectors(fixture_dir):
    from citeflow.evaluation.embeddings import load_embeddings

    return {
        "embeddings.parquet": load_embeddings(str(fixture_dir / "embeddings.parquet")),
        "query_embeddings.parquet": load_embeddings(str(fixture_dir / "query_embeddings.parquet")),
    }


def variant_task(spec: dict):
    return with_settings(
        TASKS["SCIDOCS"], similarity=spec["similarity"], ignore_identical_ids=spec["ignore_identical_ids"]
    )


@pytest.fixture(scope="module")
def scored(expected, folder, vectors):
    out = {}
    for name in VARIANTS:
        spec = expected["variants"][name]
        out[name] = retrieval_scores(
            variant_task(spec), folder, vectors["embeddings.parquet"], vectors[spec["query_vectors"]]
        )
    return out


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_score_equals_mtebs(expected, scored, variant):
    want = expected["variants"][variant]
    got = scored[variant]
    mteb_scores = {k: v for k, v in want["scores"].items() if k not in NOT_SCORES and not k.startswith("nauc_")}
    assert set(mteb_scores) == set(score_names()) == set(got.reported) - {"main_score"}
    for name, value in mteb_scores.items():
        assert got.reported[name] == value, (variant, name)
    assert got.reported["main_score"] == want["scores"]["main_score"]
    for name, value in want["unrounded"].items():
        assert got.unrounded[name] == pytest.approx(value, abs=EXACT), (variant, name)
    assert got.evaluated == want["n_queries_evaluated"] == got.searched


def test_the_main_score_is_scidocs_ndcg_at_10(expected, scored):
    main = expected["main_score"]
    assert TASKS["SCIDOCS"].main_score == main["name"] == "ndcg_at_10"
    assert scored[expected["main_variant"]].reported["main_score"] == main["value"]
    assert scored[expected["main_variant"]].unrounded["ndcg_at_10"] == pytest.approx(main["unrounded"], abs=EXACT)


@pytest.mark.parametrize("variant", VARIANTS)
def test_per_query_values_equal_mtebs(fixture_dir, scored, variant):
    want = json.loads((fixture_dir / "expected_per_query.json").read_text())[variant]
    got = scored[variant].per_query
    assert set(got) == set(want)
    for qid, values in want.items():
        assert set(got[qid]) == set(values), qid
        for name, value in values.items():
            assert got[qid][name] == pytest.approx(value, abs=EXACT), (variant, qid, name)


def test_the_evaluated_queries_are_mtebs(expected, folder, scored):
    assert sorted(scored["scidocs"].per_query) == sorted(expected["evaluated_queries"])
    # one query of queries.jsonl has no judgments, one judged query is not in queries.jsonl: neither is evaluated
    assert scored["scidocs"].unjudged == 1 and scored["scidocs"].not_searched == 1


@pytest.fixture(scope="module")
def scidocs_run(folder, vectors):
    """The ranked lists of the registered variant: the queries' own vectors, cosine."""
    from citeflow.evaluation.mteb_retrieval import evaluated_queries, matrix

    searched, _, _ = evaluated_queries(folder, "test")
    return search(
        searched,
        matrix(searched, vectors["query_embeddings.parquet"], "queries"),
        folder.corpus.ids,
        matrix(folder.corpus.ids, vectors["embeddings.parquet"], "documents"),
        similarity="cosine",
        top_k=1000,
    )


def test_the_search_is_mtebs_saved_run(fixture_dir, scidocs_run):
    """Every (query, document) score of MTEB's own run, and its ranking (score, then id, both descending)."""
    run = json.loads((fixture_dir / "mteb_predictions_scidocs.json").read_text())["default"]["test"]
    assert set(scidocs_run) == set(run)
    for qid, ranking in scidocs_run.items():
        assert dict(ranking) == run[qid], qid
        mteb_order = sorted(run[qid].items(), key=lambda item: (item[1], item[0]), reverse=True)
        assert [doc for doc, _ in ranking] == [doc for doc, _ in mteb_order], qid


def test_the_fixture_tells_the_tie_order_apart(expected, folder, scidocs_run):
    """Ties by id ascending give other numbers here, so the equality above proves the tie rule."""
    ascending = {qid: sorted(ranking, key=lambda item: (-item[1], item[0])) for qid, ranking in scidocs_run.items()}
    assert ascending != scidocs_run
    reported, _, _, _ = score_run(TASKS["SCIDOCS"], ascending, folder.qrels["test"])
    want = expected["variants"]["scidocs"]["scores"]
    assert reported["mrr_at_10"] != want["mrr_at_10"]
    reported, _, _, _ = score_run(TASKS["SCIDOCS"], scidocs_run, folder.qrels["test"])
    assert reported["mrr_at_10"] == want["mrr_at_10"]


def test_small_batches_give_the_same_scores(expected, folder, vectors, scored):
    tiny = retrieval_scores(
        TASKS["SCIDOCS"],
        folder,
        vectors["embeddings.parquet"],
        vectors["query_embeddings.parquet"],
        pairs_per_batch=1,  # one query per batch
    )
    assert tiny.reported == scored["scidocs"].reported


def test_evaluate_keys_scores_by_mteb_task_name(expected, folder, vectors):
    got = evaluate(TASKS["SCIDOCS"], folder, vectors["embeddings.parquet"], vectors["query_embeddings.parquet"])
    want = expected["variants"]["scidocs"]["scores"]
    assert got["SCIDOCS_ndcg_at_10"] == got["SCIDOCS_main_score"] == want["ndcg_at_10"]
    assert got["SCIDOCS_accuracy"] == want["recall_at_1"]
    assert all(key.startswith("SCIDOCS_") for key in got) and len(got) == len(score_names()) + 1


# ---- the command line on the fixture


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    from citeflow.jobs.cli import main

    code = main(["benchmark", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    ("variant", "flags"),
    [
        ("scidocs", ["--query-embeddings", "query_embeddings.parquet"]),
        ("scidocs_paper_vectors", ["--query-embeddings", "embeddings.parquet"]),
        ("ignore_identical_ids", ["--query-embeddings", "query_embeddings.parquet", "--ignore-identical-ids"]),
        ("dot", ["--query-embeddings", "query_embeddings.parquet", "--similarity", "dot"]),
    ],
)
def test_cli_writes_mtebs_scores_labelled_scidocs(fixture_dir, expected, tmp_path, capsys, variant, flags):
    flags = [str(fixture_dir / f) if f.endswith(".parquet") else f for f in flags]
    code, out, err = run_cli(
        ["--embeddings", str(fixture_dir / "embeddings.parquet"), "--beir", str(fixture_dir), *flags]
        + ["--label", "fixture", "--out", str(tmp_path)],
        capsys,
    )
    assert code == 0, err
    want = expected["variants"][variant]["scores"]
    rows = pq.read_table(tmp_path / "scores.parquet").to_pylist()
    assert {r["task"] for r in rows} == {"SCIDOCS"} and {r["suite"] for r in rows} == {"mteb"}
    assert {r["split"] for r in rows} == {"test"} and {r["n"] for r in rows} == {60}
    by_metric = {r["metric"]: r for r in rows}
    assert set(by_metric) == set(score_names())
    for name, row in by_metric.items():
        details = json.loads(row["details"])
        assert details["mteb_value"] == want[name] and row["value"] == pytest.approx(100 * want[name], abs=1e-9)
        assert details["mteb_task"] == "SCIDOCS" and details["suite"] == "mteb"
    main = json.loads(by_metric["ndcg_at_10"]["details"])
    assert main["main_score"] is True and len(main["per_query"]) == 60
    assert f"MTEB SCIDOCS    ndcg_at_10       {want['ndcg_at_10']:.5f}" in out
    assert "not SciDocs" in out
    report = (tmp_path / "report.md").read_text()
    assert "## MTEB retrieval (not SciDocs)" in report
    assert "average of 12" not in report and "SPECTER" not in report  # no SciDocs table beside it


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ([], "give --query-embeddings PARQUET"),
        (["--query-embeddings", "/no/such.parquet"], "do not exist"),
        (["--query-embeddings", "Q", "--query-embeddings", "Q"], "one --query-embeddings per --embeddings"),
        (["--query-embeddings", "Q", "--mteb-task", "NFCorpus"], "unknown MTEB task 'NFCorpus'"),
    ],
)
def test_cli_argument_mistakes_are_one_line(fixture_dir, tmp_path, capsys, flags, message):
    flags = [str(fixture_dir / "query_embeddings.parquet") if f == "Q" else f for f in flags]
    code, _, err = run_cli(
        ["--embeddings", str(fixture_dir / "embeddings.parquet"), "--beir", str(fixture_dir), *flags]
        + ["--out", str(tmp_path)],
        capsys,
    )
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_cli_missing_document_vectors_are_one_line(fixture_dir, tmp_path, capsys):
    code, _, err = run_cli(
        ["--embeddings", str(fixture_dir / "query_embeddings.parquet"), "--beir", str(fixture_dir)]
        + ["--query-embeddings", str(fixture_dir / "query_embeddings.parquet"), "--out", str(tmp_path)],
        capsys,
    )
    assert code == 2 and "of 600 corpus documents have no vector" in err and len(err.strip().splitlines()) == 1


def test_cli_missing_query_vectors_are_one_line(fixture_dir, tmp_path, capsys):
    table = pq.read_table(fixture_dir / "query_embeddings.parquet")
    pq.write_table(table.slice(1), tmp_path / "q.parquet")
    dropped = table.column("paper_id")[0].as_py()
    code, _, err = run_cli(
        ["--embeddings", str(fixture_dir / "embeddings.parquet"), "--beir", str(fixture_dir)]
        + ["--query-embeddings", str(tmp_path / "q.parquet"), "--out", str(tmp_path / "out")],
        capsys,
    )
    assert code == 2 and "test queries have no vector" in err and repr(dropped) in err


def test_cli_model_embeds_the_queries_text(fixture_dir, folder, tmp_path, capsys):
    """--model embeds each searched query's text alone; the same vectors given as --query-embeddings score alike."""
    import pyarrow as pa

    from citeflow.jobs.benchmark import embedder
    from citeflow.models.encoder.model import build_small

    texts = list(folder.queries.texts) + list(folder.corpus.titles)
    model = build_small(
        texts, tmp_path / "model", vocab_size=300, hidden=32, layers=1, heads=2, intermediate=64, max_length=32, seed=3
    )
    code, out, err = run_cli(
        ["--embeddings", str(fixture_dir / "embeddings.parquet"), "--beir", str(fixture_dir)]
        + ["--model", str(model), "--out", str(tmp_path / "by_model")],
        capsys,
    )
    assert code == 0, err
    searched = [q for q in folder.queries.ids if folder.qrels["test"].get(q)]
    text = dict(zip(folder.queries.ids, folder.queries.texts, strict=True))
    vectors = embedder(str(model))([{"doc_id": q, "text": text[q]} for q in searched], ("text",))
    assert sorted(vectors) == sorted(searched)
    pq.write_table(
        pa.table({"paper_id": list(vectors), "embedding": [v.tolist() for v in vectors.values()]}),
        tmp_path / "q.parquet",
    )
    code, _, err = run_cli(
        ["--embeddings", str(fixture_dir / "embeddings.parquet"), "--beir", str(fixture_dir)]
        + ["--query-embeddings", str(tmp_path / "q.parquet"), "--out", str(tmp_path / "by_file")],
        capsys,
    )
    assert code == 0, err

    def values(name):
        return {r["metric"]: r["value"] for r in pq.read_table(tmp_path / name / "scores.parquet").to_pylist()}

    assert values("by_model") == values("by_file")
    assert values("by_model")["ndcg_at_10"] != pytest.approx(100 * 0.72159)  # another model's queries
