"""Find the files of a corpus snapshot and fingerprint them.

A snapshot is a folder (local path or filesystem URI) in one of two layouts:

- S2ORC 20200705v1: `metadata/metadata_*.jsonl.gz`, or `metadata*.jsonl[.gz]`
  files at the top, or a single metadata `.jsonl[.gz]` file.
- S2AG datasets release: one folder per dataset (`papers/`, `abstracts/`,
  `citations/`, each holding `.jsonl[.gz]` shards), or files named
  `papers*.jsonl[.gz]` etc. at the top (as the official samples are).

The fingerprint stands for the snapshot's content in artifact versions: each
file's relative path, size and a hash of its first and last 64 KiB. It is
cheap on a 50 GB corpus and changes when a shard is added, removed, resized
or rewritten.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
from dataclasses import dataclass, field

import pyarrow.fs as pafs

from citeflow.errors import CiteflowError

JSONL = re.compile(r"\.jsonl(\.gz)?$|\.json(\.gz)?$")
S2AG_DATASETS = ("papers", "abstracts", "citations")


@dataclass(frozen=True)
class Layout:
    """A corpus format's files: its datasets (a folder each, or files named after them), the one a snapshot of
    that format must have, and whether release diffs apply to it."""

    datasets: tuple[str, ...]
    main: str
    diffs: bool


# The corpus formats by name (build_graph.format; citeflow.jobs.build_graph.CORPUS_FORMATS reads each): adding one is
# one
# layout here and one reader there.
LAYOUTS: dict[str, Layout] = {
    "s2orc": Layout(datasets=("metadata",), main="metadata", diffs=False),
    "s2ag": Layout(datasets=S2AG_DATASETS, main="papers", diffs=True),
}
PROBE_BYTES = 64 * 1024


def filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    if "://" in path:
        try:
            return pafs.FileSystem.from_uri(path)
        except (ValueError, OSError) as exc:
            raise CiteflowError(f"cannot open {path!r}: {exc}") from None
    return pafs.LocalFileSystem(), os.path.abspath(path)


def engine_prefix(path: str) -> str:
    """How Spark spells the scheme of `path`: file:// for local paths, s3a:// for s3://."""
    if "://" not in path:
        return "file://"
    scheme = path.split("://", 1)[0]
    return "s3a://" if scheme == "s3" else scheme + "://"


@dataclass(frozen=True)
class Snapshot:
    """The files of one snapshot, grouped by dataset (`metadata` for S2ORC)."""

    format: str
    root: str
    datasets: dict[str, list[str]]
    sizes: dict[str, int] = field(default_factory=dict)
    uri_prefix: str = "file://"
    fs: pafs.FileSystem | None = field(default=None, compare=False, repr=False)

    def files(self, dataset: str) -> list[str]:
        return self.datasets.get(dataset, [])

    def engine_paths(self, dataset: str) -> list[str]:
        """Paths as Spark spells them (`file://` for local files)."""
        return [self.uri_prefix + f for f in self.files(dataset)]


def _list_jsonl(fs: pafs.FileSystem, path: str, recursive: bool = False) -> list[pafs.FileInfo]:
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.File:
        return [info] if JSONL.search(info.base_name) else []
    if info.type != pafs.FileType.Directory:
        return []
    return sorted(
        (
            i
            for i in fs.get_file_info(pafs.FileSelector(path, recursive=recursive))
            if i.type == pafs.FileType.File and JSONL.search(i.base_name) and not i.base_name.startswith((".", "_"))
        ),
        key=lambda i: i.path,
    )


def _dataset_files(fs: pafs.FileSystem, root: str, name: str) -> list[pafs.FileInfo]:
    sub = _list_jsonl(fs, posixpath.join(root, name))
    if sub:
        return sub
    # Files named after the dataset at the top: papers-sample.jsonl, papers_0.jsonl.gz, papers.jsonl
    pattern = re.compile(rf"^{re.escape(name)}([-_.].*)?$")
    return [i for i in _list_jsonl(fs, root) if pattern.match(i.base_name)]


