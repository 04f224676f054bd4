"""filter_leakage end to end on a generated snapshot whose SciDocs mapping is known per id."""

import json
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from citeflow.artifacts import ArtifactStore
from citeflow.config import RunConfig, apply_overrides
from citeflow.errors import CiteflowError
from citeflow.jobs import filter_leakage
from citeflow.jobs.filter_leakage.audit import LeakageError, audit_no_benchmark_papers
from citeflow.tables import read_table
from tests.conftest import TEST_SPARK_OVERRIDES

pytestmark = pytest.mark.slow
LOCAL = pafs.LocalFileSystem()


def config(snap, artifacts, *overrides, paper_ids=True, snapshot="leak"):
    base = RunConfig(
        snapshot=snapshot,
        corpus=str(snap / "corpus"),
        scidocs=str(snap / "scidocs"),
        paper_ids=str(snap / "paper-ids") if paper_ids else "",
        artifacts=str(artifacts),
    )
    return apply_overrides(base, [*TEST_SPARK_OVERRIDES, *overrides])


@pytest.fixture(scope="module")
def excluded(generated_s2orc, tmp_path_factory, spark):
    snap, truth = generated_s2orc
    artifacts = tmp_path_factory.mktemp("leak")
    return snap, truth, artifacts, filter_leakage.run(config(snap, artifacts))


def test_each_id_is_mapped_the_way_the_generator_intended(excluded):
    snap, truth, _, m = excluded
    expected = {r["id"]: r for r in map(json.loads, open(snap / "scidocs_truth.jsonl"))}
    got = pq.read_table(m.table_path("benchmark_ids")).to_pylist()
    by_id = {r["id"]: r for r in got}
    assert set(by_id) == set(expected)
    for sid, want in expected.items():
        row = by_id[sid]
        assert (row["method"], row["corpus_id"]) == (want["method"], want["corpus_id"]), sid
        if want["method"] is None:
            assert row["unmapped_reason"] == ("ambiguous_title" if want["ambiguous_title"] else "no_match")
    sd = truth["scidocs"]
    assert m.metrics["benchmark_ids"] == sd["ids"]
    assert m.metrics["mapped_by"]["sha"] == sd["mapped_by_sha"]
    assert m.metrics["mapped_by"]["title"] == sd["mapped_by_title_only"]
    assert m.metrics["unmapped"] == sd["unmappable"]
    assert m.metrics["mode"] == "exclude"


def test_filtered_graph_holds_no_benchmark_paper(excluded):
    snap, truth, _, m = excluded
    mapped = {r["corpus_id"] for r in map(json.loads, open(snap / "scidocs_truth.jsonl")) if r["corpus_id"]}
    papers = read_table(LOCAL, m.table_path("papers"))
    cites = pq.read_table(m.table_path("citations"))
    assert not mapped & set(papers["corpus_id"].to_pylist())
    assert not mapped & (set(cites["citing"].to_pylist()) | set(cites["cited"].to_pylist()))
    # removed counts recomputed from the unfiltered graph
    upstream = next(i for i in m.inputs if i.get("stage") == "build_graph")
    full = pq.read_table(upstream["path"] + "/citations").to_pydict()
    touching = sum(1 for a, b in zip(full["citing"], full["cited"], strict=True) if a in mapped or b in mapped)
    assert m.metrics["removed_citations"] == touching
    assert m.metrics["removed_papers"] == len(mapped)
    assert m.metrics["papers"] == truth["counts"]["papers"] - len(mapped)
    # plain Parquet: a plain reader reads the kept papers and no more, from the graph's own files where a file
    # holds no benchmark paper (here every file holds some) and from files written again without them
    graph = {f.name: f.stat().st_ino for f in Path(upstream["path"], "papers").glob("*.parquet")}
    assert pq.read_table(m.table_path("papers")).num_rows == papers.num_rows == m.tables["papers"]["rows"]
    assert all(graph.get(f.name) != f.stat().st_ino for f in Path(m.table_path("papers")).iterdir())
    # degrees are those of the filtered graph, one row per kept paper
    degrees = pq.read_table(m.table_path("degrees")).to_pydict()
    assert sorted(degrees["corpus_id"]) == sorted(papers["corpus_id"].to_pylist())
    counted_out, counted_in = {}, {}
    for a, b in zip(cites["citing"].to_pylist(), cites["cited"].to_pylist(), strict=True):
        counted_out[a] = counted_out.get(a, 0) + 1
        counted_in[b] = counted_in.get(b, 0) + 1
    assert all(
        (o, i) == (counted_out.get(p, 0), counted_in.get(p, 0))
        for p, o, i in zip(degrees["corpus_id"], degrees["out_degree"], degrees["in_degree"], strict=True)
    )


