"""synthcorpus (citeflow generate): the files it writes, read back with json and gzip only.

Every expected value is recomputed here from the files (or from the real samples in shared/data), never
taken from the generator's own helpers: the truth in generator.json is checked against the files.
"""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import pytest

from citeflow.errors import CiteflowError
from citeflow.synthcorpus.config import GenerateConfig
from citeflow.synthcorpus.generate import run
from tests.support.snapshot_files import fold, kept, lines_of, parse, s2ag_score, s2orc_score

N = 3000
SHA = re.compile(r"[0-9a-f]{40}")
DIGITS = re.compile(r"[0-9]+")


# ---------------------------------------------------------------------------------------------- helpers


def sample_types(path: Path) -> tuple[list[str], dict[str, set[str]]]:
    """Key order of the first real record and the JSON types each key takes in the whole sample."""
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    types = collections.defaultdict(set)
    for r in records:
        for k, v in r.items():
            types[k].add(type(v).__name__)
    return list(records[0]), types


def check_types(records: list[dict], sample: Path, sparse: tuple[str, ...] = (), dirt: tuple[str, ...] = ()) -> None:
    """Keys and JSON types as in the real sample. `sparse`: keys the sample happens to show only null;
    `dirt`: keys the generator nulls on purpose (missing titles, duplicate records without a year)."""
    first_keys, types = sample_types(sample)
    for r in records:
        assert set(first_keys) <= set(r) <= set(types), sorted(set(r) ^ set(first_keys))
        for k, v in r.items():
            allowed = types[k] | ({"str"} if k in sparse else set()) | ({"NoneType"} if k in dirt else set())
            assert type(v).__name__ in allowed, (k, v)


def generate(root: Path, **kw) -> tuple[Path, dict]:
    out = root / f"{kw.get('format', 's2orc')}-{kw.get('seed', 0)}-{kw.get('papers', N)}"
    cfg = GenerateConfig(**{"papers": N, "out": str(out), **kw})
    summary = run(cfg)
    truth = json.loads((out / "generator.json").read_text())
    assert truth == json.loads(json.dumps(summary))
    return out, truth


def paper_ids(out: Path) -> dict[str, tuple[int, bool]]:
    rows, bad = parse(lines_of(out / "paper-ids"))
    assert bad == 0
    table = {r["sha"]: (r["corpusid"], r["primary"]) for r in rows}
    assert len(table) == len(rows), "shas must be unique"
    return table


# ---------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def s2orc(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("gen"), format="s2orc", shards=2)


@pytest.fixture(scope="module")
def s2ag(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("gen"), format="s2ag", shards=2)


@pytest.fixture(scope="module")
def s2orc_records(s2orc):
    out, _ = s2orc
    return parse(lines_of(out / "corpus" / "metadata"))


@pytest.fixture(scope="module")
def s2ag_records(s2ag):
    out, _ = s2ag
    return {name: parse(lines_of(out / "corpus" / name)) for name in ("papers", "abstracts", "citations")}


# ---------------------------------------------------------------------------------------------- determinism


def all_files(out: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != "generator.json"
    }


@pytest.mark.parametrize("fmt", ["s2orc", "s2ag"])
def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path, fmt):
    a, truth_a = generate(tmp_path / "a", format=fmt, papers=1000, seed=7)
    b, truth_b = generate(tmp_path / "b", format=fmt, papers=1000, seed=7)
    c, _ = generate(tmp_path / "c", format=fmt, papers=1000, seed=8)
    files_a, files_b, files_c = all_files(a), all_files(b), all_files(c)
    assert len(files_a) >= 15 and files_a == files_b
    assert {k: v for k, v in truth_a.items() if k != "config"} == {k: v for k, v in truth_b.items() if k != "config"}
    assert set(files_a) == set(files_c)
    assert all(files_a[k] != files_c[k] for k in files_a if k.endswith(".gz"))
    # gzip header: no file name, mtime 0
    gz = next(v for k, v in files_a.items() if k.endswith(".gz"))
    assert gz[3] & 0x08 == 0 and gz[4:8] == b"\0\0\0\0"


# ---------------------------------------------------------------------------------------------- S2ORC


