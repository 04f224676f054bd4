"""filter_leakage's paper-ids lines from an S2AG release diff: the previous release's, the diff applied.

filter_leakage stores every line of the paper-ids table it read (`paper_id_lines`: the line's `sha` as
written, its corpus id where it gives a (sha, corpus id) pair, else the reason it gives none;
`id_mapping.paper_id_lines`), and looks the benchmark's shas up and counts the lines on that table. When the
release's diffs folder (`build_graph.diffs`: auto finds `<release>/diffs/` beside `<release>/paper-ids/`)
holds a diff to this snapshot with a `paper-ids.json` manifest, from a release that the artifact root holds a
filter_leakage version of (this stage version, with the table), the stage applies the diff to that version's
table instead of parsing the whole paper-ids table (`find` in `run`, `write` in the build):

- paper-ids records are keyed by `sha` as written (citeflow/diffs.py); a key's lines in the new release are
  those of the last step that names it (its update lines, or none when that step deletes it), as
  spark/incremental.py applies the corpus's datasets. Lines no step names stay, malformed ones too (they
  have no key, so no diff removes them).
- the table is written over the base's (spark/output.py `write_over`): the base's files that hold no line of
  a key the diff names linked, the others written again without those lines, the update lines in new files.
- dirt: an update line that is no JSON object is a line of the table like any other (counted by reason in the
  manifest's `paper_ids`); a delete line without a key removes nothing and is counted in the manifest's
  `paper_id_lines.from_diff.unusable_deletes`, with a warning.

The stage's version then names the base version and the diff's files instead of the paper-ids folder (as a
build_graph version from a diff names its base and diff), and its tables equal those of parsing the release's
paper-ids table (tests/e2e/test_incremental.py). Otherwise it parses the table, saying why in one line.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from citeflow import diffs as D
from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import RunConfig
from citeflow.snapshot import existing

TABLE = "paper_id_lines"
log = logging.getLogger("citeflow")


def _diffs_folder(config: RunConfig):
    """The diffs folder of the release's paper-ids table, or None (no table, no folder)."""
    if not config.paper_ids:
        return None
    existing("paper_ids", config.paper_ids)  # not read from a diff, but named by the user
    return D.release_diffs(config.build_graph.diffs, config.paper_ids, "build_graph.diffs")


def _starts(config: RunConfig, folder) -> list[str]:
    """The releases a paper-ids diff to this snapshot starts at, most recent first."""
    return [
        s
        for s in D.starts(folder, config.snapshot)
        if (D.diff_folder(folder, s, config.snapshot) / f"{D.PAPER_IDS}.json").is_file()
    ]


def _bases(store: ArtifactStore, start: str, stage: str, stage_version: int) -> list[Manifest]:
    """The `stage` versions of release `start` that hold paper-ids lines (a version made without a paper-ids
    table holds an empty one, with no source: not a base)."""
    return [
        m
        for m in store.list_versions(start, stage)
        if m.config.get("stage_version") == stage_version and TABLE in m.tables and m.metrics.get(TABLE)
    ]


def diff_bases(
    config: RunConfig, store: ArtifactStore, stage: str, stage_version: int
) -> list[tuple[Manifest, D.Diff]]:
    """Every (base version, paper-ids diff) the release's lines could be made from: each start whose versions
    hold lines of one source, silently (`find` says which one a build takes, and why)."""
    folder = _diffs_folder(config)
    if folder is None:
        return []
    found = []
    for start in _starts(config, folder):
        versions = _bases(store, start, stage, stage_version)
        if versions and len({m.metrics[TABLE].get("source") for m in versions}) == 1:
            base = min(versions, key=lambda m: m.version)  # any: their tables hold the same lines
            found.append((base, D.read_diff(folder, start, config.snapshot, (D.PAPER_IDS,))))
    return found