def test_audit_passes_on_filtered_ids_and_fails_on_leaked_ones(excluded):
    _, _, _, m = excluded
    clean = read_table(LOCAL, m.table_path("papers"))["corpus_id"]
    assert audit_no_benchmark_papers(clean, m, what="filtered papers")["benchmark_hits"] == 0
    leaked = pq.read_table(m.table_path("benchmark_ids")).column("corpus_id").drop_null()[:3]
    with pytest.raises(LeakageError, match="benchmark paper"):
        audit_no_benchmark_papers(pc.unique(leaked).to_pylist() + [1], m, what="training triplets")


def test_report_only_keeps_the_graph_and_says_so(excluded, spark):
    snap, truth, artifacts, m = excluded
    r = filter_leakage.run(config(snap, artifacts, "filter_leakage.mode=report_only"))
    assert r.version != m.version and r.metrics["mode"] == "report_only"
    assert r.metrics["removed_papers"] == 0 and r.metrics["removed_citations"] == 0
    assert r.tables["papers"]["rows"] == truth["counts"]["papers"]
    leaked = read_table(LOCAL, r.table_path("papers"))["corpus_id"]
    assert audit_no_benchmark_papers(leaked, r, what="papers")["benchmark_hits"] > 0  # counted, not fatal


def test_too_many_unmapped_ids_fail_with_a_clear_message(excluded, spark):
    snap, _, artifacts, _ = excluded
    with pytest.raises(CiteflowError) as err:
        filter_leakage.run(
            config(snap, artifacts, "filter_leakage.match_titles=false", paper_ids=False, snapshot="no-ids")
        )
    message = str(err.value)
    assert "map to no corpus id, above the limit of 5.0%" in message
    assert "scidocs/cite/test:" in message and "--paper-ids" in message


def test_rerun_is_skipped(excluded, spark):
    snap, _, artifacts, m = excluded
    again = filter_leakage.run(config(snap, artifacts))
    assert again.skipped and again.version == m.version


def test_contents_are_pinned(excluded, generated_s2ag, tmp_path, spark):
    """build_graph and filter_leakage write the same versions and rows as before issue 21's optimisations.

    The pin (tests/e2e/pinned_contents.json) was written by commit 2449bbc's Spark stages on these same
    generated snapshots; row order and file layout are not compared, every row, column type and metric is.
    One metric joined the pin later, without a table changing: filter_leakage's `paper_ids` (its account
    of the paper-ids lines, 3,450 lines that all give a pair).
    """
    from citeflow.jobs import build_graph
    from tests.e2e import contents as C

    snap, _, artifacts, leak = excluded
    pinned = C.check_input("s2orc", snap)
    upstream = build_graph.run(config(snap, artifacts))
    assert upstream.skipped  # built by the fixture's filter_leakage run
    problems = C.compare(C.stage_contents(upstream), pinned["build_graph"])
    problems += C.compare(C.stage_contents(leak), pinned["filter_leakage"])

    s2ag, _ = generated_s2ag
    pinned_s2ag = C.check_input("s2ag", s2ag)
    built = build_graph.run(config(s2ag, tmp_path, snapshot="pin-s2ag"))
    problems += [f"s2ag: {p}" for p in C.compare(C.stage_contents(built), pinned_s2ag["build_graph"])]
    assert problems == []