def test_s2orc_layout_and_record_format(s2orc, s2orc_records, shared_data):
    out, truth = s2orc
    assert sorted(p.name for p in (out / "corpus" / "metadata").iterdir()) == [
        "metadata_0.jsonl.gz",
        "metadata_1.jsonl.gz",
    ]
    records, _ = s2orc_records
    check_types(records, shared_data / "s2orc" / "metadata_sample.jsonl", sparse=("acl_id",), dirt=("title",))
    first_keys, _ = sample_types(shared_data / "s2orc" / "metadata_sample.jsonl")
    for r in records:
        if not r["has_pdf_parse"]:
            assert list(r) == first_keys  # same key order as the real file
        assert DIGITS.fullmatch(r["paper_id"]) and 1000 <= int(r["paper_id"]) < 300_000_000
        assert all(DIGITS.fullmatch(x) for x in r["outbound_citations"] + r["inbound_citations"])
        assert r["has_outbound_citations"] == bool(r["outbound_citations"])
        assert r["has_inbound_citations"] == bool(r["inbound_citations"])
        assert r["s2_url"] == "https://api.semanticscholar.org/CorpusID:" + r["paper_id"]
        assert all(set(a) == {"first", "middle", "last", "suffix"} for a in r["authors"])
    assert truth["format"] == "s2orc" and truth["papers"] == N


def test_s2orc_truth_counts(s2orc, s2orc_records):
    out, truth = s2orc
    c = truth["counts"]
    records, malformed = s2orc_records
    assert malformed == c["malformed_lines"] == c["malformed_lines_by_dataset"]["metadata"] >= 1
    assert len(records) + malformed == c["lines"]
    papers = kept(records, "paper_id", s2orc_score)
    assert len(papers) == c["papers"] == N
    assert len(records) - len(papers) == c["duplicate_records"] >= 3
    assert sum(p["title"] is None for p in papers.values()) == c["papers_without_title"] >= 1
    assert sum(p["abstract"] is None for p in papers.values()) == c["papers_without_abstract"]
    assert 0.47 < c["papers_without_abstract"] / N < 0.55  # default rate 0.51 (real S2ORC sample)

    edges, self_cites, external, internal = set(), 0, 0, 0
    for pid, p in papers.items():
        for cited in p["outbound_citations"]:
            if cited == pid:
                self_cites += 1
            elif cited not in papers:
                external += 1
            else:
                internal += 1
                edges.add((pid, cited))
    assert len(edges) == c["citations"] > N
    assert self_cites == c["self_citations"] >= 1
    assert external == c["external_citations"] >= 1
    assert internal - len(edges) == c["duplicate_citations"] >= 1
    # inbound_citations hold exactly the clean edges
    inbound = {(citing, pid) for pid, p in papers.items() for citing in p["inbound_citations"]}
    assert inbound == edges
    # citations go to older papers, mostly within the field
    assert all(papers[b]["year"] <= papers[a]["year"] for a, b in edges)
    same_field = [
        papers[a]["mag_field_of_study"][0] == papers[b]["mag_field_of_study"][0]
        for a, b in edges
        if papers[a]["mag_field_of_study"] and papers[b]["mag_field_of_study"]
    ]
    assert 0.7 < sum(same_field) / len(same_field) < 0.97
    years = [p["year"] for p in papers.values()]
    assert min(years) >= 1970 and max(years) <= 2020
    assert sum(y >= 2000 for y in years) > 2 * sum(y < 1990 for y in years)  # growth


def test_s2orc_duplicates_are_placed_to_fool_first_seen(s2orc, s2orc_records):
    records, _ = s2orc_records
    position: dict[str, list[int]] = collections.defaultdict(list)
    for i, r in enumerate(records):
        position[r["paper_id"]].append(i)
    dup_first = 0
    for where in position.values():
        if len(where) > 1:
            best = max(where, key=lambda i: s2orc_score(records[i]))
            dup_first += where[0] != best
            assert records[min(set(where) - {best})]["abstract"] is None
    assert dup_first >= 1


# ---------------------------------------------------------------------------------------------- S2AG


