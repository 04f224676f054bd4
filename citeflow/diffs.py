"""Release diffs in the Semantic Scholar Datasets API layout: find, check and fingerprint them.

The Datasets API answers `diffs/{start}/to/{end}/{dataset}` with a manifest
`{dataset, start_release, end_release, diffs: [{from_release, to_release, update_files, delete_files}]}`:
one entry per pair of consecutive releases, applied in order. A record of an update file is inserted or
replaces every record with the same primary key; a record of a delete file removes them; a step's delete files
apply after its update files (the API documentation's example code; `APPLY_RULES`). Files are gzipped
JSON lines. Primary keys (Datasets API documentation): `corpusid` for papers and abstracts, `sha` for paper-ids;
citations are keyed here by (`citingcorpusid`, `citedcorpusid`), since the released citation records (see the
S2AG sample in `shared/data/s2ag/`) carry no `citationid`.

On disk, a release folder holds its diffs beside `corpus/`:

    <release>/diffs/<start>/to/<end>/<dataset>.json          the manifest (file names relative to its folder)
    <release>/diffs/<start>/to/<end>/<from>__<to>/<dataset>/updates_0.jsonl.gz, deletes_0.jsonl.gz

`citeflow generate --derive-from` writes them (synthcorpus/derive_diffs.py); build_graph reads the corpus
datasets' (jobs/build_graph.py, spark/incremental.py), filter_leakage the paper-ids one
(jobs/filter_leakage/paper_ids_diff.py), which a diff may lack. Release ids are snapshot ids (`RELEASE_ID_RE`),
and every file a manifest names must lie inside the manifest's folder.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from citeflow.errors import CiteflowError

# A release id (S2AG: a date, 2023-08-29); citeflow's snapshot ids are release ids (citeflow.config).
RELEASE_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

DATASETS = ("papers", "abstracts", "citations")  # the corpus's, which build_graph reads
PAPER_IDS = "paper-ids"  # the sha -> corpusid table, which filter_leakage reads
# How a diff's records apply and how the merged tables are stored, part of the lineage of every version built
# from a diff (build_graph, the paper-ids lines), so a change of these rules never reuses a version built under
# the old ones: a key that one step both updates and deletes is deleted, as in the Datasets API's own example
# code (update files, then delete files); a line whose key reads but whose record does not (`bad_field_type`)
# names its key (spark/incremental.py); a base file holding a row that goes is written again without it
# (spark/output.py `write_over`). The history of the rules is in CHANGELOG.md.
APPLY_RULES = 3
KEYS = {
    "papers": ("corpusid",),
    "abstracts": ("corpusid",),
    "citations": ("citingcorpusid", "citedcorpusid"),
    PAPER_IDS: ("sha",),
}
FOLDER = "diffs"


def diff_folder(diffs_root: Path, start: str, end: str) -> Path:
    return diffs_root / start / "to" / end


def step_folder(from_release: str, to_release: str) -> str:
    """Where one step's files lie, relative to a diff folder."""
    return f"{from_release}__{to_release}"


@dataclass(frozen=True)
class Step:
    """One entry of a manifest: the files that take `from_release` to `to_release` (absolute paths)."""

    from_release: str
    to_release: str
    update_files: dict[str, list[str]]
    delete_files: dict[str, list[str]]

    def files_of(self, kind: str, dataset: str) -> list[str]:
        """The step's `kind` files ("updates" or "deletes") of one dataset (none: an empty list)."""
        return (self.update_files if kind == "updates" else self.delete_files).get(dataset, [])


@dataclass(frozen=True)
class Diff:
    """The diff from `start` to `end`: its steps in order, and its folder."""

    start: str
    end: str
    folder: str
    steps: list[Step]

    def files(self) -> dict[str, list[str]]:
        """Every file, grouped `<step>/<dataset>/<updates|deletes>` (for fingerprints)."""
        out: dict[str, list[str]] = {}
        for i, step in enumerate(self.steps):
            for kind, files in (("updates", step.update_files), ("deletes", step.delete_files)):
                for dataset, paths in files.items():
                    out[f"{i:03d}/{dataset}/{kind}"] = paths
        return out


