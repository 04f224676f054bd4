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
from citeflow.jobs.filter_leakage import mapping as M
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


def shared_title_papers(snap, graph: str) -> dict[str, set[int]]:
    """Per SciDocs id the generator made unmappable with a title several corpus papers have (`ambiguous_title` in
    its truth), the graph's papers with that title: filter_leakage maps the id to all of them (`title_shared`,
    up to `max_shared_matches`), folding titles as the generator's truth folds them."""
    from citeflow.text import fold_title

    titles: dict[str, str] = {}
    for path in sorted((snap / "scidocs").glob("paper_metadata_*.json")):
        titles.update({k: v.get("title") for k, v in json.loads(path.read_text()).items()})
    folded: dict[str, set[int]] = {}
    for row in pq.read_table(graph + "/papers", columns=["corpus_id", "title"]).to_pylist():
        if row["title"]:
            folded.setdefault(fold_title(row["title"]), set()).add(row["corpus_id"])
    truth = map(json.loads, open(snap / "scidocs_truth.jsonl"))
    return {r["id"]: folded[fold_title(titles[r["id"]])] for r in truth if r["ambiguous_title"]}


def graph_of(m) -> str:
    return next(i for i in m.inputs if i.get("stage") == "build_graph")["path"]


@pytest.fixture(scope="module")
def excluded(generated_s2orc, tmp_path_factory, spark):
    snap, truth = generated_s2orc
    artifacts = tmp_path_factory.mktemp("leak")
    return snap, truth, artifacts, filter_leakage.run(config(snap, artifacts))


def test_each_id_is_mapped_the_way_the_generator_intended(excluded):
    """Each SciDocs id maps as the generator's truth says; an id it made unmappable with a generic title that
    several corpus papers share maps to every one of them (when in doubt, leave it out)."""
    snap, truth, _, m = excluded
    expected = {r["id"]: r for r in map(json.loads, open(snap / "scidocs_truth.jsonl"))}
    shared = shared_title_papers(snap, graph_of(m))
    got: dict[str, set] = {}
    for row in pq.read_table(m.table_path("benchmark_ids")).to_pylist():
        got.setdefault(row["id"], set()).add((row["method"], row["corpus_id"], row["unmapped_reason"]))
    assert set(got) == set(expected)
    for sid, want in expected.items():
        if sid in shared:
            assert got[sid] == {("title_shared", p, None) for p in shared[sid]}, sid
        elif want["method"] is None:
            assert got[sid] == {(None, None, "no_match")}, sid
        else:
            assert got[sid] == {(want["method"], want["corpus_id"], None)}, sid
    sd = truth["scidocs"]
    assert 2 <= min(map(len, shared.values())) and len(shared) == sd["unmappable_with_ambiguous_title"] >= 1
    assert m.metrics["benchmark_ids"] == sd["ids"]
    assert m.metrics["mapped_by"]["sha"] == sd["mapped_by_sha"]
    assert m.metrics["mapped_by"]["title"] == sd["mapped_by_title_only"]
    assert m.metrics["mapped_by"]["title_shared"] == len(shared)
    assert m.metrics["unmapped"] == sd["unmappable"] - len(shared)
    assert m.metrics["doubts"] == {
        "title_shared": {
            "ids": len(shared),
            "papers": len(set().union(*shared.values())),
            "examples": sorted(shared)[:5],
        }
    }
    assert m.metrics["mode"] == "exclude"


def test_filtered_graph_holds_no_benchmark_paper(excluded):
    snap, truth, _, m = excluded
    mapped = {r["corpus_id"] for r in map(json.loads, open(snap / "scidocs_truth.jsonl")) if r["corpus_id"]}
    mapped |= set().union(*shared_title_papers(snap, graph_of(m)).values())
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
    of the paper-ids lines, 3,450 lines that all give a pair). filter_leakage's part was pinned again at stage
    version 6, which maps the two SciDocs ids whose generic title three papers share to all three: the tables
    differ from stage 5's by those ids' rows and those papers alone (checked when it was re-pinned).
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