def test_s2ag_record_format(s2ag, s2ag_records, shared_data):
    out, truth = s2ag
    for name in ("papers", "abstracts", "citations"):
        assert sorted(p.name for p in (out / "corpus" / name).iterdir()) == [f"{name}_0.jsonl.gz", f"{name}_1.jsonl.gz"]
    sample = shared_data / "s2ag"
    papers, _ = s2ag_records["papers"]
    check_types(papers, sample / "papers-sample.jsonl", dirt=("title", "year"))
    real = json.loads((sample / "papers-sample.jsonl").read_text().splitlines()[0])
    for r in papers:
        assert list(r) == list(real)
        assert set(r["externalids"]) == set(real["externalids"])
        assert r["externalids"]["CorpusId"] == str(r["corpusid"])
        assert all(set(a) == {"authorId", "name"} for a in r["authors"])
        assert r["journal"] is None or set(r["journal"]) == set(real["journal"])
        assert all(set(f) == {"category", "source"} for f in r["s2fieldsofstudy"] or [])
        assert SHA.fullmatch(r["url"].rsplit("/", 1)[1])
    abstracts, _ = s2ag_records["abstracts"]
    check_types(abstracts, sample / "abstracts-sample.jsonl", dirt=("abstract",))
    real_abstract = json.loads((sample / "abstracts-sample.jsonl").read_text().splitlines()[0])
    assert all(set(r["openaccessinfo"]) == set(real_abstract["openaccessinfo"]) for r in abstracts)
    citations, _ = s2ag_records["citations"]
    check_types(citations, sample / "citations-sample.jsonl", dirt=("citingcorpusid",))  # "either can be null"
    assert any(r["citingcorpusid"] is None for r in citations)
    assert any(r["contexts"] for r in citations) and any(r["intents"] for r in citations)
    check_types(parse(lines_of(out / "paper-ids"))[0], sample / "paper-ids-sample.jsonl")


def test_s2ag_truth_counts(s2ag, s2ag_records):
    out, truth = s2ag
    c = truth["counts"]
    (papers_raw, bad_p), (abstracts, bad_a), (citations, bad_c) = (
        s2ag_records[k] for k in ("papers", "abstracts", "citations")
    )
    assert c["malformed_lines_by_dataset"] == {"papers": bad_p, "abstracts": bad_a, "citations": bad_c}
    assert c["malformed_lines"] == bad_p + bad_a + bad_c and min(bad_p, bad_a, bad_c) >= 1
    assert (c["lines"], c["abstract_lines"], c["citation_lines"]) == (
        len(papers_raw) + bad_p,
        len(abstracts) + bad_a,
        len(citations) + bad_c,
    )
    papers = kept(papers_raw, "corpusid", s2ag_score)
    assert len(papers) == c["papers"] == N
    assert len(papers_raw) - N == c["duplicate_records"] >= 3
    assert sum(p["title"] is None for p in papers.values()) == c["papers_without_title"]
    text = {r["corpusid"]: r["abstract"] for r in abstracts}
    assert len(text) == len(abstracts) and set(text) <= set(papers)
    assert sum(text.get(pid) is None for pid in papers) == c["papers_without_abstract"]
    assert any(pid in text and text[pid] is None for pid in papers)  # an abstracts line with a null abstract

    ids = {str(pid) for pid in papers}
    edges, counts = set(), collections.Counter()
    for r in citations:
        a, b = r["citingcorpusid"], r["citedcorpusid"]
        if a is None or b is None:
            counts["null"] += 1
        elif a == b:
            counts["self"] += 1
        elif a not in ids:
            counts["citing_outside"] += 1
        elif b not in ids:
            counts["external"] += 1
        else:
            counts["internal"] += 1
            edges.add((int(a), int(b)))
    assert len(edges) == c["citations"] > N
    assert counts["internal"] - len(edges) == c["duplicate_citations"] >= 1
    assert counts["self"] == c["self_citations"] >= 1
    assert counts["external"] == c["external_citations"] >= 1
    assert counts["null"] == c["null_id_citations"] >= 1
    assert counts["citing_outside"] == c["citing_not_in_corpus"] >= 1
    for a, b in edges:
        pa_, pb = papers[a], papers[b]
        assert pb["year"] <= pa_["year"]
        if pa_["publicationdate"] and pb["publicationdate"]:
            assert pb["publicationdate"] < pa_["publicationdate"]


# ---------------------------------------------------------------------------------------------- paper-ids, SciDocs


