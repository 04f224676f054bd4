"""tests/support/hepth.py: the HEP-Th releases, diff and benchmark it writes, read back with gzip and json only
and checked against the raw HEP-Th files (../shared/data/hepth), the real S2AG samples (../shared/data/s2ag) and
the counts the data's README states. Skipped without the shared data, failed under CI=true."""

from __future__ import annotations

import collections
import csv
import gzip
import json
from pathlib import Path

import pytest

from citeflow.diffs import DATASETS, PAPER_IDS, read_diff
from citeflow.errors import CiteflowError
from tests.support.hepth import (
    HEPTH_DATA,
    HepthConfig,
    parse_journal_ref,
    require_files,
    require_hepth,
    split_authors,
    write_releases,
)

R1, R2 = "2000-01-01", "2002-01-01"
S2AG = HEPTH_DATA.parent / "s2ag"
SAMPLES = {"papers": "papers-sample.jsonl", "abstracts": "abstracts-sample.jsonl"}
SAMPLES |= {"citations": "citations-sample.jsonl", PAPER_IDS: "paper-ids-sample.jsonl"}


# ---------------------------------------------------------------------------------------------- reading back


def raw_papers() -> dict[str, dict]:
    with gzip.open(require_hepth() / "papers-1992-2001.jsonl.gz", "rt", encoding="utf-8") as fh:
        return {r["id"]: r for r in map(json.loads, fh)}


def raw_citations() -> list[tuple[str, str]]:
    with gzip.open(require_hepth() / "citations-1992-2001.tsv.gz", "rt", encoding="utf-8") as fh:
        rows = list(csv.reader(fh, delimiter="\t"))
    assert rows[0] == ["citing", "cited"]
    return [(a, b) for a, b in rows[1:]]


def lines_of(folder: Path) -> list[bytes]:
    out = []
    for path in sorted(folder.glob("*.jsonl.gz")):
        out += gzip.decompress(path.read_bytes()).splitlines(keepends=True)
    return out


def records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in lines_of(folder)]


def dataset_folder(release: Path, dataset: str) -> Path:
    return release / PAPER_IDS if dataset == PAPER_IDS else release / "corpus" / dataset


def key_of(dataset: str, rec: dict):
    if dataset == "citations":
        return rec["citingcorpusid"], rec["citedcorpusid"]
    return rec["sha"] if dataset == PAPER_IDS else rec["corpusid"]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = collections.defaultdict(dict)
    for line in path.read_text(encoding="utf-8").splitlines():
        q, zero, p, rel = line.split(" ")
        assert zero == "0" and p not in out[q]
        out[q][p] = int(rel)
    return out


def all_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------------------------- fixtures

# These write or read all 25,224 papers: make test runs them, make test-fast does not.
WHOLE_CORPUS = pytest.mark.slow


@pytest.fixture(scope="module")
def raw():
    return raw_papers(), raw_citations()


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    require_hepth()
    return write_releases(HepthConfig(out=str(tmp_path_factory.mktemp("hepth") / "out")))


def small(root: Path, **kw):
    return write_releases(HepthConfig(out=str(root), subset=400, queries=10, negative_pool=60, **kw))


# ---------------------------------------------------------------------------------------------- tests


def test_missing_data_skips_locally_and_fails_under_ci(tmp_path, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="papers-1992-2001.jsonl.gz"):
        require_hepth(tmp_path)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        require_hepth(tmp_path)
    (tmp_path / "x.txt").write_text("x")
    assert require_files(tmp_path, "x.txt") == tmp_path


def test_authors_and_journal_references_are_parsed():
    assert split_authors("Keith R. Dienes (IAS, Princeton), Moshe Moshe (Technion), and Robert C. Myers (McGill)") == [
        "Keith R. Dienes",
        "Moshe Moshe",
        "Robert C. Myers",
    ]
    assert split_authors("Lapo Casetti (2 and 3), C. Clementi ((1) SISSA, (2) Pisa)") == ["Lapo Casetti", "C. Clementi"]
    assert split_authors("Gary T. Horowitz and Veronika E. Hubeny") == ["Gary T. Horowitz", "Veronika E. Hubeny"]
    assert parse_journal_ref("Phys.Lett. B418 (1998) 324-328") == {
        "name": "Phys.Lett.",
        "pages": "324-328",
        "volume": "B418",
    }
    assert parse_journal_ref("JHEP 0108 (2001) 036") == {"name": "JHEP", "pages": "036", "volume": "0108"}
    assert parse_journal_ref("Sakharov Conference 1996:386") == {
        "name": "Sakharov Conference 1996:386",
        "pages": None,
        "volume": "",
    }
    assert parse_journal_ref("") is None


