"""Derive a later release of a generated snapshot: some papers added, some removed, some changed.

Run: `citeflow generate --derive-from RELEASE1 --out RELEASE2 [--added N] [--removed N] [--changed N] [--seed S]
[--overwrite]` (or `run(DeriveConfig(derive_from=..., out=..., ...))`). Counts default to 5% added, 1% removed and
2% changed of release 1's papers. The same release 1, counts and seed give byte-identical files. Release 1 may
itself be a derived release (release 3 from release 2, ...).

Reads RELEASE1, the output of `citeflow generate`: `generator.json` (format, seed, config), `corpus/`,
`paper-ids/`, `paper_topics.parquet`, `scidocs_truth.jsonl` and `scidocs/`. The gzipped shards are read twice,
line by line (a census pass, then the rewrite); only per-paper numpy arrays, the edge list and the few rewritten
papers' new texts are held in memory, never the records.

Writes RELEASE2 in release 1's layout (S2ORC or S2AG, same shard files, same compression), into a temporary
folder beside it that is renamed into place at the end (generator.json written last):
- removed papers: every record of theirs is gone, with every citation to or from them (S2ORC: their ids leave
  the other papers' outbound / inbound lists; S2AG: their citation and abstract rows go), their paper-ids rows
  and their paper_topics row. SciDocs papers, and papers whose title a SciDocs id is (or is not) matched by, are
  never removed, so scidocs/ and scidocs_truth.jsonl stay valid and are copied unchanged.
- changed papers: same corpus id, a revised abstract (its first half kept, the rest rewritten), a corrected
  title, or both (60 / 20 / 20), in every record of the paper. Only papers with a title and an abstract, outside
  SciDocs and without a generic title, change.
- added papers: new corpus ids (used nowhere in release 1), published in the year after release 1's last year,
  with titles and abstracts from release 1's topic vocabulary (generate_snapshot.build_vocabulary with its seed,
  make_titles, make_abstracts), external ids above release 1's, and references to existing papers drawn like
  the generator draws them (mostly within the subtopic, then the field, then across fields; preferential
  attachment on citations received, recent papers likelier). They are appended to the end of release 1's
  shards. S2ORC inbound lists and S2AG citation / reference counts of the papers they touch follow.
  About `missing_abstract_rate` of them have no abstract; they carry no other dirt.
- release 1's other dirt (duplicate and malformed lines, self-, duplicate and external citations, null ids)
  stays as it was, except what belonged to a removed paper (a malformed line is dropped when it shows a removed
  id). Unchanged papers whose citations did not change keep their exact bytes.
- `paper-ids/` without the removed papers' shas, plus a primary sha per added paper; `paper_topics.parquet`
  without removed rows, added rows appended; `release_diff.parquet`: corpus_id, change (added / removed /
  changed), title_changed, abstract_changed, sorted by corpus id.
- `generator.json` (see `run`): `counts` in release 1's keys, all exact (recounted from the lines as they are
  written, the way build_graph keeps papers and edges), `diff` and `derived_from`.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import hashlib
import itertools
import json
import logging
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from citeflow.errors import CiteflowError
from citeflow.text import fold_titles
from jobs import generate_snapshot as G

log = logging.getLogger("citeflow")

# Bump when the same release 1, counts and seed would give different files.
DERIVE_VERSION = 1
DEFAULT_SHARES = {"added": 0.05, "removed": 0.01, "changed": 0.02}
_DATASETS = {"s2orc": ("metadata",), "s2ag": ("papers", "abstracts", "citations")}
_OURS = (
    "generator.json",
    "corpus",
    "paper-ids",
    "scidocs",
    "scidocs_truth.jsonl",
    "paper_topics.parquet",
    "release_diff.parquet",
)
# What happens to a changed paper: abstract revised, title corrected, or both.
_CHANGE_P = (0.6, 0.2, 0.2)
_LOC = 1 << 32  # a line's location: shard * _LOC + line number
_NUMBER = re.compile(rb"\d+")


_help = G._help  # the same field help as GenerateConfig's, for the CLI


@dataclass(frozen=True, kw_only=True)
class DeriveConfig:
    """`citeflow generate --derive-from`: a later release of a generated snapshot. Same inputs, same bytes."""

    derive_from: str = field(metadata=_help("release 1: a folder written by `citeflow generate` (or derived)"))
    out: str = field(metadata=_help("output folder; must be absent or empty unless overwrite is set"))
    added: int | None = field(default=None, metadata=_help("papers to add; None: 5% of release 1's papers"))
    removed: int | None = field(
        default=None, metadata=_help("papers to remove (never SciDocs papers); None: 1% of release 1's papers")
    )
    changed: int | None = field(
        default=None, metadata=_help("papers whose title and/or abstract change; None: 2% of release 1's papers")
    )
    seed: int = field(default=0, metadata=_help("random seed (>= 0); same seed and release 1 give identical files"))
    overwrite: bool = field(default=False, metadata=_help("replace a previous generator output in `out`"))

    def __post_init__(self) -> None:
        for name in ("derive_from", "out"):
            value = getattr(self, name)
            object.__setattr__(self, name, os.fspath(value) if isinstance(value, os.PathLike) else value)
        if not isinstance(self.derive_from, str) or not self.derive_from:
            raise CiteflowError("a release to derive from is required (--derive-from DIR)")
        if not isinstance(self.out, str) or not self.out:
            raise CiteflowError("an output folder is required (--out DIR)")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or not 0 <= self.seed < 2**63:
            raise CiteflowError(f"seed must be an integer between 0 and 2**63 - 1, not {self.seed!r}")
        for name in DEFAULT_SHARES:
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 50_000_000
            ):
                raise CiteflowError(f"--{name} must be an integer between 0 and 50,000,000, not {value!r}")

    def count(self, name: str, papers: int) -> int:
        """The requested count, or its default share of release 1's `papers`."""
        value = getattr(self, name)
        return value if value is not None else round(DEFAULT_SHARES[name] * papers)


# ---------------------------------------------------------------------------------------------------
# Reading release 1


def _shards(folder: Path, prefix: str) -> list[Path]:
    """`{prefix}_{i}.jsonl.gz` files of a folder, by shard number."""
    pattern = re.compile(rf"{re.escape(prefix)}_(\d+)\.jsonl\.gz")
    found = [(int(m.group(1)), p) for p in folder.glob("*.jsonl.gz") if (m := pattern.fullmatch(p.name))]
    return [p for _, p in sorted(found)]


