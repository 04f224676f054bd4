"""The benches of graph embeddings and mining run as their docstrings say, on a tiny generated corpus, so that they
cannot rot unseen: `bench/bench_windows.py` (absolute against relative SciNCL windows, scored by the generator's
subtopics) and `bench/bench_pbg_spread.py` (identical PBG runs apart), the latter on the embed_graph version the
former built (a link-prediction run of the demo profile).
"""

import json
from pathlib import Path

import pytest

from tests.conftest import TEST_SPARK_OVERRIDES
from tests.support.bench import finite, run_bench

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.jvm]  # both tests need the fixture's Spark run
QUERIES = 100


@pytest.fixture(scope="module")
def windows(tmp_path_factory) -> tuple[Path, dict]:
    """bench_windows on 1,000 generated papers, the smallest snapshot of the Spark benches here, 100 queries:
    (its folder, its JSON)."""
    root = tmp_path_factory.mktemp("windows")
    settings = [arg for item in TEST_SPARK_OVERRIDES for arg in ("--set", item)]
    run_bench(
        "bench_windows.py",
        *("--papers", "1000", "--queries", str(QUERIES), "--work", str(root / "work"), "--out", str(root / "out")),
        *settings,
        timeout=300,
    )
    return root, json.loads((root / "out" / "windows_1000.json").read_text())


@pytest.mark.timeout(420)
def test_the_windows_bench_mines_with_both_windows_and_scores_them(windows):
    """About 50 s: one process builds the graph (one Spark driver), embeds it with PBG and mines twice."""
    root, result = windows
    assert (result["papers"], result["seed"]) == (1000, 7) and result["pool"] > 2 * 25
    assert finite(result["seconds"]) and result["embed_graph"]["link_prediction"]["mrr"] > 0
    rows = result["windows"]
    assert set(rows) == {"absolute", "relative"}
    absolute, relative = rows["absolute"]["windows"], rows["relative"]["windows"]
    # absolute: SciNCL's ranks, k_hard capped so that half the pool lies outside it; relative: shares of SciNCL's
    # 680,967-paper pool, far fewer ranks in a pool of a few hundred
    assert (absolute["k_pos"], absolute["k_hard"]) == (25, min(4000, (result["pool"] - 1) // 2))
    assert relative["k_pos"] < 25 and relative["k_hard"] < absolute["k_hard"]
    for name, r in rows.items():
        assert r["queries"] == QUERIES, name
        shares = [r[k] for k in ("positive_same_subtopic", "hard_same_subtopic", "easy_same_subtopic", "chance")]
        assert all(finite(v) and 0 <= v <= 1 for v in shares), (name, shares)
        assert r["chance"] > 0 and r["collisions"] >= 0
    table = (root / "out" / "windows_1000.md").read_text().splitlines()
    assert table[0].startswith("# SciNCL windows on a generated snapshot of 1,000 papers")
    rows_md = [line.split(" | ") for line in table if line.startswith(("| absolute |", "| relative |"))]
    assert [(r[0], int(r[1]), int(r[2])) for r in rows_md] == [
        (f"| {name}", rows[name]["windows"]["k_pos"], rows[name]["windows"]["k_hard"]) for name in rows
    ]


@pytest.mark.timeout(300)
def test_the_spread_bench_trains_the_link_prediction_run_again_and_compares(windows):
    """Two HOGWILD runs and the two one-worker runs of the embed_graph version bench_windows built. It has fewer
    than 1,000 papers, the neighbour overlap's sample: every paper is compared instead. About 25 s."""
    root, built = windows
    (version,) = (root / "work" / "artifacts").glob(f"*/embed_graph/{built['embed_graph']['version']}")
    out = root / "spread"
    run_bench("bench_pbg_spread.py", "--embed-graph", str(version), "--runs", "2", "--out", str(out), timeout=240)
    result = json.loads((out / "pbg_spread.json").read_text())
    assert (result["runs"], result["workers"], result["embed_graph"]) == (2, 2, str(version))
    assert 0 < result["entities"] < 1000 and result["holdout_edges"] > 0  # a graph smaller than the sample
    assert (
        len(result["mrr"]) == 2 and result["mrr_min"] == min(result["mrr"]) and result["mrr_max"] == max(result["mrr"])
    )
    assert all(finite(m) and 0 < m <= 1 for m in result["mrr"] + result["one_worker_mrr"])
    overlap = result["neighbour_overlap_between_hogwild_runs"]
    assert overlap["k"] == built["embed_graph"]["neighbour_overlap"]["k"] and 0 <= overlap["min"] <= overlap["max"] <= 1
    # the bench's baseline: with one worker a run repeats bit for bit
    assert result["one_worker_vectors_identical"] is True and len(set(result["one_worker_mrr"])) == 1
    text = (out / "pbg_spread.md").read_text()
    assert text.startswith(f"2 identical PBG runs with 2 HOGWILD workers ({result['entities']:,} papers")
