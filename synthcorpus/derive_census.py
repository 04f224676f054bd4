"""Reading a release for `citeflow generate --derive-from`: its generator.json, and its corpus as build_graph
would keep it (pass 1, `census`; the same `Census` recounts release 2 as its lines are written).

Reads RELEASE1, the output of `citeflow generate` (or of a derivation): `generator.json` (format, seed, config),
`corpus/` (gzipped shards, line by line: only per-paper numpy arrays and the edge list are kept, never the
records), `paper-ids/` and `scidocs_truth.jsonl` + `scidocs/`. Writes nothing.
"""

from __future__ import annotations

import collections
import gzip
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from citeflow.errors import CiteflowError
from citeflow.synthcorpus.arrays import index_mask
from citeflow.synthcorpus.config import GenerateConfig
from citeflow.synthcorpus.lexicon import GENERIC_TITLES
from citeflow.text import fold_titles

# The datasets of each layout, the first holding the papers.
DATASETS = {"s2orc": ("metadata",), "s2ag": ("papers", "abstracts", "citations")}
LOC = 1 << 32  # a line's location: shard * LOC + line number


def shard_files(folder: Path, prefix: str) -> list[Path]:
    """`{prefix}_{i}.jsonl.gz` files of a folder, by shard number."""
    pattern = re.compile(rf"{re.escape(prefix)}_(\d+)\.jsonl\.gz")
    found = [(int(m.group(1)), p) for p in folder.glob("*.jsonl.gz") if (m := pattern.fullmatch(p.name))]
    return [p for _, p in sorted(found)]


def load_release(root: Path) -> dict[str, Any]:
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
        or meta.get("format") not in DATASETS
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
    counts = {ds: len(shard_files(root / "corpus" / ds, ds)) for ds in DATASETS[meta["format"]]}
    if min(counts.values()) == 0 or len(set(counts.values())) != 1:
        raise CiteflowError(
            f"release {str(root)!r}: expected as many {meta['format']} shards in each of "
            f"{', '.join('corpus/' + d for d in counts)}, found {counts}"
        )
    if not shard_files(root / "paper-ids", "paper-ids"):
        raise CiteflowError(f"release {str(root)!r}: paper-ids/ holds no paper-ids_*.jsonl.gz shards")
    return meta


def base_config(meta: dict[str, Any]) -> GenerateConfig:
    """The GenerateConfig of the snapshot the chain of releases started from (rates, vocabulary seed)."""
    try:
        return GenerateConfig(**meta.get("base_config", meta["config"]))
    except (TypeError, CiteflowError) as exc:
        raise CiteflowError(f"release 1's generator.json has no usable generate config: {exc}") from None


def read_lines(path: Path) -> Iterator[tuple[bytes, dict | None]]:
    """Each line of a .jsonl.gz shard (ending with a newline) and its JSON object, or None if it is not one."""
    with gzip.open(path, "rb") as fh:
        for line in fh:
            try:
                rec = json.loads(line.decode("utf-8"))
            except ValueError:  # truncated JSON, or UTF-8 cut mid-character
                rec = None
            yield (line if line.endswith(b"\n") else line + b"\n"), (rec if isinstance(rec, dict) else None)


def as_id(value: Any) -> int:
    """A corpus id as written (int or digit string); -1 for null or empty."""
    return -1 if value is None or value == "" else int(value)


def _filled(value: Any) -> bool:
    return value is not None and value != "" and value != []


def s2orc_completeness(r: dict) -> int:
    """build_graph's score of an S2ORC record (citeflow.spark.graph.completeness): filled fields, fields of study,
    refs."""
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
    generic: np.ndarray  # title is one of lexicon.GENERIC_TITLES
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
                self._buf["abstract_id"].append(as_id(rec.get("corpusid")))
        else:
            self._buf["citing"].append(as_id(rec.get("citingcorpusid")))
            self._buf["cited"].append(as_id(rec.get("citedcorpusid")))

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
        generic = np.asarray(pc.fill_null(pc.is_in(title, value_set=pa.array(GENERIC_TITLES)), False), dtype=bool)
        if self.fmt == "s2orc":
            has_abstract = self._col("abstract_null")[kept] == 0
            is_kept = index_mask(len(rec_id), kept)
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
        by_dataset = {ds: self.malformed[ds] for ds in DATASETS[self.fmt]}
        first_ds = DATASETS[self.fmt][0]
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
    shards = {ds: shard_files(root / "corpus" / ds, ds) for ds in DATASETS[fmt]}
    c = Census(fmt, len(shards[DATASETS[fmt][0]]))
    for ds, paths in shards.items():
        for s, path in enumerate(paths):
            for i, (_, rec) in enumerate(read_lines(path)):
                c.line(ds, rec, s * LOC + i)
            c.end_shard()
    return c.result()


def read_paper_ids(root: Path) -> tuple[pa.Array, np.ndarray]:
    """(every sha, every corpus id) of a paper-ids folder."""
    shas: list[pa.Array] = []
    ids: list[np.ndarray] = []
    for path in shard_files(root, "paper-ids"):
        rows = [rec for _, rec in read_lines(path) if rec is not None]
        shas.append(pa.array([r.get("sha") for r in rows], pa.string()))
        ids.append(np.array([as_id(r.get("corpusid")) for r in rows], dtype=np.int64))
    return pa.concat_arrays(shas), np.concatenate(ids)


def read_scidocs_truth(root: Path) -> tuple[np.ndarray, set[str]]:
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
