"""build_graph end to end: real samples, generated snapshots with known dirt, idempotence, kills."""

import gzip
import json
import os
import subprocess
import sys
import textwrap

import pyarrow.parquet as pq
import pytest

from citeflow.artifacts import ArtifactStore
from citeflow.config import RunConfig, apply_overrides
from citeflow.jobs import build_graph
from tests.conftest import TEST_SPARK_OVERRIDES

pytestmark = pytest.mark.slow


def config(snapshot, corpus, artifacts, *overrides):
    base = RunConfig(snapshot=snapshot, corpus=str(corpus), artifacts=str(artifacts))
    return apply_overrides(base, [*TEST_SPARK_OVERRIDES, *overrides])


def read(manifest, table):
    return pq.read_table(manifest.table_path(table))


def test_real_s2orc_sample(spark, shared_data, tmp_path):
    m = build_graph.run(config("s2orc-sample", shared_data / "s2orc" / "metadata_sample.jsonl", tmp_path))
    # 1,000 real records, 3,107 outbound citations: a random sample of 136M papers
    # has almost no internal edges; the 4 that point inside are self-citations.
    assert m.tables["papers"]["rows"] == 1000
    assert m.tables["citations"]["rows"] == 0
    assert m.metrics["rejected"] == {"citation.cited_not_in_corpus": 3103, "citation.self_citation": 4}
    assert m.metrics["papers_without_abstract"] == 512  # the sample's README: 488 have an abstract
    papers = read(m, "papers").to_pydict()
    i = papers["corpus_id"].index(77490025)
    assert papers["title"][i] == "State of external ocular muscles in strabismus of different duration"
    assert papers["mag_id"][i] == "2426173123" and papers["fields_of_study"][i] == ["Medicine"]
    assert len(set(papers["corpus_id"])) == len(papers["corpus_id"])  # one row per corpus id (in no set order)


def test_real_s2ag_sample(spark, shared_data, tmp_path):
    m = build_graph.run(config("s2ag-sample", shared_data / "s2ag", tmp_path))
    assert m.metrics["format"] == "s2ag"
    assert m.tables["papers"]["rows"] == 100
    cites = [json.loads(line) for line in open(shared_data / "s2ag" / "citations-sample.jsonl")]
    null_ids = sum(1 for c in cites if c["citingcorpusid"] is None or c["citedcorpusid"] is None)
    assert m.metrics["rejected"]["citation.null_id"] == null_ids == 17
    # the samples are independent draws: no citation has both ends among the 100 papers
    assert m.tables["citations"]["rows"] == 0
    assert sum(v for k, v in m.metrics["rejected"].items() if k.startswith("citation.")) == len(cites)
    papers = read(m, "papers").to_pydict()
    i = papers["corpus_id"].index(223588394)
    assert papers["doi"][i] == "10.3760/CMA.J.ISSN.2095-1485.2006.01.019"
    assert papers["fields_of_study"][i] == ["Education", "Psychology"]
    assert papers["year"][i] == 2006


@pytest.mark.parametrize("fmt", ["s2orc", "s2ag"])
def test_counts_match_the_dirt_the_generator_injected(fmt, spark, tmp_path, request):
    snap, truth = request.getfixturevalue(f"generated_{fmt}")
    counts = truth["counts"]
    m = build_graph.run(config(f"gen-{fmt}", snap / "corpus", tmp_path))
    rejected = m.metrics["rejected"]
    assert m.tables["papers"]["rows"] == counts["papers"]
    assert m.tables["citations"]["rows"] == counts["citations"]
    assert rejected.get("paper.duplicate_paper", 0) == counts["duplicate_records"]
    assert rejected.get("citation.self_citation", 0) == counts["self_citations"]
    assert rejected.get("citation.duplicate_citation", 0) == counts["duplicate_citations"]
    assert rejected.get("citation.cited_not_in_corpus", 0) == counts["external_citations"]
    assert m.metrics["papers_without_abstract"] == counts["papers_without_abstract"]
    assert m.metrics["papers_without_title"] == counts["papers_without_title"]
    if fmt == "s2orc":
        assert rejected.get("paper.malformed_json", 0) == counts["malformed_lines"]
        # nothing lost: every line is a paper or a rejected paper row
        assert (
            m.tables["papers"]["rows"] + sum(v for k, v in rejected.items() if k.startswith("paper."))
            == counts["lines"]
        )
    else:
        by_dataset = counts["malformed_lines_by_dataset"]
        assert rejected.get("paper.malformed_json", 0) == by_dataset["papers"]
        assert rejected.get("abstract.malformed_json", 0) == by_dataset["abstracts"]
        assert rejected.get("citation.malformed_json", 0) == by_dataset["citations"]
        assert rejected.get("citation.null_id", 0) == counts["null_id_citations"]
        assert rejected.get("citation.citing_not_in_corpus", 0) == counts["citing_not_in_corpus"]
    # every kept edge joins two kept papers
    ids = set(read(m, "papers").column("corpus_id").to_pylist())
    edges = read(m, "citations").to_pydict()
    assert set(edges["citing"]) <= ids and set(edges["cited"]) <= ids
    assert len(set(zip(edges["citing"], edges["cited"], strict=True))) == len(edges["citing"])
    assert (tmp_path / f"gen-{fmt}" / "build_graph" / m.version / "degree_distribution.png").stat().st_size > 1000


