"""Stage train_encoder: a Transformer paper encoder trained on the mined triplets (docs/reference.md §5).

Reads: the mine_triplets version of the run (`triplets`, `training_texts`)
and the model: a local Hugging Face directory (`train_encoder.model`, e.g.
SciBERT) or `small`, a small BERT whose WordPiece tokenizer is trained on
the training texts. A folder's sentence-transformers files (`modules.json`,
`1_Pooling/config.json`, `sentence_bert_config.json`) set pooling, max length
and normalisation where `train_encoder.*` leaves them unset (none); the
manifest's `resolved_from` says where each value came from (docs/models.md).
Writes `ARTIFACTS/<snapshot>/train_encoder/<version>/`:
- `model/`: the trained encoder (safetensors, tokenizer, `citeflow.json`, and
  the sentence-transformers files of the pooling it was trained with),
  loadable with plain `transformers.AutoModel.from_pretrained` and with
  `SentenceTransformer(folder)`.
- `base_model/` (small model only): the untrained model it started from.
- `training_log`: step, epoch, loss, lr, grad_norm (before clipping), seconds,
  triplets_per_second, padding_share (of the step's forward passes); and
  `training_loss.png`.

Training runs in its own process (`python -m citeflow.models.training.train`, or
`torchrun` with `train_encoder.nproc` > 1), never inside the caller (an
Airflow task, the CLI). Its working state (tokens, checkpoints) lives in
`ARTIFACTS/<snapshot>/train_encoder/.work/<version>/`, outside the version
folder, so a killed run resumes from its last checkpoint when run again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import RunConfig, TrainEncoderConfig, to_dict, versioned_dict
from citeflow.jobs.pipeline import StageContext, entry_point
from citeflow.jobs.train_launch import gpus, launch, per_device
from citeflow.registry import REGISTRY
from citeflow.stage import execute
from citeflow.tables import write_table

STAGE = "train_encoder"
STAGE_VERSION = 2  # 2: held-out triplets, the eval_curve table, the inference length apart from training's
TABLES = list(REGISTRY[STAGE].tables)
READ_BATCH = 4096

log = logging.getLogger("citeflow")

run = entry_point(STAGE)


def run_on(ctx: StageContext) -> Manifest:
    from citeflow.snapshot import fingerprint_path

    config, triplets, store = ctx.config, ctx.inputs["mine_triplets"], ctx.store
    store.require_local(STAGE)
    cfg = config.train_encoder
    inputs = [triplets.lineage()]
    usage = encoder_usage(cfg)
    # what the run computes with: the resolved values, so that a setting and a model folder saying the same
    # thing make the same version (the folder's files are part of its fingerprint)
    versioned = versioned_dict(cfg) | usage.values
    if versioned["inference_max_length"] == versioned["max_length"]:
        versioned.pop("inference_max_length")  # one length said twice is one version
    if cfg.keep == "best":  # which step is kept depends on when steps are evaluated
        versioned["eval_every"] = cfg.eval_every or cfg.checkpoint_every
    else:  # the evaluations only watch: the model is the same whenever they run
        versioned.pop("eval_every")
    if cfg.eval_val_queries:
        if not config.scidocs:
            from citeflow.errors import CiteflowError

            raise CiteflowError("train_encoder.eval_val_queries scores the SciDocs val split: pass --scidocs DIR")
        inputs.append(fingerprint_path("scidocs", config.scidocs))
    if cfg.model != "small":
        inputs.append(fingerprint_path("model", cfg.model))
        for name in ("vocab_size", "hidden_size", "layers", "heads"):
            versioned.pop(name)
    leakage = ctx.lineage["filter_leakage"]
    warm = None
    if cfg.init_from != "off":
        from citeflow.models.training.warm import find_warm_model, warm_steps

        source = find_warm_model(config, store, triplets, [i for i in inputs if i.get("kind") == "model"])
        steps, of_steps = warm_steps(
            cfg.warm_share, triplets.tables["triplets"]["rows"], cfg.batch_size, cfg.epochs, cfg.max_steps
        )
        warm = {"snapshot": source.snapshot, "version": source.version, "steps": steps, "of_steps": of_steps}
        inputs.append({**source.lineage(), "snapshot": source.snapshot})
        versioned["warm_steps"] = steps
        log.info(
            "%s: warm start from version %s of snapshot %s: %d of %d steps",
            STAGE,
            source.version,
            source.snapshot,
            steps,
            of_steps,
        )
    return execute(
        store=store,
        snapshot=config.snapshot,
        stage=STAGE,
        stage_version=STAGE_VERSION,
        config=versioned,
        resolved_config={
            "train_encoder": to_dict(cfg) | usage.values,
            "resolved_from": usage.sources,
            "strategy": triplets.metrics["strategy"],
            "leakage_mode": leakage.metrics["mode"],
            "warm_start": warm,
        },
        inputs=inputs,
        tables=TABLES,
        build=lambda path: build(config, store, triplets, leakage, Path(path), usage.values, warm),
    )


def encoder_usage(cfg: TrainEncoderConfig):
    """Pooling, normalisation and the two lengths of the run (`citeflow.models.encoder.folder.resolve_usage`): a
    setting, else the model folder's sentence-transformers files, else the fallback. `inference_max_length` is the
    length the trained model embeds at: a setting, else the base model's own (`inference_length`: its
    sentence-transformers max_seq_length, else its tokenizer's limit; the small model: its training length), so a
    shorter training length costs nothing at inference. `max_length` is the training truncation: a setting, else
    the inference length. A setting that overrides the folder is logged, since the folder says how its model is
    meant to be used."""
    from citeflow.models.encoder.folder import folder_usage, inference_length, resolve_usage
    from citeflow.models.encoder.model import check_model_dir

    small = cfg.model == "small"
    said = {} if small else folder_usage(check_model_dir(cfg.model))
    if not small and "max_length" not in said and (limit := inference_length(cfg.model)):
        said["max_length"] = limit  # a plain Hugging Face folder: its tokenizer's limit
    inference = cfg.max_length if small and cfg.inference_max_length is None else cfg.inference_max_length
    usage = resolve_usage({"pooling": cfg.pooling, "max_length": inference, "normalize": cfg.normalize}, said)
    for name, value in usage.overridden.items():
        setting = "inference_max_length" if name == "max_length" else name
        log.warning(
            "%s: train_encoder.%s=%s overrides the model folder's %s (%s)",
            STAGE,
            setting,
            usage.values[name],
            value,
            said[name][1],
        )
    values, sources = dict(usage.values), dict(usage.sources)
    values["inference_max_length"] = values.pop("max_length")
    sources["inference_max_length"] = sources.pop("max_length")
    if cfg.inference_max_length is not None:
        sources["inference_max_length"] = "train_encoder.inference_max_length (--set or profile)"
    elif small:
        sources["inference_max_length"] = "train_encoder.max_length (the small model is built at its training length)"
    values["max_length"] = cfg.max_length or values["inference_max_length"]
    sources["max_length"] = "train_encoder.max_length (--set or profile)" if cfg.max_length else "inference_max_length"
    if values["max_length"] > values["inference_max_length"]:
        log.warning(
            "%s: training at %d tokens, but the model embeds at %d (train_encoder.inference_max_length)",
            STAGE,
            values["max_length"],
            values["inference_max_length"],
        )
    return type(usage)(values, sources, usage.overridden)


def build(
    config: RunConfig,
    store: ArtifactStore,
    triplets: Manifest,
    leakage: Manifest,
    path: Path,
    usage: dict[str, Any],
    warm: dict[str, Any] | None = None,
) -> dict[str, Any]:
    work = path.parent / ".work" / path.name
    work.mkdir(parents=True, exist_ok=True)
    try:
        return _build_in(config, store, triplets, leakage, path, work, usage, warm)
    except BaseException as exc:
        _clean_after_failure(work, exc)
        raise


def _clean_after_failure(work: Path, exc: BaseException) -> None:
    """What a failed run leaves in `work`: its half-written `*.tmp` folders go, always (a rerun writes them
    afresh); after a full disk everything goes, since checkpoints and tokens kept for a resume would keep the
    disk full (a rerun then starts over)."""
    from citeflow.errors import environment_cause

    cause = environment_cause(exc) or ""
    if cause.startswith(("no space left", "the disk quota")):
        shutil.rmtree(work, ignore_errors=True)
        with contextlib.suppress(OSError):
            work.parent.rmdir()  # `.work`, when no other version's work is in it
        log.warning("%s: removed %s to free the disk; a rerun starts the training over", STAGE, work)
        return
    for partial in list(work.glob("*.tmp")) + list(work.glob("checkpoints/*.tmp")):
        shutil.rmtree(partial, ignore_errors=True) if partial.is_dir() else partial.unlink(missing_ok=True)


def _build_in(
    config: RunConfig,
    store: ArtifactStore,
    triplets: Manifest,
    leakage: Manifest,
    path: Path,
    work: Path,
    usage: dict[str, Any],
    warm: dict[str, Any] | None,
) -> dict[str, Any]:
    """`build`'s steps in its work folder `work`."""
    from citeflow.jobs.filter_leakage.audit import audit_no_benchmark_papers
    from citeflow.models.encoder.folder import write_sentence_transformers_files
    from citeflow.models.encoder.model import load
    from citeflow.models.training.token_batches import TokenStore

    cfg = config.train_encoder
    texts_path = triplets.table_path("training_texts")
    text_ids = _column(texts_path, "corpus_id")
    audit = audit_no_benchmark_papers(text_ids, leakage, what="papers of the encoder's training texts")

    model_in = _starting_model(cfg, store, work, texts_path, len(text_ids), usage, warm)
    tokenizer, _ = load(model_in, tokenizer_only=True)
    tokens = work / "tokens"
    if not (tokens / "tokens.npy").is_file():
        log.info("%s: tokenising %s papers (max %d tokens)", STAGE, f"{len(text_ids):,}", usage["max_length"])
        TokenStore.write(tokens, _sorted_batches(texts_path), tokenizer, usage["max_length"], len(text_ids))

    if cfg.eval_val_queries:
        sample = val_sample(Path(config.scidocs), cfg.eval_val_queries, cfg.seed, tokenizer.sep_token)
        (work / "eval_val.json").write_text(json.dumps(sample))
    nproc = cfg.nproc or gpus() or 1
    spec = _train_spec(config, triplets, leakage, path, work, model_in, nproc, usage, warm)
    spec_path = work / "spec.json"
    spec.write(spec_path)
    resumed = _checkpoint_step(work / "checkpoints")
    launch(spec_path, nproc, work / "train.log")

    shutil.move(str(work / "model"), str(path / "model"))
    dimension = json.loads((path / "model" / "config.json").read_text())["hidden_size"]
    write_sentence_transformers_files(
        path / "model",
        pooling=usage["pooling"],
        max_length=usage["inference_max_length"],
        normalize=usage["normalize"],
        dimension=dimension,
    )
    if cfg.model == "small":  # the untrained init, embed_papers' baseline; a warm start keeps its source's
        base = work / "base_model" if warm is None else Path(model_in).parent / "base_model"
        if base.is_dir():
            shutil.copytree(base, path / "base_model")
    rows = [json.loads(line) for line in (work / "log.jsonl").read_text().splitlines() if line.strip()]
    curve = _jsonl(work / "eval.jsonl")
    about = json.loads((path / "model" / "citeflow.json").read_text())
    kept = about.get("kept_step", len(rows))
    _write_training_log(rows, path / "training_log")
    _write_eval_curve(curve, kept, path / "eval_curve")
    _plot(rows, curve, kept, path / "training_loss.png", config.snapshot, triplets.metrics["strategy"])
    shutil.copy(work / "train.log", path / "train.log")
    shutil.rmtree(work, ignore_errors=True)
    with contextlib.suppress(OSError):
        work.parent.rmdir()  # `.work`, when no other version's work is in it: a finished stage leaves none
    counts = {key: about.get(key) for key in ("heldout_triplets", "trained_triplets")}
    metrics = _metrics(cfg, triplets, leakage, audit, rows, nproc, resumed, warm)
    return metrics | counts | _curve_metrics(cfg, curve, kept)


