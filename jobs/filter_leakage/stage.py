"""filter_leakage's steps: both sides read, the ids mapped, the graph written without the benchmark's papers,
the report counted (the stage and its tables: the package's docstring)."""

from __future__ import annotations

import dataclasses
import logging
import posixpath
from typing import Any

import citeflow.jobs.filter_leakage.paper_ids_diff as P
import citeflow.jobs.filter_leakage.paper_keys as K
from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import RunConfig, to_dict, versioned_dict
from citeflow.errors import CiteflowError
from citeflow.jobs.filter_leakage.report import count_metrics, write_benchmark_side
from citeflow.jobs.pipeline import StageContext, entry_point
from citeflow.registry import REGISTRY
from citeflow.snapshot import fingerprint_path
from citeflow.stage import execute

STAGE = "filter_leakage"
# A change to the keys (`transforms.paper_key_rows`: `cascade_key`, the title fold) needs a new stage version:
# only a version of this one carries its paper_keys over to the next release. CHANGELOG.md lists the versions.
STAGE_VERSION = 6
TABLES = list(REGISTRY[STAGE].tables)

# the settings that name benchmark files: their fingerprints are inputs, not config
SOURCE_LISTS = ("extra_ids", "scirepeval", "beir")

log = logging.getLogger("citeflow")

run = entry_point(STAGE)


def scirepeval_of(config: RunConfig) -> tuple[str, ...]:
    """The SciRepEval task sources audited: filter_leakage's own and every one the benchmark scores."""
    return tuple(dict.fromkeys((*config.filter_leakage.scirepeval, *config.benchmark.scirepeval)))


def check(config: RunConfig) -> None:
    """The benchmark to filter is given (before the runner builds the graph)."""
    cfg = config.filter_leakage
    if not config.scidocs and not (cfg.extra_ids or cfg.beir or scirepeval_of(config)):
        raise CiteflowError(
            "filter_leakage needs the benchmark: give --scidocs DIR (original or BEIR layout) and/or "
            "--set filter_leakage.scirepeval=PATH, filter_leakage.beir=DIR or filter_leakage.extra_ids=FILE"
        )


def run_on(ctx: StageContext) -> Manifest:
    """The graph without the benchmark. The paper-ids lines come from a diff onto an earlier release's version
    when the root holds one (`paper_ids_diff.find`), else from the table parsed; a release that holds a version
    made the other way, which its inputs still give, keeps it (`citeflow.currency.choose`; `store.rebase`
    builds anew)."""
    from citeflow import currency
    from citeflow import diffs as D

    config = ctx.config
    check(config)
    cfg = config.filter_leakage
    graph = ctx.inputs["build_graph"]
    inputs = [graph.lineage()]
    if config.scidocs:
        inputs.append(fingerprint_path("scidocs", config.scidocs))
    store = ctx.store
    benchmark = [fingerprint_path("scirepeval", path) for path in scirepeval_of(config)]
    benchmark += [fingerprint_path("beir", path) for path in cfg.beir]
    benchmark += [fingerprint_path("id_list", path) for path in cfg.extra_ids]
    stage_config = {k: v for k, v in versioned_dict(cfg).items() if k not in SOURCE_LISTS}  # lists enter via inputs
    # the paper-ids lines: the base's with a diff applied (`paper_ids_diff.py`), or the table parsed
    paper_ids = source = None
    extra: dict[str, Any] = {}
    if config.paper_ids:
        parsed = fingerprint_path("paper_ids", config.paper_ids)
        full = currency.Way(
            "with the paper-ids table parsed", stage_config, [*inputs, parsed, *benchmark], STAGE, STAGE_VERSION
        )
        # every way the lines could come: parsed, or from each diff onto a release's version (`find`'s pick)
        ways: dict[str, tuple[currency.Way, tuple[Manifest, Any] | None, dict[str, Any]]] = {
            full.version: (full, None, parsed)
        }
        for base, diff in P.diff_bases(config, store, STAGE, STAGE_VERSION):
            lineage = D.fingerprint(diff)
            way = currency.Way(
                f"with the paper-ids diff {diff.start} -> {diff.end} applied onto version {base.version}",
                stage_config,
                [*inputs, {**base.lineage(), "snapshot": base.snapshot}, lineage, *benchmark],
                STAGE,
                STAGE_VERSION,
            )
            ways[way.version] = (way, (base, diff), lineage)
        found = P.find(config, store, STAGE, STAGE_VERSION)
        chosen = full
        if found is not None:
            chosen = next(w for w, made, _ in ways.values() if made and made[0].version == found[0].version)
        others = [w for w, _, _ in ways.values() if w is not chosen]
        way, extra = currency.choose(store, config.snapshot, chosen, others, config.store.rebase)
        _, paper_ids, lineage = ways[way.version]
        source = P.source_of(paper_ids[0] if paper_ids else None, lineage)
        inputs = way.inputs
    else:
        inputs += benchmark
    return execute(
        store=store,
        snapshot=config.snapshot,
        stage=STAGE,
        stage_version=STAGE_VERSION,
        config=stage_config,
        resolved_config={
            "filter_leakage": to_dict(cfg),
            "spark": to_dict(config.spark),
            "scidocs": config.scidocs,
            "paper_ids": config.paper_ids,
            "paper_ids_diff": paper_ids[1].folder if paper_ids else None,
            "stage_version": STAGE_VERSION,  # whether a later release may carry this version's paper_keys over
        },
        inputs=inputs,
        tables=TABLES,
        build=lambda path: {**_build_explained(config, graph, store, path, paper_ids, source), **extra},
    )