def _load_release(root: Path) -> dict[str, Any]:
    """generator.json of a complete release, after checking that its files are there."""
    if not root.is_dir():
        raise CiteflowError(f"release folder {str(root)!r} does not exist or is not a folder (--derive-from)")
    meta_path = root / "generator.json"
    if not meta_path.is_file():
        raise CiteflowError(f"{str(root)!r} is not a complete `citeflow generate` output: no generator.json")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CiteflowError(f"cannot read {str(meta_path)!r}: {exc}") from None
    if (
        not isinstance(meta, dict)
        or meta.get("format") not in _DATASETS
        or not isinstance(meta.get("config"), dict)
        or not isinstance(meta.get("counts"), dict)
    ):
        raise CiteflowError(
            f"{str(meta_path)!r} is not the generator.json of `citeflow generate` (format, config or counts missing)"
        )
    for name in ("paper-ids", "scidocs", "corpus"):
        if not (root / name).is_dir():
            raise CiteflowError(f"release {str(root)!r} has no {name}/ folder; it is not a complete generator output")
    for name in ("scidocs_truth.jsonl", "paper_topics.parquet"):
        if not (root / name).is_file():
            raise CiteflowError(f"release {str(root)!r} has no {name}; it is not a complete generator output")
    counts = {ds: len(_shards(root / "corpus" / ds, ds)) for ds in _DATASETS[meta["format"]]}
    if min(counts.values()) == 0 or len(set(counts.values())) != 1:
        raise CiteflowError(
            f"release {str(root)!r}: expected as many {meta['format']} shards in each of "
            f"{', '.join('corpus/' + d for d in counts)}, found {counts}"
        )
    if not _shards(root / "paper-ids", "paper-ids"):
        raise CiteflowError(f"release {str(root)!r}: paper-ids/ holds no paper-ids_*.jsonl.gz shards")
    return meta


def _base_config(meta: dict[str, Any]) -> G.GenerateConfig:
    """The GenerateConfig of the snapshot the chain of releases started from (rates, vocabulary seed)."""
    try:
        return G.GenerateConfig(**meta.get("base_config", meta["config"]))
    except (TypeError, CiteflowError) as exc:
        raise CiteflowError(f"release 1's generator.json has no usable generate config: {exc}") from None


def _lines(path: Path) -> Iterator[tuple[bytes, dict | None]]:
    """Each line of a .jsonl.gz shard (ending with a newline) and its JSON object, or None if it is not one."""
    with gzip.open(path, "rb") as fh:
        for line in fh:
            try:
                rec = json.loads(line.decode("utf-8"))
            except ValueError:  # truncated JSON, or UTF-8 cut mid-character
                rec = None
            yield (line if line.endswith(b"\n") else line + b"\n"), (rec if isinstance(rec, dict) else None)


def _int(value: Any) -> int:
    """A corpus id as written (int or digit string); -1 for null or empty."""
    return -1 if value is None or value == "" else int(value)


def _filled(value: Any) -> bool:
    return value is not None and value != "" and value != []


def s2orc_completeness(r: dict) -> int:
    """build_graph's score of an S2ORC record (spark.graph.completeness): filled fields, fields of study, refs."""
    fields = ("title", "abstract", "year", "doi", "pubmed_id", "arxiv_id", "mag_id")
    return (
        sum(_filled(r.get(f)) for f in fields)
        + _filled(r.get("venue") or r.get("journal"))
        + _filled(r.get("mag_field_of_study"))
        + _filled(r.get("outbound_citations"))
    )


def s2ag_completeness(r: dict) -> int:
    """build_graph's score of an S2AG papers record (its abstract lives in another dataset)."""
    ext = r.get("externalids") or {}
    venue = r.get("venue") or (r.get("journal") or {}).get("name")
    return (
        sum(_filled(r.get(f)) for f in ("title", "year"))
        + _filled(venue)
        + sum(_filled(ext.get(k)) for k in ("DOI", "PubMed", "ArXiv", "MAG"))
        + _filled(r.get("s2fieldsofstudy"))
    )


@dataclass
class Corpus:
    """A release's corpus as build_graph sees it: per paper (sorted by corpus id), its most complete record."""

    ids: np.ndarray  # int64, sorted
    loc: np.ndarray  # location of the kept record (shard * 2**32 + line)
    year: np.ndarray  # -1 if null
    title: pa.Array  # kept record's title (null if none)
    has_abstract: np.ndarray
    generic: np.ndarray  # title is one of generate_snapshot.GENERIC_TITLES
    src: np.ndarray  # clean edges (positions in ids): unique, no self-citations, both ends in corpus
    dst: np.ndarray
    referenced: np.ndarray  # every id any citation entry names (in or out of the corpus)
    floors: dict[str, int]  # largest MAG, PubMed and PMC ids
    counts: dict[str, Any]  # generator.json counts of the corpus (without paper-ids)


