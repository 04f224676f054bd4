"""Backfilling a release from its diff against building it in full; PBG warm start against a cold start.

    python bench/bench_incremental.py --papers 1000000 --snapshots /tmp/citeflow-snaps --repeat 3 --out bench/results
    python bench/bench_incremental.py --hepth ../shared/data/hepth --pipeline --repeat 1 --out bench/results

Releases: a generated S2AG release R1 (`--papers`, seed 5, one shard per 50k papers) and R2 derived from it
with about `--change` of R1's papers touched (40% added, 20% removed, 40% changed), which ships the diff R1 ->
R2; both kept under `--snapshots` (as `<root>/releases/2024-01-01` and `2024-02-01`) and reused when there.

1. Spark stages. R1 is built once (`citeflow run --until filter_leakage`) into a base artifact root, and two
   untimed runs on a small snapshot have the Spark driver's class archive written and checked
   (bench_stages.py `warm_up`; each step waits for the processes the last one left). Then,
   `--repeat` times and interleaved, each in a fresh root and its own process:
   - incremental: the base root hard-linked into a fresh one, then R2's build_graph from the diff and
     filter_leakage (`citeflow run --snapshot 2024-02-01 --until filter_leakage`);
   - full: R2's build_graph from its shards (`--set build_graph.diffs=off`) and filter_leakage.
   - floor (unless `--no-floor`): the same as incremental, for a release EMPTY (`2024-01-15`) whose shards
     are R1's (hard links) and whose diff from R1 changes nothing (each dataset's manifest lists no file):
     what the diff path costs before any row is merged, its fixed cost.
   Seconds, peak memory of the process tree and load average as bench_stages.py measures them; the report
   gives the medians, the ratio incremental / full (the goal: at most 0.25), the floor's ratio, and
   whether the two builds' tables are equal (order-free digests of papers, citations and degrees of both
   stages, and filter_leakage's benchmark_ids, paper_keys and paper_id_lines, whose paper-ids diff the
   incremental run applies), and whether the empty diff's tables equal R1's.
2. PBG warm start, leak-free: 1% of R2's filtered edges are held out (`citeflow.models.pbg.importer`, seeded); R1's
   embeddings are trained on R1's filtered edges *minus those held-out edges* (full epochs), then R2 is
   trained cold (full epochs) and warm-started from R1's embeddings (`--warm-epochs` of the epochs, PBG
   init_path via models/pbg/warm.py), both on R2's training edges; each scored on the held-out edges
   (evaluation/link_prediction.py: MRR against 1,000 random candidates). Goal: warm MRR within 2% of cold
   with at most 30% of the epochs.
3. Whole pipeline (`--pipeline`). R1 is taken on from section 1's base to the benchmark; then, `--repeat` times,
   R2 is run to the benchmark twice, each in its own process and root: backfilled (R1's root hard-linked, R2's
   build_graph from the diff, `embed_graph.warm_start=auto` and `train_encoder.init_from=previous`) and from
   scratch (a fresh root, `build_graph.diffs=off`, no warm start). The report gives each stage's seconds as the
   run printed them, the whole runs' medians and ratio, PBG's epochs and the encoder's steps of both, the
   benchmark's test cite and co-cite scores of both models and of the untrained one (and the mean of the four:
   goal, the warm-started model within 1 point of the one from scratch at <= 40% of its steps), and the drift
   report `citeflow compare` prints for the backfilled pair.
`--hepth DATA`: the real pair instead of generated releases: arXiv HEP-Th (`../shared/data/hepth`, written by
tests/support/hepth.py under `--snapshots`) up to 1999 (`2000-01-01`) and up to 2001 (`2002-01-01`), the
benchmark's `--queries` queries per task and split taken from the papers the later release adds, so that both
R2 models are scored on citations neither saw (R1 lacks those queries: its filter_leakage is let count them
unmapped).
`--spark-connect`: the runs of R2 (and of the empty release) go through a Spark Connect server the bench
starts (spark/engine/connect_server.py, as `citeflow spark-server` runs it); before the timed runs each path runs once
through it untimed (`first_runs`: the fresh server's JVM compiles the stages' code there, as a long-running
server did on earlier releases), and the server's memory counts in every run's peak. R1's base is built with a
local driver.
Results: OUT/incremental.json and OUT/incremental.md. Timings mean something only on a quiet machine: the
load average before and after each step is in the JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_real_encoder import TASKS, scores  # noqa: E402
from bench_stages import connect_server, measure, warm_up  # noqa: E402

R1, R2 = "2024-01-01", "2024-02-01"  # the generated pair
HEPTH_R1, HEPTH_R2 = "2000-01-01", "2002-01-01"  # arXiv HEP-Th up to 1999 and up to 2001 (tests/support/hepth.py)
EMPTY = "2024-01-15"  # R1's shards again, with a diff from R1 that changes nothing
SEED = 5
GRAPH = ("papers", "citations", "degrees")  # the tables of both stages compared, as their readers read them
TABLES = {"build_graph": GRAPH, "filter_leakage": (*GRAPH, "benchmark_ids", "paper_keys", "paper_id_lines")}


class Pair(NamedTuple):
    """Two releases under `root` (each a folder named by its release id), the later with a diff from the earlier."""

    root: Path
    r1: str
    r2: str


def first_release(root: Path, papers: int) -> Path:
    """`root/releases`, holding R1 (a generated S2AG release of `papers` papers), generated when absent."""
    rel = root / "releases"
    if not (rel / R1 / "generator.json").exists():
        cmd = [sys.executable, "-m", "citeflow.jobs.cli", "generate", "--papers", str(papers), "--seed", str(SEED)]
        measure([*cmd, "--format", "s2ag", "--out", str(rel / R1), "--overwrite"])
    return rel


def releases(root: Path, papers: int, change: float) -> Pair:
    """R1 and R2 under `root/releases`, generated when absent (R2 also when an older generator derived it: its
    diff may lack a dataset, DERIVE_VERSION 4 added paper-ids)."""
    rel = first_release(root, papers)
    from citeflow.synthcorpus.derive import DERIVE_VERSION

    made = rel / R2 / "generator.json"
    if not made.exists() or json.loads(made.read_text()).get("derive_version") != DERIVE_VERSION:
        n = round(change * papers)
        counts = ["--added", str(round(0.4 * n)), "--removed", str(round(0.2 * n)), "--changed", str(round(0.4 * n))]
        cmd = [
            sys.executable,
            "-m",
            "citeflow.jobs.cli",
            "generate",
            "--derive-from",
            str(rel / R1),
            "--out",
            str(rel / R2),
        ]
        measure([*cmd, *counts, "--seed", "1", "--overwrite"])
    return Pair(rel, R1, R2)


def hepth_releases(root: Path, data: str, queries: int) -> Pair:
    """The real pair: every HEP-Th paper up to 1999, then up to 2001, with the benchmark held out of the later
    release (its queries are papers that release adds); written under `root/releases` when absent."""
    from tests.support.hepth import HepthConfig, write_releases

    rel = root / "releases"
    if not (rel / "hepth.json").exists():
        shutil.rmtree(rel, ignore_errors=True)
        write_releases(HepthConfig(out=str(rel), data=data, benchmark="new", queries=queries))
    return Pair(rel, HEPTH_R1, HEPTH_R2)


def empty_release(pair: Pair) -> None:
    """`rel/EMPTY`: R1's corpus, paper-ids and SciDocs files hard-linked, and a diff R1 -> EMPTY of every dataset
    (the corpus's and paper-ids) whose one step lists no update and no delete file. Made again each run."""
    from citeflow import diffs as D

    rel, R1 = pair.root, pair.r1
    target = rel / EMPTY
    shutil.rmtree(target, ignore_errors=True)
    for folder in ("corpus", "paper-ids", "scidocs"):
        shutil.copytree(rel / R1 / folder, target / folder, copy_function=os.link)
    step = {"from_release": R1, "to_release": EMPTY, "update_files": [], "delete_files": []}
    for dataset in (*D.DATASETS, D.PAPER_IDS):
        D.write_manifest(target / "diffs" / R1 / "to" / EMPTY, dataset, R1, EMPTY, [step])


def settings(*overrides: str) -> list[str]:
    """The `citeflow run` arguments every run of the bench takes: the demo profile and `overrides`."""
    return ["--profile", "demo", *(arg for item in overrides for arg in ("--set", item))]


def citeflow_run(rel: Path, release: str, artifacts: Path, *overrides: str, until: str = "filter_leakage") -> list[str]:
    cmd = [sys.executable, "-m", "citeflow.jobs.cli", "run", "--snapshot", release]
    cmd += ["--corpus", str(rel / release / "corpus")]
    cmd += ["--scidocs", str(rel / release / "scidocs"), "--paper-ids", str(rel / release / "paper-ids")]
    return [*cmd, "--artifacts", str(artifacts), "--until", until, *settings(*overrides)]


def manifest(artifacts: Path, release: str, stage: str) -> dict:
    """The manifest of the stage's version of the release in `artifacts` (the latest finished, where a base
    root kept a version of earlier code beside it)."""
    found = []
    for path in (artifacts / release / stage).glob("*/_manifest.json"):
        data = json.loads(path.read_text())
        found.append(data | {"path": str(path.parent)})
    if not found:
        raise SystemExit(f"no {stage} version of {release} in {artifacts}")
    return max(found, key=lambda m: m["finished_at"])


def digests(artifacts: Path, release: str) -> dict:
    from tests.e2e.contents import table_digest

    out = {}
    for stage, tables in TABLES.items():
        m = manifest(artifacts, release, stage)
        out.update({f"{stage}.{t}": table_digest(f"{m['path']}/{t}") for t in tables})
    return out


def stage_seconds(artifacts: Path, release: str) -> dict[str, float]:
    """Each stage's own time (its manifest's `duration_s`: from the stage's start to its commit)."""
    return {stage: manifest(artifacts, release, stage)["duration_s"] for stage in ("build_graph", "filter_leakage")}


def from_diff(artifacts: Path, release: str) -> None:
    """Stop the bench unless the release's build_graph in `artifacts` was built from its diff."""
    if "from_diff" not in manifest(artifacts, release, "build_graph")["metrics"]:
        raise SystemExit(f"the run of {release} did not build from the diff")


def spark_stages(pair: Pair, work: Path, repeat: int, overrides: list[str], floor: bool = True, server=None) -> dict:
    """Section 1 of the module docstring. `server`: a Spark Connect server (spark/engine/connect_server.py `Server`)
    that every run after the base's goes through as its client (`--spark-connect`): each path runs once
    through it untimed first (`first_runs`), and the server's memory counts in each run's peak."""
    rel, R1, R2 = pair
    base = work / "base"
    # every time: a base built by other code has its stale stages built again (filter_leakage's paper_keys,
    # which R2's filter_leakage carries over, came with its stage version 3); a current one is reused
    measure(citeflow_run(rel, R1, base, *overrides))
    beside = None
    if server is not None:
        import psutil

        overrides = [*overrides, f"spark.remote={server.remote}"]
        beside = psutil.Process(server.process.pid)
    warm_up(rel.parent, work, settings(*overrides))
    if floor:
        empty_release(pair)
        base_digests = digests(base, R1)  # what every floor run must equal
    runs: dict[str, list[dict]] = {"incremental": [], "full": []} | ({"floor": []} if floor else {})
    equal, empty_equal = [], []
    first_runs: dict[str, dict] = {}
    for i in range(repeat + (server is not None)):
        first = server is not None and i == 0  # the server's first run of each path: untimed in the medians
        times = {k: [] for k in runs} if first else runs
        inc, full, none = work / f"inc-{i}", work / f"full-{i}", work / f"floor-{i}"
        for folder in (inc, full, none):
            shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(base, inc, copy_function=os.link)
        r = measure(citeflow_run(rel, R2, inc, *overrides), beside)
        r.pop("output")
        times["incremental"].append(r | {"stages": stage_seconds(inc, R2)})
        from_diff(inc, R2)
        if floor:
            shutil.copytree(base, none, copy_function=os.link)
            r = measure(citeflow_run(rel, EMPTY, none, *overrides), beside)
            r.pop("output")
            times["floor"].append(r | {"stages": stage_seconds(none, EMPTY)})
            from_diff(none, EMPTY)
            empty_equal.append(digests(none, EMPTY) == base_digests)
            shutil.rmtree(none)
        r = measure(citeflow_run(rel, R2, full, *overrides, "build_graph.diffs=off"), beside)
        r.pop("output")
        times["full"].append(r | {"stages": stage_seconds(full, R2)})
        if first:
            first_runs = {k: v[0] for k, v in times.items()}
        equal.append(digests(inc, R2) == digests(full, R2))
        keep = manifest(inc, R2, "build_graph")["metrics"]["from_diff"]
        leak = manifest(inc, R2, "filter_leakage")["metrics"]
        keys, lines = leak["paper_keys"], leak["paper_id_lines"]
        if lines["from_diff"] is None:
            raise SystemExit("the incremental run's filter_leakage did not apply the paper-ids diff")
        shutil.rmtree(inc)
        shutil.rmtree(full)
    med = {k: round(statistics.median(r["seconds"] for r in v), 2) for k, v in runs.items()}
    return {
        "runs": runs,
        "median_seconds": med,
        "ratio": round(med["incremental"] / med["full"], 3),
        **(
            {"floor_ratio": round(med["floor"] / med["full"], 3), "empty_diff_equal": all(empty_equal)} if floor else {}
        ),
        "tables_equal": all(equal),
        **({"spark_connect": server.remote, "first_runs": first_runs} if server is not None else {}),
        "from_diff": keep,
        "paper_keys": keys,
        "paper_id_lines": lines,
        "base_artifacts": str(base),
    }


def pbg_warm_start(pair: Pair, base: Path, full: Path, work: Path, args) -> dict:
    """Section 2 of the module docstring; `base` holds R1's filter_leakage, `full` R2's."""
    _, R1, R2 = pair
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from citeflow.evaluation.link_prediction import link_prediction
    from citeflow.models.pbg.importer import import_citations, read_edges
    from citeflow.models.pbg.train import load_embeddings, pbg_config, train_in_subprocess
    from citeflow.models.pbg.warm import pbg_init_scale, write_init

    def train(folder: Path, entities: Path, edges: Path, epochs: int, init: Path | None = None) -> float:
        config = pbg_config(
            entities=str(entities),
            train_edges=str(edges),
            checkpoint=str(folder / "checkpoint"),
            num_partitions=1,
            dimension=args.dim,
            comparator="dot",
            loss_fn="ranking",
            margin=0.15,
            lr=0.1,
            num_epochs=epochs,
            batch_size=10_000,
            num_edge_chunks=1,
            max_norm=1.0,
            workers=args.workers,
            num_uniform_negs=0,
            num_batch_negs=50,
            extra={"init_path": str(init)} if init else {},
        )
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        train_in_subprocess(config, folder / "config.json", folder / "train.log", seed=0)
        return round(time.monotonic() - t0, 1)

    r2_cites = manifest(full, R2, "filter_leakage")["path"] + "/citations"
    r1_cites = manifest(base, R1, "filter_leakage")["path"] + "/citations"
    r2 = work / "pbg-r2"
    shutil.rmtree(r2, ignore_errors=True)
    imported = import_citations(r2_cites, r2, num_partitions=1, holdout=0.01, seed=0)
    names = np.asarray(json.loads((r2 / "entities" / "entity_names_paper_0.json").read_text()), dtype=np.int64)
    lhs, rhs = read_edges(r2 / "edges_holdout", r2 / "entities", 1)
    held = {(int(a), int(b)) for a, b in zip(names[lhs], names[rhs], strict=True)}

    # R1's embeddings, trained without R2's held-out edges (else the warm start would have seen them)
    r1_table = pq.read_table(r1_cites, columns=["citing", "cited"])
    pairs = zip(r1_table["citing"].to_pylist(), r1_table["cited"].to_pylist(), strict=True)
    keep = np.array([(a, b) not in held for a, b in pairs], dtype=bool)
    r1 = work / "pbg-r1"
    shutil.rmtree(r1, ignore_errors=True)
    r1.mkdir(parents=True)
    pq.write_table(r1_table.filter(pa.array(keep)), r1 / "citations.parquet")
    import_citations(r1 / "citations.parquet", r1, num_partitions=1, holdout=0.0, seed=0)
    r1_seconds = train(r1 / "run", r1 / "entities", r1 / "edges_all", args.epochs)
    r1_ids, r1_vectors = load_embeddings(r1 / "run" / "checkpoint", r1 / "entities", 1)

    scored = {}
    cold_seconds = train(r2 / "cold", r2 / "entities", r2 / "edges_train", args.epochs)
    warm_epochs = max(1, math.ceil(args.warm_epochs * args.epochs - 1e-9))
    counts = write_init(r2 / "init", r2 / "entities", 1, r1_ids, r1_vectors, init_scale=pbg_init_scale(), seed=0)
    warm_seconds = train(r2 / "warm", r2 / "entities", r2 / "edges_train", warm_epochs, init=r2 / "init")
    for run in ("cold", "warm"):
        _, vectors = load_embeddings(r2 / run / "checkpoint", r2 / "entities", 1)
        scored[run] = link_prediction(vectors, lhs, rhs, num_negatives=1000, comparator="dot", seed=0)
    mrr_cold, mrr_warm = scored["cold"]["mrr"], scored["warm"]["mrr"]
    return {
        "dimension": args.dim,
        "edges": imported["edges"],
        "held_out_edges": len(held),
        "r1_train_edges": int(keep.sum()),
        "r1_seconds": r1_seconds,
        "cold": {"epochs": args.epochs, "seconds": cold_seconds, **scored["cold"]},
        "warm": {"epochs": warm_epochs, "seconds": warm_seconds, **scored["warm"], **counts},
        "mrr_relative_gap": round((mrr_cold - mrr_warm) / mrr_cold, 4) if mrr_cold else None,
        "epoch_share": round(warm_epochs / args.epochs, 3),
    }


WARM = ("embed_graph.warm_start=auto", "train_encoder.init_from=previous")
STAGE_LINE = re.compile(r"\] (\w+): (?:built|reused from snapshot \S+) in ([\d.]+)s — version ([0-9a-f]+)")


def stage_lines(output: str) -> dict[str, dict]:
    """{stage: {"seconds", "version"}} from `citeflow run`'s report lines (a stage it skipped as up to date is
    absent): each stage's time as the run saw it, its own process's share of the whole."""
    return {m[1]: {"seconds": float(m[2]), "version": m[3]} for m in STAGE_LINE.finditer(output)}


def citation_scores(artifacts: Path, release: str, version: str) -> dict[str, dict[str, float]]:
    """{model: {"<task> <metric>": value}} of a benchmark version's test split, cite and co-cite
    (bench_real_encoder.py `scores`), with the mean of the four as "citation mean", as SciDocs averages its tasks."""
    out: dict[str, dict[str, float]] = {}
    for model, numbers in scores(artifacts, release, version).items():
        test = {f"{t} {m}": numbers[f"test {t} {m}"] for t, m in TASKS if f"test {t} {m}" in numbers}
        if len(test) == len(TASKS):
            test["citation mean"] = round(statistics.fmean(test.values()), 2)
        out[model] = test
    return out


def whole_pipeline(pair: Pair, work: Path, repeat: int, overrides: list[str]) -> dict:
    """Section 3 of the module docstring: R2 to the benchmark, backfilled (from R1's versions, every warm start)
    against built from scratch, stage by stage, with both benchmarks' citation scores and the drift report."""
    rel, R1, R2 = pair
    base = work / "base"  # section 1's R1 (to filter_leakage), taken on to the benchmark here
    first = measure(citeflow_run(rel, R1, base, *overrides, until="benchmark"))
    runs: dict[str, list[dict]] = {"backfill": [], "scratch": []}
    drift_text = ""
    for i in range(repeat):
        back, scratch = work / f"backfill-{i}", work / f"scratch-{i}"
        for folder in (back, scratch):
            shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(base, back, copy_function=os.link)
        for kind, root, extra in (("backfill", back, WARM), ("scratch", scratch, ("build_graph.diffs=off",))):
            r = measure(citeflow_run(rel, R2, root, *overrides, *extra, until="benchmark"))
            stages = stage_lines(r.pop("output"))
            read = ("build_graph", "embed_graph", "train_encoder")
            graph, embed, encoder = (manifest(root, R2, stage)["metrics"] for stage in read)
            runs[kind].append(
                r
                | {
                    "stages": {name: s["seconds"] for name, s in stages.items()},
                    "scores": citation_scores(root, R2, stages["benchmark"]["version"]),
                    "from_diff": "from_diff" in graph,
                    "pbg_epochs": embed["runs"]["mining"]["epochs"],
                    "pbg_warm_start": embed.get("warm_start"),
                    "encoder_steps": encoder["steps"],
                    "encoder_warm_start": encoder["warm_start"],
                }
            )
        if not runs["backfill"][-1]["from_diff"] or runs["backfill"][-1]["encoder_warm_start"] is None:
            raise SystemExit("the backfilled run did not build from the diff with its warm starts")
        compare = [sys.executable, "-m", "citeflow.jobs.cli", "compare", "--snapshot", R1, "--snapshot", R2]
        drift_text = measure([*compare, "--artifacts", str(back)])["output"]
        shutil.rmtree(back)
        shutil.rmtree(scratch)
    med = {k: round(statistics.median(r["seconds"] for r in v), 1) for k, v in runs.items()}
    back, scratch = runs["backfill"][-1], runs["scratch"][-1]
    mean = lambda run: run["scores"].get("trained", {}).get("citation mean")  # noqa: E731
    return {
        "r1_seconds": first["seconds"],
        "runs": runs,
        "median_seconds": med,
        "ratio": round(med["backfill"] / med["scratch"], 3),
        "citation_mean_gap": None if None in (mean(back), mean(scratch)) else round(mean(scratch) - mean(back), 2),
        "step_share": round(back["encoder_steps"] / scratch["encoder_steps"], 3),
        "drift": drift_text.strip(),
    }


def pipeline_report(w: dict, pair: Pair) -> list[str]:
    back, scratch = w["runs"]["backfill"][-1], w["runs"]["scratch"][-1]
    stages = list(scratch["stages"])
    lines = [
        "",
        f"## {pair.r2} to the benchmark: backfilled from {pair.r1} against built from scratch (last run)",
        "",
        "| stage | backfilled s | from scratch s |",
        "|---|---:|---:|",
        *(f"| {s} | {back['stages'].get(s, '-')} | {scratch['stages'][s]} |" for s in stages),
        f"| whole run (process) | {back['seconds']} | {scratch['seconds']} |",
        "",
        f"Median whole-run seconds: backfilled {w['median_seconds']['backfill']}, from scratch "
        f"{w['median_seconds']['scratch']}; ratio **{w['ratio']}**. PBG epochs {back['pbg_epochs']} of "
        f"{scratch['pbg_epochs']}; encoder steps {back['encoder_steps']} of {scratch['encoder_steps']} "
        f"({w['step_share']:.0%}). R1 to the benchmark, once: {w['r1_seconds']} s.",
        "",
        "| model (test split) | cite MAP | cite nDCG | co-cite MAP | co-cite nDCG | citation mean |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, run, model in (
        ("untrained (base)", scratch, "base"),
        ("backfilled, warm-started", back, "trained"),
        ("from scratch", scratch, "trained"),
    ):
        numbers = run["scores"].get(model, {})
        cells = [numbers.get(f"{t} {m}") for t, m in TASKS] + [numbers.get("citation mean")]
        lines.append(f"| {label} | " + " | ".join("-" if v is None else f"{v:.2f}" for v in cells) + " |")
    gap = w["citation_mean_gap"]
    lines += [
        "",
        f"Citation mean, from scratch - warm-started: **{gap if gap is not None else '-'}** points (goal <= 1 at "
        "<= 40% of the steps).",
        "",
        "Drift report (`citeflow compare`) of the backfilled pair:",
        "",
        "```",
        w["drift"],
        "```",
    ]
    return lines


def report(result: dict) -> str:
    s = result["spark"]
    lines = [
        f"# Incremental backfill: {result['releases']}",
        "",
        f"Machine: {result['machine']}; load average before/after each step in incremental.json.",
        "",
        "| build of R2 (build_graph + filter_leakage) | median seconds | each run (build_graph + filter_leakage) |",
        "|---|---|---|",
        *(
            f"| {name} | {s['median_seconds'][kind]} | "
            + ", ".join(
                f"{r['seconds']} ({r['stages']['build_graph']} + {r['stages']['filter_leakage']})"
                for r in s["runs"][kind]
            )
            + " |"
            for kind, name in (
                ("incremental", "from the diff onto R1's build"),
                ("full", "in full from the shards"),
                ("floor", f"floor: an empty diff onto R1's build ({EMPTY})"),
            )
            if kind in s["runs"]
        ),
        "",
        f"Ratio incremental / full: **{s['ratio']}** (goal <= 0.25); tables equal: {s['tables_equal']}; "
        f"filter_leakage's paper keys carried from: {s['paper_keys']['carried_from']}; its paper-ids lines: "
        f"the diff applied to {s['paper_id_lines']['from_diff']['base']} "
        f"({s['paper_id_lines']['from_diff']['keys_named']:,} shas named).",
    ]
    if "spark_connect" in s:
        firsts = ", ".join(f"{kind} {r['seconds']}" for kind, r in s["first_runs"].items())
        lines += [
            "",
            f"R2's runs went through a Spark Connect server ({s['spark_connect']}); its first run of each path, "
            f"untimed in the medians: {firsts} s.",
        ]
    if "floor_ratio" in s:
        lines += [
            "",
            f"Floor / full: **{s['floor_ratio']}**: the diff path's cost when the diff changes nothing; "
            f"its tables equal R1's: {s['empty_diff_equal']}.",
        ]
    if "pbg" in result:
        p = result["pbg"]
        lines += [
            "",
            f"| PBG on R2 ({p['dimension']}-d, {p['edges']:,} edges) | epochs | seconds | MRR | Hits@10 |",
            "|---|---|---|---|---|",
            f"| cold | {p['cold']['epochs']} | {p['cold']['seconds']} | {p['cold']['mrr']:.4f} | "
            f"{p['cold']['hits@10']:.4f} |",
            f"| warm from R1 | {p['warm']['epochs']} | {p['warm']['seconds']} | {p['warm']['mrr']:.4f} | "
            f"{p['warm']['hits@10']:.4f} |",
            "",
            f"MRR gap (cold - warm) / cold: **{p['mrr_relative_gap']:.2%}** (goal <= 2%) at "
            f"{p['epoch_share']:.0%} of the epochs (goal <= 30%); {p['held_out_edges']:,} held-out edges.",
        ]
    if "pipeline" in result:
        lines += pipeline_report(result["pipeline"], Pair(Path(), *result["pair"]))
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", type=int, default=1_000_000)
    parser.add_argument("--change", type=float, default=0.01, help="share of R1's papers added, removed or changed")
    parser.add_argument("--snapshots", default=os.path.join(tempfile.gettempdir(), "citeflow-snaps"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=20, help="PBG epochs of a cold run (SciNCL: 20)")
    parser.add_argument("--warm-epochs", type=float, default=0.3, help="share of the epochs a warm run trains")
    parser.add_argument("--dim", type=int, default=64, help="PBG dimension (SciNCL: 768)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-pbg", action="store_true", help="time the Spark stages only")
    parser.add_argument("--no-floor", action="store_true", help="skip the runs of an empty diff (the fixed cost)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="citeflow setting")
    parser.add_argument(
        "--spark-connect",
        action="store_true",
        help="run R2's stages as clients of a Spark Connect server the bench starts (module docstring)",
    )
    parser.add_argument(
        "--hepth",
        metavar="DATA",
        help="the real pair instead of generated releases: arXiv HEP-Th from DATA (../shared/data/hepth) up to "
        "1999 and up to 2001, its benchmark's queries papers of the later release",
    )
    parser.add_argument("--queries", type=int, default=100, help="--hepth: benchmark queries per task and split")
    parser.add_argument(
        "--pipeline",
        action="store_true",
        help="also time R2 to the benchmark, backfilled with every warm start against from scratch (section 3)",
    )
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from citeflow.threads import describe

    # the load and the thread settings beside every figure: a shared machine changes them all
    print(f"machine: {json.dumps(describe())}", flush=True)

    if args.hepth:
        root = Path(args.snapshots) / f"incremental-hepth-{args.queries}"
        pair = hepth_releases(root, args.hepth, args.queries)
        # R1 lacks the benchmark's queries (papers R2 adds): they count as unmapped there
        overrides = ["filter_leakage.max_unmapped_share=1", *args.overrides]
        described = f"arXiv HEP-Th, {pair.r1} (up to 1999) and {pair.r2} (up to 2001)"
    else:
        root = Path(args.snapshots) / f"incremental-{args.papers}-{args.change}"
        pair = releases(root, args.papers, args.change)
        overrides = args.overrides
        described = f"{args.papers:,} generated papers, {args.change:.1%} changed"
    rel = pair.root
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        server = connect_server(stack, work) if args.spark_connect else None
        spark = spark_stages(pair, work, args.repeat, overrides, floor=not args.no_floor, server=server)
    made = rel / pair.r2 / "generator.json"
    result = {
        "releases": described,
        "pair": [pair.r1, pair.r2],
        "overrides": overrides,
        "machine": f"{platform.node()} ({os.cpu_count()} cores)",
        "diff": json.loads(made.read_text())["diff"]["diffs"] if made.exists() else None,
        "spark": spark,
    }
    if not args.no_pbg:
        full = work / "pbg-full"
        if not (full / pair.r2 / "filter_leakage").exists():
            measure(citeflow_run(rel, pair.r2, full, *overrides, "build_graph.diffs=off"))
        result["pbg"] = pbg_warm_start(pair, work / "base", full, work, args)
    if args.pipeline:
        result["pipeline"] = whole_pipeline(pair, work, args.repeat, overrides)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "incremental.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "incremental.md").write_text(report(result))
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