def _build_explained(
    config: RunConfig, upstream: Manifest, store: ArtifactStore, path: str, paper_ids, source
) -> dict[str, Any]:
    """`build`, with an unreadable paper-ids shard as one line naming it."""
    from citeflow.spark.readers import explaining_unreadable_files

    return explaining_unreadable_files(lambda: build(config, upstream, store, path, paper_ids, source), "input file")


def build(
    config: RunConfig,
    upstream: Manifest,
    store: ArtifactStore,
    path: str,
    paper_ids: tuple[Manifest, Any] | None = None,
    source: str | None = None,
) -> dict[str, Any]:
    """Write the version's tables into `path`; its metrics. `paper_ids`: (base version, diff) when the paper-ids
    lines come from a diff (jobs/filter_leakage/paper_ids_diff.py `find`); `source`: their `source_of`."""
    from citeflow.jobs.filter_leakage.benchmark_ids import Collecting, collect
    from citeflow.spark.engine.session import get_spark_meanwhile

    cfg = config.filter_leakage
    sources = (config.scidocs or None, tuple(cfg.extra_ids), scirepeval_of(config), tuple(cfg.beir))
    # the benchmark is read in a child process while Spark starts and carries the keys and paper-ids lines over
    spark, benchmark = get_spark_meanwhile(
        config.spark,
        f"citeflow-{STAGE}-{config.snapshot}",
        lambda: collect(*sources),
        apart=lambda: Collecting(*sources),
    )
    try:
        return _build(config, upstream, store, path, paper_ids, source, spark, benchmark)
    finally:
        benchmark.cancel()  # a child still reading after an error goes too; nothing once it has answered


def _build(
    config: RunConfig,
    upstream: Manifest,
    store: ArtifactStore,
    path: str,
    paper_ids: tuple[Manifest, Any] | None,
    source: str | None,
    spark,
    benchmark,
) -> dict[str, Any]:
    """`build`'s work, `benchmark` (pending: the benchmark ids table and its layouts) taken when the mapping
    needs it: the graph's side and the benchmark's at once, the benchmark ids mapped to corpus ids, the graph
    written without them, then the counts."""
    from citeflow.spark.engine.session import Done, size_shuffle, step
    from citeflow.spark.work import VersionWork

    work = VersionWork(spark, store, path)
    spark.conf.set("spark.sql.parquet.compression.codec", "zstd")
    size_shuffle(spark, config.spark, upstream.content_bytes(), STAGE)
    step(spark, STAGE, "reading the graph")
    metrics: dict[str, Any] = {"mode": config.filter_leakage.mode}
    # The graph's side needs no benchmark: the papers' keys and the paper-ids lines. On a graph merged from a
    # diff they are carried over in a few seconds, while the child reads the benchmark. A full build
    # keys every paper and parses the paper-ids table, which grow with the corpus: the benchmark is taken first,
    # so that a mistake in it is one line at once rather than after those passes.
    if not upstream.metrics.get("from_diff"):
        benchmark = Done(benchmark.result())
    bench = _both_sides(work, config, upstream, paper_ids, source, benchmark, metrics)
    if config.paper_ids:
        step(spark, STAGE, "looking up the benchmark's shas in the paper-ids lines")
    by_sha = _looked_up_shas(work, config, bench, metrics) if config.paper_ids else None
    step(spark, STAGE, "mapping benchmark ids")
    mapped = _map_ids(work, config, upstream, bench, by_sha)
    step(spark, STAGE, "writing the graph without the benchmark's papers")
    report = _write_graph(work, config, upstream, mapped)
    step(spark, STAGE, "counting")
    count_metrics(work, config, upstream, mapped.table, report, metrics, bench.conflicts)
    log.info(
        "%s: %s — %d of %d benchmark ids mapped; removed %d papers and %d citations",
        STAGE,
        config.filter_leakage.mode,
        metrics["mapped"],
        metrics["benchmark_ids"],
        metrics["removed_papers"],
        metrics["removed_citations"],
    )
    return metrics


