"""synthcorpus/derive*.py: release 2 read back with json and gzip only, against release 1's files.

Expected values come from the requested counts and from plain-JSON recounts of both releases' files (with the
helpers of test_generate, which mirror build_graph's rules), never from the deriving code's helpers.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from citeflow.errors import CiteflowError
from citeflow.jobs.cli import main
from citeflow.synthcorpus.config import GENERATOR_VERSION, GenerateConfig
from citeflow.synthcorpus.derive import DeriveConfig, run
from citeflow.synthcorpus.derive_census import census
from citeflow.synthcorpus.generate import run as generate
from citeflow.synthcorpus.lexicon import GENERIC_TITLES
from tests.support.snapshot_files import fold, kept, lines_of, parse, s2ag_score, s2orc_score

N = 3000
# The defaults: 5% added, 1% removed, 2% changed of release 1's papers.
ADDED, REMOVED, CHANGED = 150, 30, 60


# ---------------------------------------------------------------------------------------------- reading a release


class Release:
    """A release's files, parsed: kept records by corpus id, the build_graph edge set, raw lines."""

    def __init__(self, root: Path, fmt: str) -> None:
        self.root, self.fmt = root, fmt
        self.truth = json.loads((root / "generator.json").read_text())
        first = "metadata" if fmt == "s2orc" else "papers"
        self.raw = {
            name: lines_of(root / "corpus" / name)
            for name in ((first,) if fmt == "s2orc" else ("papers", "abstracts", "citations"))
        }
        self.records, self.malformed = parse(self.raw[first])
        if fmt == "s2orc":
            self.papers = {int(k): r for k, r in kept(self.records, "paper_id", s2orc_score).items()}
            self.id_of = lambda r: int(r["paper_id"])
            self.abstract = {pid: r["abstract"] for pid, r in self.papers.items()}
            self.rows = [(pid, int(c)) for pid, r in self.papers.items() for c in r["outbound_citations"]]
        else:
            self.papers = kept(self.records, "corpusid", s2ag_score)
            self.id_of = lambda r: r["corpusid"]
            abstracts, _ = parse(self.raw["abstracts"])
            self.abstract = {r["corpusid"]: r["abstract"] for r in abstracts}
            self.citations, _ = parse(self.raw["citations"])
            self.rows = [
                (
                    None if r["citingcorpusid"] is None else int(r["citingcorpusid"]),
                    None if r["citedcorpusid"] is None else int(r["citedcorpusid"]),
                )
                for r in self.citations
            ]
        self.edges = {
            (a, b)
            for a, b in self.rows
            if a is not None and b is not None and a != b and a in self.papers and b in self.papers
        }
        self.year = {pid: r["year"] for pid, r in self.papers.items()}
        self.title = {pid: r["title"] for pid, r in self.papers.items()}
        self.paper_id_lines = lines_of(root / "paper-ids")
        ids, bad = parse(self.paper_id_lines)
        assert bad == 0
        self.paper_ids = ids
        self.topics = pq.read_table(root / "paper_topics.parquet").to_pylist()

    def lines(self, dataset: str) -> list[str]:
        """The raw lines of a corpus dataset, or of `paper-ids`."""
        return self.paper_id_lines if dataset == "paper-ids" else self.raw[dataset]


def derive(root: Path, release1: Path, **kw) -> tuple[Path, dict]:
    summary = run(DeriveConfig(derive_from=str(release1), out=str(root), **kw))
    truth = json.loads((root / "generator.json").read_text())
    assert truth == json.loads(json.dumps(summary))
    return root, truth


@pytest.fixture(scope="module", params=["s2orc", "s2ag"])
def releases(request, tmp_path_factory):
    fmt = request.param
    base = tmp_path_factory.mktemp(f"derive-{fmt}")
    generate(GenerateConfig(papers=N, out=str(base / "r1"), format=fmt, shards=2, seed=5))
    derive(base / "r2", base / "r1", seed=3)
    r1, r2 = Release(base / "r1", fmt), Release(base / "r2", fmt)
    diff = pq.read_table(base / "r2" / "release_diff.parquet").to_pylist()
    sets = {kind: {d["corpus_id"] for d in diff if d["change"] == kind} for kind in ("added", "removed", "changed")}
    return r1, r2, diff, sets


