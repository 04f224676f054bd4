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

from citeflow import tables
from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import RunConfig, to_dict, versioned_dict
from citeflow.errors import CiteflowError
from citeflow.registry import REGISTRY
from citeflow.stage import execute
from jobs.pipeline import Upstream, entry_point

STAGE = "embed_papers"
STAGE_VERSION = 1
TABLES = list(REGISTRY[STAGE].tables)
# length_grouping: papers are sorted by length within chunks of this many batches
GROUP_BATCHES = 50

log = logging.getLogger("citeflow")

run = entry_point(STAGE)


def check(config: RunConfig) -> None:
    """Papers to embed are given (before the runner trains the model that embeds them)."""
    if not (config.embed_papers.papers or config.scidocs):
        raise CiteflowError("embed_papers needs papers: pass --scidocs or set embed_papers.papers=PATH")


def run_on(config: RunConfig, upstream: Upstream) -> Manifest:
    from citeflow.snapshot import fingerprint_path

    check(config)
    model = upstream["train_encoder"]
    source = config.embed_papers.papers or config.scidocs
    store = ArtifactStore(config.artifacts, config.store)
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
        max_length=settings["max_length"],
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


def embed_to_parquet(
    papers: Iterator[tuple[str, str | None, str | None]],
    model_dir: str,
    out: Path,
    *,
    max_length: int,
    pooling: str,
    batch_size: int,
    normalize: bool = False,
    joined: bool = False,
    length_grouping: bool = True,
    precision: str = "auto",
) -> dict[str, Any]:
    """Embed (id, title, abstract) rows in batches and stream them to `out/part-0.parquet`, in input order.

    `pooling`, `normalize`: `models.encoder.pool`'s, so the vectors are those the encoder was trained to give.
    `joined`: the title field already holds the whole text (SciRepEval's field joining, jobs/benchmark.py).
    `length_grouping`: papers are read in chunks of `GROUP_BATCHES` batches, and each chunk's batches are cut
    from its papers sorted by token count, so a batch pads little; rows are written back in input order.
    `precision`: bf16 autocast on a GPU that supports it (auto) or where asked (bf16, on a CPU too); else fp32.
    """
    import pyarrow as pa

    from citeflow.progress import Progress
    from models.encoder import paper_text

    encoder = _Encoder(model_dir, max_length, pooling, normalize, batch_size, length_grouping, precision)
    tokenizer, dimension = encoder.tokenizer, encoder.dimension
    schema = pa.schema([("paper_id", pa.string()), ("embedding", pa.list_(pa.float32(), dimension))])
    seen: set[str] = set()
    counts = {"papers": 0, "empty_text": 0, "duplicates": 0}

    def flush(writer, ids, texts):
        flat = pa.array(encoder.vectors(texts).reshape(-1), pa.float32())
        writer.write_table(
            pa.table(
                {
                    "paper_id": pa.array(ids, pa.string()),
                    "embedding": pa.FixedSizeListArray.from_arrays(flat, dimension),
                },
                schema=schema,
            )
        )
        counts["papers"] += len(ids)

    chunk = batch_size * GROUP_BATCHES if length_grouping else batch_size
    with (
        tables.table_writer(out, schema) as writer,
        # a bar on a terminal, else a line in the log at least every 30 s
        Progress("embed_papers", total=None, unit="paper", emit=lambda line: log.info("%s", line)) as bar,
    ):
        encoder.on_batch = bar.update  # per batch: a chunk of 50 batches takes longer than a progress line's 30 s
        ids: list[str] = []
        texts: list[str] = []
        for paper_id, title, abstract in papers:
            if paper_id in seen:
                counts["duplicates"] += 1
                continue
            seen.add(paper_id)
            if not (title or "").strip() and not (abstract or "").strip():
                counts["empty_text"] += 1
            ids.append(paper_id)
            texts.append((title or "") if joined else paper_text(title, abstract, tokenizer.sep_token))
            if len(ids) == chunk:
                flush(writer, ids, texts)
                ids, texts = [], []
        if ids:
            flush(writer, ids, texts)
    if counts["papers"] == 0:
        raise CiteflowError("embed_papers: no papers to embed")
    return {
        **counts,
        "dimension": dimension,
        "papers_per_second": round(counts["papers"] / max(encoder.seconds, 1e-9), 1),
        "padding_share": round(1 - encoder.tokens["real"] / max(encoder.tokens["padded"], 1), 4),
        "precision": "bf16" if encoder.bf16 else "fp32",
        "device": "cuda" if encoder.cuda else "cpu",
    }


