"""What a committed artifact version says about itself: the manifest, its format and the version hash.

`_manifest.json` (format 2) lists the resolved config, the inputs' versions
(lineage), tables, metrics, timings and every file of the version with its
size and SHA-256, plus a checksum of its own text; `Manifest.from_json`
refuses a manifest that is edited, truncated or of an unknown format with a
`DamagedVersion`. `compute_version` is the content address of a version: a
hash of the stage, its logic version, its versioned config and its inputs'
versions. The store that writes and verifies versions is `citeflow/artifacts.py`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import posixpath
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import citeflow
from citeflow.errors import CiteflowError

MANIFEST = "_manifest.json"
MANIFEST_FORMAT = 2
READABLE_FORMATS = (1, 2)
DAMAGED = ".damaged"
VERSION_RE = re.compile(r"[0-9a-f]{16}")


class DamagedVersion(CiteflowError):
    """A committed version whose files or manifest differ from what the manifest says."""

    def __init__(self, message: str, *, path: str, problems: list[str]):
        super().__init__(message)
        self.path = path
        self.problems = problems


def sha256_of(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def compute_version(stage: str, stage_version: int, config: dict[str, Any], inputs: list[dict[str, Any]]) -> str:
    """Content address of an artifact: 16 hex chars of a SHA-256 over its definition."""
    # what an input is, not where it lies; `rules`: how a release diff's records apply (citeflow.diffs.APPLY_RULES)
    lineage = [
        {k: v for k, v in sorted(i.items()) if k in ("stage", "version", "kind", "fingerprint", "rules")}
        for i in inputs
    ]
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
    # every file of the version but the manifest: relative path -> {"bytes": size, "sha256": hex digest}
    contents: dict[str, dict[str, Any]] = field(default_factory=dict)
    manifest_format: int = MANIFEST_FORMAT
    skipped: bool = False

    def content_bytes(self) -> int:
        """The bytes of every file of the version (its tables, plots and reports) as the manifest lists them."""
        return sum(entry["bytes"] for entry in self.contents.values())

    def to_json(self) -> dict[str, Any]:
        """The manifest as written: format 2 with `checksum`, a SHA-256 of everything else in it."""
        data = {k: v for k, v in self.__dict__.items() if k not in ("skipped", "path")}
        data["manifest_format"] = MANIFEST_FORMAT
        data["checksum"] = sha256_of(data)
        return data

    @classmethod
    def from_json(cls, data: Any, path: str) -> Manifest:
        """A manifest read from `path`; a corrupt or edited one raises `DamagedVersion`."""

        def corrupt(why: str) -> DamagedVersion:
            return DamagedVersion(
                f"{posixpath.join(path, MANIFEST)} is corrupt ({why}); `citeflow run --repair` moves the version "
                "aside and rebuilds it",
                path=path,
                problems=[f"{MANIFEST}: {why}"],
            )

        if not isinstance(data, dict):
            raise corrupt("not a JSON object")
        fmt = data.get("manifest_format")
        if fmt not in READABLE_FORMATS:
            raise corrupt(f"unknown manifest format {fmt!r}")
        fields = {k: v for k, v in data.items() if k not in ("manifest_format", "checksum")}
        if fmt == 2 and data.get("checksum") != sha256_of({k: v for k, v in data.items() if k != "checksum"}):
            raise corrupt("its checksum does not match its content: the manifest was edited")
        known = {f for f in cls.__dataclass_fields__ if f not in ("path", "skipped", "manifest_format")}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise corrupt(f"unknown fields {unknown}")
        try:
            manifest = cls(path=path, manifest_format=fmt, **fields)
        except TypeError as exc:
            raise corrupt(str(exc)) from None
        if not (isinstance(manifest.tables, dict) and isinstance(manifest.contents, dict)):
            raise corrupt("tables and contents must be objects")
        for rel, entry in manifest.contents.items():
            if not (isinstance(entry, dict) and isinstance(entry.get("bytes"), int) and "sha256" in entry):
                raise corrupt(f"contents entry {rel!r} has no size and hash")
        return manifest

    def table_path(self, table: str) -> str:
        if table not in self.tables:
            raise CiteflowError(f"{self.stage} {self.version} has no table {table!r} (has {', '.join(self.tables)})")
        return posixpath.join(self.path, table)

    def lineage(self) -> dict[str, Any]:
        """How a downstream stage refers to this artifact."""
        return {"stage": self.stage, "version": self.version, "path": self.path}
