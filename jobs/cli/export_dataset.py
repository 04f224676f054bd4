"""`citeflow export-dataset`: a stage version's tables as a Hugging Face `datasets` folder, with a dataset card.

    citeflow export-dataset --snapshot demo --stage filter_leakage --out dist/demo-leak-free [--version V]

Reads the version of `--stage` that `--version` names, or the stage's only version (never "the newest" of
several), and the versions it was built from (its lineage, through the manifests' inputs). Writes `--out`
(absent or empty, or `--overwrite` of a previous export: `citeflow/export_folder.py`):

- `data/<table>-00000-of-0000N.parquet`: copies of each table's committed Parquet files (never links into the
  artifact root), named the way the Hub names sharded splits. `datasets` reads that name before any of its
  split keyword rules, so `load_dataset("parquet", data_dir=OUT)` gives one split per table, each whole. A
  folder per table would not: `datasets` reads a folder named `training_texts` as the `train` split and drops
  every other table without a word.
- `README.md`, the dataset card: one configuration per table with its files listed (`load_dataset(OUT,
  "triplets")`; the stage's main table is the default, `load_dataset(OUT)`), examples that run as printed (this
  export's path, its table names), each table's rows and columns, every artifact version of the lineage and
  the leakage audit of the filter_leakage version in the lineage, per benchmark suite.

Staged in a hidden folder of its own beside `--out` and renamed into place, so a killed export leaves no half
folder at `--out`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import validate_snapshot_id
from citeflow.errors import CiteflowError
from citeflow.export_folder import ExportFolder
from citeflow.manifest import VERSION_RE
from citeflow.registry import REGISTRY, STAGES
from citeflow.tables import data_files


def export_dataset(
    *,
    snapshot: str,
    stage: str,
    out: str,
    artifacts: str,
    version: str | None = None,
    tables: tuple[str, ...] = (),
    overwrite: bool = False,
) -> Path:
    validate_snapshot_id(snapshot)
    if stage not in STAGES:
        raise CiteflowError(f"--stage must be one of {', '.join(STAGES)}, not {stage!r}")
    if version is not None and not VERSION_RE.fullmatch(version):
        raise CiteflowError(
            f"--version must be a version id (16 hex digits, as `citeflow artifacts` lists), not {version!r}"
        )
    store = ArtifactStore(artifacts)
    if not store.local:
        raise CiteflowError("export-dataset reads a local artifact root")
    manifest = _chosen(store, snapshot, stage, version)
    declared = REGISTRY[stage].tables  # the registry's order (a manifest lists its tables alphabetically)
    order = {t: i for i, t in enumerate(declared)}
    names = list(tables) or sorted(manifest.tables, key=lambda t: (order.get(t, len(order)), t))
    unknown = [t for t in names if t not in manifest.tables]
    if unknown:
        raise CiteflowError(
            f"{stage} {manifest.version} has no table {unknown[0]!r} (has {', '.join(manifest.tables)})"
        )
    folder = ExportFolder(out, overwrite=overwrite, kind="export-dataset")  # checked before any work
    lineage = store.lineage(manifest, STAGES)
    files: dict[str, list[str]] = {}
    with folder:
        for name in names:
            sources = data_files(store.fs, manifest.table_path(name))
            files[name] = [f"data/{name}-{n:05d}-of-{len(sources):05d}.parquet" for n in range(len(sources))]
            for info, copied in zip(sources, files[name], strict=True):
                # a copy (or a reflink), never a link: editing the export cannot change the committed version
                folder.copy(info.path, copied)
        folder.write_text("README.md", dataset_card(manifest, lineage, files, folder.target))
    return folder.target


def _chosen(store: ArtifactStore, snapshot: str, stage: str, version: str | None) -> Manifest:
    """The version named, or the stage's only one; one line when there is none or several."""
    versions = store.list_versions(snapshot, stage)
    if version is not None:
        found = [m for m in versions if m.version == version]
        if not found:
            listed = ", ".join(m.version for m in versions) or "none"
            raise CiteflowError(
                f"{stage} of snapshot {snapshot!r} has no version {version} under {store.uri} (has {listed})"
            )
        return found[0]
    if not versions:
        raise CiteflowError(
            f"no {stage} version of snapshot {snapshot!r} under {store.uri}: run "
            f"`citeflow run --snapshot {snapshot} ... --until {stage}` first"
        )
    if len(versions) > 1:
        listed = ", ".join(f"{m.version} ({m.finished_at[:19]})" for m in versions)
        raise CiteflowError(
            f"{stage} of snapshot {snapshot!r} has {len(versions)} versions: name one with --version ({listed})"
        )
    return versions[0]


def _yaml(value: Any) -> str:
    return json.dumps(value)  # JSON scalars are valid YAML scalars, quoted where they must be


def default_table(stage: str, tables: list[str]) -> str:
    """The configuration `load_dataset(OUT)` loads: the stage's main table when exported, else the first."""
    main = REGISTRY[stage].main_table
    return main if main in tables else tables[0]


