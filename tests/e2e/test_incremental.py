"""build_graph from a release diff equals a full build of the release; filter_leakage follows.

Three dated S2AG releases: a generated one and two derived from it (`citeflow generate --derive-from`, which
writes each release's diff). The oracle is build_graph's full build of the same release from its shards
(`build_graph.diffs=off`), compared as order-free table digests (tests/e2e/contents.py) and manifest counts:
- one diff: release 2 merged from release 1's build;
- a chain of two diffs (release 3 from release 1's build, release 2 never built);
- a diff whose start release is not built: a full build, with one log line, the same version as a full build;
- dirt in the diff's files: quarantined and counted like dirt in shards, the graph unchanged.
filter_leakage on a graph merged from a diff equals filter_leakage on the full build, table for table and
metric for metric, whether it keys every paper (no filter_leakage of the base release) or carries the base
release's `paper_keys` over (two releases in a row, the second over keys that the first merged).

Which parts must match (README "Backfilling a release from its diff"): the papers, citations, degrees and
degree_histogram tables, every manifest count (papers, citations, degree statistics, text flags, rejected rows
by reason), and the rejected table row for row except `source`, which names the file a line was read from: a
diff file for the lines the diff brought.
"""

import gzip
import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from citeflow.artifacts import ArtifactStore
from citeflow.jobs import build_graph, filter_leakage
from citeflow.tables import read_table
from tests.conftest import TEST_SPARK_OVERRIDES
from tests.e2e.conftest import release_config
from tests.e2e.contents import table_digest
from tests.support.readers import assert_tables_read_whole, training_ids, truth_benchmark_ids

pytestmark = pytest.mark.slow
R1, R2, R3 = "2024-01-01", "2024-02-01", "2024-03-01"
# Metrics that say how a version was made rather than what it holds.
HOW = {"input_files", "from_diff", "supersedes"}
LEAKAGE_HOW = {"paper_keys", "paper_id_lines"}


@pytest.fixture(scope="module")
def releases(generated_s2ag, tmp_path_factory):
    from citeflow.synthcorpus.derive import DeriveConfig
    from citeflow.synthcorpus.derive import run as derive

    snap, _ = generated_s2ag
    root = tmp_path_factory.mktemp("releases")
    shutil.copytree(snap, root / R1)
    derive(DeriveConfig(derive_from=str(root / R1), out=str(root / R2), seed=3))
    derive(DeriveConfig(derive_from=str(root / R2), out=str(root / R3), seed=4, added=60, removed=20, changed=40))
    return root


def cfg(root, release, artifacts, *overrides):
    return release_config(root, release, artifacts, [*TEST_SPARK_OVERRIDES, *overrides])


def rows_without_source(path):
    table = read_table(pafs.LocalFileSystem(), path).drop(["source"])
    return sorted(
        hashlib.sha256(json.dumps(r, sort_keys=True, default=bytes.hex).encode()).hexdigest() for r in table.to_pylist()
    )


def assert_same_build(got, want):
    """Two build_graph manifests hold the same graph (see the module docstring)."""
    for table in ("papers", "citations", "degrees", "degree_histogram"):
        assert table_digest(got.table_path(table)) == table_digest(want.table_path(table)), table
    assert rows_without_source(got.table_path("rejected")) == rows_without_source(want.table_path("rejected"))
    assert {k: v for k, v in got.metrics.items() if k not in HOW} == {
        k: v for k, v in want.metrics.items() if k not in HOW
    }
    assert {t: s["rows"] for t, s in got.tables.items()} == {t: s["rows"] for t, s in want.tables.items()}


def assert_written_over(merged, base):
    """`papers`, `citations`, `degrees` and `rejected` of `merged` are written over `base`'s
    (spark/output.py `write_over`) as plain Parquet: the data files the manifest names as linked are the base's
    own files (hard links), every other file of the table is the version's own, the rows the diff changed are in
    files of their own, and a plain Parquet reader reads exactly the manifest's rows."""
    for table in ("papers", "citations", "degrees", "rejected"):
        files = merged.metrics["from_diff"]["files"][table]
        old = {f.name: os.stat(f).st_ino for f in Path(base.table_path(table)).glob("*.parquet")}
        new = {f.name: os.stat(f).st_ino for f in Path(merged.table_path(table)).iterdir()}
        assert sorted(new) == sorted(files["linked"] + files["kept"] + files["new"]), table  # data files only
        assert all(new[n] == old[n] for n in files["linked"]), table
        assert not set(new) & (set(old) - set(files["linked"])), table  # no base file but those linked
        assert files["new"], table
        assert pq.read_table(merged.table_path(table)).num_rows == merged.tables[table]["rows"], table