def test_the_shuffled_joins_write_the_pinned_contents(generated_s2orc, generated_s2ag, tmp_path, spark):
    """With `spark.broadcast_rows=0` and Spark's own broadcasts off, build_graph joins every side by a shuffle, as
    it does above 5M papers, and writes the pinned tables of both formats: the path a corpus of S2ORC's size takes,
    which the broadcast copies of every smaller run never enter. Its shuffle partitions are one per
    `spark.shuffle_input_mb` of the corpus (1 MiB here: 2 for either snapshot, where the set count is 1)."""
    import math

    from citeflow.jobs import build_graph
    from citeflow.snapshot import discover
    from tests.e2e import contents as C

    shared = {
        key: spark.conf.get(key) for key in ("spark.sql.autoBroadcastJoinThreshold", "spark.sql.shuffle.partitions")
    }
    problems = []
    try:
        for fmt, snap in (("s2orc", generated_s2orc[0]), ("s2ag", generated_s2ag[0])):
            pinned = C.check_input(fmt, snap)
            shuffled = ["spark.broadcast_rows=0", "spark.conf=spark.sql.autoBroadcastJoinThreshold=-1"]
            sized = ["spark.shuffle_partitions=1", "spark.shuffle_input_mb=1"]
            cfg = config(snap, tmp_path, *shuffled, *sized, snapshot=f"shuffled-{fmt}")
            got = C.stage_contents(build_graph.run(cfg))
            problems += [f"{fmt}: {p}" for p in C.compare(got, pinned["build_graph"])]
            want = math.ceil(sum(discover(str(snap / "corpus"), fmt).sizes.values()) / 2**20)
            assert want > 1 and spark.conf.get("spark.sql.shuffle.partitions") == str(want), fmt
            assert spark.conf.get("spark.sql.autoBroadcastJoinThreshold") == "-1"  # the build ran without them
    finally:
        for key, value in shared.items():  # the session is shared with the worker's later tests
            spark.conf.set(key, value)
    assert problems == []


def test_a_corpus_with_no_doubt_gives_the_tables_of_the_stage_before_doubts_were_resolved(tmp_path, spark):
    """On a generated snapshot where no benchmark id is in doubt (no generic titles: no title several papers share,
    no id with two titles, no sha with two corpus ids), filter_leakage writes the tables and metrics that stage
    version 5, before any doubt was resolved toward exclusion, wrote (pinned by it: `s2orc-unambiguous`), and its
    new counts are all zero."""
    from citeflow.jobs import build_graph
    from tests.e2e import contents as C

    snap = C.generate("s2orc-unambiguous", tmp_path / "snapshot")
    pinned = C.check_input("s2orc-unambiguous", snap)
    cfg = config(snap, tmp_path / "artifacts", snapshot="pin-s2orc-unambiguous")
    problems = C.compare(C.stage_contents(build_graph.run(cfg)), pinned["build_graph"])
    leak = filter_leakage.run(cfg)
    problems += C.compare(C.stage_contents(leak), pinned["filter_leakage"])
    assert problems == []
    assert leak.metrics["doubts"] == {} and leak.metrics["paper_ids"]["conflicts"] == {"shas": 0, "lines": 0}
    overall = leak.metrics["report"][-1]
    assert overall["too_common"] == 0 and set(leak.metrics["mapped_by"]) == {f"{m}" for m in M.METHODS}
    assert all(overall[f"mapped_{m}"] == 0 for m in M.DOUBTFUL)


def test_every_paper_ids_line_is_counted(excluded, spark, tmp_path, caplog):
    """No paper-ids line is dropped uncounted: the manifest's `paper_ids` accounts for every line of the
    table, the lines without a (sha, corpus id) pair by reason, and the log says so; the dirt changes no
    mapping."""
    import dataclasses
    import gzip
    import shutil

    snap, _, artifacts, m = excluded
    lines = sum(1 for f in (snap / "paper-ids").glob("*.jsonl.gz") for _ in gzip.open(f, "rt"))
    none = {"shas": 0, "lines": 0}
    assert m.metrics["paper_ids"] == {"lines": lines, "pairs": lines, "unusable": {}, "conflicts": none}

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
        "conflicts": none,
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
    scidocs |= set().union(*shared_title_papers(snap, upstream["path"]).values())
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