def _release_id(value: Any, what: str, where: Path) -> str:
    if not isinstance(value, str) or not RELEASE_ID_RE.fullmatch(value) or len(value) > 128:
        raise CiteflowError(f"diff manifest {where}: {what} {value!r} is not a release id (letters, digits, . _ -)")
    return value


# Characters a file name may not hold: Spark reads * ? [ ] { } as a glob pattern (which could match files the
# check below never saw), Hadoop's paths cannot take ':', and control characters are no file names.
UNSAFE_NAME_RE = re.compile(r"[*?\[\]{}:\x00-\x1f\x7f]")


def _inside(folder: Path, name: Any, where: Path) -> str:
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name:
        raise CiteflowError(f"diff manifest {where}: file name {name!r} must be a path relative to its folder")
    if UNSAFE_NAME_RE.search(name):
        raise CiteflowError(
            f"diff manifest {where}: file name {name!r} holds one of * ? [ ] {{ }} : or a control character, "
            "which Spark would read as a pattern or cannot take; rename the file and its entry"
        )
    try:
        path = (folder / name).resolve()
    except (OSError, ValueError, UnicodeError) as exc:  # a lone surrogate, an unreadable link
        raise CiteflowError(f"diff manifest {where}: file name {name!r} cannot be used: {exc}") from None
    if not path.is_relative_to(folder.resolve()):
        raise CiteflowError(f"diff manifest {where}: file {name!r} lies outside the diff's folder")
    if not path.is_file():
        raise CiteflowError(f"diff manifest {where}: file {name!r} is missing")
    return str(path)


