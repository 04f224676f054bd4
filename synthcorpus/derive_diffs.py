"""The diff a derived S2AG release ships with (`citeflow generate --derive-from`), in the Datasets API layout.

Reads release 2's written `corpus/` and `paper-ids/` shards (in the temporary folder, after derive_rewrite.py
wrote them) and the keys pass 2 touched (`DiffKeys`); writes `diffs/<R1>/to/<R2>/` (layout: citeflow/diffs.py) and, when
release 1 has diffs of its own ending at R1 (`diffs/<R0>/to/<R1>/`), the chained `diffs/<R0>/to/<R2>/`: R0's
steps copied, this one appended.

What the diff holds, so that applying it to release 1 gives release 2 exactly:
- update files: for every key that pass 2 added or edited, *every* release-2 record of that key (a paper's
  duplicate records too, edited or not), so that the records of a touched key in release 2 are those of the
  diff; keys: papers and abstracts by corpusid, citations by (citingcorpusid, citedcorpusid), paper-ids by sha;
- delete files: one record per key whose records release 2 lost (removed papers' papers and abstracts rows,
  their citation rows and their paper-ids rows, each key once).
Malformed lines have no key and are not part of any diff (release 1's stay in release 2, derive.py).
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from citeflow.diffs import DATASETS, FOLDER, PAPER_IDS, diff_folder, read_diff, starts, step_folder, write_manifest
from citeflow.synthcorpus.derive_census import read_lines, shard_files
from citeflow.synthcorpus.outputs import write_gzip

log = logging.getLogger("citeflow")

Key = int | str | tuple[str | None, str | None]
# every dataset a derived release's diff holds: the corpus's and the paper-ids table
DIFF_DATASETS = (*DATASETS, PAPER_IDS)


@dataclass
class DiffKeys:
    """Keys pass 2 touched, per dataset: `updated` (edited or added), `edited` (release 1's keys among them)
    and `deleted` (keys whose records were dropped)."""

    updated: dict[str, set[Key]] = field(default_factory=lambda: {d: set() for d in DIFF_DATASETS})
    deleted: dict[str, set[Key]] = field(default_factory=lambda: {d: set() for d in DIFF_DATASETS})
    edited: dict[str, set[Key]] = field(default_factory=lambda: {d: set() for d in DIFF_DATASETS})


def record_key(dataset: str, rec: dict[str, Any]) -> Key | None:
    """A record's primary key (None when it has none usable). A paper-ids record's is its `sha` as written (a
    string, as filter_leakage reads it: jobs/filter_leakage/id_mapping.py `paper_id_lines`)."""
    if dataset == PAPER_IDS:
        value = rec.get("sha")
        return value if isinstance(value, str) else None
    if dataset == "citations":
        a, b = rec.get("citingcorpusid"), rec.get("citedcorpusid")
        return (None if a is None else str(a), None if b is None else str(b))
    value = rec.get("corpusid")
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _delete_record(dataset: str, key: Key) -> dict[str, Any]:
    if dataset == PAPER_IDS:
        return {"sha": key}
    if dataset == "citations":
        assert isinstance(key, tuple)  # a citation's key is (citing, cited)
        return {"citingcorpusid": key[0], "citedcorpusid": key[1]}
    return {"corpusid": key}


def _sort_key(key: Key) -> tuple:
    if isinstance(key, tuple):
        return (2, key[0] or "", key[1] or "")
    return (0, key, "") if isinstance(key, int) else (1, key, "")


def write_diffs(
    release1: Path, tmp: Path, from_release: str, to_release: str, keys: DiffKeys, level: int
) -> dict[str, Any]:
    """Write release 2's diffs into `tmp/diffs`; returns the truth: per dataset the keys added, changed and
    deleted and the records in update and delete files, and the diff folders written (relative to `tmp`)."""
    folder = diff_folder(tmp / FOLDER, from_release, to_release)
    step = step_folder(from_release, to_release)
    truth: dict[str, Any] = {}
    entries: dict[str, dict[str, Any]] = {}
    for dataset in DIFF_DATASETS:
        wanted, deleted = keys.updated[dataset], keys.deleted[dataset]
        lines: list[bytes] = []
        kept: set[Key] = set()  # deleted keys with records left in release 2: updated, not deleted
        shards = tmp / PAPER_IDS if dataset == PAPER_IDS else tmp / "corpus" / dataset
        for path in shard_files(shards, dataset):
            for line, rec in read_lines(path):
                key = record_key(dataset, rec) if rec is not None else None
                if key is not None and (key in wanted or key in deleted):
                    lines.append(line)
                    if key in deleted:
                        kept.add(key)
        gone = deleted - kept
        deletes = [
            (json.dumps(_delete_record(dataset, k), separators=(",", ":")) + "\n").encode()
            for k in sorted(gone, key=_sort_key)
        ]
        names = {"update_files": f"{step}/{dataset}/updates_0.jsonl.gz"}
        names["delete_files"] = f"{step}/{dataset}/deletes_0.jsonl.gz"
        write_gzip(folder / names["update_files"], [b"".join(lines)], level)
        write_gzip(folder / names["delete_files"], [b"".join(deletes)], level)
        entries[dataset] = {
            "from_release": from_release,
            "to_release": to_release,
            "update_files": [names["update_files"]],
            "delete_files": [names["delete_files"]],
        }
        write_manifest(folder, dataset, from_release, to_release, [entries[dataset]])
        changed = (wanted & keys.edited[dataset]) | kept
        truth[dataset] = {
            "added": len(wanted - changed),
            "changed": len(changed),
            "deleted": len(gone),
            "update_records": len(lines),
            "delete_records": len(deletes),
        }
    written = [str(folder.relative_to(tmp))]
    # Chains: release 1's own diffs from an earlier release R0, extended by this step.
    for start in starts(release1 / FOLDER, from_release):
        earlier = read_diff(release1 / FOLDER, start, from_release)
        chained = diff_folder(tmp / FOLDER, start, to_release)
        for s in earlier.steps:
            name = step_folder(s.from_release, s.to_release)
            shutil.copytree(Path(earlier.folder) / name, chained / name)
        shutil.copytree(folder / step, chained / step)
        for dataset in DIFF_DATASETS:
            manifest = Path(earlier.folder) / f"{dataset}.json"
            if not manifest.is_file():  # a release derived before its diffs held paper-ids
                log.warning("derive: %s has no %s; the chained diff has none either", earlier.folder, manifest.name)
                continue
            doc = json.loads(manifest.read_text(encoding="utf-8"))
            write_manifest(chained, dataset, start, to_release, [*doc["diffs"], entries[dataset]])
        written.append(str(chained.relative_to(tmp)))
    return {"datasets": truth, "folders": sorted(written)}
