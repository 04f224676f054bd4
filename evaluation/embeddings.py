"""Embedding files as the benchmark reads them: citeflow's Parquet (an id column and `embedding`) or the reference
evaluators' JSON lines, read into {paper id: vector}."""

from __future__ import annotations

import json
import os
from typing import Any

from citeflow.errors import CiteflowError


def load_embeddings(path: str) -> dict[str, Any]:
    """{paper id (string): vector} from a Parquet file or folder with an id column and `embedding` (float32), or
    from the reference evaluators' JSON lines (`{"paper_id" | "doc_id", "embedding"}`, kept float64 as SciDocs
    reads them)."""
    import numpy as np
    import pyarrow.dataset as ds

    if not os.path.exists(path):
        raise CiteflowError(f"embeddings {path!r} do not exist")
    if path.endswith((".jsonl", ".json")):
        return _load_jsonl_embeddings(path)
    dataset = ds.dataset(path, format="parquet")
    names = dataset.schema.names
    key = next((k for k in ("paper_id", "corpus_id", "id", "doc_id") if k in names), None)
    if key is None or "embedding" not in names:
        raise CiteflowError(
            f"embeddings {path!r} need an id column (paper_id, corpus_id, id) and 'embedding'; found {', '.join(names)}"
        )
    out: dict[str, Any] = {}
    for batch in dataset.to_batches(columns=[key, "embedding"]):
        ids = [str(v) for v in batch.column(key).to_pylist()]
        column = batch.column("embedding")
        width = column.type.list_size if hasattr(column.type, "list_size") and column.type.list_size > 0 else None
        flat = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
        if width is None:
            lengths = np.diff(column.offsets.to_numpy())
            if len(set(lengths.tolist())) > 1:
                raise CiteflowError(f"embeddings {path!r} have vectors of different lengths")
            width = int(lengths[0]) if len(lengths) else 0
        matrix = flat.reshape(len(ids), width)
        out.update(zip(ids, matrix, strict=True))
    if not out:
        raise CiteflowError(f"embeddings {path!r} are empty")
    return out


def _load_jsonl_embeddings(path: str) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {}
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                key = record.get("paper_id", record.get("doc_id", record.get("corpus_id")))
                vector = np.asarray(record["embedding"], dtype=np.float64)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
                raise CiteflowError(f"{path}:{number}: expected {{'paper_id', 'embedding': [numbers]}}") from None
            if key is None:
                raise CiteflowError(f"{path}:{number}: no paper_id or doc_id")
            out[str(key)] = vector
    if not out:
        raise CiteflowError(f"embeddings {path!r} are empty")
    if len({len(v) for v in out.values()}) > 1:
        raise CiteflowError(f"embeddings {path!r} have vectors of different lengths")
    return out
