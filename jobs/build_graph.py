"""Stage build_graph: a corpus snapshot -> the citation graph, with Spark.

Reads: the snapshot at `config.corpus` (S2ORC metadata or S2AG papers /
abstracts / citations shards, `.jsonl[.gz]`).
Writes `ARTIFACTS/<snapshot>/build_graph/<version>/`:
- `papers`: corpus_id, title, abstract, year, venue, fields_of_study, the
  external ids; one row per corpus id (no set order).
- `degrees`: corpus_id, out_degree, in_degree (int32) of every paper in
  `papers` (0 for a paper without edges), counted on `citations`; apart from
  the text so that a release whose edges change rewrites no text.
- `citations`: citing, cited (corpus ids); SciNCL's graph (docs/reference.md §2): from
  S2ORC `outbound_citations` (or `inbound_citations`), no self-loops, no
  duplicates, both ends in the corpus.
- `rejected`: every line, record or edge that was dropped, with its reason
  (`raw`: the input line's bytes, binary).
- `degree_histogram` and `degree_distribution.png`.
- `_manifest.json` with the counts of each reason and degree statistics, and `lossy_text`: per string field of
  `papers`, the papers whose value holds U+FFFD, which Spark's UTF-8 decoding puts in place of each byte that is
  not UTF-8 (such a record is kept, so it is counted and warned about rather than passing silently).

Every input line ends up in exactly one place: papers rows + rejected rows of
kind `paper` = lines of the papers files (a test holds the stage to it).

How the work is laid out: the corpus text is read and parsed once
into a staging copy (no shuffle, Snappy, no dictionary encoding), duplicates are
ranked on light columns only, S2ORC edges are labelled inside each paper's list
with a broadcast look-up of the corpus ids, and the text moves once more, into
`papers`; the degrees are counted on the written citations for the written
papers' ids. `tests/e2e/test_filter_leakage.py`
holds the output to the rows written before this layout (`pinned_contents.json`).

From a diff: when the S2AG release holds a diff to this snapshot
(`<release>/diffs/<start>/to/<snapshot>/`, citeflow/diffs.py; `build_graph.diffs`)
from a release `<start>` that the artifact root holds a build_graph version of
(snapshot `<start>`, same settings), the stage merges that version's tables
with the diff (jobs/build_graph_diff.py, spark/incremental.py) instead of parsing
every shard. Its tables equal a full build's (tests/e2e/test_incremental.py);
its version is the content address of the base version and the diff's files.
Otherwise (no diff, no such build) it builds in full, saying why in one line.

Run: `citeflow run --snapshot ID --corpus DIR --until build_graph`.
"""

from __future__ import annotations

import logging
import posixpath
from pathlib import Path
from typing import Any

from citeflow import diffs as D
from citeflow.artifacts import ArtifactStore, Manifest, table_stats
from citeflow.config import RunConfig, to_dict, versioned_dict
from citeflow.jobs.graph_summary import summarize
from citeflow.jobs.pipeline import StageContext, entry_point
from citeflow.registry import REGISTRY
from citeflow.snapshot import LAYOUTS, Snapshot, discover, fingerprint
from citeflow.stage import execute

STAGE = "build_graph"
# Bump when the stage's output changes meaning for the same inputs and config.
STAGE_VERSION = 3  # 2: rejected.raw is binary (the line's bytes as read); 3: the degrees in a table of their own
TABLES = list(REGISTRY[STAGE].tables)

log = logging.getLogger("citeflow")

run = entry_point(STAGE)


def run_on(ctx: StageContext) -> Manifest:
    """The release's graph, built the way the artifact root allows (`find_diff`: from a diff onto an earlier
    release's build, else in full), unless the release holds a version built another way that its inputs
    still give: that one is pinned (`citeflow.currency.choose`; `store.rebase` builds anew)."""
    from citeflow import currency

    config, store = ctx.config, ctx.store
    snapshot = discover(config.corpus, config.build_graph.format)
    stage_config = {**versioned_dict(config.build_graph), "format": snapshot.format}
    resolved = {
        "build_graph": to_dict(config.build_graph),
        "spark": to_dict(config.spark),
        "corpus": config.corpus,
        "detected_format": snapshot.format,
        "stage_config": stage_config,
        "stage_version": STAGE_VERSION,
    }
    full = currency.Way("in full", stage_config, [fingerprint(snapshot)], STAGE, STAGE_VERSION)
    builders = {full.version: (resolved, lambda path: build(config, snapshot, store, path))}
    ways = [full]
    for base, diff in diff_bases(config, store, stage_config):
        way = currency.Way(
            f"from the diff {diff.start} -> {diff.end} onto {STAGE} version {base.version}",
            {**stage_config, "from_diff": True},
            [{**base.lineage(), "snapshot": base.snapshot}, D.fingerprint(diff)],
            STAGE,
            STAGE_VERSION,
        )
        ways.append(way)
        builders[way.version] = (
            {**resolved, "diff": diff.folder},
            lambda path, base=base, diff=diff: _from_diff(config, base, diff, store, path),
        )
    found = find_diff(config, snapshot, store, stage_config)
    chosen = full if found is None else next(w for w in ways if w.inputs[0].get("version") == found[0].version)
    way, extra = currency.choose(
        store, config.snapshot, chosen, [w for w in ways if w is not chosen], config.store.rebase
    )
    resolved_config, builder = builders[way.version]
    if way is not full:
        log.info("%s: building %s", STAGE, way.name)
    return execute(
        store=store,
        snapshot=config.snapshot,
        stage=STAGE,
        stage_version=STAGE_VERSION,
        config=way.config,
        resolved_config=resolved_config,
        inputs=way.inputs,
        tables=TABLES,
        build=lambda path: {**_build_explained(lambda: builder(path)), **extra},
    )


