"""The benches that start no Spark JVM run as their docstrings say, at tiny sizes, so that they cannot rot unseen:
`bench/bench_benchmark.py` (the SciDocs evaluation), `bench/bench_generate.py` (`citeflow generate` against a
commit's), `bench/bench_mine.py` (SciNCL mining against the GEMM bound), `bench/bench_pbg.py` (PBG's import and an
epoch) and `bench/bench_pbg_memory.py` (PBG's memory by partition count); `bench/bench_scale.py`'s judgement of
its curves and the process roles `bench/bench_stages.py` measures apart.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.bench import finite, run_bench
from tests.support.shared import missing

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
# SciDocs' 12 headline numbers, as bench_benchmark keys them (`task/metric`)
HEADLINE = [
    "mag/f1",
    "mesh/f1",
    *(f"{task}/{metric}" for task in ("cite", "cocite", "coview", "coread") for metric in ("map", "ndcg")),
    "recomm/adj-ndcg",
    "recomm/adj-p@1",
]


def random_citations(folder: Path, papers: int, edges: int) -> int:
    """A citations Parquet folder of `edges` random (citing, cited) pairs over `papers` ids, self-citations
    dropped; the edges written."""
    rng = np.random.default_rng(0)
    citing, cited = rng.integers(1, papers + 1, edges), rng.integers(1, papers + 1, edges)
    keep = citing != cited
    folder.mkdir()
    pq.write_table(pa.table({"citing": citing[keep], "cited": cited[keep]}), folder / "part-0.parquet")
    return int(keep.sum())


@pytest.mark.timeout(240)
def test_the_benchmark_bench_scores_all_twelve_numbers_and_removes_its_scratch(tmp_path):
    """1,000 papers (the bench draws 1,000 distinct queries per ranking task and split), 16 dimensions, 40 clicks.
    About 10 s."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = tmp_path / "out"
    run_bench(
        "bench_benchmark.py",
        *("--papers", "1000", "--dim", "16", "--clicks", "40", "--out", str(out)),
        timeout=180,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    result = json.loads((out / "benchmark.json").read_text())
    assert (result["papers"], result["dim"]) == (1000, 16)
    assert finite(result["seconds"]) and result["seconds"] > 0 and finite(result["load_seconds"])
    assert set(result["task_seconds"]) == {"classification", "ranking", "recomm"}
    assert all(finite(s) and s >= 0 for s in result["task_seconds"].values())
    scores = result["scores"]
    assert set(scores) == {*HEADLINE, "average/avg"} and all(finite(v) and 0 <= v <= 100 for v in scores.values())
    # SciDocs' average is the plain mean of the 12 (each number rounded to 2 decimals in the JSON)
    assert abs(scores["average/avg"] - sum(scores[k] for k in HEADLINE) / 12) < 0.01
    table = (out / "benchmark.md").read_text().splitlines()
    assert table[2].startswith("| 1,000 | 16 | all 12:") and table[2].endswith(f"| {result['seconds']:.1f} |")
    # its SciDocs folder and embeddings are gone (torch's compile cache may stay, as in any process)
    assert [p.name for p in scratch.iterdir() if p.name.startswith("citeflow-")] == []


@pytest.mark.timeout(240)
def test_the_generate_bench_times_this_checkout_against_a_commit(tmp_path):
    """300 papers, one round, against HEAD (the default baseline's tree may be absent from a shallow clone).
    About 5 s."""
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        missing(f"{REPO} is not a git checkout: bench_generate exports its baseline with git archive")
    out = tmp_path / "out"
    run_bench(
        "bench_generate.py",
        *("--papers", "300", "--rounds", "1", "--baseline", "HEAD", "--out", str(out)),
        *("--workdir", str(tmp_path / "work")),
        timeout=180,
    )
    report = json.loads((out / "generate.json").read_text())
    assert (report["papers"], report["format"], report["baseline_commit"]) == (300, "s2orc", head.stdout.strip())
    assert set(report["runs"]) == {"baseline", "new"}
    for name, runs in report["runs"].items():
        (run,) = runs
        assert run["seconds"] > 0 and run["peak_rss_gib"] > 0 and finite(run["load_average_1m"]), (name, run)
        assert report["median_seconds"][name] == run["seconds"]
    median = report["median_seconds"]
    assert report["ratio_new_to_baseline"] == round(median["new"] / median["baseline"], 3)
    table = (out / "generate.md").read_text()
    assert table.startswith(f"# citeflow generate, 300 papers (s2orc): this checkout vs {head.stdout[:10]}")
    assert f"ratio {report['ratio_new_to_baseline']}." in table
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["baseline"]  # each run's snapshot removed


@pytest.mark.timeout(240)
def test_the_mining_bench_mines_and_measures_the_bound(tmp_path):
    """A pool of 3,000 32-d vectors, 200 queries, windows k_pos 10 and k_hard 200. A few seconds."""
    out = tmp_path / "out"
    run_bench(
        "bench_mine.py",
        *("--pool", "3000", "--queries", "200", "--dim", "32", "--k-pos", "10", "--k-hard", "200"),
        *("--batch", "64", "--bound-batch", "64", "--gemm-repeats", "1", "--out", str(out)),
        timeout=180,
    )
    result = json.loads((out / "mine.json").read_text())
    assert (result["pool"], result["queries"], result["dim"]) == (3000, 200, 32)
    assert result["k_max"] == 200 and result["warnings"] == []
    assert result["triplets"] == 5 * 200  # SciNCL's 5 triplets per query: 2 hard and 3 easy negatives
    for key in ("mining_seconds", "bound_seconds", "bare_product_seconds", "search_k1_seconds", "peak_rss_gib"):
        assert finite(result[key]) and result[key] >= 0, key
    for key in ("queries_per_second", "ratio_to_bound", "ratio_to_bare_product", "k1_ratio_to_bound"):
        assert finite(result[key]) and result[key] > 0, key
    assert set(result["gemm_gflops"]) == {"torch", "numpy", "faiss_k1"}
    assert all(finite(v) and v > 0 for v in result["gemm_gflops"].values())
    table = (out / "mine.md").read_text().splitlines()
    assert len(table) == 3 and table[2].startswith("| 3,000 | 200 | 32 | 200 |")


@pytest.mark.timeout(240)
def test_the_pbg_bench_imports_both_ways_and_trains_an_epoch(tmp_path):
    """5,000 edges of a random graph, 8 dimensions. About 30 s, 20 of them PBG's HOGWILD delay (its second
    worker waits 2 s on each of the 10 edge chunks of the first epoch, as in the stage's training)."""
    edges = random_citations(tmp_path / "citations", 2000, 20_000)
    out = tmp_path / "out"
    run_bench(
        "bench_pbg.py",
        "--citations",
        str(tmp_path / "citations"),
        "--edges",
        "5000",
        "--dim",
        "8",
        "--out",
        str(out),
        timeout=180,
    )
    result = json.loads((out / "pbg.json").read_text())
    (row,) = result["results"]
    assert edges > 5000 and row["edges"] == 5000
    for importer in ("citeflow_import", "pbg_tsv_import"):
        m = row[importer]
        roles = m.pop("peak_by_role_gib")  # bench_stages.measure: each role's own peak
        assert set(m) == {"seconds", "lingering_s", "peak_rss_gib", "load_before", "load_after"}, importer
        assert m["seconds"] > 0 and all(map(finite, m.values())), importer
        assert roles["driver"] > 0 and all(map(finite, roles.values())), importer
    assert row["speedup"] == round(row["pbg_tsv_import"]["seconds"] / row["citeflow_import"]["seconds"], 1)
    epoch = row["train_epoch"]
    assert epoch["dimension"] == 8 and epoch["seconds"] > 0 and epoch["edges_per_second"] > 0
    table = (out / "pbg.md").read_text().splitlines()
    assert len(table) == 3 and table[2].startswith("| 5,000 | ") and table[2].endswith("(8) |")


@pytest.mark.timeout(240)
def test_the_pbg_memory_bench_reports_each_partition_count(tmp_path):
    """A random graph of 2,000 papers and 10,000 edges, 8 dimensions, 1 and 2 partitions. About 12 s."""
    out = tmp_path / "out"
    run_bench(
        "bench_pbg_memory.py",
        *("--nodes", "2000", "--edges", "10000", "--dim", "8", "--partitions", "1", "2", "--out", str(out)),
        timeout=180,
    )
    result = json.loads((out / "pbg_memory.json").read_text())
    assert [r["partitions"] for r in result["results"]] == [1, 2]
    for r in result["results"]:
        assert 0 < r["entities"] <= 2000 and 0 < r["edges"] <= 10_000 and (r["dimension"], r["workers"]) == (8, 2)
        assert finite(r["table_gib"]) and 0 <= r["model_gib"] <= r["table_gib"]  # PBG holds the table or a part
        for step in ("import", "train"):
            m = r[step]
            # sampled every 0.5 s: a one-second import may be seen only as it starts
            assert m["seconds"] > 0 and 0 <= m["peak_pss_gib"] <= m["peak_rss_gib"], (r["partitions"], step, m)
        assert r["train"]["peak_rss_gib"] > 0
    # the same graph imported both times
    assert len({(r["entities"], r["edges"]) for r in result["results"]}) == 1
    lines = (out / "pbg_memory.md").read_text().splitlines()
    assert lines[0].startswith(f"{result['results'][0]['entities']:,} papers, {result['results'][0]['edges']:,} edges")
    assert [line.split(" | ")[0] for line in lines if line[:3] in ("| 1", "| 2")] == ["| 1", "| 2"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("module", ["bench_stages", "bench_generate", "bench_pbg_memory"])
def test_a_bench_measuring_a_chatty_child_is_not_blocked_by_its_output(module, tmp_path, monkeypatch):
    """The child's output goes to a file: into a pipe that nobody reads while the tree is sampled, 64 KiB filled
    it and blocked the child for good (sentence-transformers' trainer, logging every step, hung half way)."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    bench = __import__(module)
    chatty = [
        sys.executable,
        "-c",
        "import sys; [print('x' * 99) for _ in range(5000)]; print('done', file=sys.stderr)",
    ]
    if module == "bench_stages":
        result = bench.measure(chatty)
        assert result["output"].endswith("done\n") and len(result["output"]) > 500_000
    elif module == "bench_generate":
        assert bench.measure(chatty, tmp_path)["seconds"] < 60
    else:
        assert bench.measure_tree(chatty, every_s=0.05)["seconds"] < 60


def test_a_spooled_child_is_killed_when_its_sampling_fails(monkeypatch):
    """`bench_stages.spooled`, which every measuring bench starts its child with: an error in the block that
    samples the child kills it, instead of leaving it running beside the next step."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import bench_stages

    with pytest.raises(RuntimeError, match="sampling failed"):
        with bench_stages.spooled([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"]) as (
            proc,
            output,
        ):
            while "up" not in output():
                assert proc.poll() is None
            raise RuntimeError("sampling failed")
    assert proc.returncode is not None and proc.returncode < 0


def _scale_row(papers: int, us: dict[str, float], peak: dict[str, float], twin_s: float) -> dict:
    """One size of bench_scale's result, each stage `us[stage]` µs per paper at `peak[stage]` GiB; DuckDB's
    build_graph twin `twin_s` seconds."""
    stages = {}
    for stage, cost in us.items():
        stages[stage] = {
            "seconds": round(cost * papers / 1e6, 1),
            "us_per_paper": cost,
            "peak_rss_gib": peak[stage],
            "peak_by_role_gib": {"driver": 0.2, "jvm": peak[stage] - 0.2},
            "artifact_mib": 1.0,
            "load_before": 1.0,
            "load_after": 1.5,
        }
    stages["diff"] = stages.pop("diff", None) or {
        **stages["build_graph"],
        "stage_seconds": {"build_graph": 1.0, "filter_leakage": 2.0},
    }
    bg = stages["build_graph"]["seconds"]
    twin = {"seconds": twin_s, "peak_rss_gib": 1.0, "ratio": round(bg / twin_s, 2), "counts_agree": True}
    return {
        "papers": papers,
        "citations": 3 * papers,
        "settings": [],
        "stages": stages,
        "duckdb": {"build_graph": twin},
    }


def test_the_scale_bench_judges_each_stage_by_its_smallest_and_its_last_two_sizes(monkeypatch):
    """`bench_scale.checks`: cost per paper at the largest size against the smallest (goal 1.25x), peak memory at
    the largest against the size before (goal 1.5x), Spark against DuckDB at the largest (goal 2x); a miss is
    named in the report, a goal met is not."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import bench_scale

    result = {
        "machine": "test",
        "sizes": [
            _scale_row(
                5_000_000, {"build_graph": 60.0, "embed_graph": 10.0}, {"build_graph": 4.0, "embed_graph": 2.0}, 100
            ),
            _scale_row(
                1_000_000, {"build_graph": 50.0, "embed_graph": 20.0}, {"build_graph": 3.0, "embed_graph": 1.0}, 40
            ),
            _scale_row(
                10_000_000, {"build_graph": 70.0, "embed_graph": 10.0}, {"build_graph": 4.4, "embed_graph": 4.0}, 175
            ),
        ],
    }
    checks = {c["stage"]: c for c in bench_scale.checks(result)}
    assert checks["build_graph"] == {
        "stage": "build_graph",
        "sizes": [1_000_000, 5_000_000, 10_000_000],
        "unit": "paper",
        "us_per_unit": [50.0, 70.0],
        "cost_ratio": 1.4,  # 70 / 50: not flat
        "cost_flat": False,
        "memory_ratio": 1.1,  # 4.4 / 4.0, against 5M, not 1M
        "memory_bounded": True,
        "duckdb_ratio": 4.0,  # 700 s / 175 s
        "duckdb_within": False,
    }
    assert (checks["embed_graph"]["cost_ratio"], checks["embed_graph"]["cost_flat"]) == (0.5, True)
    assert (checks["embed_graph"]["memory_ratio"], checks["embed_graph"]["memory_bounded"]) == (2.0, False)
    assert "duckdb_ratio" not in checks["embed_graph"]
    report = bench_scale.report(result)
    assert (
        "| build_graph | 1.4× (missed) (10M ÷ 1M: 70 ÷ 50 µs per paper) | 1.1× (10M ÷ 5M) | 4.0× (missed) |" in report
    )
    assert "| embed_graph | 0.5× (10M ÷ 1M: 10 ÷ 20 µs per paper) | 2.0× (missed) (10M ÷ 5M) | – |" in report
    # PBG's work is the filtered graph's edges, mining's its queries: where the metrics count them, per those
    for row, edges in zip(result["sizes"], (10, 2, 20), strict=True):  # 5M, 1M, 10M
        row["stages"]["embed_graph"]["metrics"] = {"edges": edges * row["papers"]}
    graph = next(c for c in bench_scale.checks(result) if c["stage"] == "embed_graph")
    assert (graph["unit"], graph["us_per_unit"]) == ("edge", [10.0, 0.5])  # 10 µs / 20 edges, 20 µs / 2
    assert graph["cost_ratio"] == 0.05
    # a stage left out at the largest size (the diff path above --diff-up-to) is judged on the sizes it ran at
    del result["sizes"][2]["stages"]["diff"]
    diff = next(c for c in bench_scale.checks(result) if c["stage"] == "diff")
    assert diff["sizes"] == [1_000_000, 1_000_000, 5_000_000] and diff["cost_ratio"] == 1.2
    assert (
        "| 10,000,000 | 30,000,000 | diff path: bg 1.0 + FL 2.0 s | 700.0 | 70.0 | 4.4 | 0.2 / 4.2 / 0 / 0 |" in report
    )
    assert bench_scale.checks({"sizes": result["sizes"][:1]}) == []


def test_a_measured_tree_is_split_into_driver_jvm_spark_workers_and_other_workers(monkeypatch):
    """`bench_stages.roles`: the command's own process is the driver, a `java` process the JVM, a process below a
    JVM a Spark Python worker, any other a worker; each role's resident memory summed, a child younger than a
    second left out."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import bench_stages

    class Proc:
        def __init__(self, pid, ppid, name, rss, started=0.0):
            self.pid, self._ppid, self._name, self._rss, self._started = pid, ppid, name, rss, started

        def create_time(self):
            return self._started

        def ppid(self):
            return self._ppid

        def name(self):
            return self._name

        def memory_info(self):
            return type("mem", (), {"rss": self._rss})()

    root = Proc(1, 0, "python", 100)
    tree = [
        root,
        Proc(2, 1, "bash", 1),  # spark-submit's shell
        Proc(3, 2, "java", 1000),
        Proc(4, 3, "python3", 50),  # pyspark.daemon
        Proc(5, 4, "python3", 60),  # its forked worker
        Proc(6, 1, "python", 300),  # a PBG worker
    ]
    assert bench_stages.roles(root, tree, now=10.0) == {
        "driver": 100,
        "jvm": 1000,
        "python_workers": 110,
        "workers": 301,
    }
    # a child forked a moment ago shows its parent's pages as its own: not counted until YOUNG_S old
    forked = Proc(7, 3, "bash", 1000, started=9.5)
    assert bench_stages.roles(root, [*tree, forked], now=10.0)["python_workers"] == 110
    assert bench_stages.roles(root, [*tree, forked], now=10.6)["python_workers"] == 1110


def test_the_breakdown_reads_each_tasks_gc_time_and_spilled_bytes_from_spark_event_names(tmp_path, monkeypatch):
    """`spark_breakdown.read_event_log` on an event log written the way Spark 4 writes one: a task's "JVM GC Time"
    and "Disk Bytes Spilled" reach its job, under its step's tag."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import spark_breakdown

    tag = f"spark-session-1-thread-1-{spark_breakdown.STEP_TAG}build_graph: ranking abstracts"
    metrics = {
        "Executor Run Time": 4000,
        "JVM GC Time": 250,
        "Disk Bytes Spilled": 3_000_000,
        "Shuffle Write Metrics": {"Shuffle Bytes Written": 5_000_000},
    }
    events = [
        {"Event": "SparkListenerApplicationStart", "Timestamp": 1_000},
        {
            "Event": "SparkListenerJobStart",
            "Job ID": 0,
            "Submission Time": 2_000,
            "Stage IDs": [0],
            "Properties": {"spark.job.tags": tag},
        },
        *[{"Event": "SparkListenerTaskEnd", "Stage ID": 0, "Task Metrics": metrics} for _ in range(2)],
        {"Event": "SparkListenerJobEnd", "Job ID": 0, "Completion Time": 6_000},
        {"Event": "SparkListenerApplicationEnd", "Timestamp": 7_000},
    ]
    folder = tmp_path / "eventlog_v2_local-1"
    folder.mkdir()
    (folder / "events_1_local-1").write_text("".join(json.dumps(e) + "\n" for e in events))
    (job,) = spark_breakdown.read_event_log(tmp_path)["jobs"]
    assert job["description"] == "build_graph: ranking abstracts"
    assert (job["task_s"], job["gc_s"], job["spilled"], job["shuffle"]) == (8.0, 0.5, 6_000_000, 10_000_000)
    (step,) = spark_breakdown.breakdown(0.5, 8.0, {"jobs": [job], "app": {"start": 1.0}})["steps"].values()
    assert (step["gc_s"], step["spilled_mb"], step["shuffle_mb"]) == (0.5, 6.0, 10.0)
