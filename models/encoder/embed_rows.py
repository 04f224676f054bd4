"""Embed (id, title, abstract) rows with an encoder folder and stream the vectors to Parquet, in input order.

What embed_papers does to the benchmark's papers, and the benchmark to the papers and queries it embeds itself
(SciRepEval's, MTEB's): a library function of the encoder, not a stage, so that neither stage imports the other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from citeflow import tables
from citeflow.errors import CiteflowError

log = logging.getLogger("citeflow")

# length_grouping: papers are sorted by length within chunks of this many batches
GROUP_BATCHES = 50


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

    `pooling`, `normalize`: `citeflow.models.encoder.model.pool`'s, so the vectors are those the encoder was trained to
    give.
    `joined`: the title field already holds the whole text (SciRepEval's field joining, jobs/benchmark.py).
    `length_grouping`: papers are read in chunks of `GROUP_BATCHES` batches, and each chunk's batches are cut
    from its papers sorted by token count, so a batch pads little; rows are written back in input order.
    `precision`: bf16 autocast on a GPU that supports it (auto) or where asked (bf16, on a CPU too); else fp32.
    """
    import pyarrow as pa

    from citeflow.models.encoder.model import paper_text
    from citeflow.progress import Progress

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

        from citeflow.models.encoder.model import load

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
        self.on_batch: Callable[[int], None] = lambda papers: None  # told the papers of each batch embedded

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

        from citeflow.models.encoder.model import pool

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