def find(config: RunConfig, store: ArtifactStore, stage: str, stage_version: int) -> tuple[Manifest, D.Diff] | None:
    """(base filter_leakage version, paper-ids diff) when the diffs folder holds a diff to this snapshot with
    a paper-ids manifest from a release the artifact root holds a `stage` version of `stage_version` with
    the table; the latest such start (by release id) wins. None, with one log line saying why, when a diff
    is there but cannot be used (also when a start's versions hold tables of different paper-ids sources: a
    version is never chosen by age)."""
    folder = _diffs_folder(config)
    if folder is None:
        return None
    starts = _starts(config, folder)
    if not starts:
        return None
    for start in starts:
        found = _bases(store, start, stage, stage_version)
        sources = {m.metrics.get(TABLE, {}).get("source") for m in found}
        if len(sources) > 1:
            log.info(
                "%s: release %s holds %s versions of %d paper-ids sources (%s); parsing the paper-ids table",
                stage,
                start,
                stage,
                len(sources),
                ", ".join(m.version for m in found),
            )
            return None
        if found:
            base = min(found, key=lambda m: m.version)  # any: their tables hold the same lines
            return base, D.read_diff(folder, start, config.snapshot, (D.PAPER_IDS,))
    log.info(
        "%s: paper-ids diffs to %s start at %s, of which the artifact root holds no %s version with its "
        "paper-ids lines; parsing the paper-ids table",
        stage,
        config.snapshot,
        ", ".join(starts),
        stage,
    )
    return None


def source_of(base: Manifest | None, lineage: dict[str, Any]) -> str:
    """What a version's `paper_id_lines` were made from, as a short digest: the paper-ids folder's fingerprint
    (parsed), or the base's source and the diff's fingerprint (`lineage`). Versions of one release with the same
    source hold the same lines; `find` refuses to choose between different ones."""
    parts = (
        [lineage["fingerprint"]]
        if base is None
        else [base.metrics[TABLE]["source"], lineage["fingerprint"], lineage["rules"]]
    )
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def write(
    spark, store: ArtifactStore, config: RunConfig, base: Manifest, diff: D.Diff, target: str, materialize
) -> dict[str, Any]:
    """Write `target` (the version's `paper_id_lines`): `base`'s with the diff applied; the manifest's
    `from_diff` entry. `materialize(frame, name)` stages a frame read twice."""
    from pyspark.sql import functions as F

    from citeflow.jobs.filter_leakage.id_mapping import PAPER_IDS_SCHEMA, paper_id_lines
    from citeflow.spark import incremental as I
    from citeflow.spark import output as O
    from citeflow.spark import readers as R
    from citeflow.spark import scans as S

    def lines_of(kind: str):
        return R.diff_lines(spark, diff, D.PAPER_IDS, kind, PAPER_IDS_SCHEMA, paper_id_lines)

    updates = materialize(lines_of("updates"), "paper_id_updates")
    deletes = materialize(lines_of("deletes"), "paper_id_deletes")
    keyed = updates.where(F.col("key").isNotNull())
    steps = I.last_steps(keyed, deletes.where(F.col("key").isNotNull()), ["key"])
    named = materialize(steps, "paper_id_keys")
    columns = ["key", "corpus_id", "reason"]
    new_rows = I.final_updates(keyed, named, ["key"]).unionByName(updates.where(F.col("key").isNull())).select(*columns)
    base_rows = S.read_stored(spark, store, base.table_path(TABLE), with_position=True).join(
        named.select("key"), "key", "left_semi"
    )
    files = O.write_over(
        spark, store, base.table_path(TABLE), target, base_rows, new_rows, most=config.build_graph.output_files
    )
    counts = {
        r["kind"]: r
        for r in updates.select(F.lit("updates").alias("kind"))
        .unionByName(deletes.select(F.lit("deletes").alias("kind")))
        .groupBy("kind")
        .agg(F.count("*").alias("lines"))
        .collect()
    }
    unusable = {
        r["reason"]: r["n"]
        for r in deletes.where(F.col("key").isNull()).groupBy("reason").agg(F.count("*").alias("n")).collect()
    }
    if unusable:
        log.warning(
            "paper-ids: %d delete lines of the diff name no sha and remove nothing: %s",
            sum(unusable.values()),
            ", ".join(f"{k} {v}" for k, v in sorted(unusable.items())),
        )
    entry = {
        "base": {"snapshot": base.snapshot, "version": base.version},
        "start": diff.start,
        "end": diff.end,
        "steps": [[s.from_release, s.to_release] for s in diff.steps],
        "keys_named": named.count(),
        "update_lines": counts["updates"]["lines"] if "updates" in counts else 0,
        "delete_lines": counts["deletes"]["lines"] if "deletes" in counts else 0,
        "unusable_deletes": dict(sorted(unusable.items())),
        "files": {k: len(v) for k, v in files.items()},  # the data files linked, written again and new
    }
    log.info(
        "paper-ids: applied the diff %s -> %s (%d keys named) to the lines of %s version %s",
        diff.start,
        diff.end,
        entry["keys_named"],
        base.snapshot,
        base.version,
    )
    return entry