def test_every_paper_ids_line_is_counted(excluded, spark, tmp_path, caplog):
    """No paper-ids line is dropped uncounted: the manifest's `paper_ids` accounts for every line of the
    table, the lines without a (sha, corpus id) pair by reason, and the log says so; the dirt changes no
    mapping."""
    import dataclasses
    import gzip
    import shutil

    snap, _, artifacts, m = excluded
    lines = sum(1 for f in (snap / "paper-ids").glob("*.jsonl.gz") for _ in gzip.open(f, "rt"))
    assert m.metrics["paper_ids"] == {"lines": lines, "pairs": lines, "unusable": {}}

    dirty = tmp_path / "paper-ids"
    shutil.copytree(snap / "paper-ids", dirty)
    sha = "ab" * 20
    (dirty / "paper-ids_dirty.jsonl").write_text(
        "\n".join(
            [
                "{not json",
                "",
                '{"sha": "short", "corpusid": 5}',
                f'{{"sha": "{sha}", "corpusid": "x"}}',
                f'{{"sha": "{sha}", "corpusid": 5, "primary": "yes"}}',  # a bad field beside a usable pair
            ]
        )
        + "\n"
    )
    with caplog.at_level("WARNING", logger="citeflow"):
        r = filter_leakage.run(dataclasses.replace(config(snap, artifacts), paper_ids=str(dirty)))
    assert r.version != m.version
    assert r.metrics["paper_ids"] == {
        "lines": lines + 5,
        "pairs": lines + 1,
        "unusable": {"blank_line": 1, "malformed_json": 1, "no_sha_or_corpus_id": 2},
    }
    assert f"4 of {lines + 5} paper-ids lines give no (sha, corpus id) pair" in caplog.text
    assert r.metrics["mapped_by"] == m.metrics["mapped_by"] and r.metrics["unmapped"] == m.metrics["unmapped"]


@pytest.fixture(scope="module")
def planted(excluded, tmp_path_factory):
    """A SciRepEval task file and a BEIR folder, each holding one paper of the graph that is no SciDocs paper
    (the SciRepEval one by corpus id, the BEIR one by its sha in the paper-ids table) and one id the graph lacks;
    the graph's papers and edges read with pyarrow, and the benchmark papers of the generator's truth."""
    import gzip

    snap, _, artifacts, m = excluded
    upstream = next(i for i in m.inputs if i.get("stage") == "build_graph")
    papers = pq.read_table(upstream["path"] + "/papers", columns=["corpus_id", "title"]).to_pylist()
    edges = pq.read_table(upstream["path"] + "/citations").to_pylist()
    scidocs = {r["corpus_id"] for r in map(json.loads, open(snap / "scidocs_truth.jsonl")) if r["corpus_id"]}
    degree: dict[int, int] = {}
    for e in edges:
        for end in (e["citing"], e["cited"]):
            degree[end] = degree.get(end, 0) + 1
    # two papers of the graph with edges, no SciDocs paper and no SciDocs neighbour
    near_scidocs = {e["cited"] for e in edges if e["citing"] in scidocs} | {
        e["citing"] for e in edges if e["cited"] in scidocs
    }
    free = sorted(p["corpus_id"] for p in papers if degree.get(p["corpus_id"], 0) >= 2)
    free = [p for p in free if p not in scidocs and p not in near_scidocs]
    p_scirepeval, p_beir = free[0], free[-1]
    sha = next(
        r["sha"]
        for f in sorted((snap / "paper-ids").glob("*.jsonl.gz"))
        for r in map(json.loads, gzip.open(f, "rt"))
        if r["corpusid"] == p_beir
    )
    root = tmp_path_factory.mktemp("suites")
    task = root / "fos_planted.json"
    task.write_text(
        json.dumps(
            [
                {"corpus_id": p_scirepeval, "title": "x", "abstract": "", "labels": [1], "split": "test"},
                {"corpus_id": 999_999_999_999, "title": "y", "abstract": "", "labels": [0], "split": "train"},
            ]
        )
    )
    beir = root / "scifact"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(json.dumps({"_id": sha, "title": "a document", "text": "t"}) + "\n")
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q-1", "text": "a query that is no paper"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text(f"query-id\tcorpus-id\tscore\nq-1\t{sha}\t1\n")
    overrides = [f"filter_leakage.scirepeval={task}", f"filter_leakage.beir={beir}"]
    return {
        "snap": snap,
        "artifacts": artifacts,
        "overrides": overrides,
        "scidocs": scidocs & {p["corpus_id"] for p in papers},
        "scirepeval": p_scirepeval,
        "beir": p_beir,
        "papers": {p["corpus_id"] for p in papers},
        "edges": [(e["citing"], e["cited"]) for e in edges],
    }