def scidocs_files(root: Path) -> tuple[dict, dict, dict]:
    """(metadata by sha, classification rows by task/split, qrel rows by task/split), checking the layout."""
    meta = {}
    for name in ("paper_metadata_mag_mesh.json", "paper_metadata_view_cite_read.json"):
        entries = json.loads((root / name).read_text())
        for sha, entry in entries.items():
            assert set(entry) == {"paper_id", "title", "abstract"} and entry["paper_id"] == sha
            assert meta.setdefault(sha, entry) == entry
    classes = {}
    for task, n_labels in (("mag", 19), ("mesh", 11)):
        for split in ("train", "val", "test"):
            text = (root / task / f"{split}.csv").read_text().splitlines()
            assert text[0] == "pid,class_label"
            rows = [line.split(",") for line in text[1:]]
            assert rows and all(len(r) == 2 and SHA.fullmatch(r[0]) and 0 <= int(r[1]) < n_labels for r in rows)
            classes[task, split] = rows
    qrels = {}
    for task in ("cite", "cocite", "coview", "coread"):
        for split in ("val", "test"):
            rows = [line.split(" ") for line in (root / task / f"{split}.qrel").read_text().splitlines()]
            assert rows and all(len(r) == 4 and r[1] == "0" and r[3] in ("0", "1") for r in rows)
            assert all(SHA.fullmatch(r[0]) and SHA.fullmatch(r[2]) and r[0] != r[2] for r in rows)
            per_query = collections.Counter((r[0], r[3]) for r in rows)
            queries = {r[0] for r in rows}
            assert all(1 <= per_query[q, "1"] <= 5 and per_query[q, "0"] <= 25 for q in queries)
            qrels[task, split] = rows
        assert not {r[0] for r in qrels[task, "val"]} & {r[0] for r in qrels[task, "test"]}
    return meta, classes, qrels


def test_recomm_clicks_in_the_reference_layout_follow_the_querys_subtopic(s2orc):
    """recomm/{train,val,test}.csv, propensity_scores.json and paper_metadata_recomm.json, read with csv and json
    only: every click lists 10 distinct shown papers with the clicked one among them; every id already belongs
    to the SciDocs set (recomm adds no benchmark id); the clicked paper shares the query's subtopic and the
    other shown papers do not; clicks sit more often at the top (the propensities fall with the position)."""
    import csv

    import pyarrow.parquet as pq

    out, truth = s2orc
    root = out / "scidocs"
    clicks = {}
    for split in ("train", "val", "test"):
        with open(root / "recomm" / f"{split}.csv", newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))[1:]
        assert rows and all(len(r) == 3 for r in rows)
        clicks[split] = [(q, c, shown.split(",")) for q, c, shown in rows]
    assert {k: len(v) for k, v in clicks.items()} == {
        k: truth["scidocs"]["tasks"]["recomm"][k] for k in ("train", "val", "test")
    }
    scores = json.loads((root / "recomm" / "propensity_scores.json").read_text())["scores"]
    assert len(scores) == 10 and all(a > b > 0 for a, b in zip(scores, scores[1:], strict=False))
    every = [c for rows in clicks.values() for c in rows]
    assert all(len(set(shown)) == len(shown) == 10 and c in shown and q not in shown for q, c, shown in every)
    ids = {x for q, c, shown in every for x in (q, c, *shown)}
    assert all(SHA.fullmatch(x) for x in ids)

    metadata = json.loads((root / "paper_metadata_recomm.json").read_text())
    assert set(metadata) == ids == set(metadata) & ids
    assert all(
        set(m) == {"paper_id", "title", "abstract", "authors", "references", "cited_by", "year"}
        and m["paper_id"] == pid
        and m["title"]
        and isinstance(m["year"], int)
        for pid, m in metadata.items()
    )
    mapping = {r["id"]: r for r in map(json.loads, (out / "scidocs_truth.jsonl").read_text().splitlines())}
    assert all(mapping[x]["method"] == "sha" for x in ids)  # SciDocs ids the leakage filter maps by sha
    topics = pq.read_table(out / "paper_topics.parquet").to_pydict()
    community = dict(zip(topics["corpus_id"], topics["community"], strict=True))
    topic = {x: community[mapping[x]["corpus_id"]] for x in ids}
    assert all(topic[c] == topic[q] for q, c, _ in every)
    others = [topic[x] == topic[q] for q, c, shown in every for x in shown if x != c]
    assert sum(others) / len(others) < 0.05
    positions = collections.Counter(shown.index(c) for _, c, shown in every)
    assert positions[0] > 2 * positions[9]


