"""A folder in the BEIR layout, read as MTEB's retrieval loader reads it (MTEB's SCIDOCS is such a folder).

    from citeflow.evaluation.beir import read_beir, split_ids
    folder = read_beir(Path("scidocs"))      # corpus, queries, qrels of every split under qrels/
    folder.qrels["test"]["q1"]               # {corpus id: score}
    split_ids(Path("scidocs"))               # {split: {"queries", "judged", "corpus"}}: ids only, no text kept

Reads (writes nothing):
- `corpus.jsonl`: one JSON object a line, `_id` (string or number; kept as a string), `title`, `text`;
- `queries.jsonl`: `_id`, `text`;
- `qrels/<split>.tsv`: a header `query-id<TAB>corpus-id<TAB>score`, then one judgment a line; the score an
  integer (a pair judged twice keeps its last score, as a dict built from the lines does).
Blank lines are skipped. Anything else is a one-line `CiteflowError` naming the file and line. Nothing is
filtered here: which queries a retrieval task evaluates is the scorer's business (evaluation/mteb_retrieval.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from citeflow.errors import CiteflowError

QRELS_HEADER = ("query-id", "corpus-id", "score")


@dataclass(frozen=True)
class Corpus:
    """The documents, in file order."""

    ids: tuple[str, ...]
    titles: tuple[str, ...]
    texts: tuple[str, ...]


@dataclass(frozen=True)
class Queries:
    """The queries, in file order."""

    ids: tuple[str, ...]
    texts: tuple[str, ...]


@dataclass(frozen=True)
class BeirFolder:
    root: Path
    corpus: Corpus
    queries: Queries
    # split -> query id -> corpus id -> score, in file order
    qrels: dict[str, dict[str, dict[str, int]]]


def _records(path: Path, fields: tuple[str, ...]) -> Iterator[tuple[int, str, dict]]:
    """(line number, `_id` as a string, object) per non-blank line of a JSON-lines file; each id once."""
    if not path.is_file():
        raise CiteflowError(f"{path} does not exist: a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/")
    seen: set[str] = set()
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CiteflowError(f"{path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(record, dict) or "_id" not in record:
                raise CiteflowError(f"{path}:{number}: expected a JSON object with '_id' ({', '.join(fields)})")
            key = record["_id"]
            if isinstance(key, bool) or not isinstance(key, str | int) or str(key) == "":
                raise CiteflowError(f"{path}:{number}: '_id' must be a non-empty string or integer, not {key!r}")
            for name in fields:
                value = record.get(name)
                if value is not None and not isinstance(value, str):
                    raise CiteflowError(f"{path}:{number}: {name!r} must be a string, not {type(value).__name__}")
            key = str(key)
            if key in seen:
                raise CiteflowError(f"{path}:{number}: '_id' {key!r} appears twice")
            seen.add(key)
            yield number, key, record
    if not seen:
        raise CiteflowError(f"{path} holds no records")


def read_corpus(path: Path) -> Corpus:
    ids, titles, texts = [], [], []
    for _, key, record in _records(path, ("title", "text")):
        ids.append(key)
        titles.append(record.get("title") or "")
        texts.append(record.get("text") or "")
    return Corpus(tuple(ids), tuple(titles), tuple(texts))


def read_queries(path: Path) -> Queries:
    ids, texts = [], []
    for number, key, record in _records(path, ("text",)):
        if "text" not in record:
            raise CiteflowError(f"{path}:{number}: query {key!r} has no 'text'")
        ids.append(key)
        texts.append(record["text"] or "")
    return Queries(tuple(ids), tuple(texts))


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """{query id: {corpus id: score}} of one qrels file."""
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8") as fh:
        header = fh.readline()
        if tuple(header.rstrip("\r\n").split("\t")) != QRELS_HEADER:
            raise CiteflowError(
                f"{path}:1: expected the header 'query-id<TAB>corpus-id<TAB>score', got {header.strip()[:80]!r}"
            )
        for number, line in enumerate(fh, 2):
            if not line.strip():
                continue
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) != 3 or not parts[0] or not parts[1]:
                raise CiteflowError(f"{path}:{number}: expected 'query-id<TAB>corpus-id<TAB>score', got {line!r}")
            try:
                score = float(parts[2])
            except ValueError:
                score = float("nan")
            if not score.is_integer():
                raise CiteflowError(f"{path}:{number}: the score must be an integer, not {parts[2]!r}")
            qrels.setdefault(parts[0], {})[parts[1]] = int(score)
    if not qrels:
        raise CiteflowError(f"{path} holds no judgments")
    return qrels


def qrels_files(root: Path) -> dict[str, Path]:
    """{split: qrels/<split>.tsv} of a BEIR folder, at least one."""
    root = Path(root)
    if not root.is_dir():
        raise CiteflowError(f"BEIR folder {str(root)!r} does not exist")
    files = {p.stem: p for p in sorted((root / "qrels").glob("*.tsv"))}
    if not files:
        raise CiteflowError(
            f"{root} has no qrels/<split>.tsv (a BEIR folder holds corpus.jsonl, queries.jsonl, qrels/)"
        )
    return files


def read_beir(root: Path, splits: tuple[str, ...] | None = None) -> BeirFolder:
    """The corpus, the queries and the qrels of `splits` (default: every qrels/<split>.tsv there is)."""
    root = Path(root)
    files = qrels_files(root)
    wanted = tuple(files) if splits is None else splits
    absent = [s for s in wanted if s not in files]
    if absent:
        raise CiteflowError(f"{root} has no qrels/{absent[0]}.tsv; splits there: {', '.join(files)}")
    return BeirFolder(
        root=root,
        corpus=read_corpus(root / "corpus.jsonl"),
        queries=read_queries(root / "queries.jsonl"),
        qrels={split: read_qrels(files[split]) for split in wanted},
    )


def split_ids(root: Path) -> dict[str, dict[str, frozenset[str]]]:
    """Every id of a BEIR folder, per split: `queries` (query ids judged in qrels/<split>.tsv), `judged` (corpus
    ids judged there) and `corpus` (every corpus.jsonl id: a split's queries search the whole corpus).

    For leakage filtering: every id a benchmark split uses, read with the same checks as `read_beir`."""
    root = Path(root)
    files = qrels_files(root)
    corpus = frozenset(key for _, key, _ in _records(root / "corpus.jsonl", ("title", "text")))
    for _ in _records(root / "queries.jsonl", ("text",)):  # the same checks as read_beir; ids come from qrels
        pass
    out = {}
    for split, path in files.items():
        qrels = read_qrels(path)
        out[split] = {
            "queries": frozenset(qrels),
            "judged": frozenset(doc for judged in qrels.values() for doc in judged),
            "corpus": corpus,
        }
    return out
