"""The real arXiv HEP-Th corpus (`../shared/data/hepth/`, see its README) as citeflow's inputs, for tests and
measurements only: dated S2AG releases, the diff from each release to the next, and a held-out citation
benchmark in SciDocs' original layout.

    from tests.support.hepth import HepthConfig, write_releases
    written = write_releases(HepthConfig(out="/tmp/hepth"))                  # releases 2000-01-01 and 2002-01-01
    written = write_releases(HepthConfig(out="/tmp/hepth-3k", subset=3000))  # a dense 3,000-paper sub-graph

or `python -m tests.support.hepth --out /tmp/hepth [--subset 3000] [--queries 20] ...` (`--help`).

Reads `papers-1992-2001.jsonl.gz` and `citations-1992-2001.tsv.gz` (never copied into the repository). Writes,
under `out/`, one folder per release, named by its release id (`<last year + 1>-01-01`: a release published
at the start of the year after its last papers), each as `citeflow generate --derive-from` lays a release out
(README, "Backfilling a release from its diff"):

- `corpus/{papers,abstracts,citations}/<dataset>_<i>.jsonl.gz`: the release's papers (year <= its last year)
  and every line of the citations file between two of them, self-citations included (build_graph rejects
  those), in the S2AG records of `../shared/data/s2ag/`;
- `paper-ids/paper-ids_<i>.jsonl.gz`: one primary sha per paper (`sha1("hep-th/<number>")`);
- `scidocs/`: the benchmark, the same files in every release;
- `diffs/<previous>/to/<release>/` (every release but the first): the Datasets API diff from the release
  before, for papers, abstracts, citations and paper-ids (`citeflow.diffs`).
- `hepth.json`, written last: the config, the records written per release and the benchmark's shape.

What the S2AG records hold. Real: the corpus id (the 7-digit arXiv number as an int: `0001001` -> 1001), the
arXiv id, title, abstract, year, authors (the one authors string split at commas and "and", affiliations in
parentheses dropped) and, where the paper has a journal reference, the journal name, volume and pages parsed
from it. Filled in, the same for a paper in every release (so the diff holds only what a release adds or
drops): `authorId` (a number from a hash of the name), `url` (the paper's sha), `referencecount` and
`citationcount` (its lines in the whole citations file, as a later snapshot would count them),
`influentialcitationcount` 0, `isopenaccess` true, `s2fieldsofstudy` Physics (external and s2-fos-model),
`publicationtypes` JournalArticle with a journal reference and null without, `publicationdate` null (arXiv
numbers give the month, not the day), `venue` the journal name or arXiv's HEP-Th venue, `journal` the parsed
reference or ArXiv with the arXiv id as volume, the open-access block (arXiv's PDF, GREEN, no licence), citation
`isinfluential` false with null contexts and intents, and every `updated` the last day of the citing or cited
paper's year. Other ids (DOI, MAG, ...) are null.

The benchmark (SciDocs' cite and cocite tasks, docs/reference.md) comes from the first release's papers and citations,
so that it maps in every release: per task and split `queries` queries, each with up to `positives` related
papers (cite: papers it cites; cocite: papers cited together with it by some paper) as rel 1 and up to
`negatives` unrelated papers of a seeded negative pool as rel 0, keyed by the papers' shas:
`paper_metadata_view_cite_read.json` ({sha: {paper_id, title, abstract}}) and `{cite,cocite}/{val,test}.qrel`
(`qid 0 pid rel`). No MAG, MeSH, co-view, co-read or recomm files: HEP-Th has no labels or usage logs, and the
benchmark stage reports those tasks as missing. filter_leakage maps the shas through `paper-ids` and removes
the benchmark's papers from the training graph, which is what holds these edges out. With `benchmark=new` the
benchmark comes from the last release's graph instead, its queries the papers that release adds, so that it scores
a model on citations only the last release holds (an earlier release then lacks those queries: its
filter_leakage counts them unmapped, and needs `filter_leakage.max_unmapped_share` raised).

With `holdout=edges` the relations are held out instead of the papers: the citation lines that carry a judged
positive (`held_out_edges`) are left out of every written release, the benchmark's papers stay in the corpus, and
a run scores it with `filter_leakage.mode=report_only` (exclude would take thousands of papers out of the graph).
A corpus this size holds about a hundred queries per task and split SciDocs' way, whose 95% intervals are about
±3 points of MAP; held-out edges give a thousand (about ±1) at the cost of 8% of the lines (`hepth.json` counts
them per release).

`subset=N` keeps the N papers with the most lines in the citations file (citing or cited; ties: the smaller
arXiv number), a citation-dense sub-graph (3,000 papers: 76k citations between them), for e2e tests on CPUs.
Same config, same bytes.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from citeflow.diffs import DATASETS, FOLDER, PAPER_IDS, diff_folder, step_folder, write_manifest
from citeflow.errors import CiteflowError
from citeflow.synthcorpus.config import field_help
from citeflow.synthcorpus.outputs import write_gzip, write_json

HEPTH_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "hepth"
PAPERS_FILE = "papers-1992-2001.jsonl.gz"
CITATIONS_FILE = "citations-1992-2001.tsv.gz"
TASKS = ("cite", "cocite")
SPLITS = ("val", "test")
ARXIV_VENUE = "arXiv: High Energy Physics - Theory"
MANIFEST = "hepth.json"
# "Phys.Lett. B418 (1998) 324-328", "JHEP 0108 (2001) 036": name, volume, (year), first pages token
JOURNAL_REF = re.compile(r"(?P<name>.*?)\s*(?P<volume>[A-Z]?\d+)\s*\(\d{4}\)\s*(?P<pages>[\w.+-]+)?")

Key = int | str | tuple[str, str]


def require_files(folder: Path, *names: str) -> Path:
    """`folder` when it holds the files `names`; else the test is skipped, or fails where `CI=true` (CI has
    ../shared, so a missing file there is a broken checkout, not a reason to skip)."""
    from tests.support.shared import missing

    absent = [n for n in names if not (folder / n).is_file()]
    if not absent:
        return folder
    missing(f"{', '.join(absent)} not found in {folder}")


def require_hepth(data: Path = HEPTH_DATA) -> Path:
    """The HEP-Th folder (`require_files`)."""
    return require_files(data, PAPERS_FILE, CITATIONS_FILE)


@dataclass(frozen=True, kw_only=True)
class HepthConfig:
    """What to write where; same config, same bytes."""

    out: str = field(metadata=field_help("output folder; must be absent or empty"))
    data: str = field(default=str(HEPTH_DATA), metadata=field_help("folder holding the HEP-Th files"))
    years: tuple[int, ...] = field(
        default=(1999, 2001),
        metadata=field_help("last year of each release, increasing; a diff is written from each to the next"),
    )
    subset: int | None = field(
        default=None, metadata=field_help("keep only the N papers with the most citation lines; None: all 25,224")
    )
    shards: int = field(default=2, metadata=field_help("shards per dataset (corpus and paper-ids)"))
    seed: int = field(default=0, metadata=field_help("seed of the benchmark's queries, positives and negatives"))
    queries: int = field(default=100, metadata=field_help("benchmark queries per task and split (at most)"))
    positives: int = field(default=5, metadata=field_help("related candidates per query, at most (SciDocs: 5)"))
    negatives: int = field(default=25, metadata=field_help("unrelated candidates per query (SciDocs: 25)"))
    negative_pool: int | None = field(
        default=None,
        metadata=field_help(
            "papers the negatives are drawn from; None: max(negatives, min(1000, papers // 10)) of the first "
            "release (a pool keeps the benchmark a minority of the graph, as SciDocs is of S2ORC)"
        ),
    )
    compresslevel: int = field(default=6, metadata=field_help("gzip level of the shards"))
    holdout: str = field(
        default="papers",
        metadata=field_help(
            "papers: the benchmark's papers stay in the corpus and filter_leakage takes them out of the graph "
            "(SciDocs' way; a few hundred queries at most fit a corpus this size); edges: the relations the qrels "
            "judge are left out of the written citations (cite: query -> positive; cocite: every citing paper's "
            "line to the positive), the papers stay, and the run needs filter_leakage.mode=report_only"
        ),
    )
    benchmark: str = field(
        default="first",
        metadata=field_help(
            "first: the benchmark is built from the first release's graph; new: from the last release's, its "
            "queries the papers the last release adds (their citations are held-out edges of that release)"
        ),
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", os.fspath(self.out))
        object.__setattr__(self, "data", os.fspath(self.data))
        object.__setattr__(self, "years", tuple(self.years))
        if not self.years or any(b <= a for a, b in zip(self.years, self.years[1:], strict=False)):
            raise CiteflowError(f"years must be one or more increasing years, not {self.years!r}")
        counts = {"shards": self.shards, "queries": self.queries, "positives": self.positives}
        counts |= {"negatives": self.negatives, "compresslevel": self.compresslevel}
        for name, value in counts.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise CiteflowError(f"{name} must be a positive integer, not {value!r}")
        if self.holdout not in ("papers", "edges"):
            raise CiteflowError(f"holdout must be papers or edges, not {self.holdout!r}")
        if self.benchmark not in ("first", "new"):
            raise CiteflowError(f"benchmark must be first or new, not {self.benchmark!r}")
        if self.benchmark == "new" and len(self.years) < 2:
            raise CiteflowError("benchmark=new needs two releases or more: it asks the papers the last one adds")
        for name in ("subset", "negative_pool"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 2):
                raise CiteflowError(f"{name} must be an integer of at least 2 or None, not {value!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise CiteflowError(f"seed must be a non-negative integer, not {self.seed!r}")


@dataclass(frozen=True)
class HepthRelease:
    """One written release: its folders, and what was written into them."""

    release: str
    last_year: int
    root: Path
    corpus: Path
    paper_ids: Path
    scidocs: Path
    diff: Path | None  # diffs/<previous>/to/<release>, None for the first release
    papers: int
    citation_lines: int


@dataclass(frozen=True)
class HepthReleases:
    root: Path
    manifest: Path
    releases: tuple[HepthRelease, ...]

    def __getitem__(self, release: str) -> HepthRelease:
        return next(r for r in self.releases if r.release == release)


# ---------------------------------------------------------------------------------------------------
# The raw files


@dataclass(frozen=True)
class Hepth:
    papers: dict[str, dict[str, Any]]  # by 7-digit arXiv number, in number order
    edges: list[tuple[str, str]]  # (citing, cited), in file order


def read_hepth(data: Path) -> Hepth:
    papers_path, citations_path = data / PAPERS_FILE, data / CITATIONS_FILE
    for path in (papers_path, citations_path):
        if not path.is_file():
            raise CiteflowError(f"{path} not found; point data= at the folder of the HEP-Th files")
    with gzip.open(papers_path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    papers = {r["id"]: r for r in sorted(rows, key=lambda r: r["id"])}
    if len(papers) != len(rows):
        raise CiteflowError(f"{papers_path} repeats paper ids")
    with gzip.open(citations_path, "rt", encoding="utf-8") as fh:
        header = fh.readline().split()
        edges = [tuple(line.split()) for line in fh if line.strip()]
    if header != ["citing", "cited"] or any(len(e) != 2 or e[0] not in papers or e[1] not in papers for e in edges):
        raise CiteflowError(f"{citations_path}: expected citing<TAB>cited lines between papers of {PAPERS_FILE}")
    return Hepth(papers=papers, edges=edges)  # type: ignore[arg-type]


def most_connected(hepth: Hepth, n: int) -> list[str]:
    """The `n` papers with the most lines in the citations file (citing or cited), ties by arXiv number."""
    lines = collections.Counter(p for e in hepth.edges for p in e)
    return sorted(sorted(hepth.papers, key=lambda p: (-lines[p], p))[:n])


# ---------------------------------------------------------------------------------------------------
# S2AG records


def corpus_id(number: str) -> int:
    return int(number)


def sha_of(number: str) -> str:
    return hashlib.sha1(f"hep-th/{number}".encode()).hexdigest()


def split_authors(text: str) -> list[str]:
    """Names of an arXiv authors string: affiliations in (nested) parentheses dropped, split at commas and 'and'."""
    flat, depth = [], 0
    for ch in text:
        depth += ch == "("
        if depth == 0:
            flat.append(ch)
        depth -= ch == ")" and depth > 0
    names = re.split(r",\s*(?:and\s+)?|\s+and\s+", "".join(flat))
    return [" ".join(n.split()) for n in names if n.strip()]


def _author_id(name: str) -> str:
    return str(int(hashlib.sha1(name.encode()).hexdigest()[:8], 16))


def parse_journal_ref(ref: str) -> dict[str, Any] | None:
    """S2AG's `journal` of an arXiv journal reference (None without one)."""
    ref = " ".join(ref.split())
    if not ref:
        return None
    m = JOURNAL_REF.match(ref)
    if m is None or not m["name"]:
        return {"name": ref, "pages": None, "volume": ""}
    return {"name": m["name"], "pages": m["pages"], "volume": m["volume"]}