def diffs_folder(config: RunConfig) -> Path | None:
    """The diffs folder `build_graph.diffs` names for the corpus (`citeflow.diffs.release_diffs`)."""
    return D.release_diffs(config.build_graph.diffs, config.corpus, "build_graph.diffs")


def _bases(store: ArtifactStore, start: str, stage_config: dict[str, Any]) -> list[Manifest]:
    """The build_graph versions of release `start` built with these settings (a diff's possible bases)."""
    return [
        m
        for m in store.list_versions(start, STAGE)
        if m.config.get("stage_config") == stage_config and m.config.get("stage_version") == STAGE_VERSION
    ]


def diff_bases(config: RunConfig, store: ArtifactStore, stage_config: dict[str, Any]) -> list[tuple[Manifest, D.Diff]]:
    """Every (base version, diff) the release could be built from: each whole diff to it whose start holds
    exactly one build with these settings, silently (`find_diff` says which one a build takes, and why)."""
    folder = diffs_folder(config)
    if folder is None:
        return []
    found = []
    for start in D.starts(folder, config.snapshot):
        if D.missing_manifests(folder, start, config.snapshot):
            continue
        matches = _bases(store, start, stage_config)
        if len(matches) == 1:
            found.append((matches[0], D.read_diff(folder, start, config.snapshot)))
    return found


def find_diff(
    config: RunConfig, snapshot: Snapshot, store: ArtifactStore, stage_config: dict[str, Any]
) -> tuple[Manifest, D.Diff] | None:
    """(base version, diff) when a diff to this snapshot starts at a release with one build of these settings;
    the latest such start (by release id) wins. None, with one log line saying why, otherwise (also when a
    start holds several such builds: a version is never chosen by age)."""
    folder = diffs_folder(config)
    if folder is None:
        return None
    starts = []
    for start in D.starts(folder, config.snapshot):
        missing = D.missing_manifests(folder, start, config.snapshot)
        if not missing:
            starts.append(start)
        elif len(missing) < len(D.DATASETS):  # a dataset without its diff would keep the start's records
            log.warning(
                "%s: the diff %s -> %s has no %s manifest; it applies only with those of %s",
                STAGE,
                start,
                config.snapshot,
                ", ".join(f"{d}.json" for d in missing),
                ", ".join(D.DATASETS),
            )
    if not starts:
        log.info("%s: %s holds no whole diff to %s; building from the shards", STAGE, folder, config.snapshot)
        return None
    if not LAYOUTS[snapshot.format].diffs:
        diffable = ", ".join(name for name, layout in LAYOUTS.items() if layout.diffs)
        log.info(
            "%s: diffs apply to %s releases, this snapshot is %s; building from the shards",
            STAGE,
            diffable,
            snapshot.format,
        )
        return None
    for start in starts:
        matches = _bases(store, start, stage_config)
        if len(matches) > 1:  # the release's files changed between builds: never pick one by age
            log.info(
                "%s: release %s holds %d builds with these settings (%s); building from the shards",
                STAGE,
                start,
                len(matches),
                ", ".join(m.version for m in matches),
            )
            return None
        if matches:
            return matches[0], D.read_diff(folder, start, config.snapshot)
    log.info(
        "%s: diffs to %s start at %s, of which the artifact root holds no %s build with these settings; "
        "building from the shards",
        STAGE,
        config.snapshot,
        ", ".join(starts),
        STAGE,
    )
    return None


def _from_diff(config: RunConfig, base: Manifest, diff: D.Diff, store: ArtifactStore, path: str) -> dict[str, Any]:
    from citeflow.jobs.build_graph_diff import build_from_diff

    return build_from_diff(config, base, diff, store, path)


