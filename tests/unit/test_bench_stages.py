"""The benches of the Spark stages run as their docstrings say, on a tiny generated corpus, so that they cannot rot
unseen: `bench/bench_stages.py` (citeflow beside DuckDB), `bench/duckdb_stages.py` (DuckDB's twin of build_graph
and filter_leakage, whose tables must equal citeflow's for the comparison to be honest), `bench/bench_scale.py`
(every stage that grows with the corpus, and DuckDB's S2AG twin) and `bench/spark_breakdown.py` (where a Spark
stage's time goes).

Each bench runs as a subprocess of its own session (`tests/support/bench.py`): a run past its time is killed with the
`citeflow run` processes and Spark JVMs it started.
"""

import gzip
import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from citeflow.jobs.filter_leakage.mapping import STEPS
from citeflow.text import fold_title
from tests.conftest import TEST_SPARK_OVERRIDES
from tests.support.bench import finite, run_bench, run_command

REPO = Path(__file__).resolve().parents[2]
SPARK_SETTINGS = [arg for item in TEST_SPARK_OVERRIDES for arg in ("--set", item)]
pytestmark = [pytest.mark.slow, pytest.mark.jvm]


def citeflow(*args: str, timeout: float = 240) -> str:
    return run_command(f"citeflow {args[0]}", [sys.executable, "-m", "citeflow.jobs.cli", *args], timeout)


@pytest.mark.timeout(420)
def test_the_stages_bench_times_citeflow_beside_duckdb_with_the_same_counts(tmp_path):
    """The smallest run: 300 papers, one repeat. It still starts four Spark drivers, about a minute: two untimed
    warm-up runs on the 1,000-paper snapshot (`warm_up`, which no option skips), then citeflow's build_graph and
    filter_leakage, each in a process of its own."""
    out = tmp_path / "out"
    run_bench(
        "bench_stages.py",
        *("--sizes", "300", "--snapshots", str(tmp_path / "snaps"), "--out", str(out)),
        *("--citeflow-args", " ".join(SPARK_SETTINGS)),
        timeout=360,
    )
    report = json.loads((out / "stages.json").read_text())
    (row,) = report["results"]
    assert (row["papers"], row["format"]) == (300, "s2orc") and row["counts_match_generator"] is True
    for stage in ("build_graph", "filter_leakage"):
        s = row[stage]
        for engine in ("citeflow", "duckdb"):
            e = s[engine]
            assert len(e["seconds"]) == 1 and e["median_s"] == e["seconds"][0] > 0, (stage, engine, e)
            assert all(finite(e[k]) for k in ("peak_rss_gib", "load")), e
        assert s["ratio"] == round(s["citeflow"]["median_s"] / s["duckdb"]["median_s"], 2)
        assert s["counts_agree"] is True, s
    truth = json.loads((tmp_path / "snaps" / "snap-s2orc-300-seed5" / "generator.json").read_text())
    assert row["build_graph"]["metrics"]["citations"] == truth["counts"]["citations"]
    assert row["filter_leakage"]["metrics"]["mapped"] > 0
    table = (out / "stages.md").read_text().splitlines()
    rows = [line for line in table if line.startswith("| 300 |")]
    assert [r.split(" | ")[1] for r in rows] == ["build_graph", "filter_leakage"]
    assert all(r.endswith("| True |") for r in rows), rows