def _updated(year: int) -> str:
    return f"{year}-12-31T00:00:00.000Z"


def paper_record(p: dict[str, Any], references: int, citations: int) -> dict[str, Any]:
    """An S2AG `papers` record, in the real sample's key order (the filled-in fields: module docstring)."""
    cid, arxiv = corpus_id(p["id"]), f"hep-th/{p['id']}"
    journal = parse_journal_ref(p["journal_ref"])
    return {
        "corpusid": cid,
        "externalids": {
            "ACL": None,
            "DBLP": None,
            "ArXiv": arxiv,
            "MAG": None,
            "CorpusId": str(cid),
            "PubMed": None,
            "DOI": None,
            "PubMedCentral": None,
        },
        "url": f"https://www.semanticscholar.org/paper/{sha_of(p['id'])}",
        "title": p["title"],
        "authors": [{"authorId": _author_id(n), "name": n} for n in split_authors(p["authors"])],
        "venue": journal["name"] if journal else ARXIV_VENUE,
        "publicationvenueid": None,
        "year": p["year"],
        "referencecount": references,
        "citationcount": citations,
        "influentialcitationcount": 0,
        "isopenaccess": True,
        "s2fieldsofstudy": [
            {"category": "Physics", "source": "external"},
            {"category": "Physics", "source": "s2-fos-model"},
        ],
        "publicationtypes": ["JournalArticle"] if journal else None,
        "publicationdate": None,
        "journal": journal or {"name": "ArXiv", "pages": None, "volume": f"abs/{arxiv}"},
        "updated": _updated(p["year"]),
    }