def dataset_card(manifest: Manifest, lineage: list[Manifest], files: dict[str, list[str]], out: Path) -> str:
    """The dataset card (`README.md` with YAML front matter): one `configs` entry per table, listing its files
    (`files`: table -> its paths in the export), so no split rule of `datasets` decides what a table holds."""
    tables = [name for name in files if files[name]]
    leak = next((m for m in lineage if m.stage == "filter_leakage"), None)
    front = ["---", f"pretty_name: {_yaml(f'citeflow {manifest.stage} of {manifest.snapshot}')}", "tags:"]
    front += ["- citeflow", "- scientific-documents", "- citation-graph", "configs:"]
    default = default_table(manifest.stage, tables) if tables else None
    for name in tables:
        front.append(f"- config_name: {_yaml(name)}")
        if name == default:
            front.append("  default: true")
        front += ["  data_files:", "  - split: train", "    path:", *[f"    - {_yaml(f)}" for f in files[name]]]
    front.append("---")
    body = [
        f"# {manifest.stage} of snapshot {manifest.snapshot}",
        "",
        f"The tables of citeflow's `{manifest.stage}` version `{manifest.version}`, built from release "
        f"`{manifest.snapshot}`. Every table is plain Parquet in `data/`, named `<table>-00000-of-0000N.parquet`: "
        "any reader reads exactly the rows below.",
        "",
        *_examples(out, tables, default),
        "## Tables",
        "",
        "| table | rows | files | columns |",
        "|---|---:|---:|---|",
    ]
    for name in files:
        stats = manifest.tables[name]
        columns = ", ".join(f"`{c['name']}` {c['type']}" for c in stats.get("schema", []))
        body.append(f"| `{name}` | {stats['rows']:,} | {len(files[name])} | {columns} |")
    empty = [name for name in files if not files[name]]
    if empty:
        body += [
            "",
            f"No file (and so no configuration) for {', '.join(f'`{n}`' for n in empty)}: the version "
            "committed no rows there.",
        ]
    body += ["", "## Lineage", "", "| stage | version | built | code |", "|---|---|---|---|"]
    for m in lineage:
        body.append(f"| {m.stage} | `{m.version}` | {m.finished_at[:19]} | {m.code_version} |")
    body += ["", "## Leakage audit", ""]
    if leak is None:
        body.append("No filter_leakage version is in this lineage: the tables were not checked against any benchmark.")
    else:
        body += _audit(leak)
    return "\n".join(front + [""] + body) + "\n"


def _examples(out: Path, tables: list[str], default: str | None) -> list[str]:
    """The card's "Load it" section: code that runs as printed, with this export's path and table names."""
    if default is None:
        return ["This export holds no rows.", ""]
    other = next((t for t in tables if t != default), None)
    path, var = repr(str(out)), _variable(default)
    lines = [
        "## Load it",
        "",
        f"With Hugging Face `datasets` (`pip install datasets`); the path is this folder as exported, a Hub repo "
        f"id once uploaded. Each table is a configuration of this card; `{default}` is the default.",
        "",
        "```python",
        "import datasets",
        "",
        f"{var} = datasets.load_dataset({path}, {default!r}, split='train')",
        f"print({var})",
    ]
    if other is not None:
        lines += [
            f"{_variable(other)} = datasets.load_dataset({path}, {other!r}, split='train')",
            f"print({_variable(other)}.num_rows)",
        ]
    lines += [
        f"default = datasets.load_dataset({path}, split='train')  # the default configuration: {default}",
        "print(default.num_rows)",
        "# the parquet builder, one table by its files",
        f"{var} = datasets.load_dataset('parquet', data_files={_files_glob(out, default)!r}, split='train')",
        f"print({var}.num_rows)",
        "```",
        "",
        "`load_dataset('parquet', data_dir=...)` on the whole folder reads every table as one dataset, which "
        "fails on their different columns: name a configuration, or the files of one table, as above.",
        "",
        "With DuckDB (`pip install duckdb`), one table by its files:",
        "",
        "```python",
        "import duckdb",
        "",
        f"print(duckdb.sql({_count_sql(out, default)!r}).fetchall())",
        "```",
        "",
    ]
    return lines


def _variable(table: str) -> str:
    """A Python name for a table's variable (table names are identifiers; a keyword gets a suffix)."""
    import keyword

    return f"{table}_table" if keyword.iskeyword(table) or not table.isidentifier() else table


def _files_glob(out: Path, table: str) -> str:
    return str(out / "data" / f"{table}-*.parquet")


def _count_sql(out: Path, table: str) -> str:
    """DuckDB's row count of a table's files (a quote in the path doubled, as SQL strings quote it)."""
    return "SELECT count(*) FROM '{}'".format(_files_glob(out, table).replace("'", "''"))


def _audit(leak: Manifest) -> list[str]:
    """The per-suite totals of a filter_leakage version, as card lines."""
    metrics = leak.metrics
    lines = [
        f"filter_leakage `{leak.version}`, mode `{metrics.get('mode')}`: {metrics.get('removed_papers', 0):,} papers "
        f"and {metrics.get('removed_citations', 0):,} citations removed"
        + (" (benchmark papers and their neighbours one citation away: strict)" if metrics.get("strict") else "")
        + ".",
        "",
    ]
    if metrics.get("mode") == "report_only":
        lines += [
            "Mode report_only keeps every benchmark paper in the tables (to replicate published 'with leakage' "
            "numbers): the counts below are what mode exclude removes.",
            "",
        ]
    suites = metrics.get("suites")
    if not suites:  # a version from before the suites: its totals only
        lines.append(f"{metrics.get('mapped', 0):,} of {metrics.get('benchmark_ids', 0):,} benchmark ids mapped.")
        return lines
    lines += [
        "| suite | ids | mapped | unmapped | papers removed | edges removed |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for suite, row in suites.items():
        lines.append(
            f"| {suite} | {row['total']:,} | {row['mapped']:,} | {row['unmapped']:,} | {row['removed_papers']:,} | "
            f"{row['removed_edges']:,} |"
        )
    for name, why in metrics.get("unaudited", {}).items():
        lines.append(f"\nNot audited: SciRepEval task `{name}` ({why}).")
    return lines