def unparseable(lines: list[str]) -> list[str]:
    return [line for line in lines if parse([line])[1]]


def all_files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------------------------- the diff


def test_diff_sets_have_the_requested_sizes_and_add_up(releases):
    r1, r2, diff, sets = releases
    added, removed, changed = sets["added"], sets["removed"], sets["changed"]
    assert (len(added), len(removed), len(changed)) == (ADDED, REMOVED, CHANGED)
    assert len(diff) == ADDED + REMOVED + CHANGED  # one row per id: the three sets are disjoint
    assert [d["corpus_id"] for d in diff] == sorted(d["corpus_id"] for d in diff)
    assert removed | changed <= set(r1.papers) and not added & set(r1.papers)
    assert set(r2.papers) == (set(r1.papers) - removed) | added
    d = r2.truth["diff"]
    assert (d["added"], d["removed"], d["changed"]) == (ADDED, REMOVED, CHANGED)
    assert d["changed_title"] == sum(x["title_changed"] for x in diff)
    assert d["changed_abstract"] == sum(x["abstract_changed"] for x in diff)
    assert all(x["title_changed"] or x["abstract_changed"] for x in diff if x["change"] == "changed")
    assert r2.truth["papers"] == r2.truth["counts"]["papers"] == N + ADDED - REMOVED
    assert r2.truth["format"] == r1.fmt and r2.truth["release"] == 2
    src = r2.truth["derived_from"]
    assert Path(src["path"]) == r1.root.resolve() and src["seed"] == 5 and src["config"] == r1.truth["config"]
    assert r2.truth["scidocs"] == r1.truth["scidocs"]
    assert not any(p.name.endswith("derive-tmp") for p in r2.root.parent.iterdir())


def test_removed_papers_appear_nowhere(releases):
    r1, r2, _, sets = releases
    removed = sets["removed"]
    assert not removed & {r2.id_of(r) for r in r2.records}
    assert all(a not in removed and b not in removed for a, b in r2.rows)
    if r2.fmt == "s2orc":  # in every record, duplicates included, both lists
        assert not removed & {int(x) for r in r2.records for x in r["outbound_citations"] + r["inbound_citations"]}
    else:
        assert not removed & set(r2.abstract)
    assert not removed & {r["corpusid"] for r in r2.paper_ids}
    assert not removed & {r["corpus_id"] for r in r2.topics}
    # Malformed lines have no key, so no diff can remove them: release 1's stay, even those showing a removed id.
    for name, raw in r2.raw.items():
        assert sorted(unparseable(raw)) == sorted(unparseable(r1.raw[name])), name
    # Citations to and from them did exist in release 1.
    assert any(a in removed or b in removed for a, b in r1.edges)


def _by_key(dataset: str, lines: list[str]) -> dict:
    """Each parseable line under its primary key (papers, abstracts: corpusid; citations: the id pair;
    paper-ids: sha)."""
    out = collections.defaultdict(list)
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if dataset == "citations":
            key = (rec.get("citingcorpusid"), rec.get("citedcorpusid"))
        else:
            key = rec.get("sha") if dataset == "paper-ids" else str(rec.get("corpusid"))
        out[json.dumps(key)].append(line)
    return out


def _diff_lines(folder: Path, files: list[str]) -> list[str]:
    return [line for name in files for line in lines_of_file(folder / name)]


def lines_of_file(path: Path) -> list[str]:
    import gzip

    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return fh.read().splitlines()


