"""Which of a release's versions of a stage is current, and why another exists: pinning and rebasing.

A release (a snapshot) can be built more than one way: build_graph in full from its shards or from a diff onto
an earlier release's build, filter_leakage's paper-ids lines parsed or from a diff. Which way a run takes
depends on what the artifact root holds, and that changes: a backfill that builds release B before the release
A it derives from builds B in full, and once A is built the diff A -> B applies too. The rule:

- **Pinned.** A release that already holds a version of a stage that its inputs still give (one of the ways to
  build it, `Way`) keeps it: a rerun reuses that version and says in one line which way it was built and which
  way it would be built now. Running a date again never builds a second version of a stage for the same
  release, inputs and settings.
- **Rebased on request.** `store.rebase` (`citeflow run --rebase`) builds the way the root allows now; the new
  version's manifest names the versions it supersedes and why (`metrics.supersedes`).
- **Current.** A version is superseded when another intact version of the same release supersedes it, or when
  it was built on a superseded version of the same release (every stage after a rebased build_graph).
  `statuses` says so for every version; `citeflow artifacts`, the Artifacts tab, `citeflow compare` and the
  releases DAG read it from here.

Reads manifests only (no data), so it lies in the core beside the store.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from citeflow.artifacts import ArtifactStore
from citeflow.errors import CiteflowError
from citeflow.manifest import Manifest, compute_version

log = logging.getLogger("citeflow")

SUPERSEDES = "supersedes"  # the manifest metric: {"versions": [...], "why": "..."}


@dataclasses.dataclass(frozen=True)
class Way:
    """One way to build a release's version of a stage: what it is called in a log line (`in full`, `from the
    diff A -> B`), its versioned config and inputs (as `citeflow.stage.execute` gets them), and its version id."""

    name: str
    config: dict[str, Any]
    inputs: list[dict[str, Any]]
    stage: str
    stage_version: int

    @property
    def version(self) -> str:
        return compute_version(self.stage, self.stage_version, self.config, self.inputs)


@dataclasses.dataclass(frozen=True)
class Status:
    current: bool
    why: str  # empty for a current version


def statuses(store: ArtifactStore, snapshot: str, stage: str) -> dict[str, Status]:
    """{version: Status} of every intact version of `stage` in `snapshot` (the versions they were built on judged
    once for all of them)."""
    seen: dict[str, Status] = {}
    return {m.version: status_of(store, m, seen) for m in store.list_versions(snapshot, stage)}


def status_of(store: ArtifactStore, manifest: Manifest, _seen: dict[str, Status] | None = None) -> Status:
    """Whether `manifest` is current (`Status.why` says why not): superseded by another version of its stage in
    its release, or built on a superseded version of its release."""
    seen = {} if _seen is None else _seen
    key = manifest.path
    if key in seen:
        return seen[key]
    found = Status(True, "")
    for other in store.list_versions(manifest.snapshot, manifest.stage):
        named = (other.metrics.get(SUPERSEDES) or {}).get("versions", [])
        if other.version != manifest.version and manifest.version in named:
            found = Status(False, f"superseded by {other.version}: {other.metrics[SUPERSEDES].get('why', '')}")
            break
    else:
        for item in manifest.inputs:
            stage, version = item.get("stage"), item.get("version")
            if not stage or not version or item.get("snapshot", manifest.snapshot) != manifest.snapshot:
                continue  # a file fingerprint, or a version of another release (a diff's base)
            upstream = store.read_manifest(manifest.snapshot, stage, version)
            if upstream is None:
                continue
            if not status_of(store, upstream, seen).current:
                found = Status(False, f"built on {stage} {version}, which is superseded")
                break
    seen[key] = found
    return found


def choose(store: ArtifactStore, snapshot: str, chosen: Way, others: list[Way], rebase: bool) -> tuple[Way, dict]:
    """The way to build `snapshot`'s version of a stage, and the metrics to add to a build (`SUPERSEDES`).

    `chosen` is the way the stage picks from what the root holds now; `others` the other ways its inputs allow
    (built in full, from another release's diff). When `chosen`'s version is there already, or none of the
    others' is current, `chosen` it is. When the release holds a current version of another way, it is pinned: that
    way is taken (its version exists: the stage is skipped), with one line naming both, unless `rebase`, which
    builds `chosen` and records the versions it supersedes."""
    held = {m.version: m for m in store.list_versions(snapshot, chosen.stage)}

    def current(way: Way) -> bool:
        return way.version in held and status_of(store, held[way.version]).current

    if current(chosen):
        return chosen, {}
    standing = [w for w in others if current(w)]
    if not standing:
        return chosen, {}
    if rebase:
        why = f"rebased {chosen.name} (store.rebase)"
        log.info(
            "%s: release %s holds version %s, built %s; rebasing it: building %s",
            chosen.stage,
            snapshot,
            ", ".join(w.version for w in standing),
            standing[0].name,
            chosen.name,
        )
        return chosen, {SUPERSEDES: {"versions": [w.version for w in standing], "why": why}}
    if len(standing) > 1:  # two ways built, neither superseding the other (a root older than this rule)
        raise CiteflowError(
            f"{chosen.stage}: release {snapshot} holds versions {', '.join(w.version for w in standing)}, built "
            f"{' and '.join(w.name for w in standing)}, and none supersedes the others: a version is never chosen by "
            f"age. Run with --rebase (store.rebase=true) to build it {chosen.name} and supersede them"
        )
    (pinned,) = standing
    log.info(
        "%s: release %s keeps version %s, built %s; %s would build it again now (version %s): "
        "set store.rebase=true (citeflow run --rebase) to do so",
        chosen.stage,
        snapshot,
        pinned.version,
        pinned.name,
        chosen.name,
        chosen.version,
    )
    return pinned, {}