def _starting_model(cfg, store: ArtifactStore, work: Path, texts_path: str, texts: int, usage, warm) -> str:
    """The model training starts from: the previous release's (a warm start, checked to be compatible), a small
    BERT built here with a WordPiece vocabulary of the training texts (made once per version), or `cfg.model`."""
    from citeflow.models.encoder.model import build_small

    if warm is not None:
        from citeflow.models.training.warm import check_compatible

        previous = Path(store.version_path(warm["snapshot"], STAGE, warm["version"])) / "model"
        shape = {"model_type": "bert", "hidden_size": cfg.hidden_size, "num_hidden_layers": cfg.layers}
        shape["num_attention_heads"] = cfg.heads
        check_compatible(previous, None if cfg.model == "small" else Path(cfg.model), shape)
        model_in = str(previous)
    elif cfg.model == "small":
        base = work / "base_model"
        if not (base / "config.json").is_file():
            log.info("%s: training a %d-token WordPiece vocabulary on %s texts", STAGE, cfg.vocab_size, f"{texts:,}")
            shutil.rmtree(base, ignore_errors=True)
            build_small(
                _texts(texts_path),
                base.with_name("base_model.tmp"),
                vocab_size=cfg.vocab_size,
                hidden=cfg.hidden_size,
                layers=cfg.layers,
                heads=cfg.heads,
                intermediate=4 * cfg.hidden_size,
                max_length=usage["max_length"],
                seed=cfg.seed,
            )
            os.replace(base.with_name("base_model.tmp"), base)
        model_in = str(base)
    else:
        model_in = cfg.model
    return model_in