def test_s2ag_diff_applied_to_release_1_gives_release_2(releases):
    """The Datasets API semantics, applied in plain Python: an update record replaces every record of its key,
    a delete record removes them. Release 1 plus its diff has, key by key, exactly release 2's lines; the truth
    counts added, changed and deleted keys."""
    r1, r2, diff, sets = releases
    if r1.fmt != "s2ag":
        assert not (r2.root / "diffs").exists()  # no diffs for S2ORC releases
        return
    folder = r2.root / "diffs" / "r1" / "to" / "r2"
    truth = r2.truth["diff"]["diffs"]
    assert truth["folders"] == ["diffs/r1/to/r2"]
    for dataset in ("papers", "abstracts", "citations", "paper-ids"):
        manifest = json.loads((folder / f"{dataset}.json").read_text())
        assert (manifest["dataset"], manifest["start_release"], manifest["end_release"]) == (dataset, "r1", "r2")
        (step,) = manifest["diffs"]
        assert (step["from_release"], step["to_release"]) == ("r1", "r2")
        updates = _by_key(dataset, _diff_lines(folder, step["update_files"]))
        deletes = _by_key(dataset, _diff_lines(folder, step["delete_files"]))
        state = _by_key(dataset, r1.lines(dataset))
        before = set(state)
        for key in deletes:
            assert key in before, key  # a delete names a key release 1 has
            state.pop(key)
        for key, lines in updates.items():
            state[key] = lines
        after = _by_key(dataset, r2.lines(dataset))
        assert {k: sorted(v) for k, v in state.items()} == {k: sorted(v) for k, v in after.items()}, dataset
        counts = truth["datasets"][dataset]
        assert counts["added"] == len(set(updates) - before)
        assert counts["changed"] == len(set(updates) & before)
        assert counts["deleted"] == len(deletes) == counts["delete_records"]
        assert counts["update_records"] == sum(len(v) for v in updates.values())
        if dataset == "paper-ids":  # the removed papers' shas go, each added paper's primary sha comes
            removed = {json.loads(k) for k in deletes}
            assert removed == {r["sha"] for r in r1.paper_ids if r["corpusid"] in sets["removed"]}
            assert {json.loads(k) for k in updates} == {
                r["sha"] for r in r2.paper_ids if r["corpusid"] in sets["added"]
            }
        elif dataset != "citations":
            changed = {int(json.loads(k)) for k in set(updates) & before}
            column = "title_changed" if dataset == "papers" else "abstract_changed"
            assert {d["corpus_id"] for d in diff if d[column]} <= changed
        if dataset == "papers":
            assert {int(json.loads(k)) for k in deletes} == sets["removed"]
            assert {int(json.loads(k)) for k in set(updates) - before} == sets["added"]
    assert truth["datasets"]["citations"]["added"] == r2.truth["diff"]["citations_added"]


def test_scidocs_is_untouched_and_still_maps(releases):
    r1, r2, _, sets = releases
    assert all_files(r2.root / "scidocs") == all_files(r1.root / "scidocs")
    assert (r2.root / "scidocs_truth.jsonl").read_bytes() == (r1.root / "scidocs_truth.jsonl").read_bytes()
    truth = [json.loads(line) for line in (r1.root / "scidocs_truth.jsonl").read_text().splitlines()]
    in_scidocs = {t["corpus_id"] for t in truth if t["corpus_id"] is not None}
    assert not in_scidocs & sets["removed"] and not in_scidocs & sets["changed"]
    assert in_scidocs <= set(r2.papers)
    sha_to_id = {r["sha"]: r["corpusid"] for r in r2.paper_ids}
    meta = {}
    for path in (r2.root / "scidocs").glob("paper_metadata_*.json"):
        meta.update(json.loads(path.read_text()))
    titles = collections.Counter(fold(t) for t in r2.title.values() if t)
    for t in truth:
        if t["method"] == "sha":
            assert sha_to_id[t["id"]] == t["corpus_id"]
        elif t["method"] == "title":
            assert t["id"] not in sha_to_id and titles[fold(meta[t["id"]]["title"])] == 1
        else:
            assert titles[fold(meta[t["id"]]["title"])] != 1


# ---------------------------------------------------------------------------------------------- added, changed, same


