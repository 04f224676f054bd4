"""Collect the paper ids the benchmarks use, with the suite, task and split each comes from.

Suites: `scidocs` (the run's `--scidocs` folder), `scirepeval` (SciRepEval task files or folders), `beir`
(BEIR / MTEB-layout folders: the task is the folder's name) and `id_list` (lists the user names). Layouts read
(any subset of the files may be present):

- SciDocs, original layout (docs/reference.md §6): the keys of `paper_metadata_*.json`
  (with their titles), `{mag,mesh}/{train,val,test}.csv` (`pid,class_label`),
  `{cite,cocite,coview,coread}/{val,test}.qrel` (`qid 0 pid rel`), and any
  40-hex id inside `recomm/` files.
- SciDocs, BEIR layout: `qrels/*.tsv` or `qrels_*.tsv` (`query-id corpus-id
  score`), `queries.jsonl` (`_id`, `text` = the title), `corpus.jsonl` (`_id`,
  `title`), `metadata.json` (keys).
- SciRepEval: its task list (`scirepeval_tasks.jsonl`, data in the reference layout: `corpus_id` / `doc_id` /
  `paper_id`) and flat record files (`shared/data/scirepeval/`'s layout), read as evaluation/scirepeval.py
  reads them for scoring (`task_papers`): every paper a task scores, by split. A task whose data is a Hugging
  Face dataset cannot be read offline: it is listed as not audited.
- Extra id lists the user names: one id per
  line (`#` comments allowed), or JSON lines with `corpus_id` / `corpusid` /
  `paper_id` / `id` / `_id`; the task is the file's stem.

Returns a pyarrow table with one row per (id, task, split) and, per id, the
title and external ids the benchmark states (used by the mapping cascade).
Everything here is small (SciDocs: 223,932 ids), so plain Python is enough.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from citeflow.errors import CiteflowError

SHA = re.compile(r"\b[0-9a-f]{40}\b")
RANKING_TASKS = ("cite", "cocite", "coview", "coread")
CLASSIFICATION_TASKS = ("mag", "mesh")
ID_FIELDS = ("corpus_id", "corpusid", "paper_id", "id", "_id")

SUITES = ("scidocs", "scirepeval", "beir", "id_list")
SCHEMA = pa.schema(
    [
        ("suite", pa.string()),
        ("id", pa.string()),
        ("task", pa.string()),
        ("split", pa.string()),
        ("title", pa.string()),
        ("doi", pa.string()),
        ("pubmed_id", pa.string()),
        ("arxiv_id", pa.string()),
    ]
)

# A run of rows from one source: the ids in order, their task, their split (one for all, or one per id) and,
# per id, the title and external ids stated (None: none stated for any). Gathered column by column: a tuple
# per row, transposed at the end, had cost as much again as the reading itself (the 1M-paper bench's SciDocs,
# 825k rows: 4.6 s, now 2.9 s).
Chunk = tuple[list[str], str, str | list[str], list | None, list | None, list | None, list | None]
# the spellings of each external id (DOI, PubMed, arXiv) in SciDocs' metadata, and in BEIR and id-list lines
METADATA_EXT_KEYS = (("doi", "DOI"), ("pubmed_id", "pmid", "PubMed"), ("arxiv_id", "ArXiv"))
LINE_EXT_KEYS = (("doi", "DOI"), ("pubmed_id", "PubMed"), ("arxiv_id", "ArXiv"))
EXT_HOLDERS = ("externalids", "external_ids")


def _open(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def _json_lines(path: Path, required: str | None = None) -> Iterator[dict]:
    """The JSON objects of a JSON-lines file (blank lines skipped); a line that is not one, or that lacks
    `required`, is a one-line error naming it."""
    with _open(path) as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise CiteflowError(f"{path}:{n}: not JSON ({exc.msg})") from None
                if not isinstance(entry, dict):
                    raise CiteflowError(f"{path}:{n}: expected a JSON object")
                if required is not None and required not in entry:
                    raise CiteflowError(f"{path}:{n}: no {required!r} field")
                yield entry


def _ext(entry: dict, *keys: str) -> str | None:
    for key in keys:
        value = entry.get(key)
        if value not in (None, ""):
            return str(value)
    ext = entry.get("externalids") or entry.get("external_ids") or {}
    for key in keys:
        value = ext.get(key) if isinstance(ext, dict) else None
        if value not in (None, ""):
            return str(value)
    return None


def _ext_columns(
    entries: list[dict], spelled: tuple[tuple[str, ...], ...]
) -> tuple[list | None, list | None, list | None]:
    """Per external id (its spellings in `spelled`: DOI, PubMed, arXiv), each entry's `_ext`; None for an id no
    entry can state (no entry has one of its spellings or an external-ids object: SciDocs' own metadata has
    neither)."""
    present = set().union(*map(dict.keys, entries)) if entries else set()
    holders = not present.isdisjoint(EXT_HOLDERS)
    doi, pubmed, arxiv = (
        [_ext(e, *keys) for e in entries] if holders or not present.isdisjoint(keys) else None for keys in spelled
    )
    return doi, pubmed, arxiv


def _metadata_rows(path: Path, task: str) -> Iterator[Chunk]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CiteflowError(f"{path}: not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise CiteflowError(f"{path}: expected an object keyed by paper id")
    entries = [entry if isinstance(entry, dict) else {} for entry in data.values()]
    titles = [entry.get("title") for entry in entries]
    yield (list(data), task, "metadata", titles, *_ext_columns(entries, METADATA_EXT_KEYS))


def read_scidocs_original(root: Path) -> Iterator[Chunk]:
    for path in sorted(root.glob("paper_metadata_*.json")):
        yield from _metadata_rows(path, path.stem.removeprefix("paper_metadata_"))
    for task in CLASSIFICATION_TASKS:
        for path in sorted((root / task).glob("*.csv")):
            with open(path, newline="", encoding="utf-8") as fh:
                reader = csv.DictReader(fh)
                if not reader.fieldnames or "pid" not in reader.fieldnames:
                    raise CiteflowError(f"{path}: expected a header 'pid,class_label'")
                yield ([row["pid"].strip() for row in reader], task, path.stem, None, None, None, None)
    for task in RANKING_TASKS:
        for path in sorted((root / task).glob("*.qrel")):
            ids: list[str] = []
            with open(path, encoding="utf-8") as fh:
                for n, line in enumerate(fh, 1):
                    parts = line.split()
                    if not parts:
                        continue
                    if len(parts) != 4:
                        raise CiteflowError(f"{path}:{n}: expected 'qid 0 pid rel', got {line.strip()!r}")
                    ids += parts[0], parts[2]
            yield (ids, task, path.stem, None, None, None, None)
    recomm = root / "recomm"
    if recomm.is_dir():
        for path in sorted(p for p in recomm.rglob("*") if p.is_file()):
            with _open(path) as fh:
                yield ([sha for line in fh for sha in SHA.findall(line)], "recomm", path.stem, None, None, None, None)


def read_scidocs_beir(root: Path, task: str = "beir") -> Iterator[Chunk]:
    qrels = sorted((root / "qrels").glob("*.tsv")) + sorted(root.glob("qrels*.tsv"))
    for path in qrels:
        split = path.stem.removeprefix("qrels_").removeprefix("qrels-") if path.parent == root else path.stem
        ids: list[str] = []
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                parts = line.rstrip("\n").split("\t")
                if n == 1 and parts[0] in ("query-id", "query_id", "qid"):
                    continue
                if len(parts) < 2:
                    if line.strip():
                        raise CiteflowError(f"{path}:{n}: expected 'query-id<TAB>corpus-id<TAB>score'")
                    continue
                ids += parts[0].strip(), parts[1].strip()
        # each line's query id, then its corpus id
        yield (ids, task, [f"{split}:query", f"{split}:corpus"] * (len(ids) // 2), None, None, None, None)
    for path in sorted(root.glob("queries.jsonl*")):
        entries = list(_json_lines(path, "_id"))
        ids = [str(entry["_id"]) for entry in entries]
        yield (ids, task, "queries", [entry.get("text") or entry.get("title") for entry in entries], None, None, None)
    for path in sorted(root.glob("corpus.jsonl*")):
        entries = list(_json_lines(path, "_id"))
        metas = [meta if isinstance(meta := entry.get("metadata"), dict) else {} for entry in entries]
        titles = [entry.get("title") for entry in entries]
        ids = [str(entry["_id"]) for entry in entries]
        yield (ids, task, "corpus", titles, *_ext_columns(metas, LINE_EXT_KEYS))
    meta_path = root / "metadata.json"
    if meta_path.is_file():
        yield from _metadata_rows(meta_path, task)


def read_id_list(path: Path) -> Iterator[Chunk]:
    task = path.name.split(".")[0]
    if ".jsonl" in path.name or ".json" in path.name:
        ids, splits, entries = [], [], []
        for entry in _json_lines(path):
            value = next((entry[k] for k in ID_FIELDS if entry.get(k) not in (None, "")), None)
            if value is None:
                raise CiteflowError(f"{path}: a line has none of the id fields {', '.join(ID_FIELDS)}")
            ids.append(str(value))
            splits.append(str(entry.get("split") or "list"))
            entries.append(entry)
        titles = [entry.get("title") for entry in entries]
        yield (ids, task, splits, titles, *_ext_columns(entries, LINE_EXT_KEYS))
        return
    with _open(path) as fh:
        ids = [value.split()[0] for value in (line.split("#", 1)[0].strip() for line in fh) if value]
    yield (ids, task, "list", None, None, None, None)


def detect_layout(root: Path) -> str:
    if any(root.glob("paper_metadata_*.json")) or any(
        (root / t).is_dir() for t in CLASSIFICATION_TASKS + RANKING_TASKS
    ):
        return "original"
    if (root / "qrels").is_dir() or any(root.glob("qrels*.tsv")) or (root / "queries.jsonl").is_file():
        return "beir"
    raise CiteflowError(
        f"{root} holds neither the original SciDocs layout (paper_metadata_*.json, mag/, cite/, ...) "
        "nor the BEIR layout (qrels/*.tsv, queries.jsonl, corpus.jsonl)"
    )


def read_scirepeval(path: Path, unaudited: dict[str, str]) -> Iterator[Chunk]:
    """The papers of every SciRepEval task at `path` (a task list, a folder, a flat record file), task by task;
    the tasks that cannot be read here go into `unaudited` (name -> why)."""
    from citeflow.evaluation.scirepeval import discover, task_papers

    try:
        tasks = discover([str(path)])
    except (ValueError, KeyError, json.JSONDecodeError) as exc:
        raise CiteflowError(f"SciRepEval tasks {path}: {exc}") from None
    if not tasks:
        raise CiteflowError(f"{path} holds no SciRepEval task (a scirepeval_tasks.jsonl or flat record files)")
    for task in tasks:
        if task.unavailable:
            unaudited[task.name] = task.unavailable
            continue
        try:
            papers = task_papers(task)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CiteflowError(f"SciRepEval task {task.name!r} ({path}): its data cannot be read: {exc}") from None
        ids = [pid for pid, _, _ in papers]
        yield (ids, task.name, [split for _, split, _ in papers], [t for _, _, t in papers], None, None, None)


def collect(
    scidocs: str | None,
    extra: tuple[str, ...] = (),
    scirepeval: tuple[str, ...] = (),
    beir: tuple[str, ...] = (),
) -> tuple[pa.Table, dict[str, str], dict[str, str]]:
    """All benchmark id rows, the layout each source was read as, and the SciRepEval tasks that could not be
    read (name -> why: their papers are not audited)."""
    chunks: list[tuple[str, Chunk]] = []
    layouts: dict[str, str] = {}
    unaudited: dict[str, str] = {}
    if scidocs:
        root = Path(scidocs)
        if not root.is_dir():
            raise CiteflowError(f"SciDocs folder {scidocs!r} does not exist")
        layout = detect_layout(root)
        layouts[str(root)] = layout
        read = read_scidocs_original(root) if layout == "original" else read_scidocs_beir(root)
        chunks.extend(("scidocs", chunk) for chunk in read)
    for item in scirepeval:
        path = Path(item)
        if not path.exists():
            raise CiteflowError(f"SciRepEval tasks {item!r} do not exist")
        layouts[str(path)] = "scirepeval"
        chunks.extend(("scirepeval", chunk) for chunk in read_scirepeval(path, unaudited))
    for item in beir:
        root = Path(item)
        if not root.is_dir() or not ((root / "corpus.jsonl").is_file() or (root / "queries.jsonl").is_file()):
            raise CiteflowError(f"BEIR folder {item!r} holds no corpus.jsonl or queries.jsonl")
        layouts[str(root)] = "beir"
        chunks.extend(("beir", chunk) for chunk in read_scidocs_beir(root, task=root.resolve().name))
    for item in extra:
        path = Path(item)
        if not path.is_file():
            raise CiteflowError(f"id list {item!r} does not exist")
        layouts[str(path)] = "id_list"
        chunks.extend(("id_list", chunk) for chunk in read_id_list(path))
    tables = [_chunk_table(chunk, suite) for suite, chunk in chunks if chunk[0]]
    if not tables:
        raise CiteflowError(
            "no benchmark ids found: give --scidocs DIR, filter_leakage.scirepeval=PATH, filter_leakage.beir=DIR "
            "or filter_leakage.extra_ids=FILE,..."
        )
    return pa.concat_tables(tables), layouts, unaudited


def _chunk_table(chunk: Chunk, suite: str) -> pa.Table:
    ids, task, split, *stated = chunk
    n = len(ids)
    columns = [pa.repeat(pa.scalar(suite, pa.string()), n), pa.array(ids, pa.string())]
    columns.append(pa.repeat(pa.scalar(task, pa.string()), n))
    columns.append(
        pa.array(split, pa.string()) if isinstance(split, list) else pa.repeat(pa.scalar(split, pa.string()), n)
    )
    columns += [pa.nulls(n, pa.string()) if values is None else pa.array(values, pa.string()) for values in stated]
    return pa.Table.from_arrays(columns, schema=SCHEMA)


# How the child process of `Collecting` says that the user's input is wrong (its message is on stderr).
USER_MISTAKE = 3


class Collecting:
    """`collect(scidocs, extra)` running in a child Python process; `result()` waits for it.

    A stage that starts Spark's JVM reads its benchmark meanwhile. In a thread beside the start the reading
    held the GIL that the start's own Python (the launcher, the Py4J handshake, the session's set-up calls)
    waited for, and both ended later than one after the other; in a process of its own it does not. The child
    sends the table as an Arrow stream; a mistake in the user's input is raised here as the same one-line
    `CiteflowError`.
    """

    def __init__(
        self,
        scidocs: str | None,
        extra: tuple[str, ...] = (),
        scirepeval: tuple[str, ...] = (),
        beir: tuple[str, ...] = (),
    ):
        from citeflow.process import start_guarded

        self._over = False  # answered or stopped: nothing left to stop
        request = json.dumps(
            {"scidocs": scidocs, "extra": list(extra), "scirepeval": list(scirepeval), "beir": list(beir)}
        )
        # under a guard, as every process a stage starts: a killed stage takes it along (citeflow/process.py)
        self._proc = start_guarded(
            [sys.executable, "-m", "citeflow.jobs.filter_leakage.benchmark_ids", request],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def result(self) -> tuple[pa.Table, dict[str, str], dict[str, str]]:
        try:
            out, err = self._proc.communicate()
        except BaseException:  # interrupted while waiting: the child goes too
            self.cancel()
            raise
        self._over = True
        message = err.decode("utf-8", "replace").strip()
        if self._proc.returncode == USER_MISTAKE:
            raise CiteflowError(message)
        if self._proc.returncode != 0:
            code = self._proc.returncode
            raise RuntimeError(f"reading the benchmark ids in a child process failed ({code}): {message}")
        table = pa.ipc.open_stream(out).read_all()
        layouts = json.loads(table.schema.metadata[b"layouts"])
        unaudited = json.loads(table.schema.metadata[b"unaudited"])
        return table.replace_schema_metadata(None), layouts, unaudited

    def cancel(self) -> None:
        """Stop the child and everything under it; nothing once it has answered (its group's id may be
        another's by then)."""
        from citeflow.process import stop_guarded

        if self._over:
            return
        self._over = True
        stop_guarded(self._proc)
        self._proc.communicate()  # closes the pipes


def _child(request: str) -> int:
    """`Collecting`'s child: `collect` as the request (JSON) asks, an Arrow stream on stdout."""
    args = json.loads(request)
    try:
        table, layouts, unaudited = collect(
            args["scidocs"], tuple(args["extra"]), tuple(args["scirepeval"]), tuple(args["beir"])
        )
    except CiteflowError as exc:
        print(exc, file=sys.stderr)
        return USER_MISTAKE
    table = table.replace_schema_metadata({"layouts": json.dumps(layouts), "unaudited": json.dumps(unaudited)})
    with pa.ipc.new_stream(sys.stdout.buffer, table.schema) as writer:
        writer.write_table(table)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