def _train_spec(
    config: RunConfig,
    triplets: Manifest,
    leakage: Manifest,
    path: Path,
    work: Path,
    model_in: str,
    nproc: int,
    usage,
    warm,
):
    """What the trainer process reads (models/training/train.py `TrainSpec`): the settings and where things are."""
    from citeflow.models.training.train import TrainSpec

    cfg = config.train_encoder
    return TrainSpec(
        tokens=str(work / "tokens"),
        triplets=triplets.table_path("triplets"),
        model_in=model_in,
        model_out=str(work / "model"),
        work=str(work / "checkpoints"),
        log=str(work / "log.jsonl"),
        epochs=cfg.epochs,
        max_steps=warm["steps"] if warm else cfg.max_steps,
        batch_size=cfg.batch_size,
        per_device_batch=per_device(cfg.batch_size, cfg.per_device_batch, nproc),
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        warmup_fraction=cfg.warmup_fraction,
        loss=cfg.loss,
        margin=cfg.margin,
        scale=cfg.scale,
        max_grad_norm=cfg.max_grad_norm,
        bitfit=cfg.bitfit,
        bitfit_lr=cfg.bitfit_lr,
        pooling=usage["pooling"],
        normalize=usage["normalize"],
        seed=cfg.seed,
        gradient_checkpointing=cfg.gradient_checkpointing,
        precision=cfg.precision,
        checkpoint_every=cfg.checkpoint_every,
        deterministic=cfg.deterministic,
        length_grouping=cfg.length_grouping,
        length_group_batches=cfg.length_group_batches,
        length_pieces=cfg.length_pieces,
        pad_to_multiple=cfg.pad_to_multiple,
        prefetch=cfg.prefetch,
        # without a GPU the loss is computed by the time it is read: write every step as it ends
        log_every=cfg.log_every if gpus() else 1,
        compile=cfg.compile,
        eval_triplets=cfg.eval_triplets,
        eval_every=cfg.eval_every or cfg.checkpoint_every,
        eval_val=str(work / "eval_val.json") if cfg.eval_val_queries else "",
        eval_log=str(work / "eval.jsonl"),
        eval_max_length=usage["max_length"],
        keep=cfg.keep,
        citeflow={
            "snapshot": config.snapshot,
            "train_encoder_version": path.name,
            "pooling": usage["pooling"],
            "max_length": usage["inference_max_length"],
            "training_max_length": usage["max_length"],
            "normalize": usage["normalize"],
            "strategy": triplets.metrics["strategy"],
            "mine_triplets_version": triplets.version,
            "leakage_mode": leakage.metrics["mode"],
            "base_model": cfg.model,
        },
    )