@WHOLE_CORPUS
def test_releases_hold_the_raw_papers_and_their_citations(full, raw):
    papers, citations = raw
    assert len(papers) == 25_224 and len(citations) == 271_863  # the data's README
    releases = {r.release: r for r in full.releases}
    assert sorted(releases) == [R1, R2] and releases[R1].diff is None
    for release, last_year in ((R1, 1999), (R2, 2001)):
        root = full.root / release
        members = {n for n, p in papers.items() if p["year"] <= last_year}
        written = {r["corpusid"]: r for r in records(root / "corpus" / "papers")}
        assert sorted(written) == sorted(int(n) for n in members)
        by_id = {int(n): papers[n] for n in members}
        for cid, rec in written.items():
            p = by_id[cid]
            assert (rec["title"], rec["year"], rec["externalids"]["ArXiv"]) == (p["title"], p["year"], p["arxiv_id"])
            assert rec["externalids"]["CorpusId"] == str(cid)
        abstracts = {r["corpusid"]: r["abstract"] for r in records(root / "corpus" / "abstracts")}
        assert abstracts == {cid: by_id[cid]["abstract"] for cid in by_id}
        lines = [(r["citingcorpusid"], r["citedcorpusid"]) for r in records(root / "corpus" / "citations")]
        expected = [(str(int(a)), str(int(b))) for a, b in citations if a in members and b in members]
        assert sorted(lines) == sorted(expected)
        ids = records(root / PAPER_IDS)
        assert sorted(r["corpusid"] for r in ids) == sorted(written) and all(r["primary"] for r in ids)
        assert {r["sha"] for r in ids} == {rec["url"].rsplit("/", 1)[1] for rec in written.values()}
        summary = json.loads(full.manifest.read_text())["releases"]
        assert {s["release"]: s["papers"] for s in summary}[release] == len(members)
    assert len(records(full.root / R1 / "corpus" / "papers")) == 25_224 - 6_279  # the README's diff: 6,279 papers
    assert releases[R2].papers == 25_224 and releases[R1].papers == 18_945


@WHOLE_CORPUS
def test_records_have_the_keys_and_json_types_of_the_real_s2ag_samples(full):
    require_files(S2AG, *SAMPLES.values())
    for dataset, sample in SAMPLES.items():
        real = [json.loads(line) for line in (S2AG / sample).read_text(encoding="utf-8").splitlines()]
        types = collections.defaultdict(set)
        for r in real:
            for k, v in r.items():
                types[k].add(type(v).__name__)
        for rec in records(dataset_folder(full.root / R2, dataset)):
            assert list(rec) == list(real[0]), dataset
            assert all(type(v).__name__ in types[k] for k, v in rec.items()), (dataset, rec)
            if dataset == "papers":
                assert set(rec["externalids"]) == set(real[0]["externalids"])
                assert set(rec["journal"]) == {"name", "pages", "volume"}
                assert rec["authors"] and all(set(a) == {"authorId", "name"} for a in rec["authors"])
            if dataset == "abstracts":
                assert set(rec["openaccessinfo"]) == set(real[0]["openaccessinfo"])


@WHOLE_CORPUS
def test_release_1_with_its_diff_applied_is_release_2(full):
    """The Datasets API's rules restated: an update record replaces every record of its key, a delete record
    removes them (after the updates)."""
    diff = read_diff(full.root / R2 / "diffs", R1, R2, (*DATASETS, PAPER_IDS))
    assert [(s.from_release, s.to_release) for s in diff.steps] == [(R1, R2)]
    (step,) = diff.steps
    for dataset in (*DATASETS, PAPER_IDS):
        state = collections.defaultdict(list)
        for line in lines_of(dataset_folder(full.root / R1, dataset)):
            state[key_of(dataset, json.loads(line))].append(line)
        updates = [
            gzip.decompress(Path(f).read_bytes()).splitlines(keepends=True) for f in step.files_of("updates", dataset)
        ]
        deletes = [
            gzip.decompress(Path(f).read_bytes()).splitlines(keepends=True) for f in step.files_of("deletes", dataset)
        ]
        fresh = collections.defaultdict(list)
        for line in sum(updates, []):
            fresh[key_of(dataset, json.loads(line))].append(line)
        state.update(fresh)
        for line in sum(deletes, []):
            state.pop(key_of(dataset, json.loads(line)), None)
        got = sorted(line for lines in state.values() for line in lines)
        assert got == sorted(lines_of(dataset_folder(full.root / R2, dataset))), dataset
        # a release that only adds papers: no deletes, and an update per new paper (citations: per new pair)
        assert sum(deletes, []) == []
        if dataset != "citations":
            assert len(sum(updates, [])) == 6_279, dataset
    assert len(
        sum((gzip.decompress(Path(f).read_bytes()).splitlines() for f in step.files_of("updates", "citations")), [])
    ) == (len(records(full.root / R2 / "corpus" / "citations")) - len(records(full.root / R1 / "corpus" / "citations")))


