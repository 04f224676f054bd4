"""The versioned artifact store.

Layout: `ROOT/<snapshot>/<stage>/<version>/` holds one folder of Parquet files
per table plus `_manifest.json`. ROOT is a local path or any URI pyarrow or
fsspec understands (`s3://bucket/citeflow`, `gs://...`, `hdfs://...`).

Rules that make a stage atomic and idempotent:
- The version is a hash of the stage name, its logic version, the versioned
  part of its config and its inputs' versions (`compute_version`). Same inputs
  and config give the same version, and the stage is skipped.
- One writer per version: a stage takes the version's lease (`citeflow.lease`,
  a file beside the folder) before it writes anything, on local stores.
- Data is written first, `_manifest.json` last, through a temporary file and a
  rename, so the manifest appears whole or not at all. A version folder
  without a manifest is a version being built (its lease is live) or the
  remains of a killed run: readers never open it, `list_versions` ignores it
  and `prepare`, called only under the lease, deletes it before a rebuild.
- An existing complete version is never overwritten.

Verified on read (manifest format 2): the manifest lists every file of the
version with its size and SHA-256 (`contents`, hashed in one streaming pass at
commit) and carries a checksum of its own text. Every read of a committed
version (`read_manifest`: skip, reuse, downstream input, `citeflow artifacts`,
the Artifacts tab) checks the checksum, the file set and the sizes; `verify`
also re-hashes every file and re-reads the tables' row counts from the Parquet
footers. A mismatch is a `DamagedVersion` naming the file. Format-1 manifests
(no file list) are still read, with a warning; `citeflow run --repair`
rebuilds them, and moves damaged versions aside to `<stage>/.damaged/`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import posixpath
import uuid
from typing import Any

import pyarrow.fs as pafs

from citeflow.config import StoreConfig, validate_snapshot_id
from citeflow.errors import CiteflowError
from citeflow.manifest import (
    DAMAGED,
    MANIFEST,
    MANIFEST_FORMAT,
    DamagedVersion,
    Manifest,
    sha256_of,
)
from citeflow.process import fault_point
from citeflow.tables import LEGACY_DELETED, data_files, legacy_deletions, link_file

HASH_CHUNK = 1 << 20

log = logging.getLogger("citeflow")
_warned_old: set[str] = set()
_verified: set[tuple[str, str]] = set()  # (path, checksum) re-hashed in this process (repair runs)


class ArtifactStore:
    """Versioned stage outputs under one root (local path or filesystem URI)."""

    def __init__(self, root: str, settings: StoreConfig | None = None):
        if not root:
            raise CiteflowError("artifact root must not be empty")
        self.settings = settings or StoreConfig()
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
        if self.local and os.path.exists(self.root) and not os.path.isdir(self.root):
            raise CiteflowError(f"artifact root {root!r} is a file, not a folder")

    # -- paths -----------------------------------------------------------
    def stage_path(self, snapshot: str, stage: str) -> str:
        validate_snapshot_id(snapshot)
        return posixpath.join(self.root, snapshot, stage)

    def version_path(self, snapshot: str, stage: str, version: str) -> str:
        return posixpath.join(self.stage_path(snapshot, stage), version)

    def require_local(self, stage: str) -> None:
        """One line, before any work, when `stage` (which writes local files) is given a remote root."""
        if not self.local:
            scheme = self.uri.split("://", 1)[0]
            need = "need" if "," in stage else "needs"
            raise CiteflowError(
                f"{stage} {need} a local artifact root (PBG, FAISS and torch write local files), not a {scheme}:// "
                "URI: use a local or mounted --artifacts folder, or stop before (--until filter_leakage)"
            )

    def engine_uri(self, path: str) -> str:
        """The path as Spark (Hadoop filesystems) spells it."""
        if self.local:
            return "file://" + path
        scheme = self.uri.split("://", 1)[0]
        return f"{'s3a' if scheme == 's3' else scheme}://{path}"

    # -- reading -----------------------------------------------------------
    def read_manifest(self, snapshot: str, stage: str, version: str, *, check: bool = True) -> Manifest | None:
        """The manifest of a complete version, or None when there is none (missing, or still being built).

        With `check` (every reader but the listing of damage), the version's file set and sizes must match
        the manifest: `DamagedVersion` names the first difference. A corrupt manifest raises it too.
        """
        path = self.version_path(snapshot, stage, version)
        info = self.fs.get_file_info(posixpath.join(path, MANIFEST))
        if info.type != pafs.FileType.File:
            return None
        try:
            with self.fs.open_input_stream(posixpath.join(path, MANIFEST)) as fh:
                data = json.loads(fh.read().decode())
        except (ValueError, UnicodeDecodeError) as exc:
            raise DamagedVersion(
                f"{posixpath.join(path, MANIFEST)} is corrupt (not JSON: {exc}); `citeflow run --repair` moves "
                "the version aside and rebuilds it",
                path=path,
                problems=[f"{MANIFEST}: not JSON"],
            ) from None
        manifest = Manifest.from_json(data, path)
        if manifest.manifest_format < MANIFEST_FORMAT:
            if path not in _warned_old:
                _warned_old.add(path)
                log.warning(
                    "%s %s of %s: manifest format %d lists no files, so its contents cannot be verified; "
                    "`citeflow run --repair` rebuilds it",
                    stage,
                    version,
                    snapshot,
                    manifest.manifest_format,
                )
        elif check:
            problems = self.check_files(manifest)
            if problems:
                raise self.damaged(manifest, problems)
        return manifest

    def damaged(self, manifest: Manifest, problems: list[str]) -> DamagedVersion:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return DamagedVersion(
            f"{manifest.stage} version {manifest.version} of snapshot {manifest.snapshot} is damaged: "
            f"{problems[0]}{more}. `citeflow verify --snapshot {manifest.snapshot} --stage {manifest.stage}` "
            "lists every problem; `citeflow run ... --repair` moves the version aside and rebuilds it",
            path=manifest.path,
            problems=problems,
        )

    def listing(self, path: str) -> dict[str, int]:
        """Every file under a version folder but its manifest (and a manifest being written): path -> size."""
        found = {}
        for info in self.fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True)):
            if info.type != pafs.FileType.File:
                continue
            rel = posixpath.relpath(info.path, path)
            if rel == MANIFEST or (rel.startswith(f".{MANIFEST}.") and rel.endswith(".tmp")):
                continue
            found[rel] = info.size or 0
        return found

    def check_files(self, manifest: Manifest) -> list[str]:
        """The cheap check: the version's files are exactly those the manifest lists, with their sizes."""
        on_disk = self.listing(manifest.path)
        problems = []
        for rel, entry in sorted(manifest.contents.items()):
            if rel not in on_disk:
                problems.append(f"{rel} is missing (the manifest lists {entry['bytes']:,} bytes)")
            elif on_disk[rel] != entry["bytes"]:
                problems.append(f"{rel} has {on_disk[rel]:,} bytes, the manifest says {entry['bytes']:,}")
        problems += [f"{rel} is not in the manifest" for rel in sorted(set(on_disk) - set(manifest.contents))]
        problems += [
            f"table {table} holds a `{LEGACY_DELETED}/` deletion folder from an older citeflow, which other Parquet "
            f"readers do not apply (they read rows the manifest removed): delete the version ({manifest.path}) and "
            "run again to rebuild it as plain Parquet"
            for table in legacy_deletions(on_disk)
        ]
        return problems

    def contents_of(self, path: str) -> dict[str, dict[str, Any]]:
        """Size and SHA-256 of every file under `path` (one streaming pass per file)."""
        contents = {}
        for rel, size in sorted(self.listing(path).items()):
            digest = hashlib.sha256()
            with self.fs.open_input_stream(posixpath.join(path, rel)) as fh:
                while chunk := fh.read(HASH_CHUNK):
                    digest.update(chunk)
            contents[rel] = {"bytes": size, "sha256": digest.hexdigest()}
        return contents

    def verify(self, manifest: Manifest) -> list[str]:
        """The full check: file set and sizes, every file's SHA-256, and each table's rows in its footers."""
        if manifest.manifest_format < MANIFEST_FORMAT:
            return [f"manifest format {manifest.manifest_format} lists no files: the contents cannot be verified"]
        problems = self.check_files(manifest)
        if problems:
            return problems
        actual = self.contents_of(manifest.path)
        problems = [
            f"{rel}: content hash differs from the manifest (same size, other bytes)"
            for rel, entry in sorted(manifest.contents.items())
            if actual[rel]["sha256"] != entry["sha256"]
        ]
        for name, stats in manifest.tables.items():
            try:
                rows = table_stats(self, posixpath.join(manifest.path, stats.get("path", name)))["rows"]
            except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
                problems.append(f"table {name} cannot be read: {str(exc).splitlines()[0]}")
                continue
            if rows != stats.get("rows"):
                problems.append(f"table {name} has {rows:,} rows, the manifest says {stats.get('rows')!r}")
        if not problems:
            _verified.add((manifest.path, sha256_of(manifest.to_json())))
        return problems

    def verified_before(self, manifest: Manifest) -> bool:
        return (manifest.path, sha256_of(manifest.to_json())) in _verified

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

    def lineage(self, manifest: Manifest, stages: tuple[str, ...]) -> list[Manifest]:
        """`manifest` and every version of `stages` it was built from (through the manifests' inputs), upstream
        first in the order of `stages`, each once; one line when one of them is gone."""
        seen: dict[tuple[str, str], Manifest] = {}

        def visit(m: Manifest) -> None:
            for item in m.inputs:
                if item.get("stage") in stages and item.get("version"):
                    key = (item["stage"], item["version"])
                    if key in seen:
                        continue
                    found = self.read_manifest(item.get("snapshot", m.snapshot), item["stage"], item["version"])
                    if found is None:
                        raise CiteflowError(
                            f"{m.stage} {m.version} was built from {item['stage']} {item['version']}, which is gone "
                            f"from {self.uri}: its lineage cannot be stated"
                        )
                    seen[key] = found
                    visit(found)

        visit(manifest)
        order = {stage: i for i, stage in enumerate(stages)}
        return sorted(seen.values(), key=lambda m: order[m.stage]) + [manifest]

    def scan(self, snapshot: str, stage: str) -> list[tuple[str, Manifest | None, DamagedVersion | None]]:
        """(version, manifest or None, damage or None) for every version folder of a stage that has a
        manifest, intact or not, by folder name."""
        found = []
        for info in sorted(self.children(self.stage_path(snapshot, stage)), key=lambda i: i.base_name):
            if info.type != pafs.FileType.Directory or info.base_name.startswith("."):
                continue
            try:
                manifest = self.read_manifest(snapshot, stage, info.base_name)
            except DamagedVersion as exc:
                found.append((info.base_name, None, exc))
                continue
            if manifest is not None:
                found.append((info.base_name, manifest, None))
        return found

    def list_versions(self, snapshot: str, stage: str) -> list[Manifest]:
        """Intact complete versions of a stage, oldest first by finish time; damaged ones are left out with a
        warning (`citeflow artifacts` and `citeflow verify` show them)."""
        found = []
        for _, manifest, damage in self.scan(snapshot, stage):
            if damage is not None:
                log.warning("%s", damage)
            elif manifest is not None:
                found.append(manifest)
        return sorted(found, key=lambda m: (m.finished_at, m.version))

    def snapshots(self) -> list[str]:
        """The snapshot folders under the root (not hidden ones)."""
        return sorted(
            i.base_name
            for i in self.children(self.root)
            if i.type == pafs.FileType.Directory and not i.base_name.startswith(".")
        )

    def find_elsewhere(self, stage: str, version: str, snapshot: str) -> Manifest | None:
        """A complete copy of a stage version in another snapshot (versions are content addresses, so the
        same version is the same artifact), or None. Folders that are not snapshot ids are passed over."""
        copies = []
        for other in self.snapshots():
            if other == snapshot:
                continue
            try:
                found = self.read_manifest(other, stage, version)
            except DamagedVersion as exc:
                log.warning("not reusing %s %s of snapshot %s: %s", stage, version, other, exc)
                continue
            except CiteflowError:  # not a snapshot id
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

    def data_file_sizes(self, path: str) -> list[int]:
        """The sizes of a table folder's data files (the names Spark and pyarrow read: none starting with
        `.` or `_`)."""
        return [i.size for i in data_files(self.fs, path)]

    def children(self, path: str) -> list[pafs.FileInfo]:
        if self.fs.get_file_info(path).type != pafs.FileType.Directory:
            return []
        return self.fs.get_file_info(pafs.FileSelector(path, recursive=False))

    # -- writing -----------------------------------------------------------
    def prepare(self, snapshot: str, stage: str, version: str) -> str:
        """An empty folder for a version about to be built; remains of a killed run are removed.

        Call it only while holding the version's lease (`citeflow.stage.execute` does): then no live run
        writes the folder it empties.
        """
        path = self.version_path(snapshot, stage, version)
        if self.fs.get_file_info(posixpath.join(path, MANIFEST)).type == pafs.FileType.File:
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
            link_file(self.fs, self.local, info.path, target)
            total += info.size or 0
        return total

    def being_built(self, snapshot: str, stage: str, version: str) -> bool:
        """Whether a live run holds the lease on this version (local stores; never on object stores)."""
        from citeflow.lease import is_being_built

        return self.local and is_being_built(self.version_path(snapshot, stage, version), self.settings.lease_stale_s)

    def clean_incomplete(self, snapshot: str, stage: str) -> list[str]:
        """Delete version folders that have no manifest and no live lease; returns their names."""
        removed = [v for v in self.incomplete_versions(snapshot, stage) if not self.being_built(snapshot, stage, v)]
        for version in removed:
            self.fs.delete_dir(self.version_path(snapshot, stage, version))
        return removed

    def move_aside(self, snapshot: str, stage: str, version: str) -> str:
        """Move a damaged version to `<stage>/.damaged/<version>-<UTC time>` (evidence is never deleted)."""
        stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        target = posixpath.join(self.stage_path(snapshot, stage), DAMAGED, f"{version}-{stamp}")
        self.fs.create_dir(posixpath.dirname(target), recursive=True)
        self.fs.move(self.version_path(snapshot, stage, version), target)
        return target

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
            fault_point("manifest-staged")
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
    """Row count and schema of one Parquet table folder, read from file footers only: the rows any Parquet
    reader reads from the folder."""
    import pyarrow.dataset as ds

    from citeflow import tables

    dataset = ds.dataset(
        path, filesystem=store.fs, format="parquet", exclude_invalid_files=False, ignore_prefixes=tables.IGNORED
    )
    rows = sum(fragment.metadata.num_rows for fragment in dataset.get_fragments())
    files = sorted(posixpath.basename(f) for f in dataset.files)
    return {
        "path": posixpath.basename(path),
        "rows": rows,
        "files": len(files),
        "schema": [{"name": f.name, "type": str(f.type)} for f in dataset.schema],
    }