def discover(path: str, fmt: str = "auto") -> Snapshot:
    """The snapshot at `path`; `fmt` is auto, s2orc or s2ag."""
    fs, root = filesystem(path)
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.NotFound:
        raise CiteflowError(f"corpus path {path!r} does not exist")
    prefix = engine_prefix(path)

    found: dict[str, dict[str, list[pafs.FileInfo]]] = {}
    if info.type == pafs.FileType.File:
        if not JSONL.search(info.base_name):
            raise CiteflowError(f"{path!r} is not a .jsonl or .jsonl.gz file")
        found["s2orc"] = {"metadata": [info]}  # one file: an S2ORC metadata shard
    else:
        for name, layout in LAYOUTS.items():
            files = {dataset: _dataset_files(fs, root, dataset) for dataset in layout.datasets}
            if files[layout.main]:
                found[name] = files

    if fmt == "auto":
        if len(found) != 1:
            detail = (
                "both S2ORC metadata and S2AG papers"
                if found
                else "no metadata*.jsonl[.gz] (S2ORC) or papers*.jsonl[.gz] (S2AG) files"
            )
            raise CiteflowError(f"cannot tell the format of {path!r}: found {detail}; set build_graph.format")
        fmt = next(iter(found))
    elif fmt not in LAYOUTS:
        raise CiteflowError(f"unknown snapshot format {fmt!r}: use {', '.join(LAYOUTS)} or auto")
    if fmt not in found:
        raise CiteflowError(f"{path!r} has no {fmt} files (expected {LAYOUTS[fmt].main}/*.jsonl.gz)")

    groups = found[fmt]
    return Snapshot(
        format=fmt,
        root=root,
        datasets={name: [i.path for i in infos] for name, infos in groups.items()},
        sizes={i.path: i.size for infos in groups.values() for i in infos},
        uri_prefix=prefix,
        fs=fs,
    )


def _digest(fs: pafs.FileSystem, root: str, groups: dict[str, list[str]], sizes: dict[str, int]) -> tuple[str, int]:
    digest = hashlib.sha256()
    total = 0
    for group in sorted(groups):
        for path in groups[group]:
            size = sizes[path]
            total += size
            rel = posixpath.relpath(path, root) if path != root else posixpath.basename(path)
            digest.update(f"{group}\0{rel}\0{size}\0".encode())
            with fs.open_input_file(path) as fh:
                digest.update(fh.read(PROBE_BYTES))
                if size > PROBE_BYTES:
                    fh.seek(max(PROBE_BYTES, size - PROBE_BYTES))
                    digest.update(fh.read(PROBE_BYTES))
    return digest.hexdigest()[:32], total


def fingerprint(snapshot: Snapshot) -> dict[str, object]:
    """Lineage entry for a snapshot: file count, bytes and a content fingerprint."""
    fs = snapshot.fs or filesystem(snapshot.root)[0]
    digest, total = _digest(fs, snapshot.root, snapshot.datasets, snapshot.sizes)
    return {
        "kind": "corpus",
        "format": snapshot.format,
        "path": snapshot.root,
        "files": sum(len(v) for v in snapshot.datasets.values()),
        "bytes": total,
        "fingerprint": digest,
    }


def existing(kind: str, path: str) -> tuple[pafs.FileSystem, str, pafs.FileInfo]:
    """(filesystem, root, file info) of an input folder or file that the user named as `kind`; one line when
    it does not exist."""
    fs, root = filesystem(path)
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.NotFound:
        raise CiteflowError(f"{kind} path {path!r} does not exist")
    return fs, root, info


def fingerprint_path(kind: str, path: str) -> dict[str, object]:
    """Lineage entry for any input folder or file (SciDocs, paper-ids, id lists)."""
    fs, root, info = existing(kind, path)
    if info.type == pafs.FileType.File:
        files = [info]
    else:
        files = sorted(
            (
                i
                for i in fs.get_file_info(pafs.FileSelector(root, recursive=True))
                if i.type == pafs.FileType.File and not i.base_name.startswith(".")
            ),
            key=lambda i: i.path,
        )
    base = root if info.type == pafs.FileType.Directory else posixpath.dirname(root)
    digest, total = _digest(fs, base, {kind: [i.path for i in files]}, {i.path: i.size for i in files})
    return {"kind": kind, "path": root, "files": len(files), "bytes": total, "fingerprint": digest}


def discover_jsonl(path: str) -> list[str]:
    """Every `.jsonl[.gz]` file at or under `path`, as Spark spells the paths."""
    fs, root = filesystem(path)
    if fs.get_file_info(root).type == pafs.FileType.NotFound:
        raise CiteflowError(f"path {path!r} does not exist")
    files = _list_jsonl(fs, root, recursive=True)
    if not files:
        raise CiteflowError(f"no .jsonl or .jsonl.gz files in {path!r}")
    return [engine_prefix(path) + i.path for i in files]
