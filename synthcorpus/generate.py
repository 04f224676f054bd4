"""Generate a realistic synthetic corpus snapshot, a SciDocs set over it and the truth about both.

Run: `citeflow generate --papers N --out DIR [--seed S] [--format s2orc|s2ag] [--shards K] [--overwrite]`
(or `citeflow.synthcorpus.generate.run(GenerateConfig(papers=N, out=DIR, ...))`). Same seed and config give
byte-identical files.

Writes, under `OUT/`:
- `corpus/`: the snapshot, gzipped JSON lines, in the field names and JSON types of the real samples
  (`shared/data/` beside the checkout):
  - `--format s2orc`: `metadata/metadata_{i}.jsonl.gz` (S2ORC 20200705v1 metadata records);
  - `--format s2ag`: `papers/papers_{i}.jsonl.gz`, `abstracts/abstracts_{i}.jsonl.gz` and
    `citations/citations_{i}.jsonl.gz` (Semantic Scholar datasets records).
- `paper-ids/paper-ids_{i}.jsonl.gz`: S2AG `paper-ids` (`sha` <-> `corpusid`, `primary`): one primary sha
  per corpus paper, extra non-primary shas for ~10% of them, and shas of papers outside the corpus.
- `scidocs/`: a SciDocs evaluation set in the original layout (docs/reference.md §6) over papers of the snapshot, keyed
  by sha ids: `paper_metadata_{mag_mesh,view_cite_read}.json`, `{mag,mesh}/{train,val,test}.csv`,
  `{cite,cocite,coview,coread}/{val,test}.qrel`, `recomm/` and `paper_metadata_recomm.json` (synthcorpus/recomm.py).
- `scidocs_truth.jsonl`: per SciDocs id, its corpus id and how a mapping should find it (sha, title or
  not at all), for tests of the leakage filter.
- `paper_topics.parquet`: per corpus paper, `corpus_id`, `field` (index in FIELDS), `subtopic` (index
  within the field) and `community` (global subtopic index): the truth later stages are tested against
  (do triplet positives and trained embeddings follow the topics?).
- `generator.json`, written last: the config and the exact truth counts (see `run`), which tests of later
  stages compare against.

What the corpus looks like:
- 19 MAG fields of study weighted like the real S2ORC sample, each with subtopics (Medicine's 11 are the
  SciDocs MeSH classes), each subtopic with one niche (a narrow topic) per 20,000 papers; every paper has a
  niche and a secondary niche, ~10% a second field. How strongly topics shape text and citations is the
  `difficulty` (config.py); at the default, the snapshot is calibrated on real samples (calibration.py):
  title and abstract lengths, vocabulary size and Zipf slope, topic-specific token share, how much more
  alike same-field and citing / cited texts are than others, missing abstracts (51%, fewer among citing
  papers), out-degrees (84% of papers cite nothing; median 13 of the others). generator.json's
  `calibration` puts the targets and the snapshot's values side by side.
- Publication dates 1970-2020 with exponential growth. Citations go only to strictly older papers,
  chosen by preferential attachment on a heavy-tailed per-paper fitness, mostly within the citing paper's
  niche and secondary niche, then its field, then anywhere. Out-degrees are a discretised lognormal.
- Dirt, injected into the kept records only so that every count is exact: missing titles and abstracts,
  strictly less complete duplicate records (sometimes before the original or in another shard),
  malformed lines (a truncated copy of another line, never the only record of a paper), self-citations,
  duplicate citations, citations to papers outside the corpus and, for S2AG, null ids and citing papers
  outside the corpus.
- SciDocs: MAG labels are the field (index in FIELDS), MeSH labels Medicine's subtopic; cite positives are
  papers the query cites, cocite positives papers cited together with it; coread (bibliographic coupling)
  and coview (co-cited or coupled papers of the same subtopic) are documented proxies for the usage-log
  tasks. Negatives come from a pool of max(1000, N // 10) papers so SciDocs stays a minority of the corpus.
  Most SciDocs ids are the paper's primary sha in `paper-ids` (a few a non-primary one), ~1% have a sha
  unknown to `paper-ids` but a title unique in the corpus (mappable by title only), and a few are not
  mappable at all (unknown sha, and a title matching no corpus paper or several).
- The format only changes the serialisation: the same seed gives the same papers and graph in both.

A later release of a snapshot (papers added, removed and changed) is derived by derive.py
(`citeflow generate --derive-from DIR`); it samples its new papers with `sample_papers(config, LaterRelease(...))`
(published after the old release, with ids it does not use) and writes them with serialise.py's line writers.

Every array is built with numpy / pyarrow compute (no per-edge Python loops); only `run` and the writers here,
in outputs.py and in scidocs.py touch files. 1,000,000 papers take a few minutes on two cores.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from citeflow.synthcorpus.arrays import random_stream
from citeflow.synthcorpus.config import GENERATOR_VERSION, PAPER_IDS_PER_SHARD, GenerateConfig
from citeflow.synthcorpus.measure import calibration_papers, measure
from citeflow.synthcorpus.outputs import (
    OUTPUTS,
    check_output,
    clear_output,
    topics_table,
    write_gzip,
    write_json,
    write_table,
)
from citeflow.synthcorpus.recomm import write_recomm
from citeflow.synthcorpus.scidocs import SciDocsPlan, plan_scidocs, write_scidocs, write_scidocs_truth
from citeflow.synthcorpus.serialise import (
    interleave,
    line_bytes,
    paper_id_lines,
    s2ag_abstract_lines,
    s2ag_citation_lines,
    s2ag_paper_lines,
    s2orc_lines,
    truncated_copies,
)
from citeflow.synthcorpus.world import World, abstracts_of, build_world

log = logging.getLogger("citeflow")

# Told after each corpus or paper-ids file: (files written, files in all).
Progress = Callable[[int, int], None]


def _write_lines(path: Path, lines: pa.Array, compresslevel: int) -> int:
    return write_gzip(path, [line_bytes(lines)], compresslevel)


class _ShardWriter:
    """Compresses and writes shards on a background thread (zlib and pyarrow release the GIL) while the
    next shard is assembled; at most two finished shards wait in memory."""

    def __init__(self, compresslevel: int, total: int, progress: Progress | None) -> None:
        self._level = compresslevel
        self._total, self._done, self._progress = total, 0, progress
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="citeflow-gzip")
        self._pending: list[Future[int]] = []

    def submit(self, path: Path, lines: pa.Array) -> None:
        self._pending.append(self._pool.submit(_write_lines, path, lines, self._level))
        while len(self._pending) > 2:
            self._wait_one()

    def _wait_one(self) -> None:
        self._pending.pop(0).result()
        self._done += 1
        if self._progress is not None:
            self._progress(self._done, self._total)

    def __enter__(self) -> _ShardWriter:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        try:
            while self._pending and exc_type is None:
                self._wait_one()
        finally:
            for future in self._pending:
                future.cancel()
            self._pool.shutdown(wait=True)


class _AbstractKeeper:
    """Keeps the abstracts of SciDocs papers as the corpus shards go by (no second text pass)."""

    def __init__(self, papers: np.ndarray) -> None:
        self.papers = papers
        self.text: dict[int, str | None] = {}

    def __call__(self, lo: int, abstracts: pa.Array) -> None:
        hi = lo + len(abstracts)
        sel = self.papers[(self.papers >= lo) & (self.papers < hi)]
        self.text.update(zip(sel.tolist(), abstracts.take(pa.array(sel - lo)).to_pylist(), strict=True))


def _write_corpus(world: World, root: Path, writer: _ShardWriter, keep: _AbstractKeeper) -> None:
    cfg, shards = world.config, world.config.shard_count
    cache: dict[int, pa.Array] = {}
    for s in range(shards):
        lo, hi = int(world.bounds[s]), int(world.bounds[s + 1])
        idx = np.arange(lo, hi, dtype=np.int64)
        abstracts = abstracts_of(world, lo, hi, cache)
        keep(lo, abstracts)
        dups = world.dup_of[world.dup_shard == s]
        rng = random_stream(cfg.seed, "shard-layout", s)
        if cfg.format == "s2orc":
            lines = interleave(rng, s2orc_lines(world, idx, abstracts), s2orc_lines(world, dups, None, duplicate=True))
            lines = interleave(rng, lines, truncated_copies(rng, lines, int(world.malformed["metadata"][s])))
            writer.submit(root / "metadata" / f"metadata_{s}.jsonl.gz", lines)
            continue
        lines = interleave(rng, s2ag_paper_lines(world, idx), s2ag_paper_lines(world, dups, duplicate=True))
        lines = interleave(rng, lines, truncated_copies(rng, lines, int(world.malformed["papers"][s])))
        writer.submit(root / "papers" / f"papers_{s}.jsonl.gz", lines)
        has_row = world.abstract_row[lo:hi]
        rows = rng.permutation(np.flatnonzero(has_row))  # the abstracts dataset is in its own order
        lines = s2ag_abstract_lines(world, lo + rows, abstracts.take(pa.array(rows)))
        lines = interleave(rng, lines, truncated_copies(rng, lines, int(world.malformed["abstracts"][s])))
        writer.submit(root / "abstracts" / f"abstracts_{s}.jsonl.gz", lines)
        lines = s2ag_citation_lines(world, s)
        lines = interleave(rng, lines, truncated_copies(rng, lines, int(world.malformed["citations"][s])))
        writer.submit(root / "citations" / f"citations_{s}.jsonl.gz", lines)


def _paper_id_rows(world: World) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    cid = world.papers.corpus_id
    sha = pa.concat_arrays([world.primary_sha, world.extra_sha, world.outside_sha])
    corpus_id = np.concatenate([cid, cid[world.extra_paper], world.outside_ids[: len(world.outside_sha)]])
    primary = np.concatenate(
        [np.ones(len(cid), bool), np.zeros(len(world.extra_paper), bool), np.ones(len(world.outside_sha), bool)]
    )
    return sha, corpus_id, primary


def _paper_id_shards(world: World) -> int:
    rows = world.papers.n + len(world.extra_paper) + len(world.outside_sha)
    return max(1, math.ceil(rows / PAPER_IDS_PER_SHARD))


def _write_paper_ids(world: World, root: Path, writer: _ShardWriter) -> dict[str, int]:
    sha, corpus_id, primary = _paper_id_rows(world)
    order = random_stream(world.config.seed, "paper-ids-order").permutation(len(corpus_id))
    shards = _paper_id_shards(world)
    cuts = (np.arange(shards + 1) * len(order)) // shards
    for s in range(shards):
        part = order[cuts[s] : cuts[s + 1]]
        writer.submit(
            root / f"paper-ids_{s}.jsonl.gz", paper_id_lines(sha.take(pa.array(part)), corpus_id[part], primary[part])
        )
    return {
        "paper_ids_rows": len(order),
        "paper_ids_primary": int(primary.sum()),
        "paper_ids_outside_corpus": len(world.outside_sha),
        "paper_ids_shards": shards,
    }


def _check_shas(world: World, plan: SciDocsPlan) -> None:
    """paper-ids' shas and SciDocs' own (title-only and unmappable ids) must all differ."""
    shas = pa.concat_arrays(
        [
            world.primary_sha,
            world.extra_sha,
            world.outside_sha,
            pa.array(plan.sha + plan.virtual_sha, pa.large_string()),
        ]
    )
    distinct = pc.count_distinct(shas).as_py()
    if distinct != len(shas) - (len(plan.sha) - int((plan.kind == 2).sum())):
        raise RuntimeError("sha collision: paper-ids and SciDocs shas must be unique; try another seed")


def _write_scidocs_set(world: World, plan: SciDocsPlan, abstracts: dict[int, str | None], out: Path) -> dict[str, Any]:
    """scidocs/ (recomm included) and scidocs_truth.jsonl; returns generator.json's `scidocs`."""
    scidocs = write_scidocs(plan, abstracts, out / "scidocs")
    with_sha = plan.papers[plan.kind != 2]  # recomm uses corpus papers of the set that paper-ids maps by sha
    at = np.searchsorted(plan.papers, with_sha)
    recomm = write_recomm(
        world,
        with_sha,
        dict(zip(with_sha.tolist(), plan.ids(with_sha), strict=True)),
        {int(p): plan.title[i] for p, i in zip(with_sha.tolist(), at.tolist(), strict=True)},
        abstracts,
        out / "scidocs",
    )
    scidocs["tasks"]["recomm"] = recomm
    scidocs["metadata"]["paper_metadata_recomm.json"] = recomm["papers"]
    write_scidocs_truth(plan, world, out / "scidocs_truth.jsonl")
    return scidocs