def touching(edges, ids) -> set:
    return {e for e in edges if e[0] in ids or e[1] in ids}


def test_a_paper_of_each_suite_is_found_reported_in_its_suite_and_removed(planted, spark):
    m = filter_leakage.run(config(planted["snap"], planted["artifacts"], *planted["overrides"]))
    report = {(r["suite"], r["task"], r["split"]): r for r in m.metrics["report"]}
    edges, p1, p2 = planted["edges"], planted["scirepeval"], planted["beir"]
    # SciRepEval: the planted paper by corpus id (and one id the graph lacks)
    row = report[("scirepeval", "fos_planted", "test")]
    assert (row["total"], row["mapped_corpus_id"], row["in_snapshot"], row["removed_papers"]) == (1, 1, 1, 1)
    assert row["removed_edges"] == len(touching(edges, {p1}))
    assert report[("scirepeval", "fos_planted", "train")]["in_snapshot"] == 0
    suite = m.metrics["suites"]["scirepeval"]
    assert (suite["total"], suite["mapped"], suite["removed_papers"]) == (2, 2, 1)
    # BEIR: the document by its sha; the query is text that maps to nothing and is counted unmapped
    corpus = report[("beir", "scifact", "corpus")]
    assert (corpus["total"], corpus["mapped_sha"], corpus["removed_papers"]) == (1, 1, 1)
    assert corpus["removed_edges"] == len(touching(edges, {p2}))
    assert report[("beir", "scifact", "queries")]["unmapped"] == 1
    assert report[("beir", "scifact", "test:corpus")]["removed_papers"] == 1
    # SciDocs: its rows as before, in a suite of their own
    assert m.metrics["suites"]["scidocs"]["removed_papers"] == len(planted["scidocs"])
    # overall: every paper and edge of all three suites, each once
    every = planted["scidocs"] | {p1, p2}
    assert m.metrics["removed_papers"] == report[("all", "all", "all")]["removed_papers"] == len(every)
    assert m.metrics["removed_citations"] == report[("all", "all", "all")]["removed_edges"]
    assert m.metrics["removed_citations"] == len(touching(edges, every))
    kept = set(pq.read_table(m.table_path("papers"))["corpus_id"].to_pylist())
    cites = pq.read_table(m.table_path("citations")).to_pylist()
    assert not kept & every and kept == planted["papers"] - every
    assert not {c["citing"] for c in cites} & every and not {c["cited"] for c in cites} & every


def test_strict_also_removes_the_papers_one_citation_away_with_exact_costs(planted, spark):
    m = filter_leakage.run(
        config(planted["snap"], planted["artifacts"], *planted["overrides"], "filter_leakage.strict=true")
    )
    edges, p1 = planted["edges"], planted["scirepeval"]
    bench = planted["scidocs"] | {p1, planted["beir"]}
    near = {b for a, b in edges if a in bench} | {a for a, b in edges if b in bench}
    near -= bench
    clean = [e for e in edges if e[0] not in bench and e[1] not in bench]
    assert m.metrics["strict"] == {"papers": len(near), "edges": len(touching(clean, near))}
    assert near and m.metrics["strict"]["edges"] > 0
    assert m.metrics["removed_papers"] == len(bench | near)
    assert m.metrics["removed_citations"] == len(touching(edges, bench | near))
    # the SciRepEval paper's own neighbourhood, counted in its suite's rows
    own = ({b for a, b in edges if a == p1} | {a for a, b in edges if b == p1}) - bench
    row = m.metrics["suites"]["scirepeval"]
    assert (row["one_hop_papers"], row["one_hop_edges"]) == (len(own), len(touching(clean, own)))
    kept = set(pq.read_table(m.table_path("papers"))["corpus_id"].to_pylist())
    assert kept == planted["papers"] - bench - near
    degrees = pq.read_table(m.table_path("degrees"))["corpus_id"].to_pylist()
    assert sorted(degrees) == sorted(kept)