@WHOLE_CORPUS
def test_the_benchmark_holds_out_cite_and_cocite_relations_of_release_1(full, raw):
    papers, citations = raw
    r1 = {n for n, p in papers.items() if p["year"] <= 1999}
    refs, citers = collections.defaultdict(set), collections.defaultdict(set)
    for a, b in citations:
        if a in r1 and b in r1 and a != b:
            refs[a].add(b)
            citers[b].add(a)
    sha_to_number = {r["sha"]: f"{r['corpusid']:07d}" for r in records(full.root / R1 / PAPER_IDS)}
    scidocs = full.root / R1 / "scidocs"
    metadata = json.loads((scidocs / "paper_metadata_view_cite_read.json").read_text())
    for sha, entry in metadata.items():
        p = papers[sha_to_number[sha]]
        assert entry == {"paper_id": sha, "title": p["title"], "abstract": p["abstract"]}
        assert sha_to_number[sha] in r1
    used: set[str] = set()
    for task in ("cite", "cocite"):
        queries = {}
        for split in ("val", "test"):
            qrels = read_qrels(scidocs / task / f"{split}.qrel")
            queries[split] = set(qrels)
            assert len(qrels) == 100
            for q, judged in qrels.items():
                used |= {q, *judged}
                query = sha_to_number[q]
                assert q not in judged
                rel = {sha_to_number[p] for p, r in judged.items() if r == 1}
                non = {sha_to_number[p] for p, r in judged.items() if r == 0}
                assert 1 <= len(rel) <= 5 and len(non) == 25  # SciDocs: up to 5 positives, 25 random
                if task == "cite":
                    related = refs[query]
                else:
                    related = {o for c in citers[query] for o in refs[c]} - {query}
                assert rel <= related and not non & related
                assert len(rel) == min(5, len(related))
        assert not queries["val"] & queries["test"]
    assert used == set(metadata)
    assert all_files(scidocs) == all_files(full.root / R2 / "scidocs")  # one benchmark for both releases
    shape = json.loads(full.manifest.read_text())["benchmark"]
    assert shape["papers"] == len(metadata) and shape["cite"]["test"]["queries"] == 100


@WHOLE_CORPUS
def test_subset_is_the_most_connected_papers_and_the_same_config_writes_the_same_bytes(tmp_path, raw):
    papers, citations = raw
    first = small(tmp_path / "a")
    kept = {f"{r['corpusid']:07d}" for r in records(first.root / R2 / "corpus" / "papers")}
    lines = collections.Counter()
    for a, b in citations:
        lines[a] += 1
        lines[b] += 1
    assert len(kept) == 400
    assert min(lines[n] for n in kept) >= max(lines[n] for n in papers if n not in kept)
    assert first[R1].papers == sum(papers[n]["year"] <= 1999 for n in kept)
    assert first[R2].citation_lines == sum(a in kept and b in kept for a, b in citations)

    again, other = small(tmp_path / "b"), small(tmp_path / "c", seed=1)
    files = all_files(first.root)
    manifests = [json.loads(w.manifest.read_text()) for w in (first, again)]
    assert [m["config"].pop("out") for m in manifests] == [str(first.root), str(again.root)]
    assert manifests[0] == manifests[1]
    assert {k: v for k, v in files.items() if k != "hepth.json"} == {
        k: v for k, v in all_files(again.root).items() if k != "hepth.json"
    }
    different = {k for k, v in all_files(other.root).items() if files[k] != v}
    assert different and all("/scidocs/" in k or k == "hepth.json" for k in different)
    assert any(k.endswith(".qrel") for k in different)
    gz = next(v for k, v in files.items() if k.endswith(".gz"))
    assert gz[3] & 0x08 == 0 and gz[4:8] == b"\0\0\0\0"  # no file name, mtime 0 in the gzip header


