"""PBG import and training throughput: citeflow's importer vs PBG's own TSV importer.

    python bench/bench_pbg.py --citations ARTIFACTS/<snap>/build_graph/<version>/citations \
        --edges 1000000 10000000 --out bench/results

For each edge count N (the first N edges of the citations table):
- citeflow import: `citeflow.models.pbg.importer.import_citations` from Parquet;
- PBG import: `torchbiggraph.converters.import_from_tsv.convert_input_data`
  on the same edges written as TSV (the TSV writing is not timed);
- training: one epoch of PBG (dimension --dim, SciNCL settings otherwise)
  in its own process, reported as edges per second.
Each import runs in its own process; peak memory is sampled over its tree.
Writes OUT/pbg.json and OUT/pbg.md.
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

import pyarrow.fs as pafs
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_stages import measure  # noqa: E402

from citeflow.tables import read_table  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--citations", required=True, help="a citations Parquet folder (citing, cited)")
    parser.add_argument("--edges", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument(
        "--skip-pbg-import-above", type=int, default=20_000_000, help="do not run PBG's importer above this many edges"
    )
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from citeflow.threads import describe

    # the load and the thread settings beside every figure: a shared machine changes them all
    print(f"machine: {json.dumps(describe())}", flush=True)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = read_table(pafs.LocalFileSystem(), args.citations, ["citing", "cited"])
    rows = []
    for n in args.edges:
        n = min(n, table.num_rows)
        work = Path(tempfile.mkdtemp(prefix="citeflow-pbg-bench-"))
        try:
            (work / "parquet").mkdir()
            pq.write_table(table.slice(0, n), work / "parquet" / "part-0.parquet")
            row = {"edges": n}
            ours = measure(
                [
                    sys.executable,
                    "-c",
                    textwrap.dedent(f"""
                from citeflow.models.pbg.importer import import_citations
                import_citations({str(work / "parquet")!r}, {str(work / "ours")!r}, holdout=0.0, seed=0)
            """),
                ]
            )
            ours.pop("output")  # the importer's log, not a figure
            row["citeflow_import"] = ours
            if n <= args.skip_pbg_import_above:
                tsv = work / "edges.tsv"
                with open(tsv, "w") as fh:
                    for batch in table.slice(0, n).to_batches(1 << 20):
                        c, d = batch.column(0).to_pylist(), batch.column(1).to_pylist()
                        fh.write("".join(f"{a}\t{b}\n" for a, b in zip(c, d, strict=True)))
                config = {
                    "entity_path": str(work / "pbg" / "entities"),
                    "edge_paths": [str(work / "pbg" / "edges")],
                    "entities": {"paper": {"num_partitions": 1}},
                    "relations": [{"name": "cites", "lhs": "paper", "rhs": "paper", "operator": "none"}],
                }
                theirs = measure(
                    [
                        sys.executable,
                        "-c",
                        textwrap.dedent(f"""
                    from citeflow.models.pbg import compat; compat.apply()
                    from pathlib import Path
                    from torchbiggraph.converters.import_from_tsv import convert_input_data, parse_config_partial
                    ents, rels, entity_path, edge_paths, dyn = parse_config_partial({config!r})
                    convert_input_data(ents, rels, entity_path, edge_paths, [Path({str(tsv)!r})], 0, 1, None, 1, 1, dyn)
                """),
                    ]
                )
                theirs.pop("output")  # PBG's progress lines and warnings, not a figure
                row["pbg_tsv_import"] = theirs
                row["speedup"] = round(theirs["seconds"] / max(ours["seconds"], 1e-9), 1)
            print(json.dumps({"partial": True, **row}), flush=True)  # imports done; training next
            from citeflow.models.pbg.train import pbg_config, train_in_subprocess

            cfg = pbg_config(
                entities=str(work / "ours" / "entities"),
                train_edges=str(work / "ours" / "edges_all"),  # holdout 0: the importer writes edges_all only
                checkpoint=str(work / "ckpt"),
                num_partitions=1,
                dimension=args.dim,
                comparator="dot",
                loss_fn="ranking",
                margin=0.15,
                lr=0.1,
                num_epochs=1,
                batch_size=10_000,
                num_edge_chunks=10,
                max_norm=1.0,
                workers=os.cpu_count() or 1,
                num_uniform_negs=50,
                num_batch_negs=50,
            )
            t0 = time.monotonic()
            train_in_subprocess(cfg, work / "config.json", work / "train.log", seed=0)
            seconds = time.monotonic() - t0
            row["train_epoch"] = {
                "seconds": round(seconds, 1),
                "edges_per_second": round(n / seconds),
                "dimension": args.dim,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    (out / "pbg.json").write_text(json.dumps({"cpus": os.cpu_count(), "results": rows}, indent=2))
    lines = [
        "| edges | citeflow import | PBG TSV import | speed-up | 1 training epoch (dim) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        pbg = r.get("pbg_tsv_import")
        lines.append(
            f"| {r['edges']:,} | {r['citeflow_import']['seconds']} s, {r['citeflow_import']['peak_rss_gib']} GiB | "
            + (f"{pbg['seconds']} s, {pbg['peak_rss_gib']} GiB | {r['speedup']}x" if pbg else "not run | –")
            + f" | {r['train_epoch']['seconds']} s = {r['train_epoch']['edges_per_second']:,} edges/s ({args.dim}) |"
        )
    (out / "pbg.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