def test_added_papers_are_new_later_and_cite_older_papers_of_their_topic(releases):
    r1, r2, _, sets = releases
    added = sets["added"]
    seen1 = (
        set(r1.papers)
        | {x for a, b in r1.rows for x in (a, b) if x is not None}
        | {r["corpusid"] for r in r1.paper_ids}
    )
    assert not added & seen1
    last_year = max(r["year"] for r in r1.records if r["year"] is not None)
    assert all(r2.year[pid] == last_year + 1 for pid in added)
    out_edges = [(a, b) for a, b in r2.edges if a in added]
    assert not any(b in added for _, b in out_edges)  # they cite existing papers only
    assert all(r2.year[b] < r2.year[a] for a, b in out_edges)
    assert len(out_edges) == r2.truth["diff"]["citations_added"] > ADDED
    community = {r["corpus_id"]: r["community"] for r in r2.topics}
    same = sum(community[a] == community[b] for a, b in out_edges) / len(out_edges)
    assert 0.55 < same < 0.9  # mostly within the subtopic (their niches), as the generator draws
    # Text from release 1's vocabulary; some without abstract, as in release 1.
    words1 = {
        w.strip(".").lower() for t in list(r1.title.values()) + list(r1.abstract.values()) if t for w in t.split()
    }
    words2 = [w.strip(".").lower() for pid in added for w in (r2.title[pid] or "").split()]
    # The vocabulary has a long tail of rare words (and each paper signature words of its own), so some of an
    # added title's words are new to release 1's few thousand texts; another seed's vocabulary shares only the
    # listed English words (under a third of a title's words).
    assert len(words2) > 6 * ADDED and sum(w in words1 for w in words2) / len(words2) > 0.8
    no_abstract = [pid for pid in added if r2.abstract.get(pid) is None]
    assert 0.35 * ADDED < len(no_abstract) < 0.65 * ADDED  # missing_abstract_rate 0.51
    primary = {r["corpusid"] for r in r2.paper_ids if r["primary"]}
    assert added <= primary
    assert added <= {r["corpus_id"] for r in r2.topics}


def test_changed_papers_keep_their_id_and_change_title_or_abstract(releases):
    r1, r2, diff, sets = releases
    for d in diff:
        if d["change"] != "changed":
            continue
        pid = d["corpus_id"]
        assert (r2.title[pid] != r1.title[pid]) == d["title_changed"]
        assert (r2.abstract[pid] != r1.abstract[pid]) == d["abstract_changed"]
        if d["abstract_changed"]:
            first_sentence = r1.abstract[pid].split(". ")[0]
            assert r2.abstract[pid].startswith(first_sentence)
        assert r2.title[pid] and r2.abstract[pid]
        assert r2.year[pid] == r1.year[pid]
    # every record of a retitled paper (duplicates included) carries the new title
    retitled = {d["corpus_id"] for d in diff if d["title_changed"]}
    assert all(r["title"] == r2.title[r2.id_of(r)] for r in r2.records if r2.id_of(r) in retitled)


def test_unchanged_papers_keep_their_records(releases):
    r1, r2, _, sets = releases
    removed, changed, added = sets["removed"], sets["changed"], sets["added"]
    new_citers = collections.defaultdict(list)
    for a, b in r2.edges:
        if a in added:
            new_citers[b].append(a)
    lines2 = collections.Counter(r2.raw["metadata" if r1.fmt == "s2orc" else "papers"])
    same_bytes = 0
    for pid, rec1 in r1.papers.items():
        if pid in removed or pid in changed:
            continue
        rec2 = r2.papers[pid]
        if r1.fmt == "s2orc":
            out = [x for x in rec1["outbound_citations"] if int(x) not in removed]
            inb = [x for x in rec1["inbound_citations"] if int(x) not in removed]
            assert rec2["outbound_citations"] == out
            assert rec2["inbound_citations"][: len(inb)] == inb
            assert sorted(int(x) for x in rec2["inbound_citations"][len(inb) :]) == sorted(new_citers[pid])
            lists = ("outbound_citations", "inbound_citations", "has_outbound_citations", "has_inbound_citations")
            touched = out != rec1["outbound_citations"] or inb != rec1["inbound_citations"] or new_citers[pid]
        else:
            lost = sum(1 for a, b in r1.edges if b == pid and a in removed)
            refs_lost = sum(1 for a, b in r1.edges if a == pid and b in removed)
            assert rec2["citationcount"] == rec1["citationcount"] - lost + len(new_citers[pid])
            assert rec2["referencecount"] == rec1["referencecount"] - refs_lost
            lists = ("citationcount", "referencecount", "influentialcitationcount")
            touched = lost or refs_lost or new_citers[pid]
        assert {k: v for k, v in rec2.items() if k not in lists} == {k: v for k, v in rec1.items() if k not in lists}
        if not touched:
            same_bytes += 1
            line1 = (
                json.dumps(rec1) if r1.fmt == "s2orc" else json.dumps(rec1, separators=(",", ":"), ensure_ascii=False)
            )
            assert lines2[line1] == 1  # byte-identical line
    assert same_bytes > N // 2
    if r1.fmt == "s2ag":
        # abstracts and citation rows of release 1 that touch no removed paper are still there, byte for byte
        gone = {str(x) for x in removed}
        rows1 = collections.Counter(
            line
            for line in r1.raw["citations"]
            for r in parse([line])[0]
            if not {r["citingcorpusid"], r["citedcorpusid"]} & gone
        )
        rows2 = collections.Counter(line for line in r2.raw["citations"] if parse([line])[0])
        assert not rows1 - rows2
        assert sum((rows2 - rows1).values()) == r2.truth["diff"]["citations_added"]  # the added papers' rows
        abstracts1 = {json.loads(x)["corpusid"]: x for x in r1.raw["abstracts"] if not unparseable([x])}
        abstracts2 = {json.loads(x)["corpusid"]: x for x in r2.raw["abstracts"] if not unparseable([x])}
        assert all(abstracts2[pid] == line for pid, line in abstracts1.items() if pid not in removed | changed)


