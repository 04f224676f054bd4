"""The versioned artifact store.

Layout: `ROOT/<snapshot>/<stage>/<version>/` holds one folder of Parquet files
per table plus `_manifest.json`. ROOT is a local path or any URI pyarrow or
fsspec understands (`s3://bucket/citeflow`, `gs://...`, `hdfs://...`).

Rules that make a stage atomic and idempotent:
- The version is a hash of the stage name, its logic version, the versioned
  part of its config and its inputs' versions (`compute_version`). Same inputs
  and config give the same version, and the stage is skipped.
- Data is written first, `_manifest.json` last, through a temporary file and a
  rename, so the manifest appears whole or not at all. A version folder
  without a manifest is the remains of a killed run: readers never open it,
  `list_versions` ignores it and `prepare` deletes it before a rebuild.
- An existing complete version is never overwritten.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import posixpath
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

import citeflow
from citeflow.config import validate_snapshot_id
from citeflow.errors import CiteflowError

MANIFEST = "_manifest.json"
MANIFEST_FORMAT = 1


def compute_version(stage: str, stage_version: int, config: dict[str, Any], inputs: list[dict[str, Any]]) -> str:
    """Content address of an artifact: 16 hex chars of a SHA-256 over its definition."""
    lineage = [{k: v for k, v in sorted(i.items()) if k in ("stage", "version", "kind", "fingerprint")} for i in inputs]
    payload = json.dumps(
        {"stage": stage, "stage_version": stage_version, "config": config, "inputs": lineage},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def code_version() -> str:
    """citeflow's version plus the git commit when running from a checkout."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        sha = ""
    return f"{citeflow.__version__}+{sha}" if sha else citeflow.__version__


def utcnow() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """What `_manifest.json` says about one artifact version."""

    stage: str
    snapshot: str
    version: str
    path: str
    config: dict[str, Any]
    inputs: list[dict[str, Any]]
    tables: dict[str, dict[str, Any]]
    metrics: dict[str, Any]
    code_version: str
    started_at: str
    finished_at: str
    duration_s: float
    files: dict[str, str] = field(default_factory=dict)
    reused_from: dict[str, Any] | None = None  # {snapshot, path, bytes} when copied from another snapshot
    skipped: bool = False

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k not in ("skipped", "path")}
        data["manifest_format"] = MANIFEST_FORMAT
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], path: str) -> Manifest:
        if data.get("manifest_format") != MANIFEST_FORMAT:
            raise CiteflowError(f"{path}: unsupported manifest format {data.get('manifest_format')!r}")
        fields = {k: v for k, v in data.items() if k != "manifest_format"}
        return cls(path=path, **fields)

    def table_path(self, table: str) -> str:
        if table not in self.tables:
            raise CiteflowError(f"{self.stage} {self.version} has no table {table!r} (has {', '.join(self.tables)})")
        return posixpath.join(self.path, table)

    def lineage(self) -> dict[str, Any]:
        """How a downstream stage refers to this artifact."""
        return {"stage": self.stage, "version": self.version, "path": self.path}