def _write_training_log(rows: list[dict], folder: Path) -> None:
    """The trainer's step log as the `training_log` table."""
    import pyarrow as pa

    write_table(
        pa.Table.from_pylist(
            rows,
            schema=pa.schema(
                [
                    ("step", pa.int64()),
                    ("epoch", pa.int64()),
                    ("loss", pa.float64()),
                    ("lr", pa.float64()),
                    ("grad_norm", pa.float64()),
                    ("seconds", pa.float64()),
                    ("triplets_per_second", pa.float64()),
                    ("padding_share", pa.float64()),
                ]
            ),
        ),
        folder,
    )


# the eval_curve table: a row per evaluation (step 0: the untrained model); the val columns are null without
# train_encoder.eval_val_queries, the held-out ones without eval_triplets
CURVE_NUMBERS = (
    "heldout_accuracy",
    "heldout_mrr",
    "val_cite_map",
    "val_cite_ndcg",
    "val_cocite_map",
    "val_cocite_ndcg",
    "val_mean",
)


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def _write_eval_curve(curve: list[dict], kept: int, folder: Path) -> None:
    """The evaluations as the `eval_curve` table: step, each number, the score that picks a step under keep=best,
    seconds, and whether the step is the one committed."""
    import pyarrow as pa

    columns = [("step", pa.int64()), *((name, pa.float64()) for name in CURVE_NUMBERS)]
    columns += [("score", pa.float64()), ("seconds", pa.float64()), ("kept", pa.bool_())]
    rows = [{**{name: r.get(name) for name, _ in columns}, "kept": r["step"] == kept} for r in curve]
    write_table(pa.Table.from_pylist(rows, schema=pa.schema(columns)), folder)