# ---------------------------------------------------------------------------------------------- exact counts


def test_counts_of_release_2_are_exact(releases):
    r1, r2, _, sets = releases
    c, fmt = r2.truth["counts"], r2.fmt
    assert set(c) == set(r1.truth["counts"])
    assert len(r2.papers) == c["papers"]
    first = "metadata" if fmt == "s2orc" else "papers"
    assert len(r2.records) + r2.malformed == c["lines"] == len(r2.raw[first])
    assert len(r2.records) - len(r2.papers) == c["duplicate_records"]
    assert sum(t is None for t in r2.title.values()) == c["papers_without_title"]
    assert sum(t in GENERIC_TITLES for t in r2.title.values()) == c["papers_with_generic_title"] >= 2
    assert sum(r2.abstract.get(pid) is None for pid in r2.papers) == c["papers_without_abstract"]
    # The edges build_graph keeps: both ends in the corpus, no self-citations, no duplicates.
    assert len(r2.edges) == c["citations"]
    assert len({x for e in r2.edges for x in e}) == c["graph_nodes"]
    ids = set(r2.papers)
    internal = [(a, b) for a, b in r2.rows if a is not None and b is not None and a != b and a in ids and b in ids]
    assert len(internal) - len(r2.edges) == c["duplicate_citations"]
    assert sum(1 for a, b in r2.rows if a is not None and a == b) == c["self_citations"]
    assert (
        sum(1 for a, b in r2.rows if None not in (a, b) and a != b and a in ids and b not in ids)
        == c["external_citations"]
    )
    assert sum(1 for a, b in r2.rows if a is None or b is None) == c["null_id_citations"]
    assert sum(1 for a, b in r2.rows if None not in (a, b) and a != b and a not in ids) == c["citing_not_in_corpus"]
    bad = {name: len(unparseable(raw)) for name, raw in r2.raw.items()}
    assert c["malformed_lines_by_dataset"] == bad and c["malformed_lines"] == sum(bad.values())
    if fmt == "s2ag":
        assert (c["abstract_lines"], c["citation_lines"]) == (len(r2.raw["abstracts"]), len(r2.raw["citations"]))
    assert len(r2.paper_ids) == c["paper_ids_rows"]
    assert sum(r["primary"] for r in r2.paper_ids) == c["paper_ids_primary"]
    assert sum(r["corpusid"] not in ids for r in r2.paper_ids) == c["paper_ids_outside_corpus"]
    # Release 1's edges, minus those of removed papers, plus those of added papers.
    removed = sets["removed"]
    gone = sum(1 for a, b in r1.edges if a in removed or b in removed)
    assert gone == r2.truth["diff"]["citations_removed"] > 0
    assert c["citations"] == len(r1.edges) - gone + r2.truth["diff"]["citations_added"]
    # release 1's dirt stays, less what belonged to removed papers
    assert 1 <= c["duplicate_records"] <= r1.truth["counts"]["duplicate_records"]
    assert 1 <= c["self_citations"] <= r1.truth["counts"]["self_citations"]


def test_census_reproduces_release_1_truth(releases):
    """The recount that writes release 2's counts gives release 1's generator.json counts on release 1."""
    r1, _, _, _ = releases
    counts = census(r1.root, r1.fmt).counts
    assert counts == {k: v for k, v in r1.truth["counts"].items() if not k.startswith("paper_ids")}


# ---------------------------------------------------------------------------------------------- determinism, CLI