class ArtifactStore:
    """Versioned stage outputs under one root (local path or filesystem URI)."""

    def __init__(self, root: str):
        if not root:
            raise CiteflowError("artifact root must not be empty")
        if "://" in root:
            try:
                self.fs, self.root = pafs.FileSystem.from_uri(root)
            except (ValueError, OSError):  # scheme pyarrow does not know: try fsspec
                self.fs, self.root = _fsspec_filesystem(root)
            self.uri = root.rstrip("/")
            self.local = isinstance(self.fs, pafs.LocalFileSystem)
        else:
            self.fs = pafs.LocalFileSystem()
            self.root = os.path.abspath(root)
            self.uri = self.root
            self.local = True

    # -- paths -----------------------------------------------------------
    def stage_path(self, snapshot: str, stage: str) -> str:
        validate_snapshot_id(snapshot)
        return posixpath.join(self.root, snapshot, stage)

    def version_path(self, snapshot: str, stage: str, version: str) -> str:
        return posixpath.join(self.stage_path(snapshot, stage), version)

    def engine_uri(self, path: str) -> str:
        """The path as Spark (Hadoop filesystems) spells it."""
        if self.local:
            return "file://" + path
        scheme = self.uri.split("://", 1)[0]
        return f"{'s3a' if scheme == 's3' else scheme}://{path}"

    # -- reading -----------------------------------------------------------
    def read_manifest(self, snapshot: str, stage: str, version: str) -> Manifest | None:
        """The manifest of a complete version, or None when it is missing or incomplete."""
        path = self.version_path(snapshot, stage, version)
        info = self.fs.get_file_info(posixpath.join(path, MANIFEST))
        if info.type != pafs.FileType.File:
            return None
        with self.fs.open_input_stream(posixpath.join(path, MANIFEST)) as fh:
            data = json.loads(fh.read().decode())
        return Manifest.from_json(data, path)

    def upstream(self, manifest: Manifest, stage: str) -> Manifest:
        """The manifest of the `stage` version that `manifest` was built from."""
        for item in manifest.inputs:
            if item.get("stage") == stage:
                found = self.read_manifest(manifest.snapshot, stage, item["version"])
                if found is None:
                    raise CiteflowError(
                        f"{manifest.stage} {manifest.version} was built from {stage} "
                        f"{item['version']}, which is gone from {self.uri}"
                    )
                return found
        raise CiteflowError(f"{manifest.stage} {manifest.version} has no {stage} input")

    def list_versions(self, snapshot: str, stage: str) -> list[Manifest]:
        """Complete versions of a stage, oldest first by finish time."""
        found = []
        for info in self.children(self.stage_path(snapshot, stage)):
            if info.type == pafs.FileType.Directory and not info.base_name.startswith("."):
                manifest = self.read_manifest(snapshot, stage, info.base_name)
                if manifest is not None:
                    found.append(manifest)
        return sorted(found, key=lambda m: (m.finished_at, m.version))

    def snapshots(self) -> list[str]:
        return sorted(i.base_name for i in self.children(self.root) if i.type == pafs.FileType.Directory)

    def find_elsewhere(self, stage: str, version: str, snapshot: str) -> Manifest | None:
        """A complete copy of a stage version in another snapshot (versions are content addresses, so the
        same version is the same artifact), or None. Folders that are not snapshot ids are passed over."""
        copies = []
        for other in self.snapshots():
            if other == snapshot:
                continue
            try:
                found = self.read_manifest(other, stage, version)
            except CiteflowError:
                continue
            if found is None:
                continue
            if found.reused_from is None:
                return found
            copies.append(found)  # a copy of a copy is as good when the original is gone
        return copies[0] if copies else None

    def incomplete_versions(self, snapshot: str, stage: str) -> list[str]:
        return [
            i.base_name
            for i in self.children(self.stage_path(snapshot, stage))
            if i.type == pafs.FileType.Directory
            and not i.base_name.startswith(".")
            and self.fs.get_file_info(posixpath.join(i.path, MANIFEST)).type != pafs.FileType.File
        ]

    def children(self, path: str) -> list[pafs.FileInfo]:
        if self.fs.get_file_info(path).type != pafs.FileType.Directory:
            return []
        return self.fs.get_file_info(pafs.FileSelector(path, recursive=False))

    # -- writing -----------------------------------------------------------
    def prepare(self, snapshot: str, stage: str, version: str) -> str:
        """An empty folder for a version about to be built; remains of a killed run are removed."""
        path = self.version_path(snapshot, stage, version)
        if self.read_manifest(snapshot, stage, version) is not None:
            raise CiteflowError(f"{stage} version {version} of {snapshot} is complete; refusing to overwrite it")
        if self.fs.get_file_info(path).type != pafs.FileType.NotFound:
            self.fs.delete_dir(path)
        self.fs.create_dir(path, recursive=True)
        return path

    def copy_version(self, source: str, dest: str) -> int:
        """Copy a version folder's files (not its manifest) into an empty `dest`; returns bytes copied.
        On a local store files are hard-linked when the filesystem allows it: artifacts are never modified
        in place, and deleting either snapshot leaves the other whole."""
        total = 0
        selector = pafs.FileSelector(source, recursive=True)
        for info in sorted(self.fs.get_file_info(selector), key=lambda i: i.path):
            rel = posixpath.relpath(info.path, source)
            target = posixpath.join(dest, rel)
            if info.type == pafs.FileType.Directory:
                self.fs.create_dir(target, recursive=True)
                continue
            if rel == MANIFEST or info.base_name.startswith(f".{MANIFEST}."):
                continue
            self.fs.create_dir(posixpath.dirname(target), recursive=True)
            if self.local:
                try:
                    os.link(info.path, target)
                except OSError:
                    shutil.copy2(info.path, target)
            else:
                self.fs.copy_file(info.path, target)
            total += info.size or 0
        return total

    def clean_incomplete(self, snapshot: str, stage: str) -> list[str]:
        """Delete version folders that have no manifest; returns their names."""
        removed = self.incomplete_versions(snapshot, stage)
        for version in removed:
            self.fs.delete_dir(self.version_path(snapshot, stage, version))
        return removed

    def commit(self, manifest: Manifest) -> Manifest:
        """Write the manifest last, atomically: temp file, flush, rename."""
        final = posixpath.join(manifest.path, MANIFEST)
        tmp = posixpath.join(manifest.path, f".{MANIFEST}.{uuid.uuid4().hex}.tmp")
        payload = json.dumps(manifest.to_json(), indent=2, sort_keys=True).encode()
        if self.local:
            # fsync the data before the rename so a crash cannot leave a
            # manifest that points at data still in the page cache.
            with open(tmp, "wb") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        else:
            with self.fs.open_output_stream(tmp) as fh:
                fh.write(payload)
            self.fs.move(tmp, final)
        return manifest


def _fsspec_filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    try:
        import fsspec
    except ImportError:  # pragma: no cover - fsspec ships with the install
        raise CiteflowError(f"no filesystem for {uri!r}: install fsspec and its backend") from None
    try:
        fs, path = fsspec.core.url_to_fs(uri)
    except (ImportError, ValueError) as exc:
        raise CiteflowError(f"no filesystem for {uri!r}: {exc}") from None
    return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path


def table_stats(store: ArtifactStore, path: str) -> dict[str, Any]:
    """Row count and schema of one Parquet table folder, read from file footers only."""
    import pyarrow.dataset as ds

    dataset = ds.dataset(
        path, filesystem=store.fs, format="parquet", exclude_invalid_files=False, ignore_prefixes=[".", "_"]
    )
    rows = sum(fragment.metadata.num_rows for fragment in dataset.get_fragments())
    files = sorted(posixpath.basename(f) for f in dataset.files)
    return {
        "path": posixpath.basename(path),
        "rows": rows,
        "files": len(files),
        "schema": [{"name": f.name, "type": str(f.type)} for f in dataset.schema],
    }
