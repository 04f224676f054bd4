"""Pass 2 of `citeflow generate --derive-from`: release 1's lines rewritten into release 2 by a Plan.

Reads release 1's `corpus/` and `paper-ids/` shards line by line and writes release 2's, in the same layout and
shard files: removed papers' lines dropped (malformed lines kept: they have no key), changed papers' records edited,
the papers' citation lists and counts that the diff touches updated, added papers' lines appended. Unchanged
lines keep their exact bytes; every written line is counted into a Census of release 2. Also writes
`paper_topics.parquet` and `release_diff.parquet`.
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from citeflow.diffs import PAPER_IDS
from citeflow.synthcorpus.arrays import index_mask
from citeflow.synthcorpus.derive_census import DATASETS, LOC, Census, Corpus, as_id, read_lines, shard_files
from citeflow.synthcorpus.derive_diffs import DiffKeys, record_key
from citeflow.synthcorpus.derive_plan import Plan, added_abstracts, revise
from citeflow.synthcorpus.outputs import topics_table, write_gzip, write_table
from citeflow.synthcorpus.serialise import (
    line_bytes,
    paper_id_lines,
    s2ag_abstract_lines,
    s2ag_citation_lines,
    s2ag_paper_lines,
    s2orc_lines,
)
from citeflow.synthcorpus.world import World

log = logging.getLogger("citeflow")


@dataclass
class Edits:
    """What pass 2 applies, keyed for O(1) look-ups per line (all small: removed, changed and touched papers)."""

    removed: set[int]
    removed_str: set[str]
    new_title: dict[int, str]
    abstract_tail: dict[int, str]
    inbound: dict[int, list[str]]  # S2ORC: kept record location -> citing ids to append
    count_delta: dict[int, tuple[int, int]]  # S2AG: kept record location -> (reference, citation) change


def _dumps(rec: dict, fmt: str) -> bytes:
    # The serialisations of serialise.py: S2ORC json.dumps defaults, S2AG compact raw UTF-8.
    text = json.dumps(rec) if fmt == "s2orc" else json.dumps(rec, separators=(",", ":"), ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def _edit_s2orc(rec: dict, loc: int, e: Edits) -> bool:
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


def _edit_s2ag_paper(rec: dict, loc: int, e: Edits) -> bool:
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
    dataset: str, fmt: str, path: Path, shard: int, e: Edits, stats: collections.Counter, keys: DiffKeys
) -> Iterator[tuple[bytes, dict | None]]:
    """Release 1's lines of one shard (with their JSON object) edited; removed papers' lines dropped. Malformed
    lines stay as they are: they have no key, so no diff could remove them. The keys of dropped and edited
    records go into `keys` (for the diff)."""
    for i, (line, rec) in enumerate(read_lines(path)):
        loc = shard * LOC + i
        if rec is None:
            yield line, None
            continue
        if dataset == "citations":
            if as_id(rec.get("citingcorpusid")) in e.removed or as_id(rec.get("citedcorpusid")) in e.removed:
                stats["dropped_citation_rows"] += 1
                if (key := record_key(dataset, rec)) is not None:  # a citation's is a pair: always
                    keys.deleted.setdefault(dataset, set()).add(key)
                continue
            yield line, rec
            continue
        pid = int(rec["paper_id"] if fmt == "s2orc" else rec["corpusid"])
        if pid in e.removed:
            stats[f"dropped_{dataset}"] += 1
            keys.deleted.setdefault(dataset, set()).add(pid)
            continue
        if dataset == "metadata":
            touched = _edit_s2orc(rec, loc, e)
        elif dataset == "papers":
            touched = _edit_s2ag_paper(rec, loc, e)
        else:  # abstracts
            touched = pid in e.abstract_tail and rec.get("abstract") is not None
            if touched:
                rec["abstract"] = revise(rec["abstract"], e.abstract_tail[pid])
        if touched:
            keys.updated.setdefault(dataset, set()).add(pid)
            keys.edited.setdefault(dataset, set()).add(pid)
        yield (_dumps(rec, fmt) if touched else line), rec


def _added_lines(dataset: str, world: World | None, abstracts: pa.Array | None, shard: int) -> pa.Array | None:
    """The added papers' lines for the end of one shard (block `shard` of them)."""
    if world is None or world.papers.n == 0:
        return None
    lo, hi = int(world.bounds[shard]), int(world.bounds[shard + 1])
    idx = np.arange(lo, hi, dtype=np.int64)
    if dataset == "metadata":
        assert abstracts is not None  # handed for the datasets that hold abstracts
        return s2orc_lines(world, idx, abstracts.slice(lo, hi - lo))
    if dataset == "papers":
        return s2ag_paper_lines(world, idx)
    if dataset == "abstracts":
        assert abstracts is not None  # handed for the datasets that hold abstracts
        rows = idx[world.abstract_row[lo:hi]]
        return s2ag_abstract_lines(world, rows, abstracts.take(pa.array(rows)))
    return s2ag_citation_lines(world, shard)


def _write_shard(path: Path, lines: Iterable[bytes], compresslevel: int) -> None:
    """A gzipped shard of these lines, handed to gzip in ~1 MB batches."""

    def batches() -> Iterator[bytes]:
        batch: list[bytes] = []
        size = 0
        for line in lines:
            batch.append(line)
            size += len(line)
            if size >= 1 << 20:
                yield b"".join(batch)
                batch, size = [], 0
        yield b"".join(batch)

    write_gzip(path, batches(), compresslevel)


