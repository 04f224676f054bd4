"""A Hugging Face model card (`README.md` with YAML front matter) for a model citeflow trained.

    text = model_card(lineage, rows, snapshot="20200705v1", benchmark_version="...")

`lineage`: {stage: manifest JSON} of the stages the model came from (filter_leakage, embed_graph, mine_triplets,
train_encoder, embed_papers; any may be absent), `rows`: the benchmark's score rows of the trained model. The card
holds a `model-index` block of the test scores, how to load the model (sentence-transformers, transformers) with
the pooling, max length and normalisation it was trained with, the leakage audit and every artifact version it
came from. Reads and writes nothing itself: jobs/benchmark.py writes the card beside each benchmark version,
`citeflow export-model` next to the model's weights.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from citeflow.config import ENCODER_USAGE_FALLBACK
from citeflow.evaluation.paired import NOT_SHOWN, delta_cell
from citeflow.evaluation.scidocs import HEADLINE, average
from citeflow.registry import STAGES

PBG_KEYS = ("dimension", "comparator", "loss", "margin", "lr", "num_epochs", "batch_size", "num_uniform_negs")
TRAINING_KEYS = (
    "model",
    "pooling",
    "max_length",
    "inference_max_length",
    "normalize",
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
# what an audit checked, by the name older versions recorded: each counted papers, not triplets or texts
AUDITED = {
    "training triplets": "papers of the training triplets",
    "training texts": "papers of the training texts",
    "encoder training texts": "papers of the encoder's training texts",
    "graph-embedding entities": "papers of the graph embeddings",
}
# the columns of the leakage audit: per benchmark suite (a filter_leakage manifest's `suites`) or its totals
LEAKAGE_COLUMNS = (
    "benchmark_ids",
    "mapped",
    "unmapped",
    "in_snapshot",
    "removed_papers",
    "removed_citations",
    "one_hop_papers",
    "one_hop_citations",
)


def _yaml_scalar(value: Any) -> str:
    return json.dumps(value)  # JSON scalars are valid YAML scalars, quoted where they must be


def _pick(config: dict, keys) -> dict:
    return {k: config[k] for k in keys if k in config}


def usage_of(training: dict) -> dict[str, Any]:
    """Pooling, max length and normalisation the model is used with, from a train_encoder config: `max_length` is
    the length it embeds at (`inference_max_length`; versions from before the two lengths were apart embedded at
    their training length; older versions still: the fallback's)."""
    usage = {name: v if training.get(name) is None else training[name] for name, v in ENCODER_USAGE_FALLBACK.items()}
    if training.get("inference_max_length"):
        usage["max_length"] = training["inference_max_length"]
    return usage


def model_card(
    lineage: dict[str, dict],
    rows: list[dict[str, Any]],
    *,
    snapshot: str,
    model_name: str = "",
    benchmark_version: str = "",
    model_path: str = "",
    model_config: dict[str, Any] | None = None,
    papers: list[tuple[str, str]] | None = None,
) -> str:
    """The model card (Markdown, the README.md of `citeflow export-model`) of a model with this `lineage`
    (manifests by stage) and these score `rows`. Its examples load `model_path` and embed `papers` ((title,
    abstract) pairs of the release), so they run as printed; `model_config` (the model's config.json) names
    the base model's shape. It is one document written in its reading order, section by section, which is why
    it is long; the tables inside it are helpers of their own."""
    train = lineage.get("train_encoder", {})
    triplets = lineage.get("mine_triplets", {})
    leakage = lineage.get("filter_leakage", {})
    graph = lineage.get("embed_graph", {})
    strategy = (triplets.get("metrics") or {}).get("strategy") or (train.get("metrics") or {}).get("strategy", "?")
    mode = (leakage.get("metrics") or {}).get("mode", "?")
    training = (train.get("config") or {}).get("train_encoder", {})
    usage = usage_of(training)
    base = training.get("model", "?")
    name = model_name or f"citeflow-{strategy}-{snapshot}"
    scidocs = [r for r in rows if r["split"] == "test" and r["status"] == "ok" and (r["task"], r["metric"]) in HEADLINE]
    others = [r for r in rows if r["split"] == "test" and r["status"] == "ok" and r["task"].startswith("scirepeval/")]
    mean = average(rows)
    front = [
        "---",
        # the sentence-transformers layout carries the pooling; a bare transformers load would not
        "library_name: sentence-transformers",
        "pipeline_tag: feature-extraction",
        "tags:",
        *[
            f"- {t}"
            for t in (
                "sentence-transformers",
                "transformers",
                "feature-extraction",
                "citeflow",
                strategy,
                "scientific-documents",
                "citation-embeddings",
            )
        ],
    ]
    if hub_id(base):
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
    pooled = POOLED[usage["pooling"]][0]
    body = [
        f"# {name}",
        "",
        f"A scientific-paper embedding model trained by citeflow with the **{strategy}** triplet strategy on corpus "
        f"release `{snapshot}`. Input: `title [SEP] abstract`, at most {usage['max_length']} tokens"
        + _trained_length(training, usage)
        + f"; embedding: the {pooled} of the last hidden layer"
        + f"{', scaled to unit length' if usage['normalize'] else ''}.",
        "",
        "## Usage",
        "",
        *_usage_snippets(usage, model_path or "PATH", papers or [("A title", "An abstract.")]),
        "",
        "## Training data",
        "",
        f"- release (snapshot): `{snapshot}`",
        f"- base model: {describe_base(training, model_config or {})}",
        f"- leakage mode: `{mode}` ({'SciDocs papers removed from the graph' if mode == 'exclude' else 'graph kept'})"
        + _leakage_line(leakage.get("metrics") or {}),
        f"- triplets: {_count(counts.get('triplets'))} (query, positive, negative) from "
        f"{_count(counts.get('queries'))} queries, over {_count(counts.get('papers_used'))} papers; "
        f"{_count(negatives.get('hard'))} hard and {_count(negatives.get('easy'))} easy negatives, "
        f"{_count(counts.get('collisions'))} collisions",
        f"- graph embeddings (PyTorch-BigGraph): `{json.dumps(_pick(pbg, PBG_KEYS))}`",
        f"- training recipe: `{json.dumps(_pick(_recipe(training, usage), TRAINING_KEYS))}`",
        "",
        "## Evaluation",
        "",
        "Scored by citeflow's ports of the SciDocs and SciRepEval evaluators (test split, × 100). Δ: the change over "
        "the untrained base model on the same queries (papers, clicks), with its 95% paired bootstrap interval; "
        f"{NOT_SHOWN}: the interval holds 0, so the change is not shown by these queries.",
        "",
        "| task | metric | value | Δ over the base [95% interval] |",
        "|---|---|---:|---:|",
        *[f"| {r['task']} | {r['metric']} | {r['value']:.2f} | {_gain_cell(r)} |" for r in scidocs + others],
        "",
        _summary(mean) + _average_gain(rows),
        "",
        "## Leakage audit",
        "",
        *_leakage_audit(lineage),
        "",
        "## Lineage",
        "",
        *_lineage(lineage, snapshot, benchmark_version),
        "",
    ]
    return "\n".join(front + [""] + body)


def _trained_length(training: dict[str, Any], usage: dict[str, Any]) -> str:
    """' (trained on the first 128)' where training truncated papers shorter than the model embeds them."""
    trained = training.get("max_length")
    return f" (trained on the first {trained})" if isinstance(trained, int) and trained < usage["max_length"] else ""


def _recipe(training: dict[str, Any], usage: dict[str, Any]) -> dict[str, Any]:
    """The training settings the card lists: the training length as `max_length`, the length the model embeds at
    as `inference_max_length`."""
    lengths = {
        "max_length": training.get("max_length") or usage["max_length"],
        "inference_max_length": usage["max_length"],
    }
    return {**training, "pooling": usage["pooling"], "normalize": usage["normalize"], **lengths}


def _gain_cell(row: dict[str, Any]) -> str:
    """The stored change of a trained row over its base (the benchmark stage's `delta`, `delta_low`,
    `delta_high`) as every report prints it."""
    return delta_cell(row.get("delta"), row.get("delta_low"), row.get("delta_high"))


def _average_gain(rows: list[dict[str, Any]]) -> str:
    """' Over its untrained base: +d [low, high].' of the average row's stored change, or nothing."""
    row = next((r for r in rows if r["task"] == "average" and r["split"] == "test"), None)
    if row is None or row.get("delta") is None or row.get("delta_low") is None:
        return ""
    return f" Over its untrained base: {_gain_cell(row)} (95% paired bootstrap interval)."


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def hub_id(base: str) -> bool:
    """Whether train_encoder.model names a Hub model (`org/name`), not `small` or a local folder."""
    return base not in ("small", "?") and base.count("/") == 1 and not base.startswith(("/", ".", "~"))


def describe_base(training: dict[str, Any], model_config: dict[str, Any]) -> str:
    """What the model started from, in words: `small` is no pretrained model at all; a folder is named by its
    architecture (from the trained model's config.json, which keeps the base's shape) and its own name."""
    layers, hidden = model_config.get("num_hidden_layers"), model_config.get("hidden_size")
    vocab = model_config.get("vocab_size")
    shape = f"{layers} layers, hidden size {hidden}, {vocab:,}-token vocabulary" if layers and vocab else ""
    base = training.get("model", "?")
    if base == "small":
        return (
            "none: a small BERT initialised at random and trained from scratch by citeflow"
            + (f" ({shape})" if shape else "")
            + ", the demo profile's stand-in for SciBERT"
        )
    kind = model_config.get("model_type") or "Transformer"
    if hub_id(base):
        return f"`{base}` (Hugging Face Hub)" + (f", a {kind} of {shape}" if shape else "")
    # the folder's last two names only: a card is published, the machine's paths are not
    where = "/".join(Path(base).parts[-2:])
    return f"a pretrained {kind}" + (f" of {shape}" if shape else "") + f", from a local folder `.../{where}`"


# Each pooling (citeflow.models.encoder.model.POOLINGS) as the card says it: in words, and as plain transformers code.
POOLED: dict[str, tuple[str, tuple[str, ...]]] = {
    "cls": ("[CLS] token", ("vectors = hidden[:, 0]  # the [CLS] token",)),
    "mean": (
        "mean of the tokens",
        (
            "mask = batch['attention_mask'].unsqueeze(-1).to(hidden.dtype)",
            "vectors = (hidden * mask).sum(1) / mask.sum(1)  # the mean of the tokens",
        ),
    ),
}


def _usage_snippets(usage: dict[str, Any], path: str, papers: list[tuple[str, str]]) -> list[str]:
    """Code that embeds two papers as citeflow did, runnable as printed: sentence-transformers (whose files here
    hold the pooling) and plain transformers (which needs it spelled out). Each block stands alone."""
    pooled = list(POOLED[usage["pooling"]][1])
    if usage["normalize"]:
        pooled.append("vectors = torch.nn.functional.normalize(vectors, dim=-1)")
    listed = [
        "papers = [  # (title, abstract): two papers of the training release",
        *[f"    ({title!r}, {abstract!r})," for title, abstract in papers],
        "]",
    ]
    return [
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "",
        f"model = SentenceTransformer({path!r})",
        *listed,
        "sep = model.tokenizer.sep_token  # citeflow's input: title [SEP] abstract",
        "vectors = model.encode([f'{title} {sep} {abstract}' for title, abstract in papers])",
        "print(vectors.shape)",
        "```",
        "",
        "```python",
        "import torch",
        "from transformers import AutoModel, AutoTokenizer",
        "",
        f"tokenizer = AutoTokenizer.from_pretrained({path!r})",
        f"model = AutoModel.from_pretrained({path!r})  # its pooler, if reported missing, is not part of the embedding",
        *listed,
        "texts = [f'{title} {tokenizer.sep_token} {abstract}' for title, abstract in papers]",
        f"batch = tokenizer(texts, truncation=True, max_length={usage['max_length']}, padding=True, "
        "return_tensors='pt')",
        "with torch.inference_mode():",
        "    hidden = model(**batch).last_hidden_state",
        *pooled,
        "print(vectors.shape)",
        "```",
    ]


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
        f"; {_count(metrics.get('mapped'))} of {_count(metrics['benchmark_ids'])} benchmark ids mapped, "
        f"{_count(metrics.get('removed_papers'))} papers and {_count(metrics.get('removed_citations'))} citations "
        "removed"
    )