def _curve_metrics(cfg, curve: list[dict], kept: int) -> dict[str, Any]:
    """The manifest's record of the evaluations: the step kept and why, and the curve (rounded)."""
    if not curve:
        return {"keep": cfg.keep, "kept_step": kept, "eval_curve": []}
    best = max((r for r in curve if r["step"] > 0), key=lambda r: (r["score"], r["step"]), default=None)
    return {
        "keep": cfg.keep,
        "kept_step": kept,
        "best_step": best["step"] if best else None,
        "eval_seconds": round(sum(r["seconds"] for r in curve), 1),
        "eval_curve": [
            {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items() if k in (*CURVE_NUMBERS, "step")}
            for r in curve
        ],
    }


def val_sample(scidocs: Path, queries: int, seed: int, sep: str) -> dict[str, Any]:
    """{texts: {paper: title `sep` abstract}, qrels: {task: {query: {paper: rel}}}}: `queries` queries per task of
    the SciDocs val split (cite, co-cite; a seeded sample) for the trainer to score while it trains."""
    import numpy as np

    from citeflow.evaluation.scidocs import read_qrels

    qrels: dict[str, dict] = {}
    for task in ("cite", "cocite"):
        path = scidocs / task / "val.qrel"
        if path.is_file():
            judged, _ = read_qrels(path)
            ids = sorted(judged)
            chosen = np.random.default_rng([seed, len(qrels)]).permutation(len(ids))[:queries]
            qrels[task] = {ids[i]: judged[ids[i]] for i in sorted(chosen)}
    needed = {p for judged in qrels.values() for q, candidates in judged.items() for p in (q, *candidates)}
    texts = {}
    for file in sorted(scidocs.glob("paper_metadata_*.json")):
        for key, entry in json.loads(file.read_text()).items():
            paper = str(entry.get("paper_id") or key)
            if paper in needed:
                texts[paper] = ((entry.get("title") or "").strip(), (entry.get("abstract") or "").strip())
    if not qrels:
        log.warning("%s: eval_val_queries is set, but %s has no cite or cocite val split", STAGE, scidocs)
    from citeflow.models.encoder.model import paper_text

    return {"texts": {p: paper_text(t, a, sep) for p, (t, a) in texts.items()}, "qrels": qrels}


