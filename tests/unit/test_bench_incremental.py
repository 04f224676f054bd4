"""`bench/bench_incremental.py` runs as its docstring says, so that it cannot rot unseen: R2's build_graph and
filter_leakage from the diff against in full (section 1, end to end on a generated pair), and its PBG warm start
against a cold start (section 2, on two small filter_leakage versions made here).

Not run: the empty-diff floor (`--no-floor`: one more Spark run of its own), the whole pipeline (`--pipeline`:
both releases to the benchmark, minutes), `--spark-connect` and `--hepth`.
"""

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import TEST_SPARK_OVERRIDES
from tests.support.bench import finite, run_command

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "bench_incremental.py"
pytestmark = pytest.mark.slow


@pytest.mark.jvm
@pytest.mark.timeout(420)
def test_the_incremental_bench_builds_r2_from_its_diff_and_in_full_with_equal_tables(tmp_path):
    """The smallest run: 1,000 papers (at 300, no paper is left for the derived release to change), 1% of them
    touched, one repeat, without PBG (the next test) and the floor. About two minutes: it starts five Spark
    drivers, each in a `citeflow run` of its own (R1's base, the two untimed warm-up runs of `warm_up`, which
    no option skips, R2 from the diff, R2 in full), and a build from a diff costs more than a full one at this
    size."""
    out = tmp_path / "out"
    settings = [arg for item in TEST_SPARK_OVERRIDES for arg in ("--set", item)]
    run_command(
        BENCH.name,
        [sys.executable, str(BENCH), "--papers", "1000", "--change", "0.01", "--repeat", "1", "--no-pbg"]
        + ["--no-floor", "--snapshots", str(tmp_path / "snaps"), "--out", str(out), *settings],
        timeout=360,
    )
    result = json.loads((out / "incremental.json").read_text())
    assert result["pair"] == ["2024-01-01", "2024-02-01"] and "pbg" not in result
    # R2 as the bench asked the generator for it: 10 papers touched, 40% added, 20% removed
    papers = result["diff"]["datasets"]["papers"]
    assert (papers["added"], papers["deleted"]) == (4, 2), papers
    s = result["spark"]
    assert set(s["runs"]) == {"incremental", "full"}
    for kind, runs in s["runs"].items():
        (r,) = runs
        assert finite(r["seconds"]) and r["seconds"] > 0 and finite(r["peak_rss_gib"]), (kind, r)
        assert set(r["stages"]) == {"build_graph", "filter_leakage"} and all(map(finite, r["stages"].values()))
        assert s["median_seconds"][kind] == r["seconds"]
    assert s["ratio"] == round(s["median_seconds"]["incremental"] / s["median_seconds"]["full"], 3)
    assert s["tables_equal"] is True
    assert s["from_diff"]["base"]["snapshot"] == "2024-01-01" and s["from_diff"]["end"] == "2024-02-01"
    assert s["paper_keys"]["carried_from"]["snapshot"] == "2024-01-01"
    assert s["paper_id_lines"]["from_diff"]["keys_named"] > 0
    table = (out / "incremental.md").read_text()
    assert "tables equal: True" in table and f"Ratio incremental / full: **{s['ratio']}**" in table
    assert "| from the diff onto R1's build |" in table and "| in full from the shards |" in table


def _filter_leakage_version(root: Path, release: str, citing: np.ndarray, cited: np.ndarray) -> None:
    """A filter_leakage version of `release` in the artifact root `root`, as far as the bench reads one: its
    manifest (`finished_at`) and its citations table."""
    version = root / release / "filter_leakage" / "0123456789abcdef"
    (version / "citations").mkdir(parents=True)
    pq.write_table(pa.table({"citing": citing, "cited": cited}), version / "citations" / "part-0.parquet")
    (version / "_manifest.json").write_text(json.dumps({"finished_at": "2024-01-01T00:00:00Z", "metrics": {}}))


@pytest.mark.timeout(300)
def test_the_incremental_benchs_pbg_warm_start_scores_a_cold_and_a_warm_run(tmp_path, monkeypatch):
    """Section 2 (`pbg_warm_start`) on a random R1 of 1,200 papers and an R2 that adds 300 papers and their
    edges, 8 dimensions, 2 epochs cold, 1 warm: the code the default run takes after its Spark stages."""
    monkeypatch.setattr(sys, "path", [*sys.path])  # the bench puts bench/ first on the path: undone after
    spec = importlib.util.spec_from_file_location("bench_incremental", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rng = np.random.default_rng(0)
    citing, cited = rng.integers(1, 1501, 6000), rng.integers(1, 1501, 6000)
    keep = citing != cited
    citing, cited = citing[keep], cited[keep]
    old = (citing <= 1200) & (cited <= 1200)  # R1: the edges between its papers
    base, full = tmp_path / "base", tmp_path / "full"
    _filter_leakage_version(base, "2024-01-01", citing[old], cited[old])
    _filter_leakage_version(full, "2024-02-01", citing, cited)
    pair = bench.Pair(tmp_path / "releases", "2024-01-01", "2024-02-01")
    args = argparse.Namespace(dim=8, epochs=2, warm_epochs=0.5, workers=1)

    result = bench.pbg_warm_start(pair, base, full, tmp_path / "work", args)

    assert result["dimension"] == 8 and result["edges"] == len(citing)
    r2_papers = set(citing) | set(cited)
    assert 0 < result["held_out_edges"] < len(citing) * 0.05  # 1% held out, seeded
    assert int(old.sum()) - result["held_out_edges"] <= result["r1_train_edges"] <= int(old.sum())
    assert (result["cold"]["epochs"], result["warm"]["epochs"], result["epoch_share"]) == (2, 1, 0.5)
    warm = result["warm"]
    # every R2 paper starts from its R1 vector or new; the 300 papers only R2 has start new
    assert warm["kept"] + warm["new"] == len(r2_papers) and warm["new"] >= len(r2_papers - set(range(1, 1201)))
    for run_ in (result["cold"], warm):
        assert finite(run_["seconds"]) and run_["seconds"] > 0
        assert 0 < run_["mrr"] <= 1 and 0 <= run_["hits@10"] <= 1, run_
    assert result["mrr_relative_gap"] == round((result["cold"]["mrr"] - warm["mrr"]) / result["cold"]["mrr"], 4)
