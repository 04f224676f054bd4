"""Read committed versions as a user reads them: with pyarrow, pandas and DuckDB, never through citeflow.

`assert_tables_read_whole(root)` opens every committed version under an artifact root by its `_manifest.json`
(plain JSON) and reads each of its tables with three standard readers; `training_ids(root)` collects the corpus
ids of every table a model is trained on, so a test can check them against the benchmark's own truth.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.dataset as ds

# The tables whose papers a model learns from, and their corpus-id columns.
TRAINING_TABLES = {
    ("filter_leakage", "papers"): ("corpus_id",),
    ("filter_leakage", "citations"): ("citing", "cited"),
    ("embed_graph", "paper_embeddings"): ("corpus_id",),
    ("mine_triplets", "triplets"): ("query_id", "positive_id", "negative_id"),
    ("mine_triplets", "training_texts"): ("corpus_id",),
}


def manifests(root: Path) -> Iterator[dict]:
    """Every committed manifest under an artifact root (versions being built or moved aside have none)."""
    for path in sorted(Path(root).glob("*/*/*/_manifest.json")):
        if not path.parent.parent.name.startswith("."):
            yield {**json.loads(path.read_text()), "path": str(path.parent)}


def rows_by_reader(folder: Path) -> dict[str, int]:
    """The rows of a table folder as pyarrow's datasets, pandas and DuckDB (two globs) each read it."""
    con = duckdb.connect()
    duck = lambda pattern: con.sql(f"select count(*) from read_parquet('{pattern}')").fetchall()[0][0]  # noqa: E731
    return {
        "pyarrow.dataset": ds.dataset(folder, format="parquet").count_rows(),
        "pandas.read_parquet": len(pd.read_parquet(folder)),
        "duckdb folder/*": duck(f"{folder}/*"),
        "duckdb folder/**/*.parquet": duck(f"{folder}/**/*.parquet"),
    }


def assert_tables_read_whole(root: Path) -> int:
    """Every table of every committed version under `root` reads, with each reader, exactly the rows its
    manifest counts; the number of tables read."""
    read = 0
    for manifest in manifests(root):
        for name, stats in manifest["tables"].items():
            folder = Path(manifest["path"]) / stats.get("path", name)
            got = rows_by_reader(folder)
            want = {reader: stats["rows"] for reader in got}
            assert got == want, f"{manifest['stage']} {manifest['version']} {name}: {got}, manifest {stats['rows']}"
            read += 1
    return read


def training_ids(root: Path) -> dict[str, set[int]]:
    """`stage/version/table` -> the corpus ids in each training table under `root` (DuckDB reads them), and the
    entity names of PBG's entity files in embed_graph's versions (`pbg/entities/entity_names_*.json`)."""
    con = duckdb.connect()
    found: dict[str, set[int]] = {}
    for manifest in manifests(root):
        for (stage, table), columns in TRAINING_TABLES.items():
            if manifest["stage"] != stage or table not in manifest["tables"]:
                continue
            folder = Path(manifest["path"]) / table
            ids: set[int] = set()
            for column in columns:
                ids |= {r[0] for r in con.sql(f"select distinct {column} from read_parquet('{folder}/*')").fetchall()}
            found[f"{stage}/{manifest['version']}/{table}"] = ids
        if manifest["stage"] == "embed_graph":
            for names in sorted(Path(manifest["path"]).glob("**/entity_names_*.json")):
                found[f"embed_graph/{manifest['version']}/{names.name}"] = {
                    int(x) for x in json.loads(names.read_text())
                }
    return found


def truth_benchmark_ids(snapshot: Path) -> set[int]:
    """The corpus ids the generator's truth maps the snapshot's SciDocs papers to (`scidocs_truth.jsonl`)."""
    rows = (json.loads(line) for line in (Path(snapshot) / "scidocs_truth.jsonl").read_text().splitlines())
    return {r["corpus_id"] for r in rows if r["corpus_id"] is not None}