@dataclasses.dataclass
class _Benchmark:
    """The benchmark's side of the mapping's input, made with pyarrow in this process."""

    table: Any  # one row per benchmark id and split (`citeflow.jobs.filter_leakage.benchmark_ids.collect`)
    distinct: Any  # one row per distinct id
    conflicts: Any  # (id, folded_title) of the ids the benchmark gives several titles (`mapping.title_conflicts`)
    ids: Any  # `distinct` staged for Spark
    shas: Any  # the sha spellings staged for Spark, or None without a paper-ids table


@dataclasses.dataclass
class _Mapped:
    frame: Any  # Spark: one row per benchmark id, its corpus id and method
    table: Any  # the same rows, read by pyarrow
    id_rows: Any  # `benchmark_ids`: one row per benchmark id and split
    members: Any  # the benchmark's papers in the graph


def _both_sides(work, config: RunConfig, upstream: Manifest, paper_ids, source, benchmark, metrics) -> _Benchmark:
    """Three independent parts at once (`session.concurrently`): the papers' keys and the paper-ids lines
    written, and the benchmark's ids taken; each alone leaves a core idle between its small queries."""
    from citeflow.jobs.filter_leakage.id_mapping import PAPER_ID_LINES_SCHEMA, PAPER_IDS_SCHEMA, paper_id_lines
    from citeflow.jobs.filter_leakage.mapping import distinct_ids, sha_candidates, title_conflicts
    from citeflow.snapshot import discover_jsonl
    from citeflow.spark import readers as R
    from citeflow.spark.engine.session import as_step, concurrently

    spark = work.spark

    def write_lines() -> dict[str, Any] | None:
        """`paper_id_lines` written; its manifest entry (None without a paper-ids table)."""
        if not config.paper_ids:
            spark.createDataFrame([], PAPER_ID_LINES_SCHEMA).write.mode("error").parquet(work.uri(P.TABLE))
            return None
        if paper_ids is not None:
            lines_path = posixpath.join(work.path, P.TABLE)
            base, diff = paper_ids
            return {
                "source": source,
                "from_diff": P.write(spark, work.store, config, base, diff, lines_path, work.stage),
            }
        # every line of the table, stored for the next release's diff, then looked up (one parse)
        parsed = R.parse_lines(spark.read.text(discover_jsonl(config.paper_ids)), PAPER_IDS_SCHEMA)
        paper_id_lines(parsed).write.mode("error").parquet(work.uri(P.TABLE))
        return {"source": source, "from_diff": None}

    def take_benchmark():
        table, layouts, unaudited = benchmark.result()
        distinct = distinct_ids(table)
        # the spellings the sha step looks up, made here too: Spark's plan for them leaves the cores idle
        shas = work.stage_arrow("shas", sha_candidates(distinct)) if config.paper_ids else None
        staged = _Benchmark(table, distinct, title_conflicts(table), work.stage_arrow("ids", distinct), shas)
        return staged, layouts, unaudited

    papers = work.read(upstream, "papers")
    metrics["paper_keys"], lines_entry, (bench, layouts, unaudited) = concurrently(
        spark,
        as_step(
            spark,
            STAGE,
            "keying the papers",
            lambda: K.write(spark, work.store, config, upstream, work.path, papers, work.stage, STAGE, STAGE_VERSION),
        ),
        as_step(spark, STAGE, "writing the paper-ids lines", write_lines),
        as_step(spark, STAGE, "taking the benchmark's ids", take_benchmark),
    )
    if lines_entry is None:
        log.warning("%s: no --paper-ids table; sha ids can only be mapped by title", STAGE)
    else:
        metrics[P.TABLE] = lines_entry
    metrics["layouts"] = layouts
    metrics["unaudited"] = unaudited
    for name, why in unaudited.items():
        log.warning("%s: SciRepEval task %r is not audited: %s", STAGE, name, why)
    described = ", ".join(f"{k} ({v})" for k, v in layouts.items())
    log.info("%s: %d benchmark id rows from %s", STAGE, bench.table.num_rows, described)
    return bench


def _looked_up_shas(work, config: RunConfig, bench: _Benchmark, metrics: dict[str, Any]):
    """The benchmark's shas looked up in the paper-ids lines: one pass over the lines, which also counts the
    lines that give no pair, by reason; the result (bounded by the benchmark) is read here only, by pyarrow."""
    from citeflow.jobs.filter_leakage.id_mapping import sha_lookup
    from citeflow.jobs.filter_leakage.mapping import looked_up_shas, paper_ids_counts

    lines = work.read_own(P.TABLE)
    lookup = sha_lookup(lines, bench.shas, broadcast=bench.distinct.num_rows <= config.spark.broadcast_rows)
    work.stage_files(lookup, "sha_lookup")
    looked_up = work.read_staged("sha_lookup")
    counts = metrics["paper_ids"] = paper_ids_counts(looked_up)
    if counts["unusable"]:
        log.warning(
            "%s: %d of %d paper-ids lines give no (sha, corpus id) pair: %s",
            STAGE,
            sum(counts["unusable"].values()),
            counts["lines"],
            ", ".join(f"{reason} {n}" for reason, n in counts["unusable"].items()),
        )
    return looked_up_shas(looked_up)