class Census:
    """Learns a corpus from its lines as they go by: per record a few numbers, per citation entry two ids.

    Feed every line of every shard (`line`), call `end_shard` after each shard, then `result`."""

    def __init__(self, fmt: str, shards: int) -> None:
        self.fmt, self.shards = fmt, shards
        self.lines: collections.Counter[str] = collections.Counter()
        self.malformed: collections.Counter[str] = collections.Counter()
        self.floors = {"mag": 0, "pubmed": 0, "pmc": 0}
        self._buf: dict[str, list[int]] = collections.defaultdict(list)
        self._cols: dict[str, list[np.ndarray]] = collections.defaultdict(list)
        self._title_buf: list[str | None] = []
        self._titles: list[pa.Array] = []
        self._records = 0

    def line(self, dataset: str, rec: dict | None, loc: int) -> None:
        self.lines[dataset] += 1
        if rec is None:
            self.malformed[dataset] += 1
        elif dataset in ("metadata", "papers"):
            self._paper(rec, loc)
        elif dataset == "abstracts":
            if rec.get("abstract") is not None:
                self._buf["abstract_id"].append(_int(rec.get("corpusid")))
        else:
            self._buf["citing"].append(_int(rec.get("citingcorpusid")))
            self._buf["cited"].append(_int(rec.get("citedcorpusid")))

    def _paper(self, rec: dict, loc: int) -> None:
        b = self._buf
        if self.fmt == "s2orc":
            pid, refs = int(rec["paper_id"]), rec.get("outbound_citations") or []
            score, abstract_null = s2orc_completeness(rec), rec.get("abstract") is None
            ext = (rec.get("mag_id"), rec.get("pubmed_id"), (rec.get("pmc_id") or "")[3:])
            b["ref_rec"].extend([self._records] * len(refs))
            b["ref_id"].extend(int(x) for x in refs)
        else:
            pid, refs = int(rec["corpusid"]), []
            score, abstract_null = s2ag_completeness(rec), True
            e = rec.get("externalids") or {}
            ext = (e.get("MAG"), e.get("PubMed"), e.get("PubMedCentral"))
        for key, value in zip(("mag", "pubmed", "pmc"), ext, strict=True):
            if isinstance(value, str) and value.isdigit():
                self.floors[key] = max(self.floors[key], int(value))
        year = rec.get("year")
        b["id"].append(pid)
        b["loc"].append(loc)
        b["score"].append(score)
        b["nref"].append(len(refs))
        b["year"].append(year if isinstance(year, int) else -1)
        b["abstract_null"].append(abstract_null)
        title = rec.get("title")
        self._title_buf.append(title if isinstance(title, str) else None)
        self._records += 1

    def end_shard(self) -> None:
        for key, values in self._buf.items():
            self._cols[key].append(np.array(values, dtype=np.int64))
        self._buf.clear()
        self._titles.append(pa.array(self._title_buf, pa.string()))
        self._title_buf = []

    def _col(self, key: str) -> np.ndarray:
        return np.concatenate(self._cols[key]) if self._cols[key] else np.empty(0, np.int64)

    def result(self) -> Corpus:
        self.end_shard()
        rec_id, score, nref, loc = self._col("id"), self._col("score"), self._col("nref"), self._col("loc")
        # build_graph keeps the most complete record of an id, then the one with more citations.
        order = np.lexsort((loc, -nref, -score, rec_id))
        first = np.r_[True, rec_id[order][1:] != rec_id[order][:-1]] if len(order) else np.empty(0, bool)
        kept = order[first]
        ids = rec_id[kept]
        title = pa.concat_arrays(self._titles).take(pa.array(kept))
        generic = np.asarray(pc.fill_null(pc.is_in(title, value_set=pa.array(G.GENERIC_TITLES)), False), dtype=bool)
        if self.fmt == "s2orc":
            has_abstract = self._col("abstract_null")[kept] == 0
            is_kept = G._mask(len(rec_id), kept)
            ref_rec, ref_id = self._col("ref_rec"), self._col("ref_id")
            mine = is_kept[ref_rec]
            citing, cited = rec_id[ref_rec[mine]], ref_id[mine]
            null = np.zeros(len(citing), bool)
            referenced = ref_id
        else:
            has_abstract = np.isin(ids, self._col("abstract_id"))
            citing, cited = self._col("citing"), self._col("cited")
            null = (citing < 0) | (cited < 0)
            referenced = np.concatenate([citing, cited])
        # The order of build_graph's edge checks: null id, self-citation, citing / cited not in the corpus.
        own = ~null & (citing == cited)
        citing_in, cited_in = np.isin(citing, ids), np.isin(cited, ids)
        citing_out = ~null & ~own & ~citing_in
        external = ~null & ~own & citing_in & ~cited_in
        internal = ~null & ~own & citing_in & cited_in
        src, dst = np.searchsorted(ids, citing[internal]), np.searchsorted(ids, cited[internal])
        pairs = np.unique(src * len(ids) + dst)
        src, dst = pairs // max(len(ids), 1), pairs % max(len(ids), 1)
        degree = np.bincount(src, minlength=len(ids)) + np.bincount(dst, minlength=len(ids))
        by_dataset = {ds: self.malformed[ds] for ds in _DATASETS[self.fmt]}
        first_ds = _DATASETS[self.fmt][0]
        counts: dict[str, Any] = {"papers": len(ids), "lines": self.lines[first_ds]}
        if self.fmt == "s2ag":
            counts["abstract_lines"] = self.lines["abstracts"]
            counts["citation_lines"] = self.lines["citations"]
        counts.update(
            {
                "malformed_lines": sum(by_dataset.values()),
                "malformed_lines_by_dataset": by_dataset,
                "duplicate_records": len(rec_id) - len(ids),
                "papers_without_title": int(title.null_count),
                "papers_without_abstract": int((~has_abstract).sum()),
                "papers_with_generic_title": int(generic.sum()),
                "citations": len(pairs),
                "graph_nodes": int((degree > 0).sum()),
                "self_citations": int(own.sum()),
                "duplicate_citations": int(internal.sum()) - len(pairs),
                "external_citations": int(external.sum()),
                "null_id_citations": int(null.sum()),
                "citing_not_in_corpus": int(citing_out.sum()),
                "shards": self.shards,
            }
        )
        return Corpus(
            ids=ids,
            loc=loc[kept],
            year=self._col("year")[kept],
            title=title,
            has_abstract=has_abstract,
            generic=generic,
            src=src,
            dst=dst,
            referenced=np.unique(referenced[referenced >= 0]),
            floors=dict(self.floors),
            counts=counts,
        )


def census(root: Path, fmt: str) -> Corpus:
    """Read a release's corpus shards once (pass 1)."""
    shards = {ds: _shards(root / "corpus" / ds, ds) for ds in _DATASETS[fmt]}
    c = Census(fmt, len(shards[_DATASETS[fmt][0]]))
    for ds, paths in shards.items():
        for s, path in enumerate(paths):
            for i, (_, rec) in enumerate(_lines(path)):
                c.line(ds, rec, s * _LOC + i)
            c.end_shard()
    return c.result()


def _read_paper_ids(root: Path) -> tuple[pa.Array, np.ndarray]:
    """(every sha, every corpus id) of a paper-ids folder."""
    shas: list[pa.Array] = []
    ids: list[np.ndarray] = []
    for path in _shards(root, "paper-ids"):
        rows = [rec for _, rec in _lines(path) if rec is not None]
        shas.append(pa.array([r.get("sha") for r in rows], pa.string()))
        ids.append(np.array([_int(r.get("corpusid")) for r in rows], dtype=np.int64))
    return pa.concat_arrays(shas), np.concatenate(ids)