def _summary(
    config: GenerateConfig,
    world: World,
    paper_ids: dict[str, int],
    scidocs: dict[str, Any],
    calibration: dict[str, Any],
) -> dict[str, Any]:
    """generator.json's content (run's docstring)."""
    return {
        "generator_version": GENERATOR_VERSION,
        "format": config.format,
        "seed": config.seed,
        "papers": config.papers,
        "config": dataclasses.asdict(config),
        "paths": {
            "corpus": "corpus",
            "paper_ids": "paper-ids",
            "scidocs": "scidocs",
            "scidocs_truth": "scidocs_truth.jsonl",
            "paper_topics": "paper_topics.parquet",
        },
        "counts": {**world.counts, **paper_ids},
        "scidocs": scidocs,
        "calibration": calibration,
    }


def run(config: GenerateConfig, progress: Progress | None = None) -> dict[str, Any]:
    """Write the snapshot, paper-ids, SciDocs set and, last, generator.json; returns generator.json's content.
    `progress` is told of every corpus and paper-ids file written (the command line draws a bar).

    generator.json: `generator_version`, `format`, `seed`, `papers`, `config` (every field), `paths`
    (relative folders), and the exact truth later stages are tested against:

    `counts`:
      papers                    distinct valid paper ids in the corpus (= config.papers)
      lines                     lines of the corpus shards (S2ORC metadata; S2AG: the papers dataset only)
      abstract_lines, citation_lines   S2AG: lines of the abstracts / citations datasets
      malformed_lines           lines that are not JSON (truncated copies, always extra lines);
                                malformed_lines_by_dataset splits them per dataset
      duplicate_records         extra well-formed records of an id already present (strictly less complete)
      papers_without_title, papers_without_abstract   among the kept records (S2AG: no abstracts line or a
                                null abstract); papers_with_generic_title: titles like "Editorial"
      citations                 clean edges: unique, citing != cited, both in the corpus (what the graph keeps)
      graph_nodes               papers with at least one clean edge
      self_citations, duplicate_citations (extra copies of clean edges), external_citations (cited id not
                                in the corpus), null_id_citations and citing_not_in_corpus (S2AG only; 0 for S2ORC)
      shards, paper_ids_rows, paper_ids_primary, paper_ids_outside_corpus, paper_ids_shards
    Each kind of dirt appears at least once when its rate is positive. S2ORC counts are for edges read
    from outbound_citations; inbound_citations hold the clean edges only.

    `scidocs`: ids (distinct sha ids over all files) = mapped_by_sha (sha in paper-ids; of which
    mapped_by_non_primary_sha via a non-primary sha) + mapped_by_title_only (sha unknown, folded title unique
    in the corpus) + unmappable (sha unknown, title matching no corpus paper or, for
    unmappable_with_ambiguous_title of them, several); `metadata` (entries per metadata file); `tasks`
    (mag / mesh: papers per split, classes; cite / cocite / coview / coread: per split queries, candidates
    and positives, and distinct papers); `labels` (MAG and MeSH class names by label).

    `calibration` (measure.py): `difficulty`, `papers_measured`, `pairs_measured`, `statistics` (per
    statistic of calibration.TARGETS: target, achieved, bound, within) and `same_field_citations` (the share
    of clean citations within the citing paper's field, which no real sample here can measure).
    """
    out = Path(config.out)
    if check_output(out, config.overwrite, OUTPUTS):
        clear_output(out, OUTPUTS)
    out.mkdir(parents=True, exist_ok=True)
    log.info(
        "generate: building a %s snapshot of %s papers (seed %s)", config.format, f"{config.papers:,}", config.seed
    )
    world = build_world(config)
    plan = plan_scidocs(world)
    _check_shas(world, plan)

    datasets = 1 if config.format == "s2orc" else 3
    keep = _AbstractKeeper(np.union1d(plan.papers, calibration_papers(world)))
    total_files = config.shard_count * datasets + _paper_id_shards(world)
    with _ShardWriter(config.compresslevel, total_files, progress) as writer:
        _write_corpus(world, out / "corpus", writer, keep)
        paper_ids = _write_paper_ids(world, out / "paper-ids", writer)
    scidocs = _write_scidocs_set(world, plan, keep.text, out)
    write_table(topics_table(world.papers), out / "paper_topics.parquet")
    calibration = measure(world, keep.text)
    summary = _summary(config, world, paper_ids, scidocs, calibration)
    # Written last, through a temporary file and a rename: its presence means the snapshot is complete.
    write_json(out / "generator.json.tmp", summary)
    os.replace(out / "generator.json.tmp", out / "generator.json")
    log.info(
        "generate: wrote %s papers, %s citations to %s", f"{config.papers:,}", f"{world.counts['citations']:,}", out
    )
    return summary