@pytest.fixture(scope="module")
def full(releases, tmp_path_factory):
    """The oracle: full builds of releases 2 and 3 from their shards (and filter_leakage of release 2)."""
    artifacts = tmp_path_factory.mktemp("full")
    out = {}
    for release in (R2, R3):
        config = cfg(releases, release, artifacts, "build_graph.diffs=off")
        out[release] = (build_graph.run(config), filter_leakage.run(config))
    return out


@pytest.fixture(scope="module")
def built_r1(releases, tmp_path_factory):
    """An artifact root holding release 1's build_graph (built once; each test works on a linked copy)."""
    artifacts = tmp_path_factory.mktemp("r1")
    return artifacts, build_graph.run(cfg(releases, R1, artifacts))


def root_with_r1(built_r1, tmp_path):
    """A fresh artifact root with release 1's build (hard links: no stage writes into a finished version)."""
    artifacts = tmp_path / "artifacts"
    shutil.copytree(built_r1[0], artifacts, copy_function=os.link)
    return artifacts, built_r1[1]


def test_one_diff_equals_the_full_build_and_filter_leakage_follows(releases, full, built_r1, tmp_path, caplog):
    artifacts, base = root_with_r1(built_r1, tmp_path)
    assert "from_diff" not in base.metrics  # release 1 has no diff: built from its shards
    with caplog.at_level(logging.INFO, logger="citeflow"):
        merged = build_graph.run(cfg(releases, R2, artifacts))
    assert merged.metrics["from_diff"]["base"] == {"snapshot": R1, "version": base.version}
    assert merged.metrics["from_diff"]["steps"] == [[R1, R2]]
    assert f"building from the diff {R1} -> {R2}" in caplog.text
    # the statistics counted from the base's and the changed rows' (equal to the full build's: assert_same_build)
    assert f"degree histogram and counts: base version {base.version}'s, with the rows this version" in caplog.text
    truth = json.loads((releases / R2 / "generator.json").read_text())
    assert merged.tables["papers"]["rows"] == truth["counts"]["papers"]
    assert merged.tables["citations"]["rows"] == truth["counts"]["citations"]
    assert_same_build(merged, full[R2][0])
    assert merged.version != full[R2][0].version  # content address of (base version, diff), not of the shards
    assert_written_over(merged, base)

    # release 1's filter_leakage, then release 1's graph built again under the same version (as a deleted and
    # rebuilt or a repaired version is: files of other names): release 2's filter_leakage carries release 1's
    # keys over all the same, since it keys the papers of the graph's new files and keeps the keys of the
    # papers of its other files, whatever the base's files are named now
    keyed_r1 = filter_leakage.run(cfg(releases, R1, artifacts))
    shutil.rmtree(artifacts / R1 / "build_graph" / base.version)
    rebuilt = build_graph.run(cfg(releases, R1, artifacts))
    assert (rebuilt.version, rebuilt.skipped) == (base.version, False)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="citeflow"):
        leak = filter_leakage.run(cfg(releases, R2, artifacts))
    assert leak.metrics["paper_keys"]["carried_from"] == {"snapshot": R1, "version": keyed_r1.version}
    # the paper-ids lines: release 1's with the diff's paper-ids records applied, not the table parsed
    applied = leak.metrics["paper_id_lines"]["from_diff"]
    assert applied["base"]["snapshot"] == R1 and applied["steps"] == [[R1, R2]] and applied["files"]["new"] == 1
    truth = json.loads((releases / R2 / "generator.json").read_text())["diff"]["diffs"]["datasets"]["paper-ids"]
    assert applied["keys_named"] == truth["added"] + truth["changed"] + truth["deleted"] > 0
    assert (
        leak.tables["paper_id_lines"]["rows"]
        == truth_rows(releases, R2)
        == full[R2][1].tables["paper_id_lines"]["rows"]
    )
    assert_same_leakage(leak, full[R2][1])

    # run again: the same version, skipped (idempotent); nothing rebuilt
    again = build_graph.run(cfg(releases, R2, artifacts))
    assert (again.version, again.skipped) == (merged.version, True)

    # as a user reads them: every table of every version whole with pyarrow, pandas and DuckDB, and no
    # benchmark paper of the generator's truth in the kept graph built over the diff's graph
    assert assert_tables_read_whole(artifacts) == 2 * (len(build_graph.TABLES) + len(filter_leakage.TABLES))
    found = training_ids(artifacts)
    benchmark = truth_benchmark_ids(releases / R2)
    for key in (f"filter_leakage/{leak.version}/papers", f"filter_leakage/{leak.version}/citations"):
        assert found[key] and not found[key] & benchmark, key

    # the base version deleted: the merged version's linked files are its own, whole and verified
    shutil.rmtree(artifacts / R1 / "build_graph" / base.version)  # this test's copy (`base` is the fixture's)
    assert ArtifactStore(str(artifacts)).verify(merged) == []
    assert_same_build(merged, full[R2][0])


