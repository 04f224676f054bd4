"""build_graph from an S2AG release diff: a base version's tables merged with the diff (issue 19).

Called by jobs/build_graph.py `run` when the artifact root holds a build of the diff's start release (the
stage's one entry point stays there). Reads the base version's `papers`, `citations` and `rejected` and the
diff's files; writes the same tables as a full build of the release into the version folder, and returns
the manifest metrics of a full build plus `from_diff`. Only what the diff can change is computed again:

- papers: the rows of the keys the merge decides again (`spark/incremental.py` `touched_papers`: keys either
  diff names, keys whose abstract the base quarantined) are merged from the base's rows of those keys only;
  every other row is the base's row as it is, with new degrees (an edge that arrives or leaves changes the
  degree of a paper the diff does not name, so no base file can be reused whole, and none is linked);
- citation edges: only pairs the diff names or brings and edges with an end that enters or leaves the
  corpus are labelled again (`split_edges`); every other base edge keeps its label;
- rejected: the base's rows stay unless the merge decides their key again;
- the tables are written, and degrees, degree histogram and metrics computed, as in a full build
  (jobs/build_graph.py `finish`): all of it in Spark, so the diff path runs where a full build runs (a
  cluster, Spark Connect) and holds no table in this process.

The result equals a full build of the release (tests/e2e/test_incremental.py).
"""

from __future__ import annotations

import logging
import posixpath
from typing import Any

from citeflow import diffs as D
from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import RunConfig
from citeflow.snapshot import filesystem

STAGE = "build_graph"
log = logging.getLogger("citeflow")


def build_from_diff(config: RunConfig, base: Manifest, diff: D.Diff, store: ArtifactStore, path: str) -> dict[str, Any]:
    """Merge `base` with the diff's steps and write the graph tables into `path`; returns the metrics."""
    from pyspark.sql import functions as F

    from jobs.build_graph import finish
    from spark import graph as G
    from spark import incremental as I
    from spark import output as O
    from spark import readers as R
    from spark.session import get_spark

    spark = get_spark(config.spark, app_name=f"citeflow-{STAGE}-{config.snapshot}")
    spark.conf.set("spark.sql.parquet.compression.codec", "zstd")
    fs, _ = filesystem(diff.folder)
    schemas = {
        "papers": R.S2AG_PAPERS_SCHEMA,
        "abstracts": R.S2AG_ABSTRACTS_SCHEMA,
        "citations": R.S2AG_CITATIONS_SCHEMA,
    }
    lines_read = {d: {"updates": 0, "deletes": 0} for d in D.DATASETS}

    def lines_of(dataset: str, kind: str, transform):
        """The steps' lines of one dataset (its update or delete files), parsed, through `transform`, with
        `_step` (the step's index); an empty frame of the same columns when no step has such files."""
        frames = []
        for i, step in enumerate(diff.steps):
            files = (step.update_files if kind == "updates" else step.delete_files).get(dataset, [])
            if files:
                sizes = [fs.get_file_info(f).size for f in files]
                lines = R.read_lines(spark, ["file://" + f for f in files], sizes)
                lines_read[dataset][kind] += len(files)
            else:
                lines = spark.createDataFrame([], "value string, source string")
            frames.append(transform(R.parse_lines(lines, schemas[dataset])).withColumn("_step", F.lit(i)))
        frame = frames[0]
        for other in frames[1:]:
            frame = frame.unionByName(other)
        return frame

    def stage(frame, name: str):
        return O.stage(spark, frame, store.engine_uri(posixpath.join(path, "_staging", name)))

    read = lambda table: spark.read.parquet(store.engine_uri(base.table_path(table)))  # noqa: E731
    base_papers, base_citations, base_rejected = read("papers"), read("citations"), read("rejected")
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
    good_deletes, bad_deletes = G.split_unparseable(paper_deletes)
    good_deletes = good_deletes.select(F.col("id_raw").try_cast("long").alias("corpus_id"), "_step")
    abstract_updates = lines_of("abstracts", "updates", R.s2ag_abstracts)
    abstract_deletes = lines_of("abstracts", "deletes", R.s2ag_abstracts)
    paper_keys = stage(
        I.last_steps(paper_updates.where(F.col("reason").isNull()), good_deletes, ["corpus_id"]), "paper_keys"
    )
    touched = stage(I.touched_papers(base_rejected, abstract_updates, abstract_deletes, paper_keys), "touched")
    # the base's rows of the touched keys: the merge decides every touched key from these and the diff alone
    touched_base = stage(base_papers.join(F.broadcast(touched), "corpus_id", "left_semi"), "touched_base")
    merged, _, paper_rejects, _ = I.merge_papers(touched_base, paper_updates, good_deletes, broadcast=True)
    changed, abstract_rejects, abstract_keys = I.merge_abstracts(
        touched_base, base_rejected, abstract_updates, abstract_deletes, merged, paper_keys
    )
    changed = stage(changed.select(*G.PAPERS_COLUMNS), "changed")

    log.info("%s: labelling the citation edges the diff can change", STAGE)
    old_ids, new_ids = touched_base.select("corpus_id"), changed.select("corpus_id")
    moved = old_ids.join(new_ids, "corpus_id", "left_anti").unionByName(new_ids.join(old_ids, "corpus_id", "left_anti"))
    corpus_ids = (
        base_papers.select("corpus_id").join(F.broadcast(touched), "corpus_id", "left_anti").unionByName(new_ids)
    )
    to_label, kept_edges, carried_edges, citation_rejects, edge_keys = I.split_edges(
        base_citations,
        base_rejected,
        lines_of("citations", "updates", R.s2ag_citation_pairs),
        lines_of("citations", "deletes", R.s2ag_citation_pairs),
        stage(moved, "moved"),
    )
    labelled = stage(G.label_edges(to_label, corpus_ids, broadcast=few_papers), "edges")
    named = {"papers": paper_keys.count(), "abstracts": abstract_keys.count(), "citations": edge_keys.count()}

    # every other paper is the base's row as it is; its degrees, like all degrees, come from the edges written
    untouched = base_papers.select(*G.PAPERS_COLUMNS).join(
        F.broadcast(touched) if few_papers else touched, "corpus_id", "left_anti"
    )
    carried_kept = kept_edges.select(
        "citing",
        "cited",
        F.col("citing").cast("string").alias("citing_raw"),
        F.col("cited").cast("string").alias("cited_raw"),
        F.lit(None).cast("string").alias("source"),
        F.lit(None).cast("string").alias("reason"),
    )
    rejected = [
        I.carried_rejected(base_rejected, paper_keys.select("corpus_id")),
        carried_edges,
        paper_rejects,
        bad_deletes,
        abstract_rejects,
        citation_rejects,
    ]
    metrics = finish(
        spark,
        store,
        path,
        config,
        untouched.unionByName(changed),
        labelled.unionByName(carried_kept),
        rejected,
        few_papers,
    )
    metrics["format"] = "s2ag"
    metrics["input_files"] = {d: sum(v.values()) for d, v in lines_read.items()}
    metrics["from_diff"] = {
        "base": {"snapshot": base.snapshot, "version": base.version},
        "start": diff.start,
        "end": diff.end,
        "steps": [[st.from_release, st.to_release] for st in diff.steps],
        "keys_named": named,
    }
    return metrics