def _counted(dataset: str, lines: Iterable[tuple[bytes, dict | None]], tally: Census, shard: int) -> Iterator[bytes]:
    """Pass lines through, counting their JSON objects into the census of release 2 (generator.json's truth)."""
    for i, (line, rec) in enumerate(lines):
        tally.line(dataset, rec, shard * LOC + i)
        yield line


def _split_lines(lines: pa.Array | None) -> list[bytes]:
    if lines is None or len(lines) == 0:
        return []
    return bytes(line_bytes(lines)).splitlines(keepends=True)


def _parsed(lines: list[bytes], dataset: str, keys: DiffKeys) -> Iterator[tuple[bytes, dict]]:
    """Added lines with their JSON object; their keys are updates of the diff."""
    for line in lines:
        rec = json.loads(line.decode("utf-8"))
        updated = keys.updated.setdefault(dataset, set())
        if (key := record_key(dataset, rec)) is not None:  # S2ORC's metadata has none (and writes no diffs)
            updated.add(key)
        yield line, rec


def write_corpus(
    src: Path, dst: Path, fmt: str, plan: Plan, e: Edits, level: int, stats: collections.Counter, keys: DiffKeys
) -> Corpus:
    shards = {ds: shard_files(src / ds, ds) for ds in DATASETS[fmt]}
    k = len(shards[DATASETS[fmt][0]])
    tally = Census(fmt, k)
    abstracts = added_abstracts(plan.added) if plan.added is not None else None
    for ds, paths in shards.items():
        for s, path in enumerate(paths):
            added = _split_lines(_added_lines(ds, plan.added, abstracts, s))
            rewritten = _rewrite(ds, fmt, path, s, e, stats, keys)
            lines = _counted(ds, itertools.chain(rewritten, _parsed(added, ds, keys)), tally, s)
            _write_shard(dst / ds / path.name, lines, level)
            tally.end_shard()
            log.debug("derive: wrote %s", dst / ds / path.name)
    return tally.result()


def write_paper_ids(
    src: Path, dst: Path, plan: Plan, e: Edits, corpus_ids: np.ndarray, level: int, keys: DiffKeys
) -> dict[str, int]:
    """Release 2's `paper-ids/`: release 1's lines less the removed papers', a primary sha per added paper
    appended, shard by shard. `keys` gets the paper-ids keys (shas) the diff names: the removed lines' as
    deleted, the added papers' as updated (and as edited where release 1 has the sha too)."""
    paths = shard_files(src, "paper-ids")
    world = plan.added
    count = world.papers.n if world is not None else 0
    bounds = (np.arange(len(paths) + 1) * count) // len(paths)
    added = set(world.primary_sha.to_pylist()) if world is not None and count else set()
    keys.updated[PAPER_IDS] |= added
    rows = primary = 0
    ids: list[np.ndarray] = []
    for s, path in enumerate(paths):
        kept: list[bytes] = []
        shard_ids: list[int] = []
        for line, rec in read_lines(path):
            cid = as_id(rec.get("corpusid")) if rec is not None else -1
            key = record_key(PAPER_IDS, rec) if rec is not None else None
            if cid in e.removed:
                if key is not None:
                    keys.deleted[PAPER_IDS].add(key)
                continue
            if key is not None and key in added:
                keys.edited[PAPER_IDS].add(key)
            kept.append(line)
            shard_ids.append(cid)
            primary += bool(rec and rec.get("primary"))
        if world is not None and count:
            lo, hi = int(bounds[s]), int(bounds[s + 1])
            lines = paper_id_lines(
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


def plan_edits(fmt: str, corpus: Corpus, plan: Plan) -> Edits:
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
        gone = index_mask(n, np.searchsorted(corpus.ids, plan.removed))
        lose_cite = gone[corpus.src] & ~gone[corpus.dst]  # a removed paper cited it
        lose_ref = gone[corpus.dst] & ~gone[corpus.src]  # it cited a removed paper
        cites = np.bincount(cited_pos, minlength=n) - np.bincount(corpus.dst[lose_cite], minlength=n)
        refs = -np.bincount(corpus.src[lose_ref], minlength=n)
        for pos in np.flatnonzero((cites != 0) | (refs != 0)).tolist():
            count_delta[int(corpus.loc[pos])] = (int(refs[pos]), int(cites[pos]))
    return Edits(
        removed=removed,
        removed_str={str(x) for x in removed},
        new_title=plan.new_title,
        abstract_tail=plan.abstract_tail,
        inbound=inbound,
        count_delta=count_delta,
    )


def write_topics(table: pa.Table, plan: Plan, path: Path) -> None:
    """Release 1's paper_topics without the removed papers, the added ones appended."""
    keep = table.filter(pc.invert(pc.is_in(table.column("corpus_id"), value_set=pa.array(plan.removed, pa.int64()))))
    if plan.added is not None:
        new = topics_table(plan.added.papers)
        keep = pa.concat_tables([keep.select(new.column_names).cast(new.schema), new])
    write_table(keep, path)


def write_diff(plan: Plan, path: Path) -> None:
    """release_diff.parquet: corpus_id, change (added / removed / changed), title_changed, abstract_changed."""
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
    write_table(table, path)