def _build_explained(build_fn) -> dict[str, Any]:
    """`build_fn()`, with an unreadable corpus or diff file (truncated or corrupt shard) as one line naming it."""
    from citeflow.spark.readers import explaining_unreadable_files

    return explaining_unreadable_files(build_fn, "corpus file")


def build(config: RunConfig, snapshot: Snapshot, store: ArtifactStore, path: str) -> dict[str, Any]:
    """Parse, clean and write the graph tables into `path`; returns the manifest metrics.

    The corpus text is read and parsed once (pass 1) and written to a staging copy without any
    shuffle; deduplication ranks light columns only, and the papers' text moves again just once, into
    `papers`. S2AG's abstracts and citations are parsed once too: each line's fate is staged with what
    `papers` and `rejected` need of it (the text of an id's best abstract, the raw line of a rejected one).
    Joins against the set of corpus ids and the degrees use broadcast copies while those fit
    `spark.broadcast_rows`, instead of shuffling the larger side.

    One Spark plan, read top to bottom: each pass stages what the next one reads, in the order it is needed;
    the transforms are `spark/graph.py`'s small functions, and this function only orders them.
    """
    from pyspark.sql import functions as F

    from citeflow.spark import graph as G
    from citeflow.spark import readers as R
    from citeflow.spark.engine.session import get_spark, size_shuffle, step
    from citeflow.spark.work import VersionWork

    spark = get_spark(config.spark, app_name=f"citeflow-{STAGE}-{config.snapshot}")
    spark.conf.set("spark.sql.parquet.compression.codec", "zstd")
    size_shuffle(spark, config.spark, sum(snapshot.sizes.values()), STAGE)
    cfg = config.build_graph
    work = VersionWork(spark, store, path)
    stage = work.stage

    def lines(dataset: str):
        files = snapshot.engine_paths(dataset)
        if not files:
            return None
        sizes = [snapshot.sizes.get(f, 0) for f in snapshot.files(dataset)]
        return R.read_lines(spark, files, sizes)

    # Pass 1: every papers line parsed once and labelled where unusable, written without a shuffle.
    fmt = CORPUS_FORMATS[snapshot.format]
    papers = fmt.papers(R, lines, cfg)
    step(spark, STAGE, "parsing papers")
    staged = stage(G.stage_papers(papers), "papers")
    step(spark, STAGE, "deduplicating papers")
    duplicates = stage(G.duplicate_rows(staged), "duplicates")
    small = lambda rows: rows <= config.spark.broadcast_rows  # noqa: E731
    # Usable papers and duplicates are both at most the staged lines, which the staging files' footers
    # count: within `broadcast_rows`, neither needs a Spark job to count it.
    few_lines = small(table_stats(store, work.staging("papers"))["rows"])
    few_duplicates = few_lines or small(duplicates.count())
    kept = G.kept_papers(staged, duplicates, broadcast=few_duplicates)
    rejected = [G.rejected_papers(staged, duplicates, broadcast=few_duplicates)]
    few_papers = few_lines or small(staged.where(F.col("reason").isNull()).count())
    step(spark, STAGE, "counting usable papers")
    kept, labelled_edges = fmt.edges(spark, lines, stage, kept, rejected, cfg, few_papers, snapshot.root)
    text = fmt.text_flags(kept)
    metrics = finish(
        spark, store, path, config, kept.select(*G.PAPERS_COLUMNS), labelled_edges, rejected, few_papers, text
    )
    metrics["format"] = snapshot.format
    metrics["input_files"] = {name: len(files) for name, files in snapshot.datasets.items()}
    return metrics


class S2orcBuild:
    """S2ORC: one metadata dataset, each line a paper with its outbound citation ids; the text flags (no title,
    no abstract, lossy text) are noted in pass 1, so the text is never read again."""

    @staticmethod
    def papers(R, lines, cfg):
        parsed = R.parse_lines(lines("metadata"), R.s2orc_schema(cfg.citations_from))
        return R.s2orc_papers(parsed, cfg.citations_from)

    @staticmethod
    def edges(spark, lines, stage, kept, rejected, cfg, few_papers, root=""):
        """(kept, labelled edges): labelled within each paper's list (no shuffle), once: staged light (the raw
        ids and the source only for rejected edges) for the citations and the rejected rows to read."""
        from citeflow.spark import graph as G
        from citeflow.spark.engine.session import step

        step(spark, STAGE, "cleaning citation edges")
        corpus_ids = kept.select("corpus_id")
        labelled = G.label_s2orc_edges(kept, corpus_ids, cfg.citations_from, broadcast=few_papers)
        return kept, stage(G.light_labels(labelled), "edges")

    @staticmethod
    def text_flags(kept):
        from pyspark.sql import functions as F

        return kept.select(
            F.col("_no_title").alias("no_title"),
            F.col("_no_abstract").alias("no_abstract"),
            F.col("_lossy").alias("lossy"),
        )