def _extra_metadata(corpus: Path) -> dict[str, dict]:
    """SciDocs metadata entries that map by each step of the cascade that the generated benchmark leaves unused:
    a corpus id (one of the corpus, one of none), a DOI (spelled in upper case, with spaces), a PubMed id, an
    arXiv id and a title (re-cased, punctuated: it folds to a corpus title that no other paper has), each of a
    paper that no other line of the corpus shares it with; a title no paper has (unmapped: no_match); and the
    generator's generic title, which two papers at least share (both named)."""
    records = _records(corpus)
    entries: dict[str, dict] = {}

    def once(key):
        counts = Counter(key(r) for r in records if key(r))
        return next(r for r in records if key(r) and counts[key(r)] == 1)

    def folded(r):  # ASCII titles only: upper() of some other letters does not fold back to the same title
        title = r.get("title") or ""
        return fold_title(title) if title.isascii() else None

    entries[once(lambda r: r["paper_id"])["paper_id"]] = {"title": None}
    entries["999999999999"] = {"title": None}  # digits: a corpus id, of no paper of this corpus
    for n, (field, spelled) in enumerate((("doi", "DOI"), ("pubmed_id", "PubMed"), ("arxiv_id", "ArXiv"))):
        record = once(lambda r, field=field: (r.get(field) or "").strip().lower())
        value = record[field].upper() if field == "doi" else record[field]
        entries[f"{n + 1:040x}"] = {"title": None, spelled: f"  {value} "}
    record = once(folded)
    entries[f"{4:040x}"] = {"title": f"  {record['title'].upper()}?! "}
    entries[f"{5:040x}"] = {"title": "A paper that no corpus holds, at all"}
    entries[f"{6:040x}"] = {"title": "Editorial"}  # the generator's generic title, two papers' at least
    return entries


