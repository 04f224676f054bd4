"""Peak memory of PBG's import and training by partition count, on one host.

    python bench/bench_pbg_memory.py --nodes 3000000 --edges 6000000 --dim 128 --partitions 1 4 8 \
        --workers 2 --out bench/results

Writes a seeded random citation graph (`--nodes` papers, `--edges` uniform citing -> cited pairs; or
`--citations DIR`, a citations Parquet folder), then for each partition count P: citeflow's import
(`citeflow.models.pbg.importer.import_citations`, P partitions, no holdout) and one epoch of PBG training with
SciNCL's settings but `--dim` (`python -m citeflow.models.pbg.train`, `--workers` HOGWILD workers), each in a
process of its own. Memory is sampled every 0.5 s over the whole process tree, two ways:

- `peak_rss_gib`: the sum of resident set sizes. PBG keeps the embeddings in shared memory that every
  HOGWILD worker maps, so this counts them once per process that touched them: an upper bound.
- `peak_pss_gib`: the sum of proportional set sizes (shared pages split among their users): the tree's
  actual share of physical memory.

Next to them `model_gib` is the arithmetic the README's rule uses: what PBG holds of the embedding table
at once (all of it with one partition; two partitions, lhs and rhs, out of P otherwise). Writes
OUT/pbg_memory.json and OUT/pbg_memory.md. Timings on a shared machine mean little; memory does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from bench_stages import spooled  # noqa: E402


def measure_tree(cmd: list[str], every_s: float = 0.5) -> dict[str, float]:
    """Run `cmd`; wall seconds, peak RSS sum and peak PSS sum (GiB) of its process tree."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    t0 = time.monotonic()
    peak_rss = peak_pss = 0
    with spooled(cmd, env=env) as (proc, read_output):  # PBG logs every bucket: a pipe would fill
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            rss = pss = 0
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                tree = []
            for p in tree:
                try:
                    info = p.memory_full_info()
                except psutil.Error:
                    continue
                rss += info.rss
                pss += getattr(info, "pss", info.rss)
            peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
            time.sleep(every_s)
        output = read_output()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed ({proc.returncode}):\n{output[-4000:]}")
    gib = 2**30
    return {
        "seconds": round(time.monotonic() - t0, 1),
        "peak_rss_gib": round(peak_rss / gib, 2),
        "peak_pss_gib": round(peak_pss / gib, 2),
    }


def random_graph(folder: Path, nodes: int, edges: int, seed: int = 0, batch: int = 1 << 22) -> None:
    """Uniform random citations over `nodes` ids (self-citations dropped), in Parquet files of `batch` rows."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for i, start in enumerate(range(0, edges, batch)):
        n = min(batch, edges - start)
        citing, cited = rng.integers(1, nodes + 1, size=n), rng.integers(1, nodes + 1, size=n)
        keep = citing != cited
        pq.write_table(pa.table({"citing": citing[keep], "cited": cited[keep]}), folder / f"part-{i}.parquet")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--citations", help="a citations Parquet folder (citing, cited); default: a random graph")
    parser.add_argument("--nodes", type=int, default=3_000_000)
    parser.add_argument("--edges", type=int, default=6_000_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    # PBG holds every HOGWILD worker but the first back this long on each bucket and edge chunk of the first
    # epoch (its default is 2 s: 1,280 s of sleep at 8 partitions); memory does not depend on it
    parser.add_argument("--hogwild-delay", type=float, default=0.0)
    parser.add_argument("--workdir", default=None, help="scratch folder (default: a temp dir, removed after)")
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from citeflow.threads import describe

    # the load and the thread settings beside every figure: a shared machine changes them all
    print(f"machine: {json.dumps(describe())}", flush=True)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="citeflow-pbg-memory-"))
    rows = []
    try:
        citations = Path(args.citations) if args.citations else work / "citations"
        if not args.citations:
            random_graph(citations, args.nodes, args.edges)
        for parts in args.partitions:
            target = work / f"p{parts}"
            shutil.rmtree(target, ignore_errors=True)
            imported = measure_tree(
                [
                    sys.executable,
                    "-c",
                    textwrap.dedent(f"""
                        import json
                        from citeflow.models.pbg.importer import import_citations
                        r = import_citations({str(citations)!r}, {str(target)!r}, num_partitions={parts}, holdout=0.0)
                        counts = {{k: r[k] for k in ("entities", "edges")}}
                        json.dump(counts, open({str(target / "counts.json")!r}, "w"))
                    """),
                ]
            )
            counts = json.loads((target / "counts.json").read_text())
            from citeflow.models.pbg.train import pbg_config

            config = pbg_config(
                entities=str(target / "entities"),
                train_edges=str(target / "edges_all"),
                checkpoint=str(target / "checkpoint"),
                num_partitions=parts,
                dimension=args.dim,
                comparator="dot",
                loss_fn="ranking",
                margin=0.15,
                lr=0.1,
                num_epochs=args.epochs,
                batch_size=10_000,
                num_edge_chunks=10,
                max_norm=1.0,
                workers=args.workers,
                num_uniform_negs=0,
                num_batch_negs=50,
                extra={"hogwild_delay": args.hogwild_delay},
            )
            (target / "config.json").write_text(json.dumps(config))
            trained = measure_tree([sys.executable, "-m", "citeflow.models.pbg.train", str(target / "config.json")])
            table = counts["entities"] * args.dim * 4
            row = {
                "partitions": parts,
                "entities": counts["entities"],
                "edges": counts["edges"],
                "dimension": args.dim,
                "workers": args.workers,
                "table_gib": round(table / 2**30, 2),
                "model_gib": round(table * (1 if parts == 1 else 2 / parts) / 2**30, 2),
                "import": imported,
                "train": trained,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            shutil.rmtree(target, ignore_errors=True)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()
    (out / "pbg_memory.json").write_text(
        json.dumps({"cpus": os.cpu_count(), "loadavg": load, "results": rows}, indent=2)
    )
    lines = [
        f"{rows[0]['entities']:,} papers, {rows[0]['edges']:,} edges, dimension {args.dim}, {args.workers} workers, "
        f"{args.epochs} epoch(s); load average {load[0]:.1f} on {os.cpu_count()} cores",
        "",
        "| partitions | table held (GiB) | import: peak PSS / RSS (GiB), s | training: peak PSS / RSS (GiB), s |",
        "|---:|---:|---:|---:|",
    ]
    for r in rows:
        i, t = r["import"], r["train"]
        lines.append(
            f"| {r['partitions']} | {r['model_gib']} of {r['table_gib']} | "
            f"{i['peak_pss_gib']} / {i['peak_rss_gib']}, {i['seconds']} | "
            f"{t['peak_pss_gib']} / {t['peak_rss_gib']}, {t['seconds']} |"
        )
    (out / "pbg_memory.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
