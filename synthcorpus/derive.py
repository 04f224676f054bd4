"""Derive a later release of a generated snapshot: some papers added, some removed, some changed.

Run: `citeflow generate --derive-from RELEASE1 --out RELEASE2 [--added N] [--removed N] [--changed N] [--seed S]
[--overwrite]` (or `citeflow.synthcorpus.derive.run(DeriveConfig(derive_from=..., out=..., ...))`). Counts default to
5% added, 1% removed and 2% changed of release 1's papers. The same release 1, counts and seed give
byte-identical files. Release 1 may itself be a derived release (release 3 from release 2, ...).

Reads RELEASE1, the output of `citeflow generate`: `generator.json` (format, seed, config), `corpus/`,
`paper-ids/`, `paper_topics.parquet`, `scidocs_truth.jsonl` and `scidocs/`. The gzipped shards are read twice,
line by line (a census pass, derive_census.py, then the rewrite, derive_rewrite.py, of what derive_plan.py
decided); only per-paper numpy arrays, the edge list and the few rewritten papers' new texts are held in memory,
never the records.

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
  with titles and abstracts from release 1's topic vocabulary (vocabulary.build_vocabulary with its seed,
  make_titles, make_abstracts), external ids above release 1's, and references to existing papers drawn by the
  generator's citation sampler (citations.sample_references: mostly within their niches, then the field, then
  across fields; preferential attachment on citations received, recent papers likelier). They are appended to
  the end of release 1's shards. S2ORC inbound lists and S2AG citation / reference counts of the papers they
  touch follow.
- S2AG: the diff from release 1 to release 2 in the Datasets API layout (`diffs/<R1>/to/<R2>/`, where R1 and R2
  are the two folders' names; derive_diffs.py), consistent with release 2's shards and paper-ids (DERIVE_VERSION
  4: the paper-ids dataset, by sha, in the diff too), plus the chained
  `diffs/<R0>/to/<R2>/` when release 1 holds a diff from R0.
  About `missing_abstract_rate` of them have no abstract; they carry no other dirt.
- release 1's other dirt (duplicate and malformed lines, self-, duplicate and external citations, null ids)
  stays as it was, except the records of a removed paper. Malformed lines stay even when they show a removed
  id: they have no primary key, so no diff could remove them, and a release must equal its predecessor plus its
  diff (since DERIVE_VERSION 3; version 2 dropped them). Unchanged papers whose citations did not change keep their
  exact bytes.
- `paper-ids/` without the removed papers' shas, plus a primary sha per added paper; `paper_topics.parquet`
  without removed rows, added rows appended; `release_diff.parquet`: corpus_id, change (added / removed /
  changed), title_changed, abstract_changed, sorted by corpus id.
- `generator.json` (see `run`): `counts` in release 1's keys, all exact (recounted from the lines as they are
  written, the way build_graph keeps papers and edges), `diff` and `derived_from`.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from citeflow.diffs import RELEASE_ID_RE
from citeflow.errors import CiteflowError
from citeflow.synthcorpus.arrays import index_mask
from citeflow.synthcorpus.config import GENERATOR_VERSION, GenerateConfig, field_help
from citeflow.synthcorpus.derive_census import (
    Corpus,
    base_config,
    census,
    load_release,
    read_paper_ids,
    read_scidocs_truth,
)
from citeflow.synthcorpus.derive_diffs import DiffKeys, write_diffs
from citeflow.synthcorpus.derive_plan import Plan, added_world, choose_changes, derived_seed
from citeflow.synthcorpus.derive_rewrite import plan_edits, write_corpus, write_diff, write_paper_ids, write_topics
from citeflow.synthcorpus.outputs import OUTPUTS, check_output, clear_output, write_json
from citeflow.synthcorpus.vocabulary import build_vocabulary
from citeflow.synthcorpus.world import World

log = logging.getLogger("citeflow")

# Bump when the same release 1, counts and seed would give different files.
# 3: S2AG diffs written; malformed lines naming a removed id kept. 4: the diffs hold paper-ids too
DERIVE_VERSION = 4
DEFAULT_SHARES = {"added": 0.05, "removed": 0.01, "changed": 0.02}
_OURS = (*OUTPUTS, "release_diff.parquet", "diffs")


@dataclass(frozen=True, kw_only=True)
class DeriveConfig:
    """`citeflow generate --derive-from`: a later release of a generated snapshot. Same inputs, same bytes."""

    derive_from: str = field(metadata=field_help("release 1: a folder written by `citeflow generate` (or derived)"))
    out: str = field(metadata=field_help("output folder; must be absent or empty unless overwrite is set"))
    added: int | None = field(default=None, metadata=field_help("papers to add; None: 5% of release 1's papers"))
    removed: int | None = field(
        default=None, metadata=field_help("papers to remove (never SciDocs papers); None: 1% of release 1's papers")
    )
    changed: int | None = field(
        default=None, metadata=field_help("papers whose title and/or abstract change; None: 2% of release 1's papers")
    )
    seed: int = field(
        default=0, metadata=field_help("random seed (>= 0); same seed and release 1 give identical files")
    )
    overwrite: bool = field(default=False, metadata=field_help("replace a previous generator output in `out`"))

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


def _check_output(out: Path, release1: Path, overwrite: bool) -> None:
    a, b = out.resolve(), release1.resolve()
    if a == b or a.is_relative_to(b) or b.is_relative_to(a):
        raise CiteflowError(f"--out {str(out)!r} must be a folder apart from release 1 {str(release1)!r}")
    check_output(out, overwrite, _OURS)


def _publish(tmp: Path, out: Path, summary: dict[str, Any]) -> None:
    """Move the finished release from `tmp` to `out`, generator.json last: its presence means complete."""
    if not out.exists() or not any(out.iterdir()):
        write_json(tmp / "generator.json", summary)
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)  # one rename: `out` appears complete or not at all
        return
    # --overwrite of a previous output: the manifest goes first, so a half-replaced folder never looks complete.
    clear_output(out, _OURS)
    for entry in sorted(tmp.iterdir()):
        os.replace(entry, out / entry.name)
    tmp.rmdir()
    write_json(out / "generator.json.tmp", summary)
    os.replace(out / "generator.json.tmp", out / "generator.json")


@dataclass(frozen=True)
class _Release1:
    """What release 1 holds, read once (pass 1): its census, its topics (the table, and per-paper arrays in
    corpus-id order), SciDocs' corpus ids and the folded titles they match by, and paper-ids' shas and ids."""

    corpus: Corpus
    topics_table: pa.Table
    topics: dict[str, np.ndarray]
    scidocs_ids: np.ndarray
    protected: set[str]
    shas: pa.Array
    paper_id_ids: np.ndarray


def _read_release1(release1: Path, fmt: str) -> _Release1:
    """Pass 1 over release 1; a one-line error when its paper_topics.parquet and corpus/ disagree."""
    corpus = census(release1, fmt)
    topics_table = pq.read_table(release1 / "paper_topics.parquet")
    topic_ids = topics_table.column("corpus_id").to_numpy()
    if len(topic_ids) != len(corpus.ids) or not np.array_equal(np.sort(topic_ids), corpus.ids):
        raise CiteflowError(
            f"release {str(release1)!r} is inconsistent: paper_topics.parquet and corpus/ list "
            f"different papers ({len(topic_ids):,} vs {len(corpus.ids):,})"
        )
    order = np.argsort(topic_ids)
    topics = {
        k: topics_table.column(k).to_numpy()[order].astype(np.int64)
        for k in ("field", "subtopic", "community", "niche", "niche2")
    }
    scidocs_ids, protected = read_scidocs_truth(release1)
    shas, paper_id_ids = read_paper_ids(release1 / "paper-ids")
    return _Release1(
        corpus=corpus,
        topics_table=topics_table,
        topics=topics,
        scidocs_ids=scidocs_ids,
        protected=protected,
        shas=shas,
        paper_id_ids=paper_id_ids,
    )


def _check_added_shas(release1: Path, r1: _Release1, world: World) -> None:
    """The added papers' shas must be new to paper-ids and SciDocs, and distinct."""
    scidocs_shas = [
        json.loads(x)["id"]
        for x in (release1 / "scidocs_truth.jsonl").read_text(encoding="utf-8").splitlines()
        if x.strip()
    ]
    known = pa.concat_arrays([r1.shas, pa.array(scidocs_shas, pa.string())])
    fresh = world.primary_sha.cast(pa.string())
    if pc.any(pc.is_in(fresh, value_set=known)).as_py() or pc.count_distinct(fresh).as_py() != len(fresh):
        raise RuntimeError("sha collision between added papers and release 1; try another seed")