def test_user_errors_are_one_line(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    with pytest.raises(CiteflowError, match="not empty"):
        write_releases(HepthConfig(out=str(tmp_path / "busy")))
    with pytest.raises(CiteflowError, match="increasing"):
        HepthConfig(out="x", years=(2001, 1999))
    with pytest.raises(CiteflowError, match="queries"):
        HepthConfig(out="x", queries=0)
    with pytest.raises(CiteflowError, match="subset"):
        HepthConfig(out="x", subset=1)
    with pytest.raises(CiteflowError, match="not found"):
        write_releases(HepthConfig(out=str(tmp_path / "new"), data=str(tmp_path)))


def test_the_benchmark_is_scored_by_the_scidocs_evaluator_and_the_command_line_writes_it(tmp_path, capsys):
    import numpy as np

    from citeflow.evaluation.scidocs import evaluate
    from tests.support.hepth import main

    require_hepth()
    assert main(["--out", str(tmp_path / "r"), "--subset", "400", "--queries", "10", "--negative-pool", "60"]) == 0
    assert f"{R2}: 400 papers" in capsys.readouterr().out
    scidocs = tmp_path / "r" / R1 / "scidocs"
    ids = json.loads((scidocs / "paper_metadata_view_cite_read.json").read_text())
    rng = np.random.default_rng(0)
    rows = evaluate(scidocs, {k: rng.normal(size=8) for k in ids}, splits=("val", "test"))
    status = {(r["task"], r["split"], r["metric"]): (r["status"], r["n"]) for r in rows}
    for task in ("cite", "cocite"):
        for split in ("val", "test"):
            assert status[task, split, "map"] == status[task, split, "ndcg"] == ("ok", 10)
    assert {r["status"] for r in rows if r["task"] not in ("cite", "cocite")} == {"missing"}
    assert main(["--out", str(tmp_path / "r")]) == 2  # not empty: one line, no traceback
    assert "not empty" in capsys.readouterr().out


def test_held_out_edges_leave_the_judged_relations_out_of_every_release_and_keep_the_papers(tmp_path, raw, capsys):
    """`--holdout edges`: no written release holds a line that makes a judged positive related to its query
    (cite: the query's line to it; cocite: a paper citing both), every other line between the kept papers is
    there, and so is every benchmark paper."""
    from tests.support.hepth import main

    papers, citations = raw
    args = ["--subset", "400", "--queries", "10", "--negative-pool", "60", "--holdout", "edges"]
    assert main(["--out", str(tmp_path / "e"), *args]) == 0
    root = tmp_path / "e"
    shape = json.loads((root / "hepth.json").read_text())
    assert shape["config"]["holdout"] == "edges"
    sha_to_number = {r["sha"]: f"{r['corpusid']:07d}" for r in records(root / R2 / PAPER_IDS)}
    kept = set(sha_to_number.values())
    for release in (R1, R2):
        year = int(release[:4]) - 1
        inside = {n for n in kept if papers[n]["year"] <= year}
        written = {
            (f"{int(r['citingcorpusid']):07d}", f"{int(r['citedcorpusid']):07d}")
            for r in records(root / release / "corpus" / "citations")
        }
        assert {f"{r['corpusid']:07d}" for r in records(root / release / "corpus" / "papers")} == inside
        refs, citers = collections.defaultdict(set), collections.defaultdict(set)
        for a, b in written:
            refs[a].add(b)
            citers[b].add(a)
        scidocs = root / release / "scidocs"
        for task in ("cite", "cocite"):
            for split in ("val", "test"):
                for q, judged in read_qrels(scidocs / task / f"{split}.qrel").items():
                    query = sha_to_number[q]
                    assert query in inside  # the papers stay
                    for p in (sha_to_number[p] for p, r in judged.items() if r == 1):
                        assert p in inside
                        if task == "cite":
                            assert p not in refs[query]
                        else:
                            assert not citers[query] & citers[p]
        everything = {(a, b) for a, b in citations if a in inside and b in inside}
        held = len(everything - written)
        assert written <= everything and held > 0
        (entry,) = [r for r in shape["releases"] if r["release"] == release]
        assert held == entry["held_out_lines"]
    with pytest.raises(CiteflowError, match="holdout"):
        HepthConfig(out="x", holdout="queries")