def _suite_entries(metrics: dict) -> list[dict[str, Any]]:
    """One row per benchmark suite of a filter_leakage manifest (`suites`: suite -> its totals), then `all`; a
    version from before the suites: its totals as one `all` row."""
    suites = metrics.get("suites")
    if not isinstance(suites, dict) or not suites:
        return [{"suite": "all", **metrics}]
    return [
        {
            "suite": name,
            "benchmark_ids": row.get("total"),
            "mapped": row.get("mapped"),
            "unmapped": row.get("unmapped"),
            "in_snapshot": row.get("in_snapshot"),
            "removed_papers": row.get("removed_papers"),
            "removed_citations": row.get("removed_edges"),
            **(
                {"one_hop_papers": row["one_hop_papers"], "one_hop_citations": row["one_hop_edges"]}
                if metrics.get("strict")
                else {}
            ),
        }
        for name, row in suites.items()
    ]


def _leakage_audit(lineage: dict[str, dict]) -> list[str]:
    """filter_leakage's counts (per benchmark suite where its manifest has `suites`, else its totals) and each
    later stage's check that its training data holds no benchmark paper."""
    leakage = lineage.get("filter_leakage", {})
    metrics = leakage.get("metrics") or {}
    lines = []
    if metrics:
        lines.append(f"filter_leakage `{leakage.get('version', '?')}`, mode `{metrics.get('mode', '?')}`:")
        lines.append("")
        entries = _suite_entries(metrics)
        columns = [c for c in LEAKAGE_COLUMNS if any(c in entry for entry in entries)]
        lines += [
            "| suite | " + " | ".join(c.replace("_", " ") for c in columns) + " |",
            "|---|" + "---:|" * len(columns),
            *[
                f"| {entry.get('suite', entry.get('name', '?'))} | "
                + " | ".join(
                    _count(entry[c]) if isinstance(entry.get(c), int) else str(entry.get(c, "")) for c in columns
                )
                + " |"
                for entry in entries
            ],
        ]
    checks = []
    for stage in STAGES:  # the stages that audit their training data record a leakage_audit
        audit = (lineage.get(stage, {}).get("metrics") or {}).get("leakage_audit")
        checks += [(stage, a) for a in (audit if isinstance(audit, list) else [audit] if audit else [])]
    if checks:
        lines += ["", "Benchmark papers found in the training data (checked against filter_leakage's list):", ""]
        lines += [
            f"- {stage}: {_count(a.get('benchmark_hits'))} benchmark papers among {_count(a.get('checked'))} "
            f"{AUDITED.get(a.get('what', '?'), a.get('what', '?'))}"
            for stage, a in checks
        ]
    return lines or ["No filter_leakage version in the lineage."]


def _lineage(lineage: dict[str, dict], snapshot: str, benchmark_version: str) -> list[str]:
    """The release and every artifact version the model came from, in pipeline order, each with the
    fingerprints of the inputs it read from outside the artifact root (corpus, SciDocs, base model)."""
    lines = [f"- release (snapshot): `{snapshot}`"]
    order = {stage: i for i, stage in enumerate(STAGES)}
    for stage, manifest in sorted(lineage.items(), key=lambda item: order.get(item[0], len(order))):
        outside = [
            f"{i.get('kind')} `{str(i.get('fingerprint', '?'))[:16]}`"
            for i in manifest.get("inputs") or []
            if "stage" not in i and i.get("kind")
        ]
        lines.append(f"- {stage}: `{manifest.get('version', '?')}`" + (f" ({', '.join(outside)})" if outside else ""))
    if benchmark_version:
        lines.append(f"- benchmark: `{benchmark_version}`")
    return lines