class _Encoder:
    """A model folder loaded for embedding: texts in, pooled float32 vectors out (in the texts' order), with
    the tokens it padded and the seconds it spent counted."""

    def __init__(self, model_dir, max_length, pooling, normalize, batch_size, length_grouping, precision):
        from citeflow.threads import configure

        configure()  # passive OpenMP waiting, torch's pool from the usable cores (before torch starts OpenMP)

        import torch

        from models.encoder import load

        self.tokenizer, self.model = load(model_dir)
        self.cuda = torch.cuda.is_available()
        self.device = torch.device("cuda" if self.cuda else "cpu")
        self.model.to(self.device).eval()
        self.bf16 = _embeds_in_bf16(precision, self.cuda)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.dimension = self.model.config.hidden_size
        self.max_length, self.pooling, self.normalize = max_length, pooling, normalize
        self.batch_size, self.length_grouping = batch_size, length_grouping
        self.tokens = {"real": 0, "padded": 0}
        self.seconds = 0.0
        self.on_batch = lambda papers: None  # told the papers of each batch embedded

    def vectors(self, texts: list[str]):
        """Vectors of `texts`, embedded in batches of similar length (`length_grouping`) or in order."""
        import time

        import numpy as np

        t0 = time.monotonic()
        encoded = self.tokenizer(texts, truncation=True, max_length=self.max_length)["input_ids"]
        if self.length_grouping:
            order = np.argsort([-len(e) for e in encoded], kind="stable")
        else:
            order = np.arange(len(encoded))
        out = np.empty((len(texts), self.dimension), np.float32)
        for lo in range(0, len(order), self.batch_size):
            part = order[lo : lo + self.batch_size]
            out[part] = self._batch([encoded[i] for i in part])
            self.on_batch(len(part))
        self.seconds += time.monotonic() - t0
        return out

    def _batch(self, encoded: list[list[int]]):
        """Vectors of tokenised papers (one padded batch), float32."""
        import numpy as np
        import torch

        from models.encoder import pool

        longest = max(len(e) for e in encoded)
        ids = torch.full((len(encoded), longest), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(encoded), longest), dtype=torch.long)
        for i, e in enumerate(encoded):
            ids[i, : len(e)] = torch.tensor(e, dtype=torch.long)
            mask[i, : len(e)] = 1
        self.tokens["real"] += int(mask.sum())
        self.tokens["padded"] += mask.numel()
        if self.cuda:
            ids = ids.pin_memory().to(self.device, non_blocking=True)
            mask = mask.pin_memory().to(self.device, non_blocking=True)
        with torch.inference_mode(), torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            hidden = self.model(input_ids=ids, attention_mask=mask).last_hidden_state
            # pooled in fp32: a bf16 mean or norm over hundreds of tokens would lose digits the vectors keep
            return pool(hidden.float(), mask, self.pooling, self.normalize).cpu().numpy().astype(np.float32)


def _embeds_in_bf16(precision: str, cuda: bool) -> bool:
    """bf16 autocast on a GPU that supports it (auto or bf16); on a CPU only where asked (bf16).

    A CPU embeds in fp32 under auto, even one with AVX512-BF16 or AMX where training runs in bf16: embedding is
    a small share of a run's time there, and in fp32 the vectors are the ones sentence-transformers gives for
    the exported model (to 1e-5), which bf16 rounding would not keep."""
    import torch

    if precision == "fp32":
        return False
    if cuda:
        return torch.cuda.is_bf16_supported()
    return precision == "bf16"


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