@pytest.mark.parametrize("which", ["s2orc", "s2ag"])
def test_scidocs_layout_and_mapping_truth(which, request):
    out, truth = request.getfixturevalue(which)
    meta, classes, qrels = scidocs_files(out / "scidocs")
    ids = (
        set(meta)
        | {r[0] for rows in classes.values() for r in rows}
        | {x for rows in qrels.values() for r in rows for x in (r[0], r[2])}
    )
    assert set(meta) == ids  # every task id has metadata
    s = truth["scidocs"]
    assert len(ids) == s["ids"]

    table = paper_ids(out)
    primary_of = collections.Counter(cid for cid, primary in table.values() if primary)
    assert all(n == 1 for n in primary_of.values())
    assert truth["counts"]["paper_ids_rows"] == len(table)
    if which == "s2orc":
        records, _ = parse(lines_of(out / "corpus" / "metadata"))
        corpus = {int(pid): r for pid, r in kept(records, "paper_id", s2orc_score).items()}
    else:
        records, _ = parse(lines_of(out / "corpus" / "papers"))
        corpus = kept(records, "corpusid", s2ag_score)
    assert set(corpus) <= set(primary_of)
    titles = collections.Counter(fold(r["title"]) for r in corpus.values() if r["title"])

    by_sha = [i for i in ids if i in table]
    assert len(by_sha) == s["mapped_by_sha"] and all(table[i][0] in corpus for i in by_sha)
    assert sum(not table[i][1] for i in by_sha) == s["mapped_by_non_primary_sha"] >= 1
    rest = [i for i in ids if i not in table]
    title_only = [i for i in rest if titles[fold(meta[i]["title"])] == 1]
    assert len(title_only) == s["mapped_by_title_only"] >= 3
    assert any(meta[i]["title"] not in {r["title"] for r in corpus.values()} for i in title_only)  # re-spelt
    unmappable = [i for i in rest if titles[fold(meta[i]["title"])] != 1]
    assert len(unmappable) == s["unmappable"] >= 3
    assert sum(titles[fold(meta[i]["title"])] >= 2 for i in unmappable) == s["unmappable_with_ambiguous_title"] >= 1
    assert len(ids) < 0.8 * N

    # The labels and judgements mean what they say.
    sha_to_paper = {sha: corpus[cid] for sha, (cid, _) in table.items() if cid in corpus}
    labels = s["labels"]["mag"]

    def fos(r):
        return r["mag_field_of_study"] if which == "s2orc" else [f["category"] for f in (r["s2fieldsofstudy"] or [])]

    checked = 0
    for split in ("train", "val", "test"):
        for sha, label in classes["mag", split]:
            if sha in sha_to_paper and fos(sha_to_paper[sha]):
                assert fos(sha_to_paper[sha])[0] == labels[int(label)]
                checked += 1
        for sha, _ in classes["mesh", split]:
            if sha in sha_to_paper and fos(sha_to_paper[sha]):
                assert fos(sha_to_paper[sha])[0] == "Medicine"
    assert checked > 30
    if which == "s2orc":
        for q, _, p, rel in qrels["cite", "test"]:
            if q in sha_to_paper and p in sha_to_paper:
                cites = p in table and str(table[p][0]) in sha_to_paper[q]["outbound_citations"]
                assert cites == (rel == "1")


# ---------------------------------------------------------------------------------------------- config, output folder