def _make_plan(config: DeriveConfig, base: GenerateConfig, seed: int, release1: Path, r1: _Release1) -> Plan:
    """The removed, changed and added papers, in the counts asked for (or their default shares)."""
    corpus = r1.corpus
    n1 = len(corpus.ids)
    added_n, removed_n, changed_n = (config.count(k, n1) for k in ("added", "removed", "changed"))
    vocab = build_vocabulary(base.seed, base.difficulty, base.niches_per_subtopic)
    removed, changed, kind, new_title, abstract_tail = choose_changes(
        corpus, r1.topics, r1.scidocs_ids, r1.protected, removed_n, changed_n, seed, vocab
    )
    taken = np.unique(np.concatenate([corpus.ids, corpus.referenced, r1.paper_id_ids, r1.scidocs_ids]))
    world, added_src, added_dst, added_year = None, np.empty(0, np.int64), np.empty(0, np.int64), 0
    if added_n:
        world, added_src, added_dst, added_year = added_world(
            base, seed, added_n, corpus.counts["shards"], corpus, removed, r1.topics, taken, r1.protected, vocab
        )
        _check_added_shas(release1, r1, world)
    return Plan(
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


def _write_release2(
    config: DeriveConfig, meta: dict[str, Any], release1: Path, base: GenerateConfig, plan: Plan, r1: _Release1
) -> dict[str, Any]:
    """Write release 2 into a temporary folder beside `config.out`, then publish it; returns its summary.
    An interrupted or failed run leaves no temporary folder behind."""
    out, fmt, level = Path(config.out), meta["format"], base.compresslevel
    edits = plan_edits(fmt, r1.corpus, plan)
    tmp = out.parent / f".{out.name}.derive-tmp"
    if tmp.exists():
        shutil.rmtree(tmp)  # left over by an interrupted run
    tmp.mkdir(parents=True)
    try:
        stats: collections.Counter[str] = collections.Counter()
        keys = DiffKeys()
        release2 = write_corpus(release1 / "corpus", tmp / "corpus", fmt, plan, edits, level, stats, keys)
        paper_ids = write_paper_ids(release1 / "paper-ids", tmp / "paper-ids", plan, edits, release2.ids, level, keys)
        diffs = None
        names = (release1.resolve().name, out.resolve().name)
        if fmt == "s2ag" and all(RELEASE_ID_RE.fullmatch(n) for n in names):
            diffs = write_diffs(release1, tmp, *names, keys, level)
        elif fmt == "s2ag":
            log.warning("derive: folder names %s are not release ids (letters, digits, . _ -): no diffs written", names)
        shutil.copytree(release1 / "scidocs", tmp / "scidocs")
        shutil.copy2(release1 / "scidocs_truth.jsonl", tmp / "scidocs_truth.jsonl")
        write_topics(r1.topics_table, plan, tmp / "paper_topics.parquet")
        write_diff(plan, tmp / "release_diff.parquet")
        summary = _summary(config, meta, release1, base, plan, r1.corpus, release2, paper_ids, stats)
        if diffs is not None:
            summary["diff"]["diffs"] = diffs
        _publish(tmp, out, summary)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary


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
    kind; file: release_diff.parquet; S2AG: `diffs`, per dataset the keys added, changed and deleted and the
    records in update and delete files, and the diff folders written), `counts` (release
    1's keys, every one exact for release 2: recounted from the written lines the way build_graph keeps records
    and edges, and checked against release 1's census plus the diff) and `scidocs` (release 1's, still valid).
    """
    release1, out = Path(config.derive_from), Path(config.out)
    meta = load_release(release1)
    if meta.get("generator_version") != GENERATOR_VERSION:
        # Added and changed papers take their words and niches from release 1's generator: another version's
        # vocabulary and topics would not match the papers already there.
        raise CiteflowError(
            f"release {str(release1)!r} was written by generator version {meta.get('generator_version')}; this "
            f"citeflow writes version {GENERATOR_VERSION}: generate release 1 again with it, then derive"
        )
    _check_output(out, release1, config.overwrite)
    fmt, base = meta["format"], base_config(meta)
    seed = derived_seed(meta, config.seed)
    log.info("derive: reading release %s (%s)", release1, fmt)
    r1 = _read_release1(release1, fmt)
    plan = _make_plan(config, base, seed, release1, r1)
    summary = _write_release2(config, meta, release1, base, plan, r1)
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


def _summary(
    config: DeriveConfig,
    meta: dict[str, Any],
    release1: Path,
    base: GenerateConfig,
    plan: Plan,
    corpus: Corpus,
    release2: Corpus,
    paper_ids: dict[str, int],
    dropped: collections.Counter[str],
) -> dict[str, Any]:
    n = len(corpus.ids)
    gone = index_mask(n, np.searchsorted(corpus.ids, plan.removed))
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
        "generator_version": GENERATOR_VERSION,
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
