"""Scale rehearsal: generated snapshots of growing size through the four stages that grow with the corpus.

    python bench/bench_scale.py --sizes 100000 1000000 5000000 --snapshots /tmp/citeflow-snaps --out bench/results

For each size, a generated snapshot (seed 5, one shard per 50k papers, kept under `--snapshots` and reused,
named as bench_stages.py names them) goes through `citeflow run` one stage at a time, each stage its own
process in a fresh artifact root per size:

1. build_graph (Spark),
2. filter_leakage (Spark),
3. embed_graph: PBG partitioned (`--partitions`, default 4 from 1M papers up, 1 below), `--epochs` epochs
   (default 1: the rehearsal times an epoch, SciNCL trains 20), `--dim` (default 64; SciNCL: 768), no
   held-out run (`embed_graph.link_prediction=false`),
4. mine_triplets at SciNCL's pool and query counts (`mine_triplets.pool_size` 680,967 and
   `num_queries` 136,820; a smaller snapshot pools every eligible paper and draws a tenth of its papers as
   queries), exact FAISS search.

Per stage: wall seconds, peak resident memory of the whole process tree (the Spark JVM and PBG's
workers included, sampled every 0.2 s), the artifact bytes it wrote, the load average before and after,
and the cost per paper (µs) and per edge, so that a reader sees whether cost stays flat as the corpus
grows. Results: OUT/scale.json and OUT/scale.md. Timings mean something only on a quiet machine; the load
average is printed next to every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stages import measure, snapshot  # noqa: E402

STAGES = ("build_graph", "filter_leakage", "embed_graph", "mine_triplets")
# docs/reference.md §4: SciNCL's FAISS pool; its 684K triplets / 5 positives
SCINCL_POOL, SCINCL_QUERIES = 680_967, 136_820


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def stage_settings(n: int, args) -> list[str]:
    partitions = args.partitions or (4 if n >= 1_000_000 else 1)
    return [
        f"embed_graph.num_epochs={args.epochs}",
        f"embed_graph.dimension={args.dim}",
        f"embed_graph.num_partitions={partitions}",
        "embed_graph.link_prediction=false",
        f"mine_triplets.pool_size={SCINCL_POOL}",  # the stage takes every eligible paper where there are fewer
        f"mine_triplets.num_queries={min(SCINCL_QUERIES, n // 10)}",
    ]


def run_size(n: int, args, work: Path) -> dict:
    snap, gen = snapshot(Path(args.snapshots) if args.snapshots else work, n, args.format)
    truth = json.loads((snap / "generator.json").read_text())
    artifacts = work / f"artifacts-{n}"
    shutil.rmtree(artifacts, ignore_errors=True)
    snap_id = f"scale-{n}"
    settings = stage_settings(n, args)
    row: dict = {"papers": n, "format": args.format, "settings": settings, "stages": {}}
    row["corpus_gz_mib"] = round(sum(f.stat().st_size for f in (snap / "corpus").rglob("*.gz")) / 2**20, 1)
    if gen:
        row["generate"] = gen
    for stage in args.stages:
        cmd = [sys.executable, "-m", "citeflow.jobs.cli", "run", "--snapshot", snap_id, "--artifacts", str(artifacts)]
        cmd += ["--corpus", str(snap / "corpus"), "--scidocs", str(snap / "scidocs")]
        cmd += ["--paper-ids", str(snap / "paper-ids"), "--until", stage, "--profile", "full"]
        for item in settings:
            cmd += ["--set", item]
        print(f"{n:,} papers: {stage} ...", flush=True)
        measured = measure(cmd)
        measured.pop("output")
        (manifest,) = (artifacts / snap_id / stage).glob("*/_manifest.json")
        metrics = json.loads(manifest.read_text())["metrics"]
        measured["artifact_mib"] = round(folder_bytes(manifest.parent) / 2**20, 1)
        measured["metrics"] = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str))}
        measured["us_per_paper"] = round(measured["seconds"] / n * 1e6, 2)
        row["stages"][stage] = measured
        print(
            f"  {measured['seconds']} s, peak {measured['peak_rss_gib']} GiB, {measured['us_per_paper']} µs/paper, "
            f"load {measured['load_before']} -> {measured['load_after']}",
            flush=True,
        )
    row["citations"] = truth["counts"]["citations"]
    if not args.keep:
        shutil.rmtree(artifacts, ignore_errors=True)
    return row


def report(result: dict) -> str:
    lines = [
        f"# Scale rehearsal ({result['machine']})",
        "",
        "| papers | citations | stage | seconds | µs / paper | peak RSS GiB | artifact MiB | load before → after |",
        "|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for row in result["sizes"]:
        for stage, m in row["stages"].items():
            lines.append(
                f"| {row['papers']:,} | {row['citations']:,} | {stage} | {m['seconds']} | {m['us_per_paper']} | "
                f"{m['peak_rss_gib']} | {m['artifact_mib']} | {m['load_before']} → {m['load_after']} |"
            )
    lines += [
        "",
        "Settings per size:",
        *(f"- {r['papers']:,}: `{' '.join(r['settings'])}`" for r in result["sizes"]),
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 5_000_000])
    parser.add_argument("--format", choices=["s2orc", "s2ag"], default="s2orc")
    parser.add_argument("--snapshots", default=os.path.join(tempfile.gettempdir(), "citeflow-snaps"))
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    parser.add_argument("--epochs", type=int, default=1, help="PBG epochs (SciNCL: 20)")
    parser.add_argument("--dim", type=int, default=64, help="PBG dimension (SciNCL: 768)")
    parser.add_argument("--partitions", type=int, default=0, help="PBG partitions (0: 4 from 1M papers, else 1)")
    parser.add_argument("--keep", action="store_true", help="keep each size's artifact root")
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from citeflow.threads import describe

    # the load and the thread settings beside every figure: a shared machine changes them all
    print(f"machine: {json.dumps(describe())}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="citeflow-scale-"))
    result = {"machine": f"{platform.node()}, {os.cpu_count()} cores", "sizes": []}
    try:
        for n in args.sizes:
            result["sizes"].append(run_size(n, args, work))
            (out / "scale.json").write_text(json.dumps(result, indent=2) + "\n")
            (out / "scale.md").write_text(report(result))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