def _records(corpus: Path) -> list[dict]:
    """The corpus's paper records with a corpus id (the generator's malformed lines left out)."""
    records = []
    for path in sorted(corpus.rglob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(record, dict) and str(record.get("paper_id") or "").isdigit():
                    records.append(record)
    return records


def _second_titles(corpus: Path, first: dict[str, dict]) -> dict[str, dict]:
    """Another metadata file that gives the id titled after a corpus paper in `first` a second title, another
    paper's (the two titles disagree: both papers are named)."""
    records = [r for r in _records(corpus) if r.get("title") and r["title"].isascii()]
    counts = Counter(fold_title(r["title"]) for r in records)
    taken = fold_title(first[f"{4:040x}"]["title"])
    other = next(r for r in records if counts[fold_title(r["title"])] == 1 and fold_title(r["title"]) != taken)
    return {f"{4:040x}": {"title": other["title"]}}


def _rows(table_path: Path, columns: list[str]) -> list[tuple]:
    table = pq.read_table(table_path, columns=columns)
    return sorted(zip(*(table[c].to_pylist() for c in columns), strict=True), key=repr)


@pytest.mark.timeout(300)
def test_the_duckdb_twin_writes_the_tables_citeflows_stages_write(tmp_path):
    """DuckDB's twin against citeflow itself, the reference: on a 300-paper snapshot whose SciDocs folder also
    names papers by corpus id, DOI, PubMed id, arXiv id and title, the twin's build_graph and filter_leakage
    tables (every row and column) equal those of `citeflow run --until filter_leakage`. About 25 s, most of it
    citeflow's Spark run."""
    snap = tmp_path / "snap"
    citeflow("generate", "--papers", "300", "--seed", "5", "--out", str(snap))
    scidocs = tmp_path / "scidocs"
    shutil.copytree(snap / "scidocs", scidocs)
    extra = _extra_metadata(snap / "corpus")
    (scidocs / "paper_metadata_extra.json").write_text(json.dumps(extra))
    (scidocs / "paper_metadata_extra_more.json").write_text(json.dumps(_second_titles(snap / "corpus", extra)))
    # a sha given a second corpus id by a line of its own (both are named)
    paper_ids = tmp_path / "paper-ids"
    shutil.copytree(snap / "paper-ids", paper_ids)
    sha = next(r["id"] for r in map(json.loads, open(snap / "scidocs_truth.jsonl")) if r["method"] == "sha")
    (paper_ids / "paper-ids_extra.jsonl").write_text(json.dumps({"sha": sha, "corpusid": 999}) + "\n")
    artifacts = tmp_path / "artifacts"
    inputs = ["--corpus", str(snap / "corpus"), "--scidocs", str(scidocs), "--paper-ids", str(paper_ids)]
    citeflow(
        "run",
        "--snapshot",
        "twin",
        "--artifacts",
        str(artifacts),
        *inputs,
        "--until",
        "filter_leakage",
        *SPARK_SETTINGS,
    )
    (graph,) = (artifacts / "twin" / "build_graph").glob("*/_manifest.json")
    (leak,) = (artifacts / "twin" / "filter_leakage").glob("*/_manifest.json")
    metrics = json.loads(leak.read_text())["metrics"]
    # the comparison covers every step of the cascade, the ids in doubt, and an id no step maps
    covered = (*STEPS, "sha_conflict", "title_shared", "title_conflict")
    assert all(metrics["mapped_by"][m] > 0 for m in covered), metrics["mapped_by"]
    assert metrics["unmapped_reasons"].get("no_match", 0) > 0, metrics["unmapped_reasons"]

    out = run_bench(
        "duckdb_stages.py",
        "build_graph",
        "--corpus",
        str(snap / "corpus"),
        "--out",
        str(tmp_path / "dd-graph"),
        timeout=120,
    )
    built = json.loads(out.splitlines()[-1])
    assert built == {k: json.loads(graph.read_text())["tables"][k]["rows"] for k in ("papers", "citations")}
    out = run_bench(
        "duckdb_stages.py",
        *("filter_leakage", "--graph", str(graph.parent), "--scidocs", str(scidocs)),
        *("--paper-ids", str(paper_ids), "--out", str(tmp_path / "dd-leak")),
        timeout=120,
    )
    counts = json.loads(out.splitlines()[-1])
    assert counts == {k: metrics[k] for k in ("benchmark_ids", "mapped", "papers", "citations")}

    papers = pq.read_schema(next((graph.parent / "papers").glob("*.parquet"))).names
    graph_tables = {
        "papers": papers,
        "citations": ["citing", "cited"],
        "degrees": ["corpus_id", "out_degree", "in_degree"],
    }
    for ours, theirs in ((graph.parent, tmp_path / "dd-graph"), (leak.parent, tmp_path / "dd-leak")):
        for name, columns in graph_tables.items():
            assert _rows(theirs / name, columns) == _rows(ours / name, columns), (ours.parent.name, name)
    columns = ["suite", "id", "task", "split", "corpus_id", "method", "in_snapshot", "unmapped_reason"]
    twin = _rows(tmp_path / "dd-leak" / "benchmark_ids.parquet", columns)
    assert twin == _rows(leak.parent / "benchmark_ids", columns)
    assert len(twin) == json.loads(leak.read_text())["tables"]["benchmark_ids"]["rows"]


@pytest.mark.timeout(420)
def test_the_scale_bench_runs_every_corpus_sized_stage_and_duckdbs_twin_writes_citeflows_tables(tmp_path):
    """The smallest run: an S2AG release of 1,000 papers and its derived successor (at 300 the graph left after
    filter_leakage is too small a pool for the stage's k_pos=25), PBG 1 epoch of 8 dimensions, no class-archive
    warm-up. Every step is a process of its own; about two minutes. DuckDB's S2AG twin is held to citeflow's
    tables row by row here (the S2ORC twin in the test above): the bench compares only counts at scale."""
    out, snaps, work, img = (tmp_path / name for name in ("out", "snaps", "work", "img"))
    run_bench(
        "bench_scale.py",
        *("--sizes", "1000", "--snapshots", str(snaps), "--epochs", "1", "--dim", "8", "--out", str(out)),
        *("--no-warm-up", "--keep", "--workdir", str(work), "--plots", str(img)),
        timeout=360,
    )
    result = json.loads((out / "scale.json").read_text())
    (row,) = result["sizes"]
    rel = snaps / "scale-s2ag-1000" / "releases"
    truth = json.loads((rel / "2024-01-01" / "generator.json").read_text())
    assert (row["papers"], row["citations"]) == (1000, truth["counts"]["citations"])
    assert list(row["stages"]) == ["build_graph", "filter_leakage", "embed_graph", "mine_triplets", "diff"]
    for stage, m in row["stages"].items():
        assert finite(m["seconds"]) and m["seconds"] > 0 and finite(m["peak_rss_gib"]), (stage, m)
        assert m["us_per_paper"] == round(m["seconds"] / 1000 * 1e6, 2), (stage, m)
        assert m["artifact_mib"] > 0 and m["metrics"], stage
        # each role's peak is part of the tree's (they need not peak at once, so their sum may exceed it)
        assert 0 < max(m["peak_by_role_gib"].values()) <= m["peak_rss_gib"], (stage, m)
    for stage in ("build_graph", "filter_leakage", "diff"):
        assert row["stages"][stage]["peak_by_role_gib"]["jvm"] > 0, stage  # a Spark stage's JVM is counted apart
    assert row["stages"]["embed_graph"]["peak_by_role_gib"].get("jvm", 0) == 0
    assert row["stages"]["build_graph"]["metrics"]["citations"] <= truth["counts"]["citations"]
    diff = row["stages"]["diff"]
    assert diff["from_diff"] and set(diff["stage_seconds"]) == {"build_graph", "filter_leakage"}
    assert "embed_graph.pbg=hogwild_delay=0" in row["settings"] and "mine_triplets.num_queries=100" in row["settings"]
    for stage in ("build_graph", "filter_leakage"):
        twin = row["duckdb"][stage]
        assert twin["counts_agree"] is True and twin["ratio"] == round(
            row["stages"][stage]["seconds"] / twin["seconds"], 2
        )
    # DuckDB's S2AG twin wrote citeflow's tables, every row and column
    arts = work / "artifacts-1000" / "2024-01-01"
    for stage, twin in (("build_graph", "duckdb-1000-build_graph"), ("filter_leakage", "duckdb-1000-filter_leakage")):
        (manifest,) = (arts / stage).glob("*/_manifest.json")
        papers = pq.read_schema(next((manifest.parent / "papers").glob("*.parquet"))).names
        for name, columns in (
            ("papers", papers),
            ("citations", ["citing", "cited"]),
            ("degrees", ["corpus_id", "out_degree", "in_degree"]),
        ):
            assert _rows(work / twin / name, columns) == _rows(manifest.parent / name, columns), (stage, name)
    assert result["checks"] == []  # one size: nothing to compare
    table = (out / "scale.md").read_text()
    stages = [line.split(" | ")[2] for line in table.splitlines() if line.startswith("| 1,000 |")]
    assert stages[:4] == ["build_graph", "filter_leakage", "embed_graph", "mine_triplets"]
    assert stages[4].startswith("diff path: bg "), stages
    assert "DuckDB's counts equal citeflow's at every size: True." in table
    assert sorted(p.name for p in img.iterdir()) == ["scale-cost.png", "scale-memory.png"]


def test_the_breakdown_bench_names_every_spark_job_by_its_step_and_accounts_for_the_wall_time(tmp_path):
    """`bench/spark_breakdown.py` on 300 papers: every Spark job of both stages carries the step its stage named
    (`citeflow.spark.engine.session.step`), and the parts of each process's wall time fit in it."""
    snap = tmp_path / "snap"
    citeflow("generate", "--papers", "300", "--seed", "5", "--out", str(snap))
    out = tmp_path / "out"
    run_bench(
        "spark_breakdown.py",
        *("--snapshot", str(snap), "--out", str(out), "--citeflow-args", " ".join(SPARK_SETTINGS)),
        timeout=360,
    )
    report = json.loads((out / "spark_breakdown.json").read_text())
    assert list(report["stages"]) == ["build_graph", "filter_leakage"]
    for stage, b in report["stages"].items():
        assert b["jobs"] > 0 and all(name.startswith(f"{stage}: ") for name in b["steps"]), (stage, b["steps"])
        assert sum(s["jobs"] for s in b["steps"].values()) == b["jobs"]
        outside = b["before_spark_s"] + b["spark_start_to_first_job_s"] + b["after_last_job_s"]
        assert all(v >= 0 for v in (outside, b["driver_between_jobs_s"])) and outside < b["wall_s"], b
        # both read from every task's metrics (their names: test_bench_without_spark.py)
        assert all(s["gc_s"] >= 0 and s["spilled_mb"] >= 0 for s in b["steps"].values()), b["steps"]
    assert "build_graph: parsing papers" in report["stages"]["build_graph"]["steps"]
    assert "filter_leakage: mapping benchmark ids" in report["stages"]["filter_leakage"]["steps"]
    assert "| before Spark" in (out / "spark_breakdown.md").read_text()
