"""The life cycle every stage shares: version, skip, build, manifest.

A stage entry point (`jobs/<stage>.py: run(config) -> Manifest`) computes
what it depends on, then hands a `build(path) -> metrics` function to
`execute`. `execute` returns the existing manifest when the version is
complete (idempotence), otherwise clears the remains of a killed run, calls
`build`, measures the tables it wrote and commits the manifest last.
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
import time
from collections.abc import Callable
from typing import Any

from citeflow.artifacts import ArtifactStore, Manifest, code_version, compute_version, table_stats, utcnow

log = logging.getLogger("citeflow")


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
    recorded in the manifest. `build(path)` writes each name in `tables` as a
    Parquet folder under `path` (plus any extra files) and returns metrics.
    """
    version = compute_version(stage, stage_version, config, inputs)
    existing = store.read_manifest(snapshot, stage, version)
    if existing is not None:
        log.info("%s: version %s is up to date, skipped", stage, version)
        return dataclasses.replace(existing, skipped=True)
    donor = store.find_elsewhere(stage, version, snapshot)
    if donor is not None:
        return reuse(store, donor, snapshot, resolved_config, inputs)
    path = store.prepare(snapshot, stage, version)
    log.info("%s: building version %s in %s", stage, version, path)
    started, t0 = utcnow(), time.monotonic()
    metrics = build(path)
    missing = [t for t in tables if store.fs.get_file_info(posixpath.join(path, t)).type.name != "Directory"]
    if missing:
        raise RuntimeError(f"{stage} did not write tables {missing}")
    stats = {t: table_stats(store, posixpath.join(path, t)) for t in tables}
    extra_files = {
        info.base_name: info.base_name
        for info in store.children(path)
        if info.type.name == "File" and not info.base_name.startswith((".", "_"))
    }
    manifest = Manifest(
        stage=stage,
        snapshot=snapshot,
        version=version,
        path=path,
        config=resolved_config,
        inputs=inputs,
        tables=stats,
        metrics=metrics,
        code_version=code_version(),
        started_at=started,
        finished_at=utcnow(),
        duration_s=round(time.monotonic() - t0, 3),
        files=extra_files,
    )
    return store.commit(manifest)


def reuse(
    store: ArtifactStore, donor: Manifest, snapshot: str, resolved_config: dict[str, Any], inputs: list[dict[str, Any]]
) -> Manifest:
    """Give `snapshot` the version another snapshot already built from the same inputs and settings.

    The files are copied (hard-linked on a local store) and a manifest of this snapshot's own is committed
    last, as for a build: same version, tables and metrics, this run's config and input paths, and
    `reused_from` naming the donor. Paths in the metrics that pointed into the donor snapshot now point
    into this one, where the upstream versions were reused the same way.
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

    manifest = dataclasses.replace(
        donor,
        snapshot=snapshot,
        path=path,
        config=resolved_config,
        inputs=inputs,
        tables={t: table_stats(store, posixpath.join(path, t)) for t in donor.tables},
        metrics=moved(donor.metrics),
        started_at=started,
        finished_at=utcnow(),
        duration_s=round(time.monotonic() - t0, 3),
        reused_from={"snapshot": donor.snapshot, "path": donor.path, "bytes": copied},
        skipped=False,
    )
    return store.commit(manifest)