def read_manifest(path: Path, dataset: str, start: str, end: str) -> list[dict[str, Any]]:
    """The checked entries of one dataset's manifest (file names resolved inside its folder)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CiteflowError(f"diff manifest {path} cannot be read: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("diffs"), list) or not doc["diffs"]:
        raise CiteflowError(f"diff manifest {path}: expected an object with a non-empty 'diffs' list")
    if (doc.get("dataset"), doc.get("start_release"), doc.get("end_release")) != (dataset, start, end):
        raise CiteflowError(
            f"diff manifest {path} names dataset {doc.get('dataset')!r} from {doc.get('start_release')!r} to "
            f"{doc.get('end_release')!r}; its place says {dataset!r} from {start!r} to {end!r}"
        )
    entries, expect = [], start
    for entry in doc["diffs"]:
        if not isinstance(entry, dict):
            raise CiteflowError(f"diff manifest {path}: each entry of 'diffs' must be an object")
        a = _release_id(entry.get("from_release"), "from_release", path)
        b = _release_id(entry.get("to_release"), "to_release", path)
        if a != expect:
            raise CiteflowError(f"diff manifest {path}: entry from {a!r} does not follow {expect!r}")
        files = {}
        for kind in ("update_files", "delete_files"):
            names = entry.get(kind, [])
            if not isinstance(names, list):
                raise CiteflowError(f"diff manifest {path}: {kind} must be a list of file names")
            files[kind] = [_inside(path.parent, n, path) for n in names]
        entries.append({"from_release": a, "to_release": b, **files})
        expect = b
    if expect != end:
        raise CiteflowError(f"diff manifest {path}: its entries end at {expect!r}, not at {end!r}")
    return entries


def missing_manifests(diffs_root: Path, start: str, end: str, datasets: tuple[str, ...] = DATASETS) -> list[str]:
    """The datasets of `datasets` whose manifest the diff `start` -> `end` lacks."""
    folder = diff_folder(diffs_root, start, end)
    return [d for d in datasets if not (folder / f"{d}.json").is_file()]


def read_diff(diffs_root: Path, start: str, end: str, datasets: tuple[str, ...] = DATASETS) -> Diff:
    """The diff `start` -> `end` under `diffs_root` of `datasets` (the corpus's; `(PAPER_IDS,)`: the paper-ids
    table's), every dataset's manifest checked; the steps must agree. Every one of `datasets` must have its
    manifest: a dataset without one would silently keep the start release's records (`missing_manifests` lets
    a caller fall back to the shards first)."""
    folder = diff_folder(diffs_root, start, end)
    missing = missing_manifests(diffs_root, start, end, datasets)
    if missing:
        raise CiteflowError(f"diff {folder} has no {', '.join(f'{d}.json' for d in missing)} manifest")
    per_dataset = {dataset: read_manifest(folder / f"{dataset}.json", dataset, start, end) for dataset in datasets}
    pairs = {d: [(e["from_release"], e["to_release"]) for e in es] for d, es in per_dataset.items()}
    if len({tuple(p) for p in pairs.values()}) != 1:
        raise CiteflowError(f"diff {folder}: its datasets' manifests list different steps: {pairs}")
    steps = [
        Step(
            from_release=e["from_release"],
            to_release=e["to_release"],
            update_files={d: per_dataset[d][i]["update_files"] for d in per_dataset},
            delete_files={d: per_dataset[d][i]["delete_files"] for d in per_dataset},
        )
        for i, e in enumerate(per_dataset[datasets[0]])
    ]
    return Diff(start=start, end=end, folder=str(folder), steps=steps)


def release_diffs(setting: str, data_path: str, name: str) -> Path | None:
    """The diffs folder a setting names (`build_graph.diffs`, `name` in errors) for a dataset folder of a
    release (`data_path`: its corpus/ or paper-ids/): None for off, or for auto without a local diffs/ folder
    inside `data_path` or beside it (`<release>/corpus`, `<release>/paper-ids` and `<release>/diffs`)."""
    from citeflow.snapshot import filesystem

    if setting == "off":
        return None
    if setting != "auto":
        fs, root = filesystem(setting)
        if fs.type_name != "local" or not Path(root).is_dir():
            raise CiteflowError(f"{name} {setting!r} is not a local folder")
        return Path(root)
    fs, root = filesystem(data_path)
    if fs.type_name != "local":
        return None
    for folder in (Path(root) / FOLDER, Path(root).parent / FOLDER):
        if folder.is_dir():
            return folder
    return None


def starts(diffs_root: Path, end: str) -> list[str]:
    """Release ids `start` for which `diffs_root/<start>/to/<end>/` exists, most recent (by name) first."""
    if not diffs_root.is_dir():
        return []
    found = [
        p.name
        for p in diffs_root.iterdir()
        if RELEASE_ID_RE.fullmatch(p.name) and (p / "to" / end).is_dir() and p.name != end
    ]
    return sorted(found, reverse=True)


def write_manifest(folder: Path, dataset: str, start: str, end: str, steps: list[dict[str, Any]]) -> None:
    """`<folder>/<dataset>.json` for these steps (file names relative to `folder`)."""
    doc = {"dataset": dataset, "start_release": start, "end_release": end, "diffs": steps}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{dataset}.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def fingerprint(diff: Diff) -> dict[str, Any]:
    """Lineage entry for a diff: its steps, file count, bytes and a content fingerprint of its files."""
    from citeflow.snapshot import _digest, filesystem

    groups = diff.files()
    fs, _ = filesystem(diff.folder)
    sizes = {p: fs.get_file_info(p).size for paths in groups.values() for p in paths}
    # file names relative to the folder as resolved (their paths are): the same files, the same fingerprint,
    # whatever link the diffs folder was reached through
    digest, total = _digest(fs, str(Path(diff.folder).resolve()), groups, sizes)
    return {
        "kind": "diff",
        "path": diff.folder,
        "rules": APPLY_RULES,
        "steps": [[s.from_release, s.to_release] for s in diff.steps],
        "files": len(sizes),
        "bytes": total,
        "fingerprint": digest,
    }