def _metrics(cfg, triplets: Manifest, leakage: Manifest, audit, rows: list[dict], nproc: int, resumed, warm):
    """The manifest's metrics: the loss at the start and the end (means of a tenth of the steps each), speed."""
    window = max(1, len(rows) // 10)
    throughput = [r["triplets_per_second"] for r in rows[1:]] or [r["triplets_per_second"] for r in rows]
    return {
        "strategy": triplets.metrics["strategy"],
        "leakage_mode": leakage.metrics["mode"],
        "leakage_audit": audit,
        "model": cfg.model,
        "steps": len(rows),
        "triplets_seen": len(rows) * cfg.batch_size,
        "first_loss": sum(r["loss"] for r in rows[:window]) / window if rows else None,
        "final_loss": sum(r["loss"] for r in rows[-window:]) / window if rows else None,
        "triplets_per_second": round(sum(throughput) / len(throughput), 2) if throughput else None,
        "padding_share": round(sum(r.get("padding_share", 0.0) for r in rows) / len(rows), 4) if rows else None,
        "processes": nproc,
        "device": "cuda" if gpus() else "cpu",
        "precision": _precision(cfg.precision),
        "resumed_from_step": resumed,
        "warm_start": warm,
    }


def _precision(requested: str) -> str:
    """The autocast precision the trainer resolves `requested` to on this host (its own rule)."""
    from citeflow.models.training.step import resolve_precision

    return resolve_precision(requested, gpus() > 0)


def _checkpoint_step(folder: Path) -> int | None:
    from citeflow.models.training.checkpoints import latest_checkpoint

    found = latest_checkpoint(folder) if folder.exists() else None
    return json.loads((found / "state.json").read_text())["step"] if found else None


def _column(table: str, column: str):
    import pyarrow.dataset as ds

    return ds.dataset(table, format="parquet").to_table(columns=[column]).column(column).to_numpy()


def _sorted_batches(texts: str):
    """(ids, titles, abstracts) batches in corpus id order (training_texts is written in id order per part)."""
    import numpy as np
    import pyarrow.dataset as ds

    table = ds.dataset(texts, format="parquet").to_table(columns=["corpus_id"])
    order = np.argsort(table.column("corpus_id").to_numpy(), kind="stable")
    if not (np.diff(order) > 0).all():
        # not sorted on disk: read it sorted (texts are small next to the corpus: ids, title, abstract)
        data = ds.dataset(texts, format="parquet").to_table().take(order)
        for lo in range(0, data.num_rows, READ_BATCH):
            part = data.slice(lo, READ_BATCH)
            yield part["corpus_id"].to_numpy(), part["title"].to_pylist(), part["abstract"].to_pylist()
        return
    for batch in ds.dataset(texts, format="parquet").to_batches(batch_size=READ_BATCH):
        yield (
            batch.column("corpus_id").to_numpy(),
            batch.column("title").to_pylist(),
            batch.column("abstract").to_pylist(),
        )


def _texts(texts: str):
    import pyarrow.dataset as ds

    from citeflow.models.encoder.model import paper_text

    for batch in ds.dataset(texts, format="parquet").to_batches(columns=["title", "abstract"], batch_size=READ_BATCH):
        for title, abstract in zip(
            batch.column("title").to_pylist(), batch.column("abstract").to_pylist(), strict=True
        ):
            yield paper_text(title, abstract, "")


def _plot(rows: list[dict], curve: list[dict], kept: int, target: Path, snapshot: str, strategy: str) -> None:
    """The loss per step and, beside it, the evaluations' curve (held-out MRR and accuracy, the val sample's mean),
    the committed step marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2 if curve else 1, figsize=(11 if curve else 6, 4), dpi=110, squeeze=False)
    ax = axes[0][0]
    steps = np.array([r["step"] for r in rows])
    loss = np.array([r["loss"] for r in rows])
    ax.plot(steps, loss, alpha=0.35, label="per step")
    if len(loss) >= 10:
        k = max(1, len(loss) // 20)
        ax.plot(steps[k - 1 :], np.convolve(loss, np.ones(k) / k, mode="valid"), label=f"mean of {k} steps")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss")
    ax.set_title(f"encoder training ({strategy} triplets) — {snapshot}", fontsize=9)
    ax.legend()
    ax.grid(True, alpha=0.3)
    if curve:
        ax = axes[0][1]
        at = [r["step"] for r in curve]
        for name, label in (("heldout_mrr", "held-out MRR"), ("heldout_accuracy", "held-out triplet accuracy")):
            if any(r.get(name) is not None for r in curve):
                ax.plot(at, [r.get(name) for r in curve], marker="o", label=label)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("held-out triplets")
        if any(r.get("val_mean") is not None for r in curve):
            val = ax.twinx()
            val.plot(at, [r.get("val_mean") for r in curve], marker="s", color="tab:green", label="val mean (×100)")
            val.set_ylabel("val sample: mean of cite, co-cite MAP and nDCG")
            val.legend(loc="lower right", fontsize=7)
        ax.axvline(kept, color="grey", linestyle="--", linewidth=1, label=f"kept: step {kept}")
        ax.set_title("evaluation while training (step 0: untrained)", fontsize=9)
        ax.legend(loc="lower left", fontsize=7)
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(target)
    plt.close(fig)