def test_a_stage_is_shared_as_a_dataset_that_datasets_loads(excluded, tmp_path, capsys, monkeypatch, spark):
    """`citeflow export-dataset`: every table a configuration of the card that `datasets` loads whole, the
    main table the default, the card's examples running as printed; the card naming the release, the lineage
    and the audit per suite; a user's mistake is one line and exit 2."""
    import datasets

    from citeflow.jobs.cli import main
    from tests.cards import run_code_blocks

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    snap, _, artifacts, m = excluded
    filter_leakage.run(config(snap, artifacts, "filter_leakage.mode=report_only"))  # a second version
    out = tmp_path / "leak-free"
    args = ["export-dataset", "--snapshot", "leak", "--stage", "filter_leakage", "--artifacts", str(artifacts)]
    assert main([*args, "--version", m.version, "--out", str(out)]) == 0
    cache = str(tmp_path / "cache")
    for table in m.tables:
        loaded = datasets.load_dataset(str(out), table, split="train", cache_dir=cache)
        assert loaded.num_rows == m.tables[table]["rows"], table
        assert loaded.column_names == [c["name"] for c in m.tables[table]["schema"]], table
    assert datasets.load_dataset(str(out), split="train", cache_dir=cache).num_rows == m.tables["citations"]["rows"]
    # the parquet builder on the whole folder never gives a part of it as the dataset: tables of different
    # columns fail loudly
    with pytest.raises(Exception, match="generating the dataset"):
        datasets.load_dataset("parquet", data_dir=str(out), cache_dir=cache)
    card = (out / "README.md").read_text()
    outputs = run_code_blocks(card, tmp_path)
    assert f"num_rows: {m.tables['citations']['rows']}" in outputs[0]
    assert f"[({m.tables['citations']['rows']},)]" in outputs[1]
    upstream = next(i for i in m.inputs if i.get("stage") == "build_graph")
    assert f"`{m.version}`" in card and f"`{upstream['version']}`" in card and "snapshot leak" in card
    scidocs = m.metrics["suites"]["scidocs"]
    assert f"| scidocs | {scidocs['total']:,} | {scidocs['mapped']:,} |" in card
    assert 'config_name: "papers"' in card
    # the export's files are its own: a user editing one leaves the committed version intact
    edited = next((out / "data").glob("papers-*.parquet"))
    assert edited.stat().st_nlink == 1
    with open(edited, "ab") as fh:
        fh.write(b"x")
    assert ArtifactStore(str(artifacts)).verify(m) == []
    # --overwrite replaces a previous export, and only that
    assert main([*args, "--version", m.version, "--out", str(out), "--overwrite"]) == 0
    users = tmp_path / "users"
    users.mkdir()
    (users / "keep.txt").write_text("keep")

    capsys.readouterr()
    for extra, message in (
        # the module's other tests add versions of their own: two at least, this test's and the fixture's
        (["--out", str(tmp_path / "other")], "versions: name one with --version"),
        (["--version", "zz", "--out", str(tmp_path / "other")], "--version must be a version id"),
        (["--version", "0" * 16, "--out", str(tmp_path / "other")], f"has no version {'0' * 16}"),
        (["--version", m.version, "--out", str(out)], "is not empty"),
        (["--version", m.version, "--out", str(users), "--overwrite"], "was not written by a citeflow export"),
        (["--version", m.version, "--out", str(users / "keep.txt")], "is a file"),
        (["--version", m.version, "--tables", "nope", "--out", str(tmp_path / "other")], "has no table 'nope'"),
    ):
        assert main([*args, *extra]) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (extra, err)
    assert not (tmp_path / "other").exists() and (users / "keep.txt").read_text() == "keep"
    assert (
        main(["export-dataset", "--snapshot", "../x", "--stage", "filter_leakage", "--out", str(tmp_path / "o")]) == 2
    )
