"""build_graph from an S2AG release diff: a base version's tables merged with the diff.

Called by jobs/build_graph.py `run` when the artifact root holds a build of the diff's start release (the
stage's one entry point stays there). Reads the base version's `papers`, `citations`, `degrees` and `rejected`
and the diff's files; writes
the same tables as a full build of the release into the version folder, and returns the manifest metrics of
a full build plus `from_diff`. Only what the diff can change is computed again:

- papers: the rows of the keys the merge decides again (`spark/incremental.py` `touched_papers`: keys either
  diff names, keys whose abstract the base quarantined) are merged from the base's rows of those keys only;
  every other row is the base's row as it is;
- citation edges: only pairs the diff names or brings and edges with an end that enters or leaves the
  corpus are labelled again (`split_edges`); every other base edge keeps its label;
- degrees: only papers whose row was replaced or whose kept edges arrived or left get a new row, their base
  degrees plus the difference (`changed_degrees`); every other paper keeps its base row;
- rejected: the base's rows stay unless the merge decides their key again.

How the rows are written (`_finish_in_place`): `papers`, `citations`, `degrees` and `rejected` are written over
the base's (spark/output.py `write_over`): a base data file whose every row stays is linked into the new table
unchanged, a file that holds a row the release no longer has is written again without it, and the rows the diff
changes or brings go to new files of their own; every table stays plain Parquet that any reader reads whole.
The degree histogram and the metrics are counts: the base's, less those of the rows that go, plus those of the
rows written (`_summarize_changes`; where it cannot, the written tables are counted as a full build counts them,
jobs/graph_summary.py `summarize`). So is `lossy_text`, the papers per field holding U+FFFD: it counts the whole
resulting table, as a full build's does, not only the records the diff wrote. All of it runs in Spark, so the diff
path runs where a full build runs (a cluster, Spark Connect) and holds no table in this process beyond the
histogram's few hundred rows.

The result equals a full build of the release (tests/e2e/test_incremental.py).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable
from functools import reduce
from typing import Any

from citeflow import diffs as D
from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import RunConfig

STAGE = "build_graph"
# the tables a version built from a diff writes over its base's (`output.write_over`); the histogram is written anew
OVER_BASE = ("papers", "rejected", "citations", "degrees")
log = logging.getLogger("citeflow")


def build_from_diff(config: RunConfig, base: Manifest, diff: D.Diff, store: ArtifactStore, path: str) -> dict[str, Any]:
    """Merge `base` with the diff's steps and write the graph tables into `path`; returns the metrics.

    One Spark plan, read top to bottom like `build_graph.build`: each pass stages what the next one reads; the
    transforms are `spark/incremental.py`'s, `spark/incremental_edges.py`'s and `spark/graph.py`'s, and this
    function only orders them."""
    from pyspark.sql import functions as F

    from citeflow.spark import graph as G
    from citeflow.spark import incremental as I
    from citeflow.spark import incremental_edges as E
    from citeflow.spark import readers as R
    from citeflow.spark import scans as S
    from citeflow.spark.engine.session import get_spark, size_shuffle
    from citeflow.spark.work import VersionWork

    spark = get_spark(config.spark, app_name=f"citeflow-{STAGE}-{config.snapshot}")
    spark.conf.set("spark.sql.parquet.compression.codec", "zstd")
    # the base version's tables are what the merge shuffles; the diff's files are small beside them
    size_shuffle(spark, config.spark, base.content_bytes(), STAGE)
    schemas = {
        "papers": R.S2AG_PAPERS_SCHEMA,
        "abstracts": R.S2AG_ABSTRACTS_SCHEMA,
        "citations": R.S2AG_CITATIONS_SCHEMA,
    }
    lines_read = {d: {"updates": 0, "deletes": 0} for d in D.DATASETS}

    def lines_of(dataset: str, kind: str, transform):
        """`readers.diff_lines` of one dataset, its files counted for the manifest's `input_files`."""
        lines_read[dataset][kind] += sum(len(step.files_of(kind, dataset)) for step in diff.steps)
        return R.diff_lines(spark, diff, dataset, kind, schemas[dataset], transform)

    work = VersionWork(spark, store, path)
    stage = work.stage
    # the base version's tables with each row's place in its data file, by which this version's table over it
    # (`output.write_over`) names the rows that go
    base_papers, base_citations = (work.read(base, t, with_position=True) for t in ("papers", "citations"))
    base_rejected = work.read(base, "rejected", with_position=True)
    few_papers = base.tables["papers"]["rows"] <= config.spark.broadcast_rows

    log.info("%s: merging papers and abstracts of the keys the diff names", STAGE)
    # staged once, with one `_row` over all steps' lines: the ranking needs a row number unique to the frame
    paper_updates = stage(
        lines_of("papers", "updates", lambda p: G.stage_papers(R.s2ag_papers(p)).drop("_row")).withColumn(
            "_row", F.monotonically_increasing_id()
        ),
        "paper_updates",
    )
    paper_deletes = lines_of("papers", "deletes", lambda p: R.s2ag_papers(p))
    good_deletes, bad_deletes = G.split_keyed(paper_deletes, kind="paper")
    good_deletes = good_deletes.select("corpus_id", "_step")
    abstract_updates = lines_of("abstracts", "updates", R.s2ag_abstracts)
    abstract_deletes = lines_of("abstracts", "deletes", R.s2ag_abstracts)
    paper_keys = stage(I.last_steps(I.keys_named(paper_updates), good_deletes, ["corpus_id"]), "paper_keys")
    abstracts = I.abstract_inputs(base_rejected, abstract_updates, abstract_deletes, materialize=stage)
    touched = stage(I.touched_papers(abstracts, paper_keys), "touched")
    # the base's rows of the touched keys: the merge decides every touched key from these and the diff alone
    touched_base = stage(base_papers.join(F.broadcast(touched), "corpus_id", "left_semi"), "touched_base")
    merged, _, paper_rejects, _ = I.merge_papers(
        touched_base, paper_updates, good_deletes, broadcast=True, steps=paper_keys, materialize=stage
    )
    changed, abstract_rejects, abstract_keys = I.merge_abstracts(
        touched_base, abstracts, merged, paper_keys, materialize=stage
    )
    changed = stage(changed.select(*G.PAPERS_COLUMNS), "changed")

    log.info("%s: labelling the citation edges the diff can change", STAGE)
    old_ids, new_ids = touched_base.select("corpus_id"), changed.select("corpus_id")
    moved = old_ids.join(new_ids, "corpus_id", "left_anti").unionByName(new_ids.join(old_ids, "corpus_id", "left_anti"))
    corpus_ids = (
        base_papers.select("corpus_id").join(F.broadcast(touched), "corpus_id", "left_anti").unionByName(new_ids)
    )
    # the diff's citation lines parsed once: the keys it names, its pairs and its rejected lines read them
    split = E.split_edges(
        base_citations,
        base_rejected,
        stage(lines_of("citations", "updates", R.s2ag_citation_pairs), "citation_updates"),
        stage(lines_of("citations", "deletes", R.s2ag_citation_pairs), "citation_deletes"),
        stage(moved, "moved"),
        materialize=stage,
    )
    labelled = stage(G.label_edges(split.to_label, corpus_ids, broadcast=few_papers), "edges")
    named = {"papers": paper_keys.count(), "abstracts": abstract_keys.count(), "citations": split.named.count()}

    _, decided_again = I.carried_rejected(
        base_rejected, paper_keys.select("corpus_id"), abstracts.steps.select("corpus_id"), split.named
    )
    new_rejected = [paper_rejects, bad_deletes, abstract_rejects, split.bad]
    log.info("%s: writing the rows the diff changes over the base's files", STAGE)
    new_edges = G.kept_edges(labelled)
    # each table's (new rows, the base rows that go, with their POSITION), made where it is written: the
    # degrees stage the base rows they read, in the thread that writes them after the citations
    tables = {
        "papers": lambda: (changed, touched_base),
        "citations": lambda: (new_edges, split.gone_kept),
        "degrees": lambda: E.changed_degrees(
            work.read(base, "degrees", with_position=True),
            new_edges,
            split.gone_kept.select("citing", "cited"),
            touched_base.select("corpus_id"),
            changed.select("corpus_id"),
            materialize=stage,
        ),
        # the base rows that go, with what the rejected counts need (staged: written and counted)
        "rejected": lambda: (
            reduce(lambda a, b: a.unionByName(b), [*new_rejected, G.rejected_edges(labelled)]),
            stage(
                decided_again.select("kind", "reason", *S.POSITION).unionByName(
                    split.gone.select("kind", "reason", *S.POSITION)
                ),
                "rejected_gone",
            ),
        ),
    }
    metrics, files = _finish_in_place(spark, store, path, config, base, tables)
    metrics["format"] = "s2ag"
    metrics["input_files"] = {d: sum(v.values()) for d, v in lines_read.items()}
    metrics["from_diff"] = {
        "base": {"snapshot": base.snapshot, "version": base.version},
        "start": diff.start,
        "end": diff.end,
        "steps": [[st.from_release, st.to_release] for st in diff.steps],
        "keys_named": named,
        # per table written over the base's, its data files by how they came (`output.write_over`): filter_leakage
        # keys only the papers of the `new` files
        "files": files,
    }
    return metrics


