"""`citeflow export-dataset`: a stage version's tables as a Hugging Face `datasets` folder, with a dataset card.

    citeflow export-dataset --snapshot demo --stage filter_leakage --out dist/demo-leak-free [--version V]

Reads the version of `--stage` that `--version` names, or the stage's only version (never "the newest" of
several), and the versions it was built from (its lineage, through the manifests' inputs). Writes `--out`
(absent or empty, or `--overwrite` of a previous export: `citeflow/export_folder.py`): one folder per table
holding copies of the table's committed Parquet files (never links into the artifact root), loadable with
`datasets.load_dataset("parquet", data_dir="OUT/<table>")` or, every table a configuration of the card's
`configs`, `datasets.load_dataset("OUT", "<table>")`; and `README.md`, the dataset card: the release, every
artifact version of the lineage, each table's rows and columns, and the leakage audit of the filter_leakage
version in the lineage, per benchmark suite. Staged in a hidden folder of its own beside `--out` and renamed
into place, so a killed export leaves no half folder at `--out`.
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
from citeflow.registry import STAGES
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
    names = list(tables) or list(manifest.tables)
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
            files[name] = []
            for n, info in enumerate(sources):
                copied = f"{name}-{n:05d}-of-{len(sources):05d}.parquet"
                # a copy (or a reflink), never a link: editing the export cannot change the committed version
                folder.copy(info.path, f"{name}/{copied}")
                files[name].append(copied)
        folder.write_text("README.md", dataset_card(manifest, lineage, names))
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


def dataset_card(manifest: Manifest, lineage: list[Manifest], tables: list[str]) -> str:
    """The dataset card (`README.md` with YAML front matter: one `configs` entry per table)."""
    leak = next((m for m in lineage if m.stage == "filter_leakage"), None)
    front = ["---", f"pretty_name: {_yaml(f'citeflow {manifest.stage} of {manifest.snapshot}')}", "tags:"]
    front += ["- citeflow", "- scientific-documents", "- citation-graph", "configs:"]
    for name in tables:
        front += [f"- config_name: {_yaml(name)}", f"  data_files: {_yaml(f'{name}/*.parquet')}"]
    front.append("---")
    body = [
        f"# {manifest.stage} of snapshot {manifest.snapshot}",
        "",
        f"The tables of citeflow's `{manifest.stage}` version `{manifest.version}`, built from release "
        f"`{manifest.snapshot}`. Every table is plain Parquet: any reader reads exactly the rows below.",
        "",
        "## Load it",
        "",
        "```python",
        "import datasets",
        f'papers = datasets.load_dataset("parquet", data_dir="{tables[0]}")  # one table; or',
        f'papers = datasets.load_dataset(".", "{tables[0]}")  # this folder, one configuration per table',
        "```",
        "",
        "## Tables",
        "",
        "| table | rows | columns |",
        "|---|---:|---|",
    ]
    for name in tables:
        stats = manifest.tables[name]
        columns = ", ".join(f"`{c['name']}` {c['type']}" for c in stats.get("schema", []))
        body.append(f"| `{name}` | {stats['rows']:,} | {columns} |")
    body += ["", "## Lineage", "", "| stage | version | built | code |", "|---|---|---|---|"]
    for m in lineage:
        body.append(f"| {m.stage} | `{m.version}` | {m.finished_at[:19]} | {m.code_version} |")
    body += ["", "## Leakage audit", ""]
    if leak is None:
        body.append("No filter_leakage version is in this lineage: the tables were not checked against any benchmark.")
    else:
        body += _audit(leak)
    return "\n".join(front + [""] + body) + "\n"


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
