"""The life cycle every stage shares: version, skip, lease, build, verify, manifest.

A stage (`jobs/<stage>.py: run_on(ctx) -> Manifest`, declared in
`citeflow.registry`) computes what it depends on, then hands a `build(path) -> metrics` function to
`execute`, which:

1. returns the existing manifest when the version is complete and intact
   (idempotence; the cheap check of file set and sizes runs on this read, and
   a damaged version stops the run with one line naming the file);
2. takes the version's lease (`citeflow.lease`; local stores): while another
   live run holds it, waits up to `store.lease_wait_s` and then uses what
   that run built, or stops with one line naming the holder;
3. under the lease: reuses a copy another snapshot holds, or re-hashes the
   committed versions it builds on (`check_inputs`, `store.verify_inputs`:
   a damaged one stops the run with one line pointing at `--repair`), clears
   the remains of a killed run, calls `build`, measures the tables it wrote,
   hashes every file and commits the manifest last, with secrets redacted. Each table folder holds its
   Parquet data files only (`citeflow.tables.tidy`). A build that fails leaves nothing behind.

With `store.repair` (`citeflow run --repair`) every version the run reads is
re-hashed, and a damaged one (or one whose manifest predates file lists) is
moved aside to `<stage>/.damaged/` under the lease and rebuilt.
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
import time
from collections.abc import Callable
from typing import Any

from citeflow.artifacts import ArtifactStore, table_stats
from citeflow.errors import CiteflowError
from citeflow.lease import Lease, dead_leases, remove_dead
from citeflow.manifest import MANIFEST_FORMAT, DamagedVersion, Manifest, code_version, compute_version, utcnow
from citeflow.process import fault_point
from citeflow.redaction import redact
from citeflow.tables import tidy

log = logging.getLogger("citeflow")


def _look(store: ArtifactStore, snapshot: str, stage: str, version: str) -> tuple[Manifest | None, Exception | None]:
    """(intact manifest, None), (None, damage) or (None, None) when the version does not exist yet."""
    try:
        manifest = store.read_manifest(snapshot, stage, version)
    except DamagedVersion as exc:
        return None, exc
    if manifest is None or not store.settings.repair:
        return manifest, None
    if not store.verified_before(manifest):
        problems = store.verify(manifest)
        if problems:
            return None, store.damaged(manifest, problems)
    if manifest.manifest_format < MANIFEST_FORMAT:
        return None, DamagedVersion(
            f"its manifest (format {manifest.manifest_format}) lists no files", path=manifest.path, problems=[]
        )
    return manifest, None


def damage_of(store: ArtifactStore, manifest: Manifest) -> list[str]:
    """What differs between `manifest` and its files, re-hashed (nothing without `store.verify_inputs`, for a
    manifest that lists no files, or for one re-hashed in this process before)."""
    if not store.settings.verify_inputs or manifest.manifest_format < MANIFEST_FORMAT:
        return []
    if store.verified_before(manifest):
        return []
    t0 = time.monotonic()
    problems = store.verify(manifest)
    log.debug(
        "%s %s of %s: %d files re-hashed in %.2fs",
        manifest.stage,
        manifest.version,
        manifest.snapshot,
        len(manifest.contents),
        time.monotonic() - t0,
    )
    return problems


def check_inputs(store: ArtifactStore, stage: str, snapshot: str, inputs: list[dict[str, Any]]) -> None:
    """Re-hash each committed version among `inputs` (those naming a stage and version) before `stage` builds
    on it: the cheap check of every read sees a missing or resized file, not bytes changed in place. A damaged
    input is a `DamagedVersion`, one line naming the file and `--repair`."""
    if not store.settings.verify_inputs:
        return
    for item in inputs:
        if "stage" not in item or "version" not in item:
            continue  # a fingerprint of files outside the store (corpus, benchmark lists)
        where = item.get("snapshot", snapshot)
        path = item.get("path", "")
        if path and not path.startswith(store.root + "/"):
            continue  # a version of another store: this one cannot read it
        if path:  # where the input lies (a version reused from another snapshot)
            where = posixpath.relpath(path, store.root).split("/")[0]
        manifest = store.read_manifest(where, item["stage"], item["version"])
        if manifest is None:
            raise CiteflowError(
                f"{stage} builds on {item['stage']} version {item['version']} of snapshot {where}, which is gone "
                f"from {store.uri}: run again to rebuild it"
            )
        problems = damage_of(store, manifest)
        if not problems:
            continue
        first, more = problems[0], f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        if any(first.startswith((f"{rel}:", f"{rel} ")) for rel in manifest.contents):
            first = posixpath.join(manifest.path, first)  # the file, by its full path
        raise DamagedVersion(
            f"{stage} cannot build on {item['stage']} version {item['version']} of snapshot {where}, which is "
            f"damaged: {first}{more}. `citeflow run ... --repair` moves it aside and rebuilds it "
            f"(`citeflow verify --snapshot {where} --stage {item['stage']}` lists every problem)",
            path=manifest.path,
            problems=problems,
        )


def execute(
    *,
    store: ArtifactStore,
    snapshot: str,
    stage: str,
    stage_version: int,
    config: dict[str, Any],
    resolved_config: dict[str, Any],
    inputs: list[dict[str, Any]],
    tables: list[str],
    build: Callable[[str], dict[str, Any]],
) -> Manifest:
    """Build one stage version unless it already exists.

    `config` is the versioned part (hashed); `resolved_config` is everything,
    recorded in the manifest (secrets redacted). `build(path)` writes each
    name in `tables` as a Parquet folder under `path` (plus any extra files)
    and returns metrics.

    Kept in one piece on purpose: its steps are the life cycle of the module docstring, in that order and
    under one lease (skip before lease, lease before clearing a killed run's remains, build before hashing,
    manifest last). Spread over functions, that order would be a convention each caller must keep.
    """
    version = compute_version(stage, stage_version, config, inputs)
    if store.local:
        _clear_dead_leases(store, snapshot, stage)
    existing, damage = _look(store, snapshot, stage, version)
    if existing is not None:
        log.info("%s: version %s is up to date, skipped", stage, version)
        return dataclasses.replace(existing, skipped=True)
    if damage is not None and not store.settings.repair:
        raise damage
    what = f"{stage} version {version} of snapshot {snapshot}"
    lease = None
    if store.local:
        lease = Lease(
            store.version_path(snapshot, stage, version),
            what=what,
            heartbeat_s=store.settings.lease_heartbeat_s,
            stale_s=store.settings.lease_stale_s,
        )
        finished = lambda: _look(store, snapshot, stage, version)[0] is not None  # noqa: E731
        if not lease.acquire(store.settings.lease_wait_s, done=finished):
            existing, damage = _look(store, snapshot, stage, version)
            if existing is None:
                raise damage or CiteflowError(f"{what} vanished while another run was building it")
            log.info("%s: built meanwhile by another run, skipped", what)
            return dataclasses.replace(existing, skipped=True)
    try:
        existing, damage = _look(store, snapshot, stage, version)
        if existing is not None:  # the run we waited for finished just before we took the lease
            return dataclasses.replace(existing, skipped=True)
        if damage is not None:
            moved = store.move_aside(snapshot, stage, version)
            log.warning("%s: %s; moved aside to %s, rebuilding", what, damage, moved)
        resolved_config = redact(resolved_config)
        donor = store.find_elsewhere(stage, version, snapshot)
        if donor is not None:
            problems = damage_of(store, donor)
            if not problems:
                return reuse(store, donor, snapshot, resolved_config, inputs, lease)
            log.warning("%s; building instead of reusing it", store.damaged(donor, problems))
        check_inputs(store, stage, snapshot, inputs)
        if lease is not None:
            lease.check()  # the folder is cleared and written only by the lease's holder
        path = store.prepare(snapshot, stage, version)
        log.info("%s: building version %s in %s", stage, version, path)
        started, t0 = utcnow(), time.monotonic()
        try:
            metrics = build(path)
        except BaseException:
            if lease is not None:
                lease.check()  # taken over: the folder is the new holder's now, and this failure came of it
            _remove_failed(store, path)
            raise
        missing = [t for t in tables if store.fs.get_file_info(posixpath.join(path, t)).type.name != "Directory"]
        if missing:
            raise RuntimeError(f"{stage} did not write tables {missing}")
        for t in tables:  # data files only, so that every Parquet reader reads each table whole
            tidy(store.fs, posixpath.join(path, t))
        stats = {t: table_stats(store, posixpath.join(path, t)) for t in tables}
        extra_files = {
            info.base_name: info.base_name
            for info in store.children(path)
            if info.type.name == "File" and not info.base_name.startswith((".", "_"))
        }
        fault_point("before-commit")
        manifest = Manifest(
            stage=stage,
            snapshot=snapshot,
            version=version,
            path=path,
            config=resolved_config,
            inputs=inputs,
            tables=stats,
            metrics=redact(metrics),
            code_version=code_version(),
            started_at=started,
            finished_at=utcnow(),
            duration_s=round(time.monotonic() - t0, 3),
            files=extra_files,
            contents=store.contents_of(path),
        )
        if lease is not None:
            lease.check()
        committed = store.commit(manifest)
        fault_point("after-commit")
        return committed
    finally:
        if lease is not None:
            lease.release()


def _clear_dead_leases(store: ArtifactStore, snapshot: str, stage: str) -> None:
    """Remove the lease files of the stage's versions whose holder on this machine is gone (a run killed after its
    manifest was written, or killed before it could release): the next run that finds one clears it."""
    for lease_file in dead_leases(store.stage_path(snapshot, stage)):
        if remove_dead(lease_file):
            log.info("%s: removed the lease of a run that is gone: %s", stage, lease_file)


def _remove_failed(store: ArtifactStore, path: str) -> None:
    """Remove what a failed build wrote (its staging files and half-written tables), under the version's lease:
    they would keep a full disk full until the next run. A version whose removal fails itself is cleared by the
    next build (`ArtifactStore.prepare`)."""
    try:
        store.fs.delete_dir(path)
    except OSError:
        log.debug("could not remove the failed build's files in %s", path, exc_info=True)


def reuse(
    store: ArtifactStore,
    donor: Manifest,
    snapshot: str,
    resolved_config: dict[str, Any],
    inputs: list[dict[str, Any]],
    lease: Lease | None = None,
) -> Manifest:
    """Give `snapshot` the version another snapshot already built from the same inputs and settings.

    The files are copied (hard-linked on a local store) and a manifest of this snapshot's own is committed
    last, as for a build: same version, tables, metrics and file hashes (the copy has the donor's bytes;
    its sizes are checked against the donor's list), this run's config and input paths, and `reused_from`
    naming the donor. Paths in the metrics that pointed into the donor snapshot now point into this one,
    where the upstream versions were reused the same way. Call it under the version's lease.
    """
    stage = donor.stage
    path = store.prepare(snapshot, stage, donor.version)
    log.info("%s: version %s was built for snapshot %s; reusing it", stage, donor.version, donor.snapshot)
    started, t0 = utcnow(), time.monotonic()
    copied = store.copy_version(donor.path, path)
    old_root = posixpath.join(store.root, donor.snapshot) + "/"
    new_root = posixpath.join(store.root, snapshot) + "/"

    def moved(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(old_root):
            return new_root + value[len(old_root) :]
        if isinstance(value, dict):
            return {k: moved(v) for k, v in value.items()}
        if isinstance(value, list):
            return [moved(v) for v in value]
        return value

    listing = store.listing(path)
    same = donor.contents and listing == {rel: entry["bytes"] for rel, entry in donor.contents.items()}
    manifest = dataclasses.replace(
        donor,
        snapshot=snapshot,
        path=path,
        config=resolved_config,
        inputs=inputs,
        tables={t: table_stats(store, posixpath.join(path, t)) for t in donor.tables},
        metrics=redact(moved(donor.metrics)),
        started_at=started,
        finished_at=utcnow(),
        duration_s=round(time.monotonic() - t0, 3),
        reused_from={"snapshot": donor.snapshot, "path": donor.path, "bytes": copied},
        contents=donor.contents if same else store.contents_of(path),
        manifest_format=MANIFEST_FORMAT,
        skipped=False,
    )
    if lease is not None:
        lease.check()
    return store.commit(manifest)