def assert_same_leakage(got, want):
    """filter_leakage `got` (on a graph merged from a diff) holds the rows and counts of `want` (on the full
    build): every table (`paper_keys` too) as its readers read it, every metric but how the keys were made."""
    assert sorted(got.tables) == sorted(want.tables)
    for table in got.tables:
        assert table_digest(got.table_path(table)) == table_digest(want.table_path(table)), table
    assert {k: v for k, v in got.metrics.items() if k not in LEAKAGE_HOW} == {
        k: v for k, v in want.metrics.items() if k not in LEAKAGE_HOW
    }
    assert want.metrics["paper_keys"] == {"carried_from": None}
    assert want.metrics["paper_id_lines"]["from_diff"] is None  # the oracle parsed its paper-ids table


def truth_rows(releases, release) -> int:
    """The generator's count of a release's paper-ids lines."""
    return json.loads((releases / release / "generator.json").read_text())["counts"]["paper_ids_rows"]


def test_a_chain_of_two_diffs_equals_the_full_build(releases, full, built_r1, tmp_path):
    artifacts, base = root_with_r1(built_r1, tmp_path)
    # release 2 is not built here: the chain from R1
    merged = build_graph.run(cfg(releases, R3, artifacts))
    assert merged.metrics["from_diff"]["base"] == {"snapshot": R1, "version": base.version}
    assert merged.metrics["from_diff"]["steps"] == [[R1, R2], [R2, R3]]
    assert_same_build(merged, full[R3][0])
    assert_written_over(merged, base)
    # release 3's filter_leakage on that graph, its paper-ids lines from release 1's through the chain
    first = filter_leakage.run(cfg(releases, R1, artifacts))
    early = filter_leakage.run(cfg(releases, R3, artifacts))
    assert early.metrics["paper_id_lines"]["from_diff"]["base"] == {"snapshot": R1, "version": first.version}
    # once release 2 is built too, release 3 keeps its versions (pinned: each is what its inputs, release 1's
    # versions and the chain's diffs, still give); asked to rebase, it is built from the nearest start: release
    # 2's build, one step
    middle = build_graph.run(cfg(releases, R2, artifacts))
    second = filter_leakage.run(cfg(releases, R2, artifacts))
    assert build_graph.run(cfg(releases, R3, artifacts)).version == merged.version
    assert filter_leakage.run(cfg(releases, R3, artifacts)).version == early.version
    stepwise = build_graph.run(cfg(releases, R3, artifacts, "store.rebase=true"))
    assert stepwise.metrics["from_diff"]["base"] == {"snapshot": R2, "version": middle.version}
    assert stepwise.metrics["supersedes"]["versions"] == [merged.version]
    assert stepwise.metrics["from_diff"]["steps"] == [[R2, R3]]
    assert stepwise.version != merged.version
    assert_same_build(stepwise, full[R3][0])
    assert_written_over(middle, base)
    assert_written_over(stepwise, middle)  # onto a base written over another: its links and its own files

    # filter_leakage of each release in turn: releases 2 and 3 carry the keys of the release before over,
    # release 3 (on its rebased graph) onto keys that release 2 wrote over release 1's
    third = filter_leakage.run(cfg(releases, R3, artifacts))
    assert second.metrics["paper_keys"]["carried_from"] == {"snapshot": R1, "version": first.version}
    assert third.metrics["paper_keys"]["carried_from"] == {"snapshot": R2, "version": second.version}
    for leak, before in ((second, first), (third, second)):
        keys = leak.tables["paper_keys"]
        assert 0 < leak.metrics["paper_keys"]["papers_keyed"] < keys["rows"]  # the papers the diff wrote
        assert pq.read_table(leak.table_path("paper_keys")).num_rows == keys["rows"]
        # the paper-ids lines of the release before, its diff applied (release 3: onto release 2's merged lines)
        applied = leak.metrics["paper_id_lines"]["from_diff"]
        assert applied["base"] == {"snapshot": before.snapshot, "version": before.version}
        assert applied["files"]["new"] == 1
    assert first.metrics["paper_id_lines"]["from_diff"] is None  # release 1 has no diff
    assert_same_leakage(second, full[R2][1])
    assert_same_leakage(third, full[R3][1])
    assert assert_tables_read_whole(artifacts) > 0


