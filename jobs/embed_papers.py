"""Stage embed_papers: embeddings of a set of papers by the trained encoder (or its untrained base).

Reads: the train_encoder version of the run and the papers to embed:
`embed_papers.papers` or, by default, the run's `--scidocs` folder. A SciDocs
folder in the original layout gives the papers of `paper_metadata_*.json`; in
the BEIR layout, `corpus.jsonl` and `queries.jsonl`; any other file or folder
is read as JSON lines or Parquet with `id` (or `paper_id`, `_id`,
`corpus_id`), `title` and `abstract` (or `text`).
Writes `ARTIFACTS/<snapshot>/embed_papers/<version>/embeddings`: paper_id
(string), embedding (float32 list), in input order, batched with a progress
bar. Papers with neither title nor abstract are embedded from the empty text
and counted (`empty_text`); ids seen twice are embedded once (`duplicates`).
Batches hold papers of similar length (`length_grouping`; the rows keep the
input order), bf16 autocast on a GPU (on a CPU where asked); the manifest records papers/s (model
time, tokenisation included), the padding share, precision and device.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from citeflow.artifacts import Manifest
from citeflow.config import RunConfig, to_dict, versioned_dict
from citeflow.errors import CiteflowError
from citeflow.jobs.pipeline import StageContext, entry_point
from citeflow.models.encoder.embed_rows import embed_to_parquet
from citeflow.registry import REGISTRY
from citeflow.stage import execute

STAGE = "embed_papers"
STAGE_VERSION = 1
TABLES = list(REGISTRY[STAGE].tables)

log = logging.getLogger("citeflow")

run = entry_point(STAGE)


def check(config: RunConfig) -> None:
    """Papers to embed are given (before the runner trains the model that embeds them)."""
    if not (config.embed_papers.papers or config.scidocs):
        raise CiteflowError("embed_papers needs papers: pass --scidocs or set embed_papers.papers=PATH")


def run_on(ctx: StageContext) -> Manifest:
    from citeflow.snapshot import fingerprint_path

    config = ctx.config
    check(config)
    model = ctx.inputs["train_encoder"]
    source = config.embed_papers.papers or config.scidocs
    store = ctx.store
    store.require_local(STAGE)
    return execute(
        store=store,
        snapshot=config.snapshot,
        stage=STAGE,
        stage_version=STAGE_VERSION,
        config=versioned_dict(config.embed_papers) | {"papers": "(fingerprint)"},
        resolved_config={
            "embed_papers": to_dict(config.embed_papers),
            "source": source,
            "strategy": model.metrics["strategy"],
            "leakage_mode": model.metrics["leakage_mode"],
        },
        inputs=[model.lineage(), fingerprint_path("papers", source)],
        tables=TABLES,
        build=lambda path: build(config, model, source, Path(path)),
    )


def model_folder(model: Manifest, which: str) -> str:
    """The encoder a train_encoder version trained (`trained`) or started from (`base`)."""
    if which == "trained":
        return f"{model.path}/model"
    if Path(f"{model.path}/base_model").is_dir():
        return f"{model.path}/base_model"
    return model.config["train_encoder"]["model"]


def build(config: RunConfig, model: Manifest, source: str, path: Path) -> dict[str, Any]:
    cfg = config.embed_papers
    folder = model_folder(model, cfg.model)
    settings = model.config["train_encoder"]
    stats = embed_to_parquet(
        read_papers(source),
        folder,
        path / "embeddings",
        # the trained model and its base alike at the model's own length, whatever length training truncated to
        max_length=settings.get("inference_max_length") or settings["max_length"],
        pooling=settings["pooling"],
        normalize=settings.get("normalize", False),  # versions trained before the setting never normalised
        batch_size=cfg.batch_size,
        length_grouping=cfg.length_grouping,
        precision=cfg.precision,
    )
    log.info("%s: embedded %s papers with the %s model", STAGE, f"{stats['papers']:,}", cfg.model)
    return {
        **stats,
        "model": cfg.model,
        "model_folder": folder,
        "strategy": model.metrics["strategy"],
        "leakage_mode": model.metrics["leakage_mode"],
        "train_encoder_version": model.version,
    }


def read_papers(source: str) -> Iterator[tuple[str, str | None, str | None]]:
    """(id, title, abstract) from a SciDocs folder (original or BEIR layout), JSON lines or Parquet."""
    root = Path(source)
    if not root.exists():
        raise CiteflowError(f"papers path {source!r} does not exist")
    if root.is_dir():
        metadata = sorted(root.glob("paper_metadata_*.json"))
        if metadata:
            for file in metadata:
                for key, entry in json.loads(file.read_text()).items():
                    yield str(entry.get("paper_id") or key), entry.get("title"), entry.get("abstract")
            return
        beir = [root / "corpus.jsonl", root / "queries.jsonl"]
        if beir[0].is_file():
            for file in beir:
                if file.is_file():
                    yield from _rows(_jsonl(file))
            return
        files = sorted(p for p in root.rglob("*") if p.suffix in (".jsonl", ".parquet") or p.name.endswith(".jsonl.gz"))
        if not files:
            raise CiteflowError(f"{source!r} holds no SciDocs metadata, BEIR corpus, JSON lines or Parquet")
    else:
        files = [root]
    for file in files:
        yield from _rows(_parquet(file) if file.suffix == ".parquet" else _jsonl(file))


def _jsonl(file: Path) -> Iterator[dict]:
    import gzip

    opener = gzip.open if file.name.endswith(".gz") else open
    with opener(file, "rt", encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    raise CiteflowError(f"{file}:{number}: not a JSON line") from None


def _parquet(file: Path) -> Iterator[dict]:
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(file).iter_batches(batch_size=4096):
        yield from batch.to_pylist()


def _rows(records: Iterator[dict]) -> Iterator[tuple[str, str | None, str | None]]:
    for record in records:
        key = next((record[k] for k in ("id", "paper_id", "_id", "corpus_id") if record.get(k) is not None), None)
        if key is None:
            raise CiteflowError(f"a paper record has no id, paper_id, _id or corpus_id: {str(record)[:200]}")
        yield str(key), record.get("title"), record.get("abstract", record.get("text"))
