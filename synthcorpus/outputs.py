"""The files of a generator output folder, shared by generate.py and derive.py: what the folder holds, the checks
before writing into one and the clearing of a previous output, and the writers whose bytes must not vary (gzip
without a name or time, generator.json's layout, Parquet tables, paper_topics.parquet's rows).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from citeflow.errors import CiteflowError
from citeflow.synthcorpus.papers import Papers

# What a generator output folder holds, generator.json (the manifest) first; anything else there is left alone.
OUTPUTS = ("generator.json", "corpus", "paper-ids", "scidocs", "scidocs_truth.jsonl", "paper_topics.parquet")


def write_gzip(path: Path, chunks: Iterable[bytes | memoryview], compresslevel: int) -> int:
    """Write the chunks as one gzip member without a name or time in the header (same lines, same bytes).
    Returns the file's size."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=compresslevel) as gz:
            for chunk in chunks:
                gz.write(chunk)
        return raw.tell()


def write_json(path: Path, content: dict[str, Any]) -> None:
    """generator.json's layout (indented, newline-terminated), flushed to disk before the caller renames it."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(content, fh, indent=2)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())


def write_table(table: pa.Table, path: Path) -> None:
    """A generator table as Parquet (zstd)."""
    pq.write_table(table, path, compression="zstd")


def topics_table(papers: Papers) -> pa.Table:
    """paper_topics.parquet's rows: corpus_id, field (index in FIELDS), subtopic (within the field), community
    (global subtopic index), niche and niche2 (global niche indices: community * niches_per_subtopic + i)."""
    p = papers
    columns = {
        "corpus_id": p.corpus_id,
        "field": p.field,
        "subtopic": p.subtopic,
        "community": p.community,
        "niche": p.niche,
        "niche2": p.niche2,
    }
    return pa.table({name: pa.array(values, pa.int64()) for name, values in columns.items()})


def check_output(out: Path, overwrite: bool, ours: tuple[str, ...]) -> list[str]:
    """The entries of an output folder that may be written; a one-line error when it may not (a file, a
    non-empty folder without --overwrite, or a folder with no generator output in it)."""
    if out.exists() and not out.is_dir():
        raise CiteflowError(f"output path {str(out)!r} exists and is not a folder")
    entries = sorted(e.name for e in out.iterdir()) if out.exists() else []
    if entries and not overwrite:
        raise CiteflowError(
            f"output folder {str(out)!r} is not empty ({', '.join(entries[:5])}); choose an "
            "empty folder or pass --overwrite to replace a previous generator output"
        )
    if entries and not any(name in ours for name in entries):
        raise CiteflowError(
            f"output folder {str(out)!r} holds no generator output (corpus/, paper-ids/, "
            "scidocs/, generator.json); refusing to overwrite it"
        )
    return entries


def clear_output(out: Path, ours: tuple[str, ...]) -> None:
    """Remove a previous generator output (`ours`, generator.json first) from `out`."""
    # The manifest goes first: a half-deleted folder must never look like a complete snapshot.
    (out / "generator.json").unlink(missing_ok=True)
    for name in ours:
        target = out / name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