def test_edges_match_the_files_recomputed_independently(spark, generated_s2orc, tmp_path):
    """Recompute SciNCL's edge set with plain json over the shards and compare."""
    snap, _ = generated_s2orc
    records = {}
    for path in sorted((snap / "corpus").rglob("*.jsonl.gz")):
        for line in gzip.open(path, "rt"):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            old = records.get(rec["paper_id"])
            if old is None or len(old.get("outbound_citations") or []) < len(rec.get("outbound_citations") or []):
                records[rec["paper_id"]] = rec
    expected = {
        (int(p), int(c)) for p, r in records.items() for c in (r["outbound_citations"] or []) if c in records and c != p
    }
    m = build_graph.run(config("gen-edges", snap / "corpus", tmp_path))
    edges = read(m, "citations").to_pydict()
    assert set(zip(edges["citing"], edges["cited"], strict=True)) == expected


def test_rerun_is_a_no_op_and_a_changed_setting_is_a_new_version(spark, shared_data, tmp_path):
    corpus = shared_data / "s2orc" / "metadata_sample.jsonl"
    first = build_graph.run(config("rerun", corpus, tmp_path))
    before = sorted(p for p in (tmp_path / "rerun").rglob("*") if p.is_file())
    mtimes = [p.stat().st_mtime_ns for p in before]
    again = build_graph.run(config("rerun", corpus, tmp_path, "build_graph.output_files=3"))
    assert again.skipped and again.version == first.version  # output_files is not part of the version
    assert [p.stat().st_mtime_ns for p in before] == mtimes

    inbound = build_graph.run(config("rerun", corpus, tmp_path, "build_graph.citations_from=inbound"))
    assert not inbound.skipped and inbound.version != first.version
    store = ArtifactStore(str(tmp_path))
    assert {m.version for m in store.list_versions("rerun", "build_graph")} == {first.version, inbound.version}
    assert store.read_manifest("rerun", "build_graph", first.version).tables == first.tables  # untouched


def test_a_run_killed_before_its_manifest_is_not_trusted(shared_data, tmp_path):
    """A process killed after writing all data but before the manifest leaves nothing readable."""
    corpus = shared_data / "s2orc" / "metadata_sample.jsonl"
    script = textwrap.dedent(f"""
        import os
        from citeflow.artifacts import ArtifactStore
        from citeflow.config import RunConfig, apply_overrides
        from citeflow.jobs import build_graph
        ArtifactStore.commit = lambda self, manifest: os._exit(137)  # SIGKILL-like: no cleanup runs
        cfg = apply_overrides(RunConfig(snapshot="killed", corpus={str(corpus)!r}, artifacts={str(tmp_path)!r}),
                              {TEST_SPARK_OVERRIDES!r})
        build_graph.run(cfg)
    """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert done.returncode == 137, done.stderr[-3000:]
    store = ArtifactStore(str(tmp_path))
    (half,) = store.incomplete_versions("killed", "build_graph")
    assert (tmp_path / "killed" / "build_graph" / half / "papers").is_dir()  # data was there...
    assert store.list_versions("killed", "build_graph") == []  # ...but nobody trusts it

    done = subprocess.run(
        [sys.executable, "-m", "citeflow.jobs.cli", "artifacts", "--snapshot", "killed", "--artifacts", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "no artifacts for snapshot 'killed'" in done.stderr

    rebuilt = build_graph.run(config("killed", corpus, tmp_path))
    assert rebuilt.version == half and not rebuilt.skipped
    assert store.incomplete_versions("killed", "build_graph") == []
    assert rebuilt.tables["papers"]["rows"] == 1000