@pytest.fixture(scope="module")
def in_doubt(excluded, tmp_path_factory):
    """The generated SciDocs and paper-ids with inputs that disagree, as an operator meets them: one SciDocs id
    with two titles (its paper-ids line gone; its view_cite_read entry keeps the title of its own paper P, and
    the same id added to mag_mesh's metadata with the title of another paper X), and one sha on two paper-ids
    lines (a line naming another paper Y appended). The generator's two ids with a title three papers share
    are there too. The papers named, read from the graph (titles as the graph holds them)."""
    import gzip
    import shutil

    from citeflow.text import fold_title

    snap, _, _, m = excluded
    root = tmp_path_factory.mktemp("in-doubt")
    shutil.copytree(snap / "scidocs", root / "scidocs")
    graph = pq.read_table(graph_of(m) + "/papers", columns=["corpus_id", "title"]).to_pylist()
    titles = {r["corpus_id"]: r["title"] for r in graph}
    counts: dict = {}
    for title in titles.values():
        counts[fold_title(title)] = counts.get(fold_title(title), 0) + 1
    truth = {r["id"]: r for r in map(json.loads, open(snap / "scidocs_truth.jsonl"))}
    benchmark = {r["corpus_id"] for r in truth.values() if r["corpus_id"]}
    view = json.loads((root / "scidocs" / "paper_metadata_view_cite_read.json").read_text())
    mag = json.loads((root / "scidocs" / "paper_metadata_mag_mesh.json").read_text())
    own = {
        i: fold_title(titles.get(truth[i]["corpus_id"])) for i in view if truth[i]["method"] == "sha" and i not in mag
    }
    two_titles = next(
        i for i in sorted(own) if own[i] and own[i] == fold_title(view[i]["title"]) and counts[own[i]] == 1
    )
    p = truth[two_titles]["corpus_id"]
    free = [c for c in sorted(titles) if c not in benchmark and titles[c] and counts[fold_title(titles[c])] == 1]
    x, y = free[0], free[1]
    mag[two_titles] = {"paper_id": two_titles, "title": titles[x], "abstract": ""}
    (root / "scidocs" / "paper_metadata_mag_mesh.json").write_text(json.dumps(mag))
    two_ids = next(i for i in sorted(truth) if truth[i]["method"] == "sha" and i != two_titles)
    lines = [line for f in sorted((snap / "paper-ids").glob("*.jsonl.gz")) for line in gzip.open(f, "rt")]
    kept = [line for line in lines if json.loads(line)["sha"] != two_titles]
    assert len(kept) == len(lines) - 1
    kept.append(json.dumps({"sha": two_ids, "corpusid": y}) + "\n")
    (root / "paper-ids").mkdir()
    with gzip.open(root / "paper-ids" / "paper-ids_0.jsonl.gz", "wt") as fh:
        fh.writelines(kept)
    shared = shared_title_papers(snap, graph_of(m))
    return {
        "snap": snap,
        "root": root,
        "two_titles": (two_titles, p, x),
        "two_ids": (two_ids, truth[two_ids]["corpus_id"], y),
        "shared": shared,
    }


def doubt_config(case, artifacts, *overrides):
    import dataclasses

    snap, root = case["snap"], case["root"]
    return dataclasses.replace(
        config(snap, artifacts, *overrides), scidocs=str(root / "scidocs"), paper_ids=str(root / "paper-ids")
    )