def abstract_record(p: dict[str, Any]) -> dict[str, Any]:
    arxiv = f"hep-th/{p['id']}"
    ids = {"MAG": None, "ACL": None, "DOI": None, "PubMedCentral": None, "ArXiv": arxiv}
    return {
        "corpusid": corpus_id(p["id"]),
        "openaccessinfo": {
            "externalids": ids,
            "license": None,
            "url": f"https://arxiv.org/pdf/{arxiv}",
            "status": "GREEN",
        },
        "abstract": p["abstract"],
        "updated": _updated(p["year"]),
    }


def citation_record(citing: str, cited: str, year: int) -> dict[str, Any]:
    return {
        "citingcorpusid": str(corpus_id(citing)),
        "citedcorpusid": str(corpus_id(cited)),
        "isinfluential": False,
        "contexts": None,
        "intents": None,
        "updated": _updated(year),
    }


def _line(record: dict[str, Any]) -> bytes:
    """A JSON line as S2AG writes it: compact separators, raw UTF-8."""
    return (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def _delete_line(dataset: str, key: Key) -> bytes:
    if dataset == "citations":
        return _line({"citingcorpusid": key[0], "citedcorpusid": key[1]})  # type: ignore[index]
    return _line({"sha": key} if dataset == PAPER_IDS else {"corpusid": key})


def release_members(hepth: Hepth, kept: list[str], last_year: int) -> list[str]:
    """The papers of `kept` a release up to `last_year` holds, in `kept`'s order."""
    return [p for p in kept if hepth.papers[p]["year"] <= last_year]


def release_lines(hepth: Hepth, kept: list[str], last_year: int) -> dict[str, dict[Key, bytes]]:
    """Per dataset (papers, abstracts, citations, paper-ids), each record's line by its primary key, in the
    order written: papers by corpus id, citations in the file's order."""
    out_lines = collections.Counter(a for a, _ in hepth.edges)
    in_lines = collections.Counter(b for _, b in hepth.edges)
    members = release_members(hepth, kept, last_year)
    inside = set(members)
    lines: dict[str, dict[Key, bytes]] = {d: {} for d in (*DATASETS, PAPER_IDS)}
    for number in members:
        p, cid = hepth.papers[number], corpus_id(number)
        lines["papers"][cid] = _line(paper_record(p, out_lines[number], in_lines[number]))
        lines["abstracts"][cid] = _line(abstract_record(p))
        lines[PAPER_IDS][sha_of(number)] = _line({"sha": sha_of(number), "corpusid": cid, "primary": True})
    for a, b in hepth.edges:
        if a in inside and b in inside:
            key = (str(corpus_id(a)), str(corpus_id(b)))
            lines["citations"][key] = _line(citation_record(a, b, hepth.papers[a]["year"]))
    return lines


def _shards(items: list[bytes], count: int) -> list[list[bytes]]:
    cuts = [len(items) * i // count for i in range(count + 1)]
    return [items[cuts[i] : cuts[i + 1]] for i in range(count)]


def _write_dataset(folder: Path, name: str, lines: Iterable[bytes], shards: int, level: int) -> None:
    for i, part in enumerate(_shards(list(lines), shards)):
        write_gzip(folder / f"{name}_{i}.jsonl.gz", [b"".join(part)], level)


def write_diff(root: Path, old: str, new: str, before: dict, after: dict, level: int) -> Path:
    """`new/diffs/<old>/to/<new>/`: per dataset, every record of a key `new` adds or changes (update file) and one
    delete record per key it drops (delete file), with a manifest each (citeflow.diffs)."""
    folder = diff_folder(root / new / FOLDER, old, new)
    step = step_folder(old, new)
    for dataset in (*DATASETS, PAPER_IDS):
        was, now = before[dataset], after[dataset]
        updates = [line for key, line in now.items() if was.get(key) != line]
        deletes = [_delete_line(dataset, key) for key in was if key not in now]
        names = {kind: f"{step}/{dataset}/{kind}_0.jsonl.gz" for kind in ("updates", "deletes")}
        write_gzip(folder / names["updates"], [b"".join(updates)], level)
        write_gzip(folder / names["deletes"], [b"".join(deletes)], level)
        entry = {
            "from_release": old,
            "to_release": new,
            "update_files": [names["updates"]],
            "delete_files": [names["deletes"]],
        }
        write_manifest(folder, dataset, old, new, [entry])
    return folder


# ---------------------------------------------------------------------------------------------------
# The benchmark

Rows = list[tuple[str, str, int]]  # (query, candidate, rel), arXiv numbers


def plan_benchmark(
    papers: list[str], edges: list[tuple[str, str]], config: HepthConfig, queries_from: set[str] | None = None
) -> dict[str, dict[str, Rows]]:
    """Per task and split, the qrel rows over `papers` (sorted arXiv numbers) and the `edges` between them, the
    queries among `queries_from` when given.

    Queries are drawn in a seeded order from the papers with a related paper; val and test take distinct ones.
    A query's candidates are up to `positives` of its related papers and up to `negatives` papers of the pool
    that are neither related nor the query, in a seeded order."""
    rng = np.random.default_rng(config.seed)
    refs: dict[str, set[str]] = collections.defaultdict(set)
    citers: dict[str, set[str]] = collections.defaultdict(set)
    for a, b in edges:
        if a != b:
            refs[a].add(b)
            citers[b].add(a)
    size = config.negative_pool or max(config.negatives, min(1000, len(papers) // 10))
    pool = sorted(rng.choice(papers, size=min(size, len(papers)), replace=False).tolist())

    def related(task: str, q: str) -> set[str]:
        if task == "cite":
            return refs[q]
        return {o for c in citers[q] for o in refs[c]} - {q}

    plan: dict[str, dict[str, Rows]] = {}
    for task in TASKS:
        eligible = [p for p in papers if (refs if task == "cite" else citers)[p]]
        if queries_from is not None:
            eligible = [p for p in eligible if p in queries_from]
        chosen: list[tuple[str, set[str]]] = []
        for i in rng.permutation(len(eligible)).tolist():
            rel = related(task, eligible[i])
            if rel:
                chosen.append((eligible[i], rel))
                if len(chosen) == 2 * config.queries:
                    break
        each = min(config.queries, len(chosen) // 2)
        if each == 0:
            raise CiteflowError(f"too few papers with a {task} relation for a benchmark; keep more papers")
        plan[task] = {}
        for split, picked in (("val", chosen[:each]), ("test", chosen[each : 2 * each])):
            rows: Rows = []
            for q, rel in picked:
                pos = rng.choice(sorted(rel), size=min(config.positives, len(rel)), replace=False).tolist()
                others = [p for p in pool if p not in rel and p != q]
                neg = rng.choice(others, size=min(config.negatives, len(others)), replace=False).tolist()
                mine = [(q, p, 1) for p in pos] + [(q, p, 0) for p in neg]
                rows += [mine[j] for j in rng.permutation(len(mine)).tolist()]
            plan[task][split] = rows
    return plan


def held_out_edges(plan: dict[str, dict[str, Rows]], edges: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """The citation lines that carry a relation the qrels judge as positive: for cite, the query's line to the
    positive; for cocite, every line to the positive from a paper that also cites the query. Without them no
    written release holds a judged relation (the relations scored were never trained on), while the papers
    and every other line stay in the graph."""
    citers: dict[str, set[str]] = collections.defaultdict(set)
    for a, b in edges:
        citers[b].add(a)
    held: set[tuple[str, str]] = set()
    for task, splits in plan.items():
        for rows in splits.values():
            for q, p, rel in rows:
                if rel and task == "cite":
                    held.add((q, p))
                elif rel:
                    held.update((c, p) for c in citers[q] & citers[p])
    return held


def write_benchmark(plan: dict[str, dict[str, Rows]], hepth: Hepth, root: Path) -> dict[str, Any]:
    """SciDocs' original layout under `root`; returns its shape (queries, candidates, positives per split)."""
    shape: dict[str, Any] = {}
    seen: dict[str, None] = {}
    for task, splits in plan.items():
        shape[task] = {}
        for split, rows in splits.items():
            path = root / task / f"{split}.qrel"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(f"{sha_of(q)} 0 {sha_of(p)} {r}\n" for q, p, r in rows), encoding="utf-8")
            for q, p, _ in rows:
                seen.setdefault(q)
                seen.setdefault(p)
            shape[task][split] = {
                "queries": len({q for q, _, _ in rows}),
                "candidates": len(rows),
                "positives": sum(r for _, _, r in rows),
            }
    metadata = {
        sha_of(n): {"paper_id": sha_of(n), "title": hepth.papers[n]["title"], "abstract": hepth.papers[n]["abstract"]}
        for n in seen
    }
    (root / "paper_metadata_view_cite_read.json").write_text(json.dumps(metadata), encoding="utf-8")
    shape["papers"] = len(metadata)
    return shape


# ---------------------------------------------------------------------------------------------------
# Entry point


def release_id(last_year: int) -> str:
    return f"{last_year + 1}-01-01"


def write_releases(config: HepthConfig) -> HepthReleases:
    """Write the releases, their diffs and the benchmark (module docstring); `hepth.json` last."""
    out = Path(config.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CiteflowError(f"output folder {str(out)!r} exists and is not empty; choose an empty or new folder")
    hepth = read_hepth(Path(config.data))
    kept = most_connected(hepth, config.subset) if config.subset else list(hepth.papers)
    level = config.compresslevel

    if config.benchmark == "first":
        graph = [p for p in kept if hepth.papers[p]["year"] <= config.years[0]]
        new = None
    else:
        graph = [p for p in kept if hepth.papers[p]["year"] <= config.years[-1]]
        new = {p for p in graph if hepth.papers[p]["year"] > config.years[-2]}
    inside = set(graph)
    plan = plan_benchmark(graph, [e for e in hepth.edges if e[0] in inside and e[1] in inside], config, new)
    held = held_out_edges(plan, hepth.edges) if config.holdout == "edges" else set()
    if held:
        hepth = Hepth(papers=hepth.papers, edges=[e for e in hepth.edges if e not in held])

    written, previous, summary = [], None, []
    for year in config.years:
        name = release_id(year)
        root = out / name
        lines = release_lines(hepth, kept, year)
        for dataset in DATASETS:
            _write_dataset(root / "corpus" / dataset, dataset, lines[dataset].values(), config.shards, level)
        _write_dataset(root / PAPER_IDS, PAPER_IDS, lines[PAPER_IDS].values(), config.shards, level)
        shape = write_benchmark(plan, hepth, root / "scidocs")
        diff = None if previous is None else write_diff(out, previous[0], name, previous[1], lines, level)
        release = HepthRelease(
            release=name,
            last_year=year,
            root=root,
            corpus=root / "corpus",
            paper_ids=root / PAPER_IDS,
            scidocs=root / "scidocs",
            diff=diff,
            papers=len(lines["papers"]),
            citation_lines=len(lines["citations"]),
        )
        written.append(release)
        members = set(release_members(hepth, kept, year))
        summary.append(
            {
                "release": name,
                "last_year": year,
                "papers": release.papers,
                "citation_lines": release.citation_lines,
                "held_out_lines": sum(a in members and b in members for a, b in held),
            }
        )
        previous = (name, lines)
    manifest = out / MANIFEST
    write_json(manifest, {"config": dataclasses.asdict(config), "releases": summary, "benchmark": shape})
    return HepthReleases(root=out, manifest=manifest, releases=tuple(written))


def main(argv: list[str] | None = None) -> int:
    """`python -m tests.support.hepth --out DIR [--subset N] [--years 1999,2001] [--queries N] [--seed S] ...`:
    write the releases and print where (every HepthConfig field is an option, help text from its metadata)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.support.hepth", description=(__doc__ or "").split("\n\n")[0])
    for f in dataclasses.fields(HepthConfig):
        if f.name == "years":
            parser.add_argument("--years", type=lambda s: tuple(int(y) for y in s.split(",")), help=f.metadata["help"])
        else:
            kind = str if f.type == "str" else int
            parser.add_argument(
                f"--{f.name.replace('_', '-')}", type=kind, help=f.metadata["help"], required=f.name == "out"
            )
    args = {k: v for k, v in vars(parser.parse_args(argv)).items() if v is not None}
    try:
        written = write_releases(HepthConfig(**args))
    except CiteflowError as exc:
        print(f"error: {exc}")
        return 2
    for r in written.releases:
        print(f"{r.release}: {r.papers:,} papers, {r.citation_lines:,} citation lines in {r.root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