def _map_ids(work, config: RunConfig, upstream: Manifest, bench: _Benchmark, by_sha) -> _Mapped:
    """The benchmark ids mapped to corpus ids. The cascade's steps that read the papers run only for the ids the
    corpus_id and sha steps leave unmapped (`map_ids_narrow`: the same rows as `map_ids`), on the keys they
    state."""
    from citeflow.jobs.filter_leakage.id_mapping import map_ids_narrow
    from citeflow.jobs.filter_leakage.mapping import benchmark_id_rows, first_steps, members

    # the steps that read no papers (corpus id, sha), on the ids the driver holds
    first = work.stage_arrow("first", first_steps(bench.distinct.select(["id"]), by_sha))
    frame = map_ids_narrow(
        bench.ids,
        work.read(upstream, "papers"),
        None,
        match_titles=config.filter_leakage.match_titles,
        materialize=work.stage,
        # the benchmark's keys (external ids, folded titles: one row per benchmark id at most) go to every task
        broadcast_keys=bench.table.num_rows <= config.spark.broadcast_rows,
        first=first,
        from_arrow=lambda table, name: work.stage_arrow(name, table),  # `mapped`, its rows made in this process
        paper_keys=work.read_own("paper_keys"),
        conflicts=bench.conflicts,
        most_shared=config.filter_leakage.max_shared_matches,
    )
    table = work.read_staged("mapped")
    id_rows = benchmark_id_rows(bench.table, table)
    return _Mapped(frame, table, id_rows, members(id_rows))


def _write_graph(work, config: RunConfig, upstream: Manifest, mapped: _Mapped) -> list[dict]:
    """The graph's papers, citations and degrees written without the benchmark's papers (mode `exclude`), or
    whole; `benchmark_ids` and `leakage_report` beside them. The report's rows.

    The benchmark's side (one row per benchmark id and split: bounded by the benchmark, not the corpus) is
    joined, counted and written with pyarrow, in a thread beside Spark's writing of the graph, which needs only
    `mapped`; the edge counts it waits for are one more Spark query meanwhile."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    import citeflow.jobs.filter_leakage.transforms as L
    from citeflow.spark import output as O
    from citeflow.spark import scans as S
    from citeflow.spark.engine.session import as_step

    cfg, spark, store = config.filter_leakage, work.spark, work.store
    few = mapped.members.num_rows <= config.spark.broadcast_rows
    citations = work.read(upstream, "citations")
    counts, neighbours = L.reach(
        citations, work.stage_arrow("members", mapped.members), strict=cfg.strict, broadcast=few
    )
    with ThreadPoolExecutor(1, thread_name_prefix="citeflow-report") as pool:
        side = pool.submit(
            as_step(
                spark,
                STAGE,
                "writing benchmark_ids and the leakage report",
                lambda: write_benchmark_side(work, mapped.id_rows, counts),
            )
        )
        gone = degrees = None
        if cfg.mode == "exclude":
            excluded = mapped.frame.where(F.col("in_snapshot")).select("corpus_id")
            if neighbours is not None:
                excluded = excluded.unionByName(neighbours)
                few = False  # a benchmark's neighbourhood is no longer small
            else:
                in_snapshot = pc.sum(mapped.table["in_snapshot"]).as_py() or 0
                few = in_snapshot <= config.spark.broadcast_rows
            # the papers' ids and places only: the files of kept papers only are the graph's own, linked
            positions = work.read(upstream, "papers", with_position=True).select("corpus_id", *S.POSITION)
            _, kept_edges, gone = L.remove_papers(positions, citations, excluded, broadcast=few)
            # the graph's degrees less the edges that go: no count of every kept edge, no read of the papers
            degrees = L.filtered_degrees(work.read(upstream, "degrees"), citations, excluded, broadcast=few)
        else:
            kept_edges = citations
        try:
            graph_papers, kept_papers = upstream.table_path("papers"), posixpath.join(work.path, "papers")
            O.write_graph(
                spark,
                store,
                work.path,
                # the graph's files without a benchmark paper linked, the others written again: beside the citations
                lambda: O.write_over(
                    spark, store, graph_papers, kept_papers, gone, most=config.build_graph.output_files, broadcast=few
                ),
                kept_edges,
                config.build_graph.output_files,
                upstream.tables["papers"]["rows"] <= config.spark.broadcast_rows,
                degrees,
            )
        finally:
            report = side.result()  # its error, if any, before Spark's
    return report
