"""A Hugging Face model card (`README.md` with YAML front matter) for a model citeflow trained.

    text = model_card(lineage, rows, snapshot="20200705v1")

`lineage`: {stage: manifest JSON} of the stages the model came from (filter_leakage, embed_graph, mine_triplets,
train_encoder; any may be absent), `rows`: the benchmark's score rows of the trained model. Reads and writes nothing
itself: jobs/benchmark.py writes the card beside each benchmark version, `citeflow export-model` puts it next to the
model's weights.
"""

from __future__ import annotations

import json
from typing import Any

from evaluation.scidocs import HEADLINE, average

PBG_KEYS = ("dimension", "comparator", "loss", "margin", "lr", "num_epochs", "batch_size", "num_uniform_negs")
TRAINING_KEYS = (
    "model",
    "pooling",
    "max_length",
    "lr",
    "weight_decay",
    "warmup_fraction",
    "epochs",
    "per_device_batch",
    "gradient_accumulation",
    "max_grad_norm",
    "bitfit",
    "precision",
    "seed",
)


def _yaml_scalar(value: Any) -> str:
    return json.dumps(value)  # JSON scalars are valid YAML scalars, quoted where they must be


def _pick(config: dict, keys) -> dict:
    return {k: config[k] for k in keys if k in config}


def model_card(lineage: dict[str, dict], rows: list[dict[str, Any]], *, snapshot: str, model_name: str = "") -> str:
    train = lineage.get("train_encoder", {})
    triplets = lineage.get("mine_triplets", {})
    leakage = lineage.get("filter_leakage", {})
    graph = lineage.get("embed_graph", {})
    strategy = (triplets.get("metrics") or {}).get("strategy") or (train.get("metrics") or {}).get("strategy", "?")
    mode = (leakage.get("metrics") or {}).get("mode", "?")
    training = (train.get("config") or {}).get("train_encoder", {})
    base = training.get("model", "?")
    name = model_name or f"citeflow-{strategy}-{snapshot}"
    scidocs = [r for r in rows if r["split"] == "test" and r["status"] == "ok" and (r["task"], r["metric"]) in HEADLINE]
    others = [r for r in rows if r["split"] == "test" and r["status"] == "ok" and r["task"].startswith("scirepeval/")]
    mean = average(rows)
    front = [
        "---",
        "library_name: transformers",
        "pipeline_tag: feature-extraction",
        "tags:",
        *[f"- {t}" for t in ("citeflow", strategy, "scientific-documents", "citation-embeddings")],
    ]
    if base not in ("small", "?") and "/" in base and not base.startswith(("/", ".")):
        front.append(f"base_model: {_yaml_scalar(base)}")
    front += ["model-index:", f"- name: {_yaml_scalar(name)}", "  results:"]
    for r in scidocs + others:
        front += [
            "  - task:",
            "      type: feature-extraction",
            "    dataset:",
            f"      name: {_yaml_scalar('SciDocs ' + r['task'] if r in scidocs else r['task'].split('/', 1)[1])}",
            f"      type: {_yaml_scalar('scidocs' if r in scidocs else 'scirepeval')}",
            "      split: test",
            "    metrics:",
            f"    - type: {_yaml_scalar(r['metric'])}",
            f"      value: {round(float(r['value']), 2)}",
        ]
    front.append("---")
    counts = triplets.get("metrics") or {}
    pbg = (graph.get("config") or {}).get("embed_graph", {})
    negatives = counts.get("negatives") or {}
    body = [
        f"# {name}",
        "",
        f"A scientific-paper embedding model trained by citeflow with the **{strategy}** triplet strategy on corpus "
        f"snapshot `{snapshot}`. Input: `title [SEP] abstract`; embedding: the "
        f"{'[CLS] token' if training.get('pooling', 'cls') == 'cls' else training.get('pooling')} of the last "
        "hidden layer.",
        "",
        "```python",
        "from transformers import AutoModel, AutoTokenizer",
        "tokenizer = AutoTokenizer.from_pretrained(PATH)",
        "model = AutoModel.from_pretrained(PATH)",
        "batch = tokenizer([title + tokenizer.sep_token + abstract], truncation=True, max_length=512, "
        "padding=True, return_tensors='pt')",
        "vectors = model(**batch).last_hidden_state[:, 0]",
        "```",
        "",
        "## Training data",
        "",
        f"- snapshot: `{snapshot}`; base model: `{base}`",
        f"- leakage mode: `{mode}` ({'SciDocs papers removed from the graph' if mode == 'exclude' else 'graph kept'})"
        + _leakage_line(leakage.get("metrics") or {}),
        f"- triplets: {counts.get('triplets', '?')} from {counts.get('queries', '?')} queries, "
        f"{negatives.get('hard', '?')} hard and {negatives.get('easy', '?')} easy negatives, "
        f"{counts.get('collisions', '?')} collisions",
        f"- graph embeddings (PyTorch-BigGraph): `{json.dumps(_pick(pbg, PBG_KEYS))}`",
        f"- training recipe: `{json.dumps(_pick(training, TRAINING_KEYS))}`",
        "",
        "## Evaluation",
        "",
        "Scored by citeflow's ports of the SciDocs and SciRepEval evaluators (test split, × 100).",
        "",
        "| task | metric | value |",
        "|---|---|---:|",
        *[f"| {r['task']} | {r['metric']} | {r['value']:.2f} |" for r in scidocs + others],
        "",
        _summary(mean),
        "",
        "## Lineage",
        "",
        *[f"- {stage}: `{m.get('version', '?')}`" for stage, m in lineage.items()],
        "",
    ]
    return "\n".join(front + [""] + body)


def _summary(mean: dict) -> str:
    if mean["partial"] is None:
        return "SciDocs: not scored."
    if mean["value"] is not None:
        return f"SciDocs average of 12: {mean['value']:.2f}."
    return f"SciDocs: {mean['label']} numbers, whose mean ({mean['partial']:.2f}) is not SciDocs' average of 12."


def _leakage_line(metrics: dict) -> str:
    if "benchmark_ids" not in metrics:
        return ""
    return (
        f"; {metrics.get('mapped', '?')} of {metrics['benchmark_ids']} benchmark ids mapped, "
        f"{metrics.get('removed_papers', '?')} papers and {metrics.get('removed_citations', '?')} citations removed"
    )