def test_a_diff_from_a_release_not_built_falls_back_to_a_full_build(releases, full, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="citeflow"):
        m = build_graph.run(cfg(releases, R2, tmp_path / "artifacts"))
    assert "from_diff" not in m.metrics
    lines = [r.getMessage() for r in caplog.records if "building from the shards" in r.getMessage()]
    assert len(lines) == 1 and R1 in lines[0]
    assert m.version == full[R2][0].version  # the same inputs as the full build: the same version
    assert_same_build(m, full[R2][0])


def _rewrite_gz(path, extra: bytes):
    data = gzip.decompress(path.read_bytes()) + extra
    path.write_bytes(gzip.compress(data))


def copied_releases(releases, tmp_path):
    """Releases 1 and 2 copied under `tmp_path` (a test's own to make dirty); the copy's root and the folder
    of release 2's diff step."""
    root = tmp_path / "releases"
    shutil.copytree(releases / R1, root / R1)
    shutil.copytree(releases / R2, root / R2)
    return root, root / R2 / "diffs" / R1 / "to" / R2 / f"{R1}__{R2}"


def test_dirt_in_a_diff_is_quarantined_and_counted(releases, full, built_r1, tmp_path):
    root, step = copied_releases(releases, tmp_path)
    _rewrite_gz(step / "papers" / "updates_0.jsonl.gz", b'{"corpusid": "12x", "title": "bad id"}\n{not json\n')
    _rewrite_gz(step / "citations" / "deletes_0.jsonl.gz", b"[1, 2]\n")
    _rewrite_gz(step / "abstracts" / "updates_0.jsonl.gz", b'{"corpusid": "", "abstract": "no id"}\n')
    artifacts, base = root_with_r1(built_r1, tmp_path)  # release 1 copied elsewhere: same content, same version
    assert build_graph.run(cfg(root, R1, artifacts)).version == base.version
    m = build_graph.run(cfg(root, R2, artifacts))
    assert "from_diff" in m.metrics
    want = full[R2][0]
    for table in ("papers", "citations", "degrees", "degree_histogram"):
        assert table_digest(m.table_path(table)) == table_digest(want.table_path(table)), table
    extra = {"paper.invalid_id": 1, "paper.malformed_json": 1, "citation.malformed_json": 1, "abstract.missing_id": 1}
    expected = dict(want.metrics["rejected"])
    for key, n in extra.items():
        expected[key] = expected.get(key, 0) + n
    assert m.metrics["rejected"] == expected
    rejected = read_table(pafs.LocalFileSystem(), m.table_path("rejected")).to_pylist()
    from_diff = {"updates_0.jsonl.gz", "deletes_0.jsonl.gz"}
    sources = {
        (r["kind"], r["reason"], r["source"])
        for r in rejected
        if r["source"] in from_diff and r["reason"] in ("invalid_id", "malformed_json", "missing_id")
    }
    assert sources == {
        ("paper", "invalid_id", "updates_0.jsonl.gz"),
        ("paper", "malformed_json", "updates_0.jsonl.gz"),
        ("citation", "malformed_json", "deletes_0.jsonl.gz"),
        ("abstract", "missing_id", "updates_0.jsonl.gz"),
    }


def _gz_lines(path) -> list[bytes]:
    return gzip.decompress(path.read_bytes()).splitlines()