def test_refuses_a_non_empty_output_folder(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(CiteflowError, match="not empty"):
        run(GenerateConfig(papers=200, out=str(tmp_path)))
    with pytest.raises(CiteflowError, match="holds no generator output"):
        run(GenerateConfig(papers=200, out=str(tmp_path), overwrite=True))
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_overwrite_replaces_a_previous_output(tmp_path):
    out = tmp_path / "snap"
    run(GenerateConfig(papers=300, out=str(out), shards=3))
    assert len(list((out / "corpus" / "metadata").iterdir())) == 3
    with pytest.raises(CiteflowError, match="not empty"):
        run(GenerateConfig(papers=300, out=str(out)))
    summary = run(GenerateConfig(papers=200, out=str(out), overwrite=True, format="s2ag"))
    assert not (out / "corpus" / "metadata").exists() and (out / "corpus" / "papers").is_dir()
    assert json.loads((out / "generator.json").read_text())["papers"] == summary["papers"] == 200


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"papers": 99}, "papers must be"),
        ({"format": "parquet"}, "format must be s2orc or s2ag"),
        ({"shards": 0}, "shards must be"),
        ({"seed": -1}, "seed must be"),
        ({"missing_abstract_rate": 0.95}, "missing_abstract_rate must be between 0 and 0.9"),
        ({"self_citation_rate": 0.6}, "self_citation_rate must be between 0 and 0.5"),
        ({"difficulty": 2}, "difficulty must be between 0 and 1"),
        ({"out": ""}, "output folder is required"),
        ({"scidocs_queries": 0}, "scidocs_queries must be"),
    ],
)
def test_bad_configs_name_the_problem(kwargs, message):
    with pytest.raises(CiteflowError, match=message):
        GenerateConfig(**{"papers": 1000, "out": "x", **kwargs})


def test_niches_per_subtopic_grow_with_the_corpus():
    # one niche per subtopic and 20,000 papers (~175 papers a niche), at least 1, at most 200
    assert [GenerateConfig(papers=n, out="x").niches_per_subtopic for n in (100, 20_000, 1_000_000, 50_000_000)] == [
        1,
        1,
        50,
        200,
    ]


def test_automatic_shard_count():
    assert GenerateConfig(papers=100, out="x").shard_count == 1
    assert GenerateConfig(papers=120_000, out="x").shard_count == 3
    assert GenerateConfig(papers=120_000, out="x", shards=5).shard_count == 5


@pytest.mark.parametrize("fmt", ["s2orc", "s2ag"])
def test_the_smallest_corpus_is_generated_and_measured(tmp_path, fmt):
    # 100 papers, half of them without abstract: still a SciDocs set, and a calibration table whose values
    # are numbers or, where the sample is too small for the statistic, none (never NaN, which is not JSON)
    truth = run(GenerateConfig(papers=100, out=str(tmp_path / fmt), format=fmt, seed=1))
    text = (tmp_path / fmt / "generator.json").read_text()
    assert "NaN" not in text and json.loads(text)["calibration"] == truth["calibration"]
    for row in truth["calibration"]["statistics"].values():
        assert row["achieved"] is None or isinstance(row["achieved"], (int, float))
    assert truth["scidocs"]["tasks"]["mag"]["papers"] >= 20


def test_the_command_line_sets_the_difficulty(tmp_path, capsys):
    from citeflow.jobs.cli import main

    assert main(["generate", "--papers", "300", "--difficulty", "0", "--out", str(tmp_path / "easy")]) == 0
    truth = json.loads((tmp_path / "easy" / "generator.json").read_text())
    assert truth["config"]["difficulty"] == 0 and truth["calibration"]["difficulty"] == 0
    assert main(["generate", "--papers", "300", "--difficulty", "1.5", "--out", str(tmp_path / "bad")]) == 2
    assert "difficulty must be between 0 and 1" in capsys.readouterr().err


def test_a_corpus_larger_than_an_id_range_gets_a_wider_range_and_no_other_corpus_changes():
    """PubMed Central's 8M ids cannot hold a 10M-paper corpus's draw: `unique_ints` drew forever. A range is now
    widened where it holds fewer than 1.25 ids per paper, so every corpus that could be made before is the same;
    a range too small for the draw is a ValueError, never a loop."""
    import numpy as np

    from citeflow.synthcorpus.arrays import unique_ints
    from citeflow.synthcorpus.papers import _with_room

    pmc = (1_000_000, 9_000_000)
    assert _with_room(pmc, 5_000_000) == pmc  # the 5M corpus of before
    assert _with_room(pmc, 10_000_000) == (1_000_000, 21_000_000)
    assert _with_room((1_000_000, 35_000_000), 10_000_000) == (1_000_000, 35_000_000)
    with pytest.raises(ValueError, match="do not fit"):
        unique_ints(np.random.default_rng(0), 11, 0, 10)
    drawn = unique_ints(np.random.default_rng(0), 10, 0, 10)
    assert sorted(drawn.tolist()) == list(range(10))