def _finish_in_place(
    spark, store: ArtifactStore, path: str, config: RunConfig, base: Manifest, tables: dict[str, Callable]
) -> tuple[dict[str, Any], dict[str, dict[str, list[str]]]]:
    """Write every table but the histogram over the base's (`output.write_over`): the base's data files that
    keep every row linked, those that lose one written again without it, the rows this release changes or brings
    in new files; then the statistics of a full build, from the base's and the changed rows'
    (`_summarize_changes`; `summarize` of the written tables where it cannot). Returns (metrics, each table's data
    files by how they came).

    `tables`: for `papers`, `citations`, `degrees` and `rejected`, a function that gives (the new rows, the base rows
    that go, with their `POSITION`: the degrees' and rejected rows' with their columns too), called just before
    the table is written. Papers: the merged rows of the touched keys, every touched key's base row going;
    citations: the kept edges among those labelled again, the base's kept edges labelled again or gone
    (`split_edges`' `gone_kept`); degrees: those of the papers whose row was replaced or whose edges arrived or
    left (`incremental_edges.changed_degrees`); rejected: the new rejected rows, those the merge decided again going.
    A paper nobody touched keeps its row, in `papers` and in `degrees`. The papers' text counts
    (`graph_stats.TEXT_COUNTS` and `graph_stats.LOSSY_TEXT`) are the base's, less those of the touched keys' base
    rows, plus those of their new rows, so the statistics read no text beyond those rows and hold for the whole
    table; a base whose manifest lacks any of them has the written tables counted (`summarize`)."""
    from citeflow.jobs.graph_summary import summarize
    from citeflow.spark import graph_stats as GS
    from citeflow.spark import output as O
    from citeflow.spark.engine.session import concurrently

    changed, touched_base = tables["papers"]()
    # the new rows' files: the base's file count in proportion to the papers the diff touched (at least one),
    # so that release after release adds few files to each table
    most = config.build_graph.output_files
    files = max(1, min(most, -(-changed.count() * most // max(base.tables["papers"]["rows"], 1))))
    gone_rows: dict[str, Any] = {}
    written: dict[str, dict[str, list[str]]] = {}

    def over(*names: str) -> None:
        for table in names:
            new_rows, gone = tables[table]()
            gone_rows[table] = gone
            source, target = base.table_path(table), posixpath.join(path, table)
            written[table] = O.write_over(spark, store, source, target, gone, new_rows, files=files, most=most)

    # the papers and rejected rows beside the edges and, after them, the degrees
    concurrently(spark, lambda: over("citations", "degrees"), lambda: over("papers", "rejected"))
    text = None
    if all(k in base.metrics for k in (*GS.TEXT_COUNTS, GS.LOSSY_TEXT)):
        gone, added = (GS.text_counts(GS.summary_stats(f)) for f in (touched_base, changed))
        text = {k: base.metrics[k] - gone[k] + added[k] for k in GS.TEXT_COUNTS}
        text[GS.LOSSY_TEXT] = lossy_after(base.metrics[GS.LOSSY_TEXT], gone[GS.LOSSY_TEXT], added[GS.LOSSY_TEXT])

    def new_rows(table: str):
        names = written[table]["new"]
        return spark.read.parquet(*[store.engine_uri(posixpath.join(path, table, n)) for n in names]) if names else None

    changes = {t: (new_rows(t), gone_rows[t]) for t in ("degrees", "rejected")}
    metrics = _summarize_changes(spark, store, path, config, base, text, changes)
    files_by_table = {t: written[t] for t in OVER_BASE}
    return (metrics if metrics is not None else summarize(spark, store, path, config, text)), files_by_table


def lossy_after(base: dict[str, int], gone: dict[str, int], added: dict[str, int]) -> dict[str, int]:
    """`graph_stats.LOSSY_TEXT` of the whole table after a diff: the base's papers per field holding U+FFFD, less those
    of the base rows that go, plus those of the rows written; fields with none left out."""
    from citeflow.spark import graph_stats as GS

    after = {f: base.get(f, 0) - gone.get(f, 0) + added.get(f, 0) for f in GS.LOSSY_FIELDS}
    return {f: n for f, n in after.items() if n}


def _summarize_changes(
    spark, store: ArtifactStore, path: str, config: RunConfig, base: Manifest, text: dict | None, changes: dict
) -> dict[str, Any] | None:
    """jobs/graph_summary.py `summarize`'s histogram and metrics, from the base's and the rows this version changes:
    the base's degree histogram, papers with an edge and rejected counts, less those of the base rows it removes,
    plus those of the rows it writes (`changes`: per table `degrees` and `rejected`, (the new rows, the base rows
    that go)). Every one of them is a count, so the result is `summarize`'s, for three small aggregations over the
    changed rows instead of three over every row (tests/e2e/test_incremental.py compares the manifests). None where
    the base holds no histogram or `text` is unknown, or when the counts come out negative (a base whose tables
    and manifest disagree): then the caller summarizes the written tables."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    from citeflow import tables as T
    from citeflow.jobs.graph_summary import metrics_of, write_histogram
    from citeflow.spark.engine.session import concurrently

    if text is None or "degree_histogram" not in base.tables or "rejected" not in base.metrics:
        return None

    def signed(table: str, columns: list[str]):
        new_rows, gone = changes[table]
        frames = [gone.select(*columns, F.lit(-1).alias("_sign"))]
        if new_rows is not None:
            frames.append(new_rows.select(*columns, F.lit(1).alias("_sign")))
        return frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])

    degrees = signed("degrees", ["out_degree", "in_degree"])
    by_direction = degrees.select(
        F.explode(
            F.array(
                F.struct(F.lit("out").alias("direction"), F.col("out_degree").alias("degree"), "_sign"),
                F.struct(F.lit("in").alias("direction"), F.col("in_degree").alias("degree"), "_sign"),
            )
        ).alias("d")
    ).select("d.*")
    has_edge = ((F.col("out_degree") + F.col("in_degree")) > 0).cast("long")
    histogram_delta, nodes_delta, rejected_delta = concurrently(
        spark,
        lambda: by_direction.groupBy("direction", "degree").agg(F.sum("_sign").alias("n")).collect(),
        lambda: degrees.agg(F.sum(F.col("_sign") * has_edge).alias("n")).first()["n"] or 0,
        lambda: (
            signed("rejected", ["kind", "reason"]).groupBy("kind", "reason").agg(F.sum("_sign").alias("n")).collect()
        ),
    )
    base_histogram = T.read_table(store.fs, base.table_path("degree_histogram"))
    counts: dict[tuple[str, int], int] = {}
    for r in base_histogram.to_pylist():
        counts[(r["direction"], r["degree"])] = r["papers"]
    for r in histogram_delta:
        key = (r["direction"], r["degree"])
        counts[key] = counts.get(key, 0) + r["n"]
    rejected = dict(base.metrics["rejected"])
    for r in rejected_delta:
        key = f"{r['kind']}.{r['reason']}"
        rejected[key] = rejected.get(key, 0) + r["n"]
    nodes = base.metrics["graph_nodes"] + nodes_delta
    if min([*counts.values(), *rejected.values(), nodes]) < 0:
        log.warning(
            "%s: the base version %s's histogram or rejected counts disagree with its tables; counting every row",
            STAGE,
            base.version,
        )
        return None
    kept = sorted((k for k, n in counts.items() if n), key=lambda k: (k[0] != "out", k[1]))
    histogram = pa.table(
        {
            "direction": [k[0] for k in kept],
            "degree": [k[1] for k in kept],
            "papers": [counts[k] for k in kept],
        },
        schema=base_histogram.schema,
    )
    write_histogram(store, path, config, histogram)
    log.info(
        "%s: degree histogram and counts: base version %s's, with the rows this version changes", STAGE, base.version
    )
    return metrics_of(store, path, histogram, nodes, text, rejected)