def _scidocs_truth(root: Path) -> tuple[np.ndarray, set[str]]:
    """(corpus ids of SciDocs papers, folded titles that SciDocs ids are matched by or must stay unmatched by).

    A title-only SciDocs id needs its folded title to stay unique in the corpus, an unmappable one needs its
    title to keep matching no paper or several: papers with such a title are neither removed nor retitled, and
    no new title may fold to one."""
    rows = [
        json.loads(line)
        for line in (root / "scidocs_truth.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    ids = np.unique(np.array([r["corpus_id"] for r in rows if r.get("corpus_id") is not None], dtype=np.int64))
    by_title = {r["id"] for r in rows if r.get("method") != "sha"}
    titles = []
    for path in sorted((root / "scidocs").glob("paper_metadata_*.json")):
        for sha, entry in json.loads(path.read_text(encoding="utf-8")).items():
            if sha in by_title and entry.get("title"):
                titles.append(entry["title"])
    folded = fold_titles(pa.array(titles, pa.string())).to_pylist() if titles else []
    return ids, set(folded)


# ---------------------------------------------------------------------------------------------------
# The plan: what changes (pure: arrays in, arrays out)


@dataclass
class Plan:
    removed: np.ndarray  # corpus ids, sorted
    changed: np.ndarray  # corpus ids, sorted
    change_kind: np.ndarray  # per changed paper: 0 abstract, 1 title, 2 both
    new_title: dict[int, str]  # corpus id -> corrected title
    abstract_tail: dict[int, str]  # corpus id -> the rewritten second half of its abstract
    added: G.World | None  # the added papers (indices 0..A-1), as generator line writers read them
    added_src: np.ndarray  # their clean references: added index -> existing corpus id
    added_dst: np.ndarray
    added_year: int


def derived_seed(meta: dict[str, Any], seed: int) -> int:
    """The seed of a derivation's random streams: its own seed mixed with the chain's seed and release number,
    so that deriving with seed 0 never replays the streams that made release 1."""
    base = meta.get("base_config", meta["config"]).get("seed", meta.get("seed", 0))
    text = f"citeflow-derive:{base}:{meta.get('release', 1)}:{seed}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big") >> 1


def _fresh_titles(
    vocab: G.Vocabulary,
    seed: int,
    stream: str,
    field_: np.ndarray,
    field2: np.ndarray,
    community: np.ndarray,
    avoid: set[str],
) -> pa.Array:
    """make_titles, drawn again (deterministically) for any title that folds to one in `avoid`."""
    titles = G.make_titles(vocab, G._rng(seed, stream), field_, field2, community)
    value_set = pa.array(sorted(avoid), pa.string())
    for attempt in range(100):
        bad = np.flatnonzero(np.asarray(pc.fill_null(pc.is_in(fold_titles(titles), value_set=value_set), False)))
        if len(bad) == 0:
            return titles
        again = G.make_titles(vocab, G._rng(seed, stream, attempt + 1), field_[bad], field2[bad], community[bad])
        mask = G._mask(len(titles), bad)
        titles = pc.replace_with_mask(titles, pa.array(mask), again)
    raise RuntimeError("could not draw titles unlike SciDocs' title-matched ones; try another seed")


def choose_changes(
    corpus: Corpus,
    topics: dict[str, np.ndarray],
    scidocs_ids: np.ndarray,
    protected: set[str],
    removed: int,
    changed: int,
    seed: int,
    vocab: G.Vocabulary,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict, dict]:
    """Pick the removed and changed papers and write the changed texts."""
    n = len(corpus.ids)
    folded = fold_titles(corpus.title)
    guarded = np.asarray(
        pc.fill_null(pc.is_in(folded, value_set=pa.array(sorted(protected), pa.string())), False), dtype=bool
    )
    removable = ~np.isin(corpus.ids, scidocs_ids) & ~guarded
    if removed > removable.sum():
        raise CiteflowError(
            f"cannot remove {removed:,} papers: only {int(removable.sum()):,} of release 1's {n:,} "
            "may go (SciDocs papers, and papers with a title SciDocs matches by, stay); ask for "
            "fewer (--removed)"
        )
    rng = G._rng(seed, "derive-removed")
    gone = np.sort(rng.choice(np.flatnonzero(removable), size=removed, replace=False))
    titled = ~np.asarray(pc.is_null(corpus.title), dtype=bool)
    changeable = removable & titled & corpus.has_abstract & ~corpus.generic & ~G._mask(n, gone)
    if changed > changeable.sum():
        raise CiteflowError(
            f"cannot change {changed:,} papers: only {int(changeable.sum()):,} of release 1's papers "
            "have a title and an abstract, are outside SciDocs and are not removed; ask for fewer "
            "(--changed)"
        )
    rng = G._rng(seed, "derive-changed")
    pos = np.sort(rng.choice(np.flatnonzero(changeable), size=changed, replace=False))
    kind = rng.choice(3, size=changed, p=_CHANGE_P).astype(np.int64)
    f, c = topics["field"][pos], topics["community"][pos]
    none = np.full(len(pos), -1, dtype=np.int64)
    retitle = kind >= 1
    old_titles = set(folded.take(pa.array(pos[retitle])).to_pylist())
    titles = _fresh_titles(vocab, seed, "derive-titles", f[retitle], none[retitle], c[retitle], protected | old_titles)
    rewrite = kind != 1
    tails = G.make_abstracts(
        vocab, G._rng(seed, "derive-abstracts"), f[rewrite], none[rewrite], c[rewrite], min_words=30, max_words=100
    )
    ids = corpus.ids
    new_title = dict(zip(ids[pos[retitle]].tolist(), titles.to_pylist(), strict=True))
    abstract_tail = dict(zip(ids[pos[rewrite]].tolist(), tails.to_pylist(), strict=True))
    return ids[gone], ids[pos], kind, new_title, abstract_tail


def _cite_existing(
    rng: np.random.Generator,
    config: G.GenerateConfig,
    papers: G.Papers,
    pool_topics: dict[str, np.ndarray],
    pool_year: np.ndarray,
    pool_weight: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """References of new papers to the `pool` of existing ones, as generate_snapshot.sample_citations draws
    them: lognormal out-degree, subtopic / field / cross-field, preferential attachment, recent likelier.
    Returns (new paper index, pool index), unique, sorted."""
    n = papers.n
    if len(pool_year) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    citing, kind, v = G.draw_references(rng, config, n)
    e = len(citing)
    day = np.full(e, int(pool_year.max(initial=0)) + 1)  # every existing paper is older
    cited = np.full(e, -1, dtype=np.int64)
    year = np.maximum(pool_year, 0)

    def attempt(pool: G._Pool, segment: np.ndarray, rows: np.ndarray) -> None:
        rows = rows[cited[rows] < 0]
        target, ok = pool.draw(segment[rows] if len(segment) == e else segment, day[rows], v[rows])
        cited[rows[ok]] = target[ok]

    every = np.arange(e, dtype=np.int64)
    by_field = G._Pool(pool_topics["field"], year, pool_weight)
    attempt(G._Pool(pool_topics["community"], year, pool_weight), papers.community[citing], every[kind == 0])
    attempt(by_field, papers.field[citing], every[kind <= 1])
    second = papers.field2[citing]
    cross = every[(kind == 2) & (second >= 0)]
    attempt(by_field, second[cross], cross)
    attempt(G._Pool(np.zeros(len(year), dtype=np.int64), year, pool_weight), np.zeros(e, dtype=np.int64), every)
    keep = cited >= 0
    m = len(pool_year)
    pairs = np.unique(citing[keep] * m + cited[keep])
    return pairs // m, pairs % m


def added_world(
    base: G.GenerateConfig,
    seed: int,
    count: int,
    shards: int,
    corpus: Corpus,
    removed: np.ndarray,
    topics: dict[str, np.ndarray],
    taken: np.ndarray,
    protected: set[str],
    vocab: G.Vocabulary,
) -> tuple[G.World, np.ndarray, np.ndarray, int]:
    """The added papers as a World that generate_snapshot's line writers can serialise, their references
    (added index, existing corpus id) and their year. Only the fields those writers read are filled."""
    added_year = int(corpus.year.max(initial=1969)) + 1
    first_day = int((np.datetime64(f"{added_year:04d}-01-01", "D") - np.datetime64("1970-01-01", "D")).astype(np.int64))
    cfg = dataclasses.replace(base, seed=seed)
    later = G.LaterRelease(
        papers=count,
        first_day=first_day,
        taken_ids=taken,
        mag_floor=corpus.floors["mag"] + 1,
        pubmed_floor=corpus.floors["pubmed"] + 1,
        pmc_floor=corpus.floors["pmc"] + 1,
    )
    papers = G.sample_papers(cfg, later)
    authors = G.sample_authors(papers, seed)
    title = _fresh_titles(vocab, seed, "added-titles", papers.field, papers.field2, papers.community, protected)
    has_abstract = ~G._mask(
        count, G._pick(G._rng(seed, "added-dirt"), count, G._count(base.missing_abstract_rate, count))
    )
    # References: to papers that stay, weighted by the citations they have received (+1).
    stay = ~np.isin(corpus.ids, removed)
    pool = np.flatnonzero(stay)
    weight = (np.bincount(corpus.dst, minlength=len(corpus.ids)) + 1.0)[pool]
    src, to = _cite_existing(
        G._rng(seed, "added-citations"),
        base,
        papers,
        {k: v[pool] for k, v in topics.items()},
        corpus.year[pool],
        weight,
    )
    dst = corpus.ids[pool[to]]
    order = np.lexsort((G._rng(seed, "added-outbound").random(len(src)), src))  # a paper's list in random order
    src, dst = src[order], dst[order]
    out_ptr = G._ptr(src, count)
    bounds = (np.arange(shards + 1, dtype=np.int64) * count) // shards
    row_shard = np.searchsorted(bounds, src, side="right") - 1
    empty = np.empty(0, dtype=np.int64)
    world = G.World(
        config=cfg,
        papers=papers,
        authors=authors,
        vocab=vocab,
        title=title,
        has_abstract=has_abstract,
        generic=np.zeros(count, bool),
        bounds=bounds,
        src=empty,
        dst=empty,
        clean_ptr=out_ptr,
        in_ptr=np.zeros(count + 1, dtype=np.int64),
        in_src=empty,
        dup_of=empty,
        dup_shard=empty,
        malformed={},
        out_ptr=out_ptr,
        out_val=dst,
        rows={"citing": papers.corpus_id[src], "cited": dst, "shard": row_shard, "field": papers.field[src]},
        abstract_row=has_abstract,
        primary_sha=G.make_shas(G._rng(seed, "added-shas"), count),
        extra_paper=empty,
        extra_sha=G.make_shas(G._rng(seed, "added-shas"), 0),
        outside_ids=empty,
        outside_sha=G.make_shas(G._rng(seed, "added-shas"), 0),
        counts_per_paper={
            "references": np.diff(out_ptr),
            "citations": np.zeros(count, np.int64),
            "influential": np.zeros(count, np.int64),
        },
        context_pool=G.make_context_pool(vocab, G._rng(seed, "added-contexts")),
        counts={},
    )
    return world, src, dst, added_year


def _added_abstracts(world: G.World) -> pa.Array:
    p = world.papers
    text = G.make_abstracts(world.vocab, G._rng(world.config.seed, "added-abstracts"), p.field, p.field2, p.community)
    return pc.if_else(pa.array(world.has_abstract), text, pa.scalar(None, text.type))


def revise(abstract: str, tail: str) -> str:
    """A revised abstract: the first half of its sentences, then new ones."""
    sentences = abstract.split(". ")
    head = ". ".join(sentences[: max(1, len(sentences) // 2)])
    return (head if head.endswith(".") else head + ".") + " " + tail


# ---------------------------------------------------------------------------------------------------
# Pass 2: rewriting the shards


@dataclass
class _Edits:
    """What pass 2 applies, keyed for O(1) look-ups per line (all small: removed, changed and touched papers)."""

    removed: set[int]
    removed_str: set[str]
    new_title: dict[int, str]
    abstract_tail: dict[int, str]
    inbound: dict[int, list[str]]  # S2ORC: kept record location -> citing ids to append
    count_delta: dict[int, tuple[int, int]]  # S2AG: kept record location -> (reference, citation) change

    def shows_removed(self, line: bytes) -> bool:
        """Whether a malformed line shows a removed id (any run of digits is taken for an id)."""
        return any(int(x) in self.removed for x in _NUMBER.findall(line))


def _dumps(rec: dict, fmt: str) -> bytes:
    # The serialisations of generate_snapshot: S2ORC json.dumps defaults, S2AG compact raw UTF-8.
    text = json.dumps(rec) if fmt == "s2orc" else json.dumps(rec, separators=(",", ":"), ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def _edit_s2orc(rec: dict, loc: int, e: _Edits) -> bool:
    """Apply the edits to one S2ORC record in place; whether it changed."""
    pid, touched = int(rec["paper_id"]), False
    for key in ("outbound_citations", "inbound_citations"):
        ids = rec.get(key) or []
        if any(x in e.removed_str for x in ids):
            rec[key] = [x for x in ids if x not in e.removed_str]
            touched = True
    if loc in e.inbound:
        rec["inbound_citations"] = (rec.get("inbound_citations") or []) + e.inbound[loc]
        touched = True
    if pid in e.new_title and rec.get("title") is not None:
        rec["title"], touched = e.new_title[pid], True
    if pid in e.abstract_tail and rec.get("abstract") is not None:
        rec["abstract"], touched = revise(rec["abstract"], e.abstract_tail[pid]), True
    if touched:
        rec["has_outbound_citations"] = bool(rec.get("outbound_citations"))
        rec["has_inbound_citations"] = bool(rec.get("inbound_citations"))
    return touched


def _edit_s2ag_paper(rec: dict, loc: int, e: _Edits) -> bool:
    pid, touched = int(rec["corpusid"]), False
    if loc in e.count_delta:
        refs, cites = e.count_delta[loc]
        rec["referencecount"] = max(0, rec["referencecount"] + refs)
        rec["citationcount"] = max(0, rec["citationcount"] + cites)
        rec["influentialcitationcount"] = min(rec["influentialcitationcount"], rec["citationcount"])
        touched = True
    if pid in e.new_title and rec.get("title") is not None:
        rec["title"], touched = e.new_title[pid], True
    return touched


def _rewrite(
    dataset: str, fmt: str, path: Path, shard: int, e: _Edits, stats: collections.Counter
) -> Iterator[tuple[bytes, dict | None]]:
    """Release 1's lines of one shard (with their JSON object) edited; removed papers' lines and malformed lines
    naming them dropped."""
    for i, (line, rec) in enumerate(_lines(path)):
        loc = shard * _LOC + i
        if rec is None:
            if e.shows_removed(line):
                stats["dropped_malformed"] += 1
                continue
            yield line, None
            continue
        if dataset == "citations":
            if _int(rec.get("citingcorpusid")) in e.removed or _int(rec.get("citedcorpusid")) in e.removed:
                stats["dropped_citation_rows"] += 1
                continue
            yield line, rec
            continue
        pid = int(rec["paper_id"] if fmt == "s2orc" else rec["corpusid"])
        if pid in e.removed:
            stats[f"dropped_{dataset}"] += 1
            continue
        if dataset == "metadata":
            touched = _edit_s2orc(rec, loc, e)
        elif dataset == "papers":
            touched = _edit_s2ag_paper(rec, loc, e)
        else:  # abstracts
            touched = pid in e.abstract_tail and rec.get("abstract") is not None
            if touched:
                rec["abstract"] = revise(rec["abstract"], e.abstract_tail[pid])
        yield (_dumps(rec, fmt) if touched else line), rec


def _added_lines(dataset: str, world: G.World | None, abstracts: pa.Array | None, shard: int) -> pa.Array | None:
    """The added papers' lines for the end of one shard (block `shard` of them)."""
    if world is None or world.papers.n == 0:
        return None
    lo, hi = int(world.bounds[shard]), int(world.bounds[shard + 1])
    idx = np.arange(lo, hi, dtype=np.int64)
    if dataset == "metadata":
        return G.s2orc_lines(world, idx, abstracts.slice(lo, hi - lo))
    if dataset == "papers":
        return G.s2ag_paper_lines(world, idx)
    if dataset == "abstracts":
        rows = idx[world.abstract_row[lo:hi]]
        return G.s2ag_abstract_lines(world, rows, abstracts.take(pa.array(rows)))
    return G.s2ag_citation_lines(world, shard)


def _write_shard(path: Path, lines: Iterable[bytes], compresslevel: int) -> None:
    """gzip without a name or time in the header (same lines, same bytes), written in ~1 MB batches."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with (
        open(path, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=compresslevel) as gz,
    ):
        batch: list[bytes] = []
        size = 0
        for line in lines:
            batch.append(line)
            size += len(line)
            if size >= 1 << 20:
                gz.write(b"".join(batch))
                batch, size = [], 0
        gz.write(b"".join(batch))


def _counted(dataset: str, lines: Iterable[tuple[bytes, dict | None]], tally: Census, shard: int) -> Iterator[bytes]:
    """Pass lines through, counting their JSON objects into the census of release 2 (generator.json's truth)."""
    for i, (line, rec) in enumerate(lines):
        tally.line(dataset, rec, shard * _LOC + i)
        yield line


def _split_lines(lines: pa.Array | None) -> list[bytes]:
    if lines is None or len(lines) == 0:
        return []
    return bytes(G._buffer(lines)).splitlines(keepends=True)


def _parsed(lines: list[bytes]) -> Iterator[tuple[bytes, dict]]:
    for line in lines:
        yield line, json.loads(line.decode("utf-8"))


def _write_corpus(
    src: Path, dst: Path, fmt: str, plan: Plan, e: _Edits, level: int, stats: collections.Counter
) -> Corpus:
    shards = {ds: _shards(src / ds, ds) for ds in _DATASETS[fmt]}
    k = len(shards[_DATASETS[fmt][0]])
    tally = Census(fmt, k)
    abstracts = _added_abstracts(plan.added) if plan.added is not None else None
    for ds, paths in shards.items():
        for s, path in enumerate(paths):
            added = _split_lines(_added_lines(ds, plan.added, abstracts, s))
            lines = _counted(ds, itertools.chain(_rewrite(ds, fmt, path, s, e, stats), _parsed(added)), tally, s)
            _write_shard(dst / ds / path.name, lines, level)
            tally.end_shard()
            log.debug("derive: wrote %s", dst / ds / path.name)
    return tally.result()


def _write_paper_ids(src: Path, dst: Path, plan: Plan, e: _Edits, corpus_ids: np.ndarray, level: int) -> dict[str, int]:
    paths = _shards(src, "paper-ids")
    world = plan.added
    count = world.papers.n if world is not None else 0
    bounds = (np.arange(len(paths) + 1) * count) // len(paths)
    rows = primary = 0
    ids: list[np.ndarray] = []
    for s, path in enumerate(paths):
        kept: list[bytes] = []
        shard_ids: list[int] = []
        for line, rec in _lines(path):
            cid = _int(rec.get("corpusid")) if rec is not None else -1
            if cid in e.removed:
                continue
            kept.append(line)
            shard_ids.append(cid)
            primary += bool(rec and rec.get("primary"))
        if count:
            lo, hi = int(bounds[s]), int(bounds[s + 1])
            lines = G.paper_id_lines(
                world.primary_sha.slice(lo, hi - lo), world.papers.corpus_id[lo:hi], np.ones(hi - lo, bool)
            )
            kept += _split_lines(lines)
            shard_ids += world.papers.corpus_id[lo:hi].tolist()
            primary += hi - lo
        rows += len(kept)
        ids.append(np.array(shard_ids, dtype=np.int64))
        _write_shard(dst / path.name, kept, level)
    every = np.concatenate(ids)
    return {
        "paper_ids_rows": rows,
        "paper_ids_primary": primary,
        "paper_ids_outside_corpus": int((~np.isin(every, corpus_ids)).sum()),
        "paper_ids_shards": len(paths),
    }


# ---------------------------------------------------------------------------------------------------
# Output folder


def _check_output(out: Path, release1: Path, overwrite: bool) -> None:
    a, b = out.resolve(), release1.resolve()
    if a == b or a.is_relative_to(b) or b.is_relative_to(a):
        raise CiteflowError(f"--out {str(out)!r} must be a folder apart from release 1 {str(release1)!r}")
    if out.exists() and not out.is_dir():
        raise CiteflowError(f"output path {str(out)!r} exists and is not a folder")
    entries = sorted(e.name for e in out.iterdir()) if out.exists() else []
    if entries and not overwrite:
        raise CiteflowError(
            f"output folder {str(out)!r} is not empty ({', '.join(entries[:5])}); choose an empty "
            "folder or pass --overwrite to replace a previous generator output"
        )
    if entries and not any(name in _OURS for name in entries):
        raise CiteflowError(
            f"output folder {str(out)!r} holds no generator output (corpus/, paper-ids/, scidocs/, "
            "generator.json); refusing to overwrite it"
        )


def _write_json(path: Path, content: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(content, fh, indent=2)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())


def _publish(tmp: Path, out: Path, summary: dict[str, Any]) -> None:
    """Move the finished release from `tmp` to `out`, generator.json last: its presence means complete."""
    if not out.exists() or not any(out.iterdir()):
        _write_json(tmp / "generator.json", summary)
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)  # one rename: `out` appears complete or not at all
        return
    # --overwrite of a previous output: the manifest goes first, so a half-replaced folder never looks complete.
    (out / "generator.json").unlink(missing_ok=True)
    for name in _OURS[1:]:
        target = out / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
    for entry in sorted(tmp.iterdir()):
        os.replace(entry, out / entry.name)
    tmp.rmdir()
    _write_json(out / "generator.json.tmp", summary)
    os.replace(out / "generator.json.tmp", out / "generator.json")


# ---------------------------------------------------------------------------------------------------
# Entry point


def run(config: DeriveConfig) -> dict[str, Any]:
    """Derive release 2 from release 1; returns release 2's generator.json content.

    generator.json: `generator_version`, `derive_version`, `release` (1 + release 1's), `format` (release 1's),
    `seed` (this derivation's), `papers` (release 2's), `config` (this DeriveConfig), `base_config` (the
    GenerateConfig the chain started from: rates and vocabulary seed), `paths` (release 1's plus `diff`),
    `derived_from` (release 1's resolved path, generator_version, release, format, seed, papers and config),
    `diff` (added, removed, changed, changed_title, changed_abstract, added_year, citations_added,
    citations_removed: clean edges gone with the removed papers, lines_dropped: release 1's lines left out per
    kind; file: release_diff.parquet), `counts` (release
    1's keys, every one exact for release 2: recounted from the written lines the way build_graph keeps records
    and edges, and checked against release 1's census plus the diff) and `scidocs` (release 1's, still valid).
    """
    release1, out = Path(config.derive_from), Path(config.out)
    meta = _load_release(release1)
    _check_output(out, release1, config.overwrite)
    fmt, base = meta["format"], _base_config(meta)
    level = base.compresslevel
    seed = derived_seed(meta, config.seed)
    log.info("derive: reading release %s (%s)", release1, fmt)

    # Pass 1: what release 1 holds.
    corpus = census(release1, fmt)
    topics_table = pq.read_table(release1 / "paper_topics.parquet")
    topic_ids = topics_table.column("corpus_id").to_numpy()
    if len(topic_ids) != len(corpus.ids) or not np.array_equal(np.sort(topic_ids), corpus.ids):
        raise CiteflowError(
            f"release {str(release1)!r} is inconsistent: paper_topics.parquet and corpus/ list "
            f"different papers ({len(topic_ids):,} vs {len(corpus.ids):,})"
        )
    order = np.argsort(topic_ids)
    topics = {k: topics_table.column(k).to_numpy()[order].astype(np.int64) for k in ("field", "subtopic", "community")}
    scidocs_ids, protected = _scidocs_truth(release1)
    shas, paper_id_ids = _read_paper_ids(release1 / "paper-ids")
    n1 = len(corpus.ids)
    added_n, removed_n, changed_n = (config.count(k, n1) for k in ("added", "removed", "changed"))

    # The plan.
    vocab = G.build_vocabulary(base.seed)
    removed, changed, kind, new_title, abstract_tail = choose_changes(
        corpus, topics, scidocs_ids, protected, removed_n, changed_n, seed, vocab
    )
    taken = np.unique(np.concatenate([corpus.ids, corpus.referenced, paper_id_ids, scidocs_ids]))
    world, added_src, added_dst, added_year = None, np.empty(0, np.int64), np.empty(0, np.int64), 0
    if added_n:
        world, added_src, added_dst, added_year = added_world(
            base, seed, added_n, corpus.counts["shards"], corpus, removed, topics, taken, protected, vocab
        )
        scidocs_shas = [
            json.loads(x)["id"]
            for x in (release1 / "scidocs_truth.jsonl").read_text(encoding="utf-8").splitlines()
            if x.strip()
        ]
        known = pa.concat_arrays([shas, pa.array(scidocs_shas, pa.string())])
        fresh = world.primary_sha.cast(pa.string())
        if pc.any(pc.is_in(fresh, value_set=known)).as_py() or pc.count_distinct(fresh).as_py() != len(fresh):
            raise RuntimeError("sha collision between added papers and release 1; try another seed")
    plan = Plan(
        removed=removed,
        changed=changed,
        change_kind=kind,
        new_title=new_title,
        abstract_tail=abstract_tail,
        added=world,
        added_src=added_src,
        added_dst=added_dst,
        added_year=added_year,
    )
    edits = _edits(fmt, corpus, plan)

    tmp = out.parent / f".{out.name}.derive-tmp"
    if tmp.exists():
        shutil.rmtree(tmp)  # left over by an interrupted run
    tmp.mkdir(parents=True)
    try:
        stats: collections.Counter[str] = collections.Counter()
        release2 = _write_corpus(release1 / "corpus", tmp / "corpus", fmt, plan, edits, level, stats)
        paper_ids = _write_paper_ids(release1 / "paper-ids", tmp / "paper-ids", plan, edits, release2.ids, level)
        shutil.copytree(release1 / "scidocs", tmp / "scidocs")
        shutil.copy2(release1 / "scidocs_truth.jsonl", tmp / "scidocs_truth.jsonl")
        _write_topics(topics_table, plan, tmp / "paper_topics.parquet")
        _write_diff(plan, tmp / "release_diff.parquet")
        summary = _summary(config, meta, release1, base, plan, corpus, release2, paper_ids, stats)
        _publish(tmp, out, summary)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    d = summary["diff"]
    log.info(
        "derive: wrote release %s to %s: %s papers (+%s, -%s, %s changed), %s citations",
        summary["release"],
        out,
        f"{summary['papers']:,}",
        f"{d['added']:,}",
        f"{d['removed']:,}",
        f"{d['changed']:,}",
        f"{summary['counts']['citations']:,}",
    )
    return summary


def _edits(fmt: str, corpus: Corpus, plan: Plan) -> _Edits:
    """Per-line look-ups for pass 2: which kept records gain inbound citations or change their counts."""
    removed = set(plan.removed.tolist())
    inbound: dict[int, list[str]] = {}
    count_delta: dict[int, tuple[int, int]] = {}
    n = len(corpus.ids)
    cited_pos = np.searchsorted(corpus.ids, plan.added_dst)
    if fmt == "s2orc" and plan.added is not None:
        citing = plan.added.papers.corpus_id[plan.added_src]
        order = np.lexsort((citing, cited_pos))
        for pos, cid in zip(cited_pos[order].tolist(), citing[order].tolist(), strict=True):
            inbound.setdefault(int(corpus.loc[pos]), []).append(str(cid))
    if fmt == "s2ag":
        gone = G._mask(n, np.searchsorted(corpus.ids, plan.removed))
        lose_cite = gone[corpus.src] & ~gone[corpus.dst]  # a removed paper cited it
        lose_ref = gone[corpus.dst] & ~gone[corpus.src]  # it cited a removed paper
        cites = np.bincount(cited_pos, minlength=n) - np.bincount(corpus.dst[lose_cite], minlength=n)
        refs = -np.bincount(corpus.src[lose_ref], minlength=n)
        for pos in np.flatnonzero((cites != 0) | (refs != 0)).tolist():
            count_delta[int(corpus.loc[pos])] = (int(refs[pos]), int(cites[pos]))
    return _Edits(
        removed=removed,
        removed_str={str(x) for x in removed},
        new_title=plan.new_title,
        abstract_tail=plan.abstract_tail,
        inbound=inbound,
        count_delta=count_delta,
    )


def _write_topics(table: pa.Table, plan: Plan, path: Path) -> None:
    keep = table.filter(pc.invert(pc.is_in(table.column("corpus_id"), value_set=pa.array(plan.removed, pa.int64()))))
    if plan.added is not None:
        p = plan.added.papers
        new = pa.table(
            {
                "corpus_id": pa.array(p.corpus_id, pa.int64()),
                "field": pa.array(p.field, pa.int64()),
                "subtopic": pa.array(p.subtopic, pa.int64()),
                "community": pa.array(p.community, pa.int64()),
            }
        )
        keep = pa.concat_tables([keep.select(new.column_names).cast(new.schema), new])
    pq.write_table(keep, path, compression="zstd")


def _write_diff(plan: Plan, path: Path) -> None:
    added = plan.added.papers.corpus_id if plan.added is not None else np.empty(0, np.int64)
    ids = np.concatenate([added, plan.removed, plan.changed])
    change = ["added"] * len(added) + ["removed"] * len(plan.removed) + ["changed"] * len(plan.changed)
    title = np.concatenate([np.zeros(len(added) + len(plan.removed), bool), plan.change_kind >= 1])
    abstract = np.concatenate([np.zeros(len(added) + len(plan.removed), bool), plan.change_kind != 1])
    order = np.argsort(ids, kind="stable")
    table = pa.table(
        {
            "corpus_id": pa.array(ids[order], pa.int64()),
            "change": pa.array(change, pa.string()).take(pa.array(order)),
            "title_changed": pa.array(title[order]),
            "abstract_changed": pa.array(abstract[order]),
        }
    )
    pq.write_table(table, path, compression="zstd")


def _summary(
    config: DeriveConfig,
    meta: dict[str, Any],
    release1: Path,
    base: G.GenerateConfig,
    plan: Plan,
    corpus: Corpus,
    release2: Corpus,
    paper_ids: dict[str, int],
    dropped: collections.Counter[str],
) -> dict[str, Any]:
    n = len(corpus.ids)
    gone = G._mask(n, np.searchsorted(corpus.ids, plan.removed))
    citations_removed = int((gone[corpus.src] | gone[corpus.dst]).sum())
    added = 0 if plan.added is None else plan.added.papers.n
    # Release 2's census against release 1's census plus the diff: a mismatch is a bug here, not user error.
    expected = {
        "papers": n - len(plan.removed) + added,
        "citations": corpus.counts["citations"] - citations_removed + len(plan.added_src),
    }
    got = {k: release2.counts[k] for k in expected}
    if got != expected:
        raise RuntimeError(f"derived release does not add up: counted {got}, expected {expected}")
    counts = {**release2.counts, **paper_ids}
    if set(meta["counts"]) <= set(counts):  # release 1's key order
        counts = {**{k: counts[k] for k in meta["counts"]}, **counts}
    return {
        "generator_version": G.GENERATOR_VERSION,
        "derive_version": DERIVE_VERSION,
        "release": meta.get("release", 1) + 1,
        "format": meta["format"],
        "seed": config.seed,
        "papers": release2.counts["papers"],
        "config": dataclasses.asdict(config),
        "base_config": dataclasses.asdict(base),
        "paths": {**meta.get("paths", {}), "diff": "release_diff.parquet"},
        "derived_from": {
            "path": str(release1.resolve()),
            "generator_version": meta.get("generator_version"),
            "release": meta.get("release", 1),
            "format": meta["format"],
            "seed": meta.get("seed"),
            "papers": meta.get("papers"),
            "config": meta["config"],
        },
        "diff": {
            "file": "release_diff.parquet",
            "added": added,
            "removed": len(plan.removed),
            "changed": len(plan.changed),
            "changed_title": int((plan.change_kind >= 1).sum()),
            "changed_abstract": int((plan.change_kind != 1).sum()),
            "added_year": plan.added_year or None,
            "citations_added": len(plan.added_src),
            "citations_removed": citations_removed,
            "lines_dropped": dict(sorted(dropped.items())),
        },
        "counts": counts,
        "scidocs": meta.get("scidocs"),
    }