def test_inputs_that_disagree_exclude_every_paper_they_name_counted_and_warned(in_doubt, excluded, spark, caplog):
    """When in doubt, leave it out: the id with two titles maps to both titles' papers (`title_conflict`), the sha
    with two corpus ids to both (`sha_conflict`, its two lines counted), the title three papers share to all three
    (`title_shared`); every paper named leaves the graph; the report, the manifest and one warning line per kind
    say so, with examples. `report_only` reports the same."""
    _, _, artifacts, _ = excluded
    (two_titles, p, x), (two_ids, x2, y) = in_doubt["two_titles"], in_doubt["two_ids"]
    shared = in_doubt["shared"]
    with caplog.at_level("WARNING", logger="citeflow"):
        m = filter_leakage.run(doubt_config(in_doubt, artifacts))
    rows: dict[str, set] = {}
    for r in pq.read_table(m.table_path("benchmark_ids")).to_pylist():
        rows.setdefault(r["id"], set()).add((r["corpus_id"], r["method"], r["in_snapshot"]))
    assert rows[two_titles] == {(p, "title_conflict", True), (x, "title_conflict", True)}
    assert rows[two_ids] == {(x2, "sha_conflict", True), (y, "sha_conflict", True)}
    for sid, papers in shared.items():
        assert rows[sid] == {(c, "title_shared", True) for c in papers}
    named = {p, x, x2, y, *set().union(*shared.values())}
    kept = set(pq.read_table(m.table_path("papers"))["corpus_id"].to_pylist())
    assert not named & kept
    doubts = m.metrics["doubts"]
    assert doubts["title_conflict"] == {"ids": 1, "matched": 1, "papers": 2, "examples": [two_titles]}
    assert doubts["sha_conflict"] == {"ids": 1, "papers": 2, "examples": [two_ids]}
    assert doubts["title_shared"]["ids"] == len(shared)
    assert m.metrics["paper_ids"]["conflicts"] == {"shas": 1, "lines": 2}
    overall = m.metrics["report"][-1]
    assert (overall["mapped_title_conflict"], overall["mapped_sha_conflict"]) == (1, 1)
    assert overall["mapped_title_shared"] == len(shared)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    for kind, example in (("title_conflict", two_titles), ("sha_conflict", two_ids), ("title_shared", None)):
        said = [w for w in warnings if f"({kind}); e.g. " in w]
        assert len(said) == 1 and (example is None or example in said[0]), (kind, warnings)
    assert "1 benchmark ids have several titles" in " ".join(warnings)
    assert "(2 lines)" in next(w for w in warnings if "sha_conflict" in w)

    report_only = filter_leakage.run(doubt_config(in_doubt, artifacts, "filter_leakage.mode=report_only"))
    assert (
        report_only.metrics["doubts"] == doubts
        and report_only.metrics["report"][-1]["removed_papers"] == (overall["removed_papers"])
    )
    assert report_only.metrics["removed_papers"] == 0


def test_a_title_more_papers_share_than_the_cap_stays_unmapped_and_counts(in_doubt, excluded, spark, caplog):
    """`filter_leakage.max_shared_matches=2`: the generic title three papers share is too common to say which; its
    ids stay unmapped with their own reason, counted toward the unmapped share, and warned about; their papers stay
    in the graph."""
    snap, truth, artifacts, _ = excluded
    shared = in_doubt["shared"]
    with caplog.at_level("WARNING", logger="citeflow"):
        m = filter_leakage.run(config(snap, artifacts, "filter_leakage.max_shared_matches=2"))
    assert m.metrics["unmapped_reasons"]["title_too_common"] == len(shared)
    assert m.metrics["unmapped"] == truth["scidocs"]["unmappable"]
    assert m.metrics["doubts"] == {"title_too_common": {"ids": len(shared), "examples": sorted(shared)}}
    assert m.metrics["report"][-1]["too_common"] == len(shared)
    kept = set(pq.read_table(m.table_path("papers"))["corpus_id"].to_pylist())
    assert set().union(*shared.values()) <= kept
    said = [r.getMessage() for r in caplog.records if "(title_too_common)" in r.getMessage()]
    assert len(said) == 1 and "shared by more than 2 corpus papers" in said[0]