class S2agBuild:
    """S2AG: papers, abstracts and citations datasets, each parsed once: what the papers and the rejected rows
    need of its lines is decided in that pass and staged, light, so that the rejected rows do not parse them
    again."""

    @staticmethod
    def papers(R, lines, cfg):
        return R.s2ag_papers(R.parse_lines(lines("papers"), R.S2AG_PAPERS_SCHEMA))

    @staticmethod
    def edges(spark, lines, stage, kept, rejected, cfg, few_papers, root=""):
        """(kept with its best abstracts, labelled edges); the rejected abstracts and citation lines are added to
        `rejected`."""
        from pyspark.sql import functions as F

        from citeflow.spark import graph as G
        from citeflow.spark import readers as R
        from citeflow.spark.engine.session import step

        corpus_ids = kept.select("corpus_id")
        abstract_lines = lines("abstracts")
        if abstract_lines is not None:
            step(spark, STAGE, "ranking abstracts")
            abstracts = R.s2ag_abstracts(R.parse_lines(abstract_lines, R.S2AG_ABSTRACTS_SCHEMA))
            staged_abstracts = stage(G.stage_abstracts(abstracts, corpus_ids, broadcast=few_papers), "abstracts")
            kept, abstract_rejects = G.attach_staged_abstracts(kept, staged_abstracts)
            rejected.append(abstract_rejects)
        citation_lines = lines("citations")
        if citation_lines is not None:
            step(spark, STAGE, "parsing citation lines")
            parsed = R.s2ag_citation_pairs(R.parse_lines(citation_lines, R.S2AG_CITATIONS_SCHEMA))
            # the raw line is kept for the unparseable lines only
            error = F.col("parse_error")
            pairs = stage(parsed.withColumn("value", F.when(error.isNotNull(), F.col("value"))), "pairs")
            candidates = pairs.where(error.isNull()).drop("parse_error", "value")
            rejected.append(
                R.rejected_rows(
                    pairs.where(error.isNotNull()),
                    kind="citation",
                    reason=error,
                    id_col=F.col("citing_raw"),
                    cited=F.col("cited_raw"),
                    raw=F.col("value"),
                )
            )
        else:
            log.warning("%s: no citations dataset in %s; the graph has no edges", STAGE, root)
            candidates = spark.createDataFrame([], "citing_raw string, cited_raw string, source string")
        # Pass 2: every candidate edge, labelled once (copies of an edge may come from any shard).
        step(spark, STAGE, "cleaning citation edges")
        return kept, stage(G.label_edges(candidates, corpus_ids, broadcast=few_papers), "edges")

    @staticmethod
    def text_flags(kept):
        return None  # `finish` reads the flags from the written papers (their abstracts came from another dataset)


# How build_graph reads each corpus format (citeflow.snapshot.CORPUS_FORMATS holds their layouts): adding a
# format is one layout there and one class here.
CORPUS_FORMATS = {"s2orc": S2orcBuild, "s2ag": S2agBuild}


def finish(
    spark,
    store: ArtifactStore,
    path: str,
    config: RunConfig,
    papers,
    labelled_edges,
    rejected: list,
    broadcast: bool,
    text=None,
) -> dict[str, Any]:
    """Write papers, citations, degrees, rejected and degree_histogram from the cleaned frames; the manifest metrics
    (degree statistics, text flags, rejected counts by reason: `summarize`). `text` (no_title, no_abstract and
    lossy per paper: `graph_stats.text_counts`) defaults to reading the written papers; `broadcast`: the papers are few
    enough to join by broadcast."""
    from citeflow.spark import graph as G
    from citeflow.spark import output as O
    from citeflow.spark.engine.session import as_step, concurrently, step

    cfg = config.build_graph
    out = lambda table: store.engine_uri(posixpath.join(path, table))  # noqa: E731
    all_rejected = rejected[0]
    for frame in [*rejected[1:], G.rejected_edges(labelled_edges)]:
        all_rejected = all_rejected.unionByName(frame)

    def write_rejected() -> None:
        all_rejected.coalesce(cfg.output_files).write.mode("error").options(**O.TEXT_OPTIONS).parquet(out("rejected"))

    # The rejected rows are written beside the graph: one after another, their small jobs and the graph's
    # broadcasts left cores idle.
    concurrently(
        spark,
        as_step(
            spark,
            STAGE,
            "writing the graph tables",
            lambda: O.write_graph(
                spark, store, path, papers, G.kept_edges(labelled_edges), cfg.output_files, broadcast
            ),
        ),
        as_step(spark, STAGE, "writing rejected rows", write_rejected),
    )
    step(spark, STAGE, "graph statistics")
    return summarize(spark, store, path, config, text)