def test_deriving_again_gives_identical_bytes(releases, capsys):
    _, r2, _, sets = releases
    before = all_files(r2.root)
    assert len(before) >= 15
    rc = main(
        ["generate", "--derive-from", str(r2.root.parent / "r1"), "--out", str(r2.root), "--seed", "3", "--overwrite"]
    )
    assert rc == 0 and "150 added, 30 removed, 60 changed" in capsys.readouterr().out
    after = all_files(r2.root)
    truth_before, truth_after = (json.loads(files.pop("generator.json")) for files in (before, after))
    assert after == before  # every other file, byte for byte
    assert truth_after["config"].pop("overwrite") and not truth_before["config"].pop("overwrite")
    assert truth_after == truth_before


def test_other_seed_other_papers_and_a_third_release(releases, tmp_path):
    r1, r2, _, sets = releases
    _, truth = derive(tmp_path / "other", r1.root, seed=4, added=10, removed=5, changed=0)
    other = {
        d["corpus_id"]
        for d in pq.read_table(tmp_path / "other" / "release_diff.parquet").to_pylist()
        if d["change"] == "removed"
    }
    assert len(other) == 5 and other != set(list(sets["removed"])[:5])
    assert (truth["diff"]["added"], truth["diff"]["changed"]) == (10, 0)
    if r1.fmt == "s2orc":  # a release 3 from release 2: later again, no id reused
        _, truth3 = derive(tmp_path / "r3", r2.root, added=20, removed=0, changed=0)
        r3 = Release(tmp_path / "r3", "s2orc")
        new = set(r3.papers) - set(r2.papers)
        assert len(new) == 20 and truth3["release"] == 3
        assert all(r3.year[pid] == max(r2.year.values()) + 1 for pid in new)
        assert truth3["derived_from"]["release"] == 2 and truth3["base_config"] == r2.truth["base_config"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--derive-from", "{tmp}/nope"], "does not exist"),
        (["--derive-from", "{tmp}"], "no generator.json"),
        (["--derive-from", "{r1}", "--removed", "3000"], "cannot remove 3,000 papers"),
        (["--derive-from", "{r1}", "--changed", "2999"], "cannot change 2,999 papers"),
        (["--derive-from", "{r1}", "--added", "-1"], "--added must be"),
        (["--derive-from", "{r1}", "--papers", "10"], "--papers cannot be used with --derive-from"),
        (["--derive-from", "{r1}", "--difficulty", "0"], "--difficulty cannot be used with --derive-from"),
        (["--added", "10"], "--papers is required"),
        (["--papers", "200", "--added", "10"], "only apply with --derive-from"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(args, message, releases, tmp_path, capsys):
    r1 = releases[0].root
    out = tmp_path / "out"
    argv = ["generate", *[a.format(tmp=tmp_path, r1=r1) for a in args], "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 + sum("INFO" in line for line in err) and message in err[-1]
    assert err[-1].startswith("citeflow: error:")
    assert not out.exists()


def test_refuses_a_release_of_another_generator_version(tmp_path):
    # Its vocabulary and niches are not this generator's: added papers would not fit the papers already there.
    r1 = tmp_path / "r1"
    generate(GenerateConfig(papers=300, out=str(r1)))
    meta = json.loads((r1 / "generator.json").read_text())
    other = GENERATOR_VERSION + 1
    (r1 / "generator.json").write_text(json.dumps({**meta, "generator_version": other}))
    with pytest.raises(CiteflowError, match=f"written by generator version {other}"):
        run(DeriveConfig(derive_from=str(r1), out=str(tmp_path / "r2")))
    assert not (tmp_path / "r2").exists()


def test_refuses_to_write_into_release_1_or_a_foreign_folder(releases, tmp_path):
    r1 = releases[0].root
    with pytest.raises(CiteflowError, match="apart from release 1"):
        run(DeriveConfig(derive_from=str(r1), out=str(r1 / "r2")))
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(CiteflowError, match="not empty"):
        run(DeriveConfig(derive_from=str(r1), out=str(tmp_path)))
    with pytest.raises(CiteflowError, match="holds no generator output"):
        run(DeriveConfig(derive_from=str(r1), out=str(tmp_path), overwrite=True))
    assert (tmp_path / "notes.txt").read_text() == "mine"
