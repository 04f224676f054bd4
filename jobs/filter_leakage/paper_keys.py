"""filter_leakage's `paper_keys` table: the keys the mapping compares, of every paper of the graph, or carried
over from the previous release's version when the graph was built from a diff (only the papers the diff wrote
are keyed then).
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any

from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import RunConfig

log = logging.getLogger("citeflow")


def write(
    spark,
    store: ArtifactStore,
    config: RunConfig,
    upstream: Manifest,
    path: str,
    papers,
    materialize,
    stage: str,
    stage_version: int,
) -> dict[str, Any]:
    """Write `paper_keys` (`transforms.paper_key_rows` of every paper of the graph); its manifest entry.

    Of a graph built from a diff, when the artifact root holds a filter_leakage version on the base graph
    (`to_carry`), the table is written over that version's `paper_keys` (`output.write_over`): only the
    papers of the graph's new files (the rows the diff brought) are keyed, and the base's keys of every paper
    that is not among the graph's other rows (the rows it kept of the base's) go. The rows are those of keying
    every paper (the keys of a paper are a function of its row: tests/e2e/test_incremental.py), without folding
    every title again. A carried table must hold one row per paper of the graph; if it does not (a base whose
    files changed under it), every paper is keyed instead, with a warning."""
    import citeflow.jobs.filter_leakage.transforms as L
    from citeflow import tables as T
    from citeflow.artifacts import table_stats
    from citeflow.spark import output as O
    from citeflow.spark import scans as S

    target = posixpath.join(path, "paper_keys")

    def key_every_paper(staging: str = "") -> dict[str, Any]:
        rows = L.paper_key_rows(papers, lambda frame, name: materialize(frame, staging + name))
        rows.coalesce(config.build_graph.output_files).write.mode("error").parquet(store.engine_uri(target))
        return {"carried_from": None}

    carried = to_carry(store, upstream, stage, stage_version)
    if carried is None:
        return key_every_paper()
    keys, new_files = carried
    graph_papers = upstream.table_path("papers")
    uri = lambda name: store.engine_uri(posixpath.join(graph_papers, name))  # noqa: E731
    new_rows = None
    if new_files:
        new_rows = L.paper_key_rows(spark.read.parquet(*[uri(n) for n in new_files]), materialize)
    # the papers the graph kept as the base graph had them: every data file of the graph but its new ones
    others = [i.base_name for i in T.data_files(store.fs, graph_papers) if i.base_name not in set(new_files)]
    base_keys = S.read_stored(spark, store, keys.table_path("paper_keys"), with_position=True)
    if others:
        kept_ids = spark.read.parquet(*[uri(n) for n in others]).select("corpus_id")
        gone = base_keys.join(kept_ids, "corpus_id", "left_anti")
    else:
        gone = base_keys
    O.write_over(
        spark, store, keys.table_path("paper_keys"), target, gone, new_rows, most=config.build_graph.output_files
    )
    rows, papers_rows = table_stats(store, target)["rows"], upstream.tables["papers"]["rows"]
    if rows != papers_rows:
        log.warning(
            "%s: the paper keys carried over from %s version %s hold %d rows for the graph's %d papers; "
            "keying every paper",
            stage,
            stage,
            keys.version,
            rows,
            papers_rows,
        )
        store.fs.delete_dir(target)
        return key_every_paper("every_")  # staged apart from the carried attempt's files
    keyed = T.footer_rows(store.fs, [posixpath.join(graph_papers, n) for n in new_files])
    log.info(
        "%s: paper keys carried over from %s version %s of %s; %d papers keyed, those the diff wrote",
        stage,
        stage,
        keys.version,
        keys.snapshot,
        keyed,
    )
    return {"carried_from": {"snapshot": keys.snapshot, "version": keys.version}, "papers_keyed": keyed}


def to_carry(
    store: ArtifactStore, upstream: Manifest, stage: str, stage_version: int
) -> tuple[Manifest, list[str]] | None:
    """(filter_leakage version, the names of the upstream graph's `papers` files that hold the rows its diff
    brought) when that version's `paper_keys` can be carried over to `upstream`: the graph was written over the
    base (`from_diff` names its files by how they came), and the version is one of `stage_version` of `stage`
    (filter_leakage) on that base. None otherwise, with one log line for a graph built from a diff."""
    from citeflow.manifest import DamagedVersion

    from_diff = upstream.metrics.get("from_diff")
    if not from_diff:
        return None
    base = from_diff["base"]
    files = (from_diff.get("files") or {}).get("papers")
    why = None
    graph = None
    if files is None:
        why = f"the graph names no files written over {base['snapshot']}'s"
    else:
        try:
            graph = store.read_manifest(base["snapshot"], "build_graph", base["version"])
        except DamagedVersion as exc:
            why = f"its graph is damaged: {exc}"
    if graph is None or files is None:
        why = why or f"its graph, build_graph version {base['version']}, is gone"
    else:
        versions = [
            m
            for m in store.list_versions(base["snapshot"], stage)
            if m.config.get("stage_version") == stage_version
            and any(i.get("stage") == "build_graph" and i.get("version") == graph.version for i in m.inputs)
        ]
        if versions:
            return min(versions, key=lambda m: m.version), list(files["new"])  # any: their paper_keys are equal
        why = "the artifact root holds none on that graph"
    log.info(
        "%s: no %s version of %s to carry paper keys over from (%s); keying every paper",
        stage,
        stage,
        base["snapshot"],
        why,
    )
    return None