def _corpus_id(line: bytes):
    """A shard line's `corpusid`, or None for the generator's dirt (no JSON object, no id)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record.get("corpusid") if isinstance(record, dict) else None


def _typed_wrong(line: bytes) -> bytes:
    """The record with a field of the wrong type beside its readable corpus id (`bad_field_type`)."""
    return json.dumps({**json.loads(line), "externalids": "not an object"}).encode()


def test_a_line_whose_key_reads_but_record_does_not_names_its_key(releases, tmp_path):
    """A paper line whose corpus id reads but a field does not (`bad_field_type`) is its key's record in the
    release: a full build rejects it and holds no paper of that key. The diff path equals it (spark/incremental.py):
    an update line of that kind names its key and is quarantined, a delete line of that kind deletes its key, and
    the base release's line of that kind goes when the diff names its key. Dirty releases 1 and 2 (shards and
    diff alike), release 1 built in full, release 2 from the diff against release 2 built in full."""
    root, step = copied_releases(releases, tmp_path)

    def lines(folder):
        return [(path, line) for path in sorted(folder.glob("*.jsonl.gz")) for line in _gz_lines(path)]

    def by_id(release):  # the ids of one line only (the generator writes duplicates and dirt too)
        found: dict = {}
        for path, line in lines(root / release / "corpus" / "papers"):
            found.setdefault(_corpus_id(line), []).append((path, line))
        return {k: v[0] for k, v in found.items() if k is not None and len(v) == 1}

    r1, r2 = by_id(R1), by_id(R2)
    named = {_corpus_id(line) for _, line in lines(step / "papers")}
    with_abstract = {_corpus_id(line) for r in (R1, R2) for _, line in lines(root / r / "corpus" / "abstracts")}
    # papers the diff does not name, the same line in both releases, without an abstract (a paper that goes
    # while its abstract stays is a known limit of its own: README)
    same = [k for k in r1 if k in r2 and k not in named and k not in with_abstract and r1[k][1] == r2[k][1]]
    k1, k2, k3 = sorted(same, key=str)[:3]

    def replace(path, old: bytes, new: bytes | None):
        lines = _gz_lines(path)
        lines[lines.index(old)] = new
        path.write_bytes(gzip.compress(b"".join(x + b"\n" for x in lines if x is not None)))

    replace(*r2[k1], _typed_wrong(r2[k1][1]))  # release 2's only line of k1 has a bad field
    _rewrite_gz(step / "papers" / "updates_0.jsonl.gz", _typed_wrong(r2[k1][1]) + b"\n")
    replace(*r2[k2], None)  # k2 leaves release 2; its delete line carries a bad field beside its id
    _rewrite_gz(step / "papers" / "deletes_0.jsonl.gz", _typed_wrong(r2[k2][1]) + b"\n")
    _rewrite_gz(r1[k3][0], _typed_wrong(r1[k3][1]) + b"\n")  # release 1 holds a bad line of k3 beside its good one
    _rewrite_gz(step / "papers" / "updates_0.jsonl.gz", r2[k3][1] + b"\n")  # the diff names k3: its good line

    artifacts = tmp_path / "artifacts"
    base = build_graph.run(cfg(root, R1, artifacts))
    assert base.metrics["rejected"]["paper.bad_field_type"] == 1  # k3's bad line
    merged = build_graph.run(cfg(root, R2, artifacts))
    assert merged.metrics["from_diff"]["base"]["version"] == base.version
    want = build_graph.run(cfg(root, R2, tmp_path / "full", "build_graph.diffs=off"))
    assert want.metrics["rejected"]["paper.bad_field_type"] == 1  # k1's line; k3's of release 1 is gone
    ids = {r["corpus_id"] for r in read_table(pafs.LocalFileSystem(), want.table_path("papers")).to_pylist()}
    assert int(k3) in ids and int(k1) not in ids and int(k2) not in ids
    assert_same_build(merged, want)


def test_paper_ids_dirt_in_a_diff_is_counted_and_a_missing_base_parses_the_table(
    releases, full, built_r1, tmp_path, caplog
):
    """filter_leakage applies the paper-ids diff only onto a filter_leakage version of its start release (else
    it parses the table, saying why); a diff's update line that is no JSON object becomes a line of the table,
    counted by reason; a delete line without a sha removes nothing and is counted."""
    root, step = copied_releases(releases, tmp_path)
    _rewrite_gz(step / "paper-ids" / "updates_0.jsonl.gz", b"{not json\n")
    _rewrite_gz(step / "paper-ids" / "deletes_0.jsonl.gz", b'[1]\n{"corpusid": 5}\n')
    artifacts, _ = root_with_r1(built_r1, tmp_path)
    with caplog.at_level(logging.INFO, logger="citeflow"):
        parsed = filter_leakage.run(cfg(root, R2, artifacts))
    assert "holds no filter_leakage version with its paper-ids lines; parsing the paper-ids table" in caplog.text
    assert parsed.metrics["paper_id_lines"]["from_diff"] is None
    for table in parsed.tables:  # the release copied elsewhere: its paths in the metrics differ, not its rows
        assert table_digest(parsed.table_path(table)) == table_digest(full[R2][1].table_path(table)), table
    assert parsed.metrics["paper_ids"] == full[R2][1].metrics["paper_ids"]

    first = filter_leakage.run(cfg(root, R1, artifacts))
    # the release keeps its parsed version until asked to rebase; then the diff is applied onto R1's lines
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="citeflow"):
        assert filter_leakage.run(cfg(root, R2, artifacts)).version == parsed.version
    assert "set store.rebase=true (citeflow run --rebase) to do so" in caplog.text
    applied = filter_leakage.run(cfg(root, R2, artifacts, "store.rebase=true"))
    entry = applied.metrics["paper_id_lines"]["from_diff"]
    assert entry["base"] == {"snapshot": R1, "version": first.version} and applied.version != parsed.version
    assert entry["unusable_deletes"] == {"malformed_json": 1, "no_sha_or_corpus_id": 1}
    want = dict(parsed.metrics["paper_ids"])
    want["lines"] += 1
    want["unusable"] = {**want["unusable"], "malformed_json": want["unusable"].get("malformed_json", 0) + 1}
    assert applied.metrics["paper_ids"] == want
    assert applied.tables["paper_id_lines"]["rows"] == parsed.tables["paper_id_lines"]["rows"] + 1
    assert pq.read_table(applied.table_path("paper_id_lines")).num_rows == applied.tables["paper_id_lines"]["rows"]
    for table in ("benchmark_ids", "leakage_report", "papers", "citations"):
        assert table_digest(applied.table_path(table)) == table_digest(parsed.table_path(table)), table


PBG = [
    "filter_leakage.mode=report_only",
    "embed_graph.dimension=16",
    "embed_graph.num_epochs=10",
    "embed_graph.link_prediction=false",
    "embed_graph.holdout=0",
    "embed_graph.workers=1",
    "embed_graph.batch_size=1000",
    "embed_graph.num_edge_chunks=1",
]


def test_embed_graph_warm_starts_from_the_previous_release(releases, built_r1, tmp_path):
    from citeflow.jobs import embed_graph

    artifacts, _ = root_with_r1(built_r1, tmp_path)
    first = embed_graph.run(cfg(releases, R1, artifacts, *PBG, "embed_graph.warm_start=auto"))
    assert "warm_start" not in first.metrics  # release 1's graph was not built from a diff: cold
    warm = embed_graph.run(cfg(releases, R2, artifacts, *PBG, "embed_graph.warm_start=auto"))
    cold = embed_graph.run(cfg(releases, R2, artifacts, *PBG))
    assert warm.version != cold.version
    assert [i.get("version") for i in warm.inputs][1] == first.version

    old = set(pq.read_table(first.table_path("paper_embeddings")).column("corpus_id").to_pylist())
    new = set(pq.read_table(warm.table_path("paper_embeddings")).column("corpus_id").to_pylist())
    assert warm.metrics["warm_start"] == {
        "snapshot": R1,
        "version": first.version,
        "epochs": 3,  # 30% of 10
        "of_epochs": 10,
        "kept": len(new & old),
        "new": len(new - old),
    }
    log = pq.read_table(warm.table_path("training_log")).to_pylist()
    assert [r["epoch"] for r in log if r["run"] == "mining"] == [1, 2, 3]
    cold_log = pq.read_table(cold.table_path("training_log")).to_pylist()
    assert len([r for r in cold_log if r["run"] == "mining"]) == 10
    # the warm run starts from release 1's embeddings: its first epoch's loss is far below a cold first
    # epoch's (Adagrad starts afresh, so the first steps still move), and after 3 epochs it is about where the
    # cold run ends after 10 (measured: 1.76, 0.57, 0.35 warm; 12.8 ... 0.38 cold)
    warm_losses = [r["loss"] for r in log if r["run"] == "mining"]
    cold_losses = [r["loss"] for r in cold_log if r["run"] == "mining"]
    assert warm_losses[0] < 0.5 * cold_losses[0]
    assert warm_losses[-1] <= cold_losses[-1] * 1.2


def test_a_release_built_before_the_release_it_derives_from_keeps_its_versions(
    releases, built_r1, tmp_path, capsys, caplog, monkeypatch
):
    """A backfill out of order, through `citeflow run` as a user runs it: release 1, then release 3 (whose only
    diff starts at release 2, not built yet: built in full), then release 2 (from release 1's diff), then release
    3 again. Release 3 keeps the one version of each stage it has, saying in one line why the diff 2 -> 3 is not
    taken; `--rebase` builds it from release 2's build, and `citeflow artifacts` names the versions that replaces
    as not current, and why."""
    from citeflow.currency import statuses
    from citeflow.jobs.cli import main

    monkeypatch.setenv("CITEFLOW_LOG_DIR", str(tmp_path / "logs"))
    root = tmp_path / "releases"
    for release in (R1, R2, R3):
        shutil.copytree(releases / release, root / release)
    shutil.rmtree(root / R3 / "diffs" / R1)  # release 3 derives from release 2 alone
    artifacts, _ = root_with_r1(built_r1, tmp_path)
    store = ArtifactStore(str(artifacts))
    stages = ("build_graph", "filter_leakage")

    def run(release: str, *extra: str) -> dict[str, list]:
        inputs = {"--corpus": "corpus", "--scidocs": "scidocs", "--paper-ids": "paper-ids"}
        args = ["run", "--snapshot", release, "--artifacts", str(artifacts), "--until", "filter_leakage"]
        args += [arg for flag, folder in inputs.items() for arg in (flag, str(root / release / folder))]
        args += [arg for override in TEST_SPARK_OVERRIDES for arg in ("--set", override)]
        assert main([*args, *extra]) == 0
        return {stage: store.list_versions(release, stage) for stage in stages}

    run(R1)
    before = run(R3)
    assert all(len(versions) == 1 for versions in before.values())
    assert "from_diff" not in before["build_graph"][0].metrics  # in full: release 2 is not built
    assert before["filter_leakage"][0].metrics["paper_id_lines"]["from_diff"] is None
    run(R2)
    with caplog.at_level(logging.INFO, logger="citeflow"):
        again = run(R3)
    assert again == before  # the same one version of each stage, nothing built
    graph, leak = before["build_graph"][0].version, before["filter_leakage"][0].version
    kept = [r.getMessage() for r in caplog.records if "keeps version" in r.getMessage()]
    assert (
        len(kept) == 2
        and f"build_graph: release {R3} keeps version {graph}, built in full; from the diff {R2} -> {R3}" in kept[0]
    )
    assert f"filter_leakage: release {R3} keeps version {leak}, built with the paper-ids table parsed" in kept[1]
    assert "store.rebase=true (citeflow run --rebase)" in kept[0]

    rebased = run(R3, "--rebase")
    (new_graph,) = [m for m in rebased["build_graph"] if m.version != graph]
    assert new_graph.metrics["from_diff"]["base"]["snapshot"] == R2
    assert new_graph.metrics["supersedes"]["versions"] == [graph]
    assert_same_build(new_graph, before["build_graph"][0])  # another way to the same graph
    for stage in stages:
        status = statuses(store, R3, stage)
        assert len(status) == 2 and sum(s.current for s in status.values()) == 1, stage
    assert not statuses(store, R3, "build_graph")[graph].current
    assert statuses(store, R3, "filter_leakage")[leak].why == f"built on build_graph {graph}, which is superseded"
    assert run(R3) == rebased  # the rebased versions are the release's now: a rerun keeps them
    capsys.readouterr()
    assert main(["artifacts", "--snapshot", R3, "--artifacts", str(artifacts)]) == 0
    out = capsys.readouterr().out
    assert f"not current: superseded by {new_graph.version}: rebased from the diff {R2} -> {R3}" in out
    assert f"not current: built on build_graph {graph}, which is superseded" in out
    assert f"current: supersedes {graph}" in out
