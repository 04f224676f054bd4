"""What a stage wrote, as a person reads it: the artifact summary behind Airflow's "Artifacts" tab.

`summarize(store, snapshot, stage, version)` reads one version through its manifest: version, lineage
(input versions), each table's schema, row count and first rows, metrics and plots; a benchmark's also holds
its answer (the trained model against its untrained base, `citeflow.evaluation.report.answer`), every score rounded, and
the drift reports (`citeflow compare`, the releases DAG's drift task) of this benchmark against an earlier
release: the cross-release view. `render_html` turns that into one self-contained page (plots inlined) that
fits its window (Airflow's iframe, or 1,400 px): a benchmark page opens with its answer; wide tables scroll in
their own box and long JSON wraps. Both are plain functions, usable without Airflow.

`create_app()` is the FastAPI app the citeflow Airflow plugin (`citeflow.cockpit.plugin`) mounts under
`/citeflow` in Airflow's API server:

    GET /citeflow/artifacts/task?dag_id=..&run_id=..&task_id=..&map_index=..     the page
    GET /citeflow/artifacts/task.json?...                                        the summary as JSON
    GET /citeflow/artifacts/report?...                                           the benchmark report

A task instance is resolved to its artifact through the XCom its stage task pushed (snapshot, stage,
version, artifact root), so the page shows exactly the version that run used, cached or built; the XCom's
snapshot, stage and version are validated (an id, a stage name, 16 hex digits) before anything is opened.
Every route requires an authenticated Airflow user allowed to read the DAG's task instances (Airflow's own
`requires_access_dag`): plugin routes are not authenticated by default.

The version is read through `ArtifactStore.read_manifest`, which checks its files against the manifest: a
damaged version is shown as an error naming the file, never as data. Secret-named settings are redacted
(again, for manifests written before redaction) and binary cells (`rejected.raw`) are shown escaped.
"""

# No `from __future__ import annotations`: FastAPI resolves the route signatures, defined inside create_app.

import base64
import html
import json
import posixpath
from typing import Any

from citeflow.artifacts import ArtifactStore
from citeflow.config import validate_snapshot_id
from citeflow.errors import CiteflowError
from citeflow.manifest import VERSION_RE, DamagedVersion
from citeflow.redaction import redact
from citeflow.registry import REPORTS, STAGES

SAMPLE_ROWS = 5
WHOLE_ROWS = 200
WHOLE_TABLES = {"drift": ("summary",), "filter_leakage": ("leakage_report",)}
# a benchmark's scores are read whole for its answer and its table of every score: two models' SciDocs, SciRepEval
# and MTEB rows are a few hundred at most
SCORE_ROWS = 2000
PLOT_SUFFIXES = (".png",)
MAX_PLOT_BYTES = 8 << 20
XCOM_FIELDS = ("artifacts", "snapshot", "stage", "version")


def _cell(value: Any) -> str:
    """One value of a sample row, shortened: vectors show their length and first entries; bytes escaped; a float
    of more than 6 significant digits rounded to 6 (a score's 15 digits say nothing a reader can use)."""
    if isinstance(value, float) and float(f"{value:.6g}") != value:
        return f"{value:.6g}"
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", errors="backslashreplace")
    if isinstance(value, (list, tuple)):
        head = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in value[:4])
        return f"[{head}{', …' if len(value) > 4 else ''}] ({len(value)})"
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "…"


def summarize(store: ArtifactStore, snapshot: str, stage: str, version: str) -> dict[str, Any]:
    """Everything the artifact page shows, read through the version's manifest."""
    manifest = store.read_manifest(snapshot, stage, version)
    if manifest is None:
        raise CiteflowError(
            f"{stage} version {version} of snapshot {snapshot} has no manifest in {store.uri} "
            "(deleted, or never completed)"
        )
    return summary_of(store, manifest)


def summary_of(store: ArtifactStore, manifest) -> dict[str, Any]:
    """`summarize` of a manifest already read (and checked) by the store."""
    from citeflow.tables import head

    tables = []
    scores = None
    for name, stats in manifest.tables.items():
        # the reports whole (the drift report's summary, the leakage report), else the first rows
        shown = min(stats["rows"], WHOLE_ROWS) if name in WHOLE_TABLES.get(manifest.stage, ()) else SAMPLE_ROWS
        if manifest.stage == "benchmark" and name == "scores":
            scores = head(store.fs, manifest.table_path(name), min(stats["rows"], SCORE_ROWS)).to_pylist()
            sample = scores[:shown]
        else:
            sample = head(store.fs, manifest.table_path(name), shown).to_pylist()
        tables.append(
            {
                "name": name,
                "rows": stats["rows"],
                "files": stats["files"],
                "schema": stats["schema"],
                "sample": [{k: _cell(v) for k, v in row.items()} for row in sample],
            }
        )
    plots = {}
    for name in sorted(manifest.files):
        info = store.fs.get_file_info(posixpath.join(manifest.path, name))
        if name.endswith(PLOT_SUFFIXES) and "/" not in name and 0 < info.size <= MAX_PLOT_BYTES:
            with store.fs.open_input_stream(info.path) as fh:
                plots[name] = base64.b64encode(fh.read()).decode()
    return {
        "stage": manifest.stage,
        "snapshot": manifest.snapshot,
        "version": manifest.version,
        "path": manifest.path,
        "code_version": manifest.code_version,
        "started_at": manifest.started_at,
        "finished_at": manifest.finished_at,
        "duration_s": manifest.duration_s,
        "inputs": redact(manifest.inputs),
        "metrics": redact(manifest.metrics),
        "config": redact(manifest.config),
        "tables": tables,
        "plots": plots,
        "files": sorted(manifest.files),
        "reused_from": manifest.reused_from,
        "drift": drift_reports(store, manifest) if manifest.stage == "benchmark" else [],
        **(benchmark_answer(manifest, scores) if scores is not None else {}),
    }


SCORE_COLUMNS = ("task", "split", "metric", "value", "status", "label")


def benchmark_answer(manifest, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A benchmark version's answer (`citeflow.evaluation.report.answer`: trained against base, SciDocs' average and per
    task) and its scores as one table, model by model: {"answer": ..., "scores": {"labels", "rows"}}.

    Whether published numbers may stand beside them is decided by the SciDocs folder the manifest records as
    an input (`citeflow.evaluation.report.scidocs_origin`: a generated set has none)."""
    from citeflow.evaluation.report import answer, scidocs_input, scidocs_origin

    if not rows or not all(c in rows[0] for c in SCORE_COLUMNS):  # a version older than these columns
        return {}
    scidocs = scidocs_input(manifest.inputs)
    labels = list(dict.fromkeys(r["label"] for r in rows))
    by_key: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        key = (r.get("suite") or "", r["task"], r["split"], r["metric"])
        entry = by_key.setdefault(key, {"n": [], "values": {}})
        if r.get("n") is not None and r["n"] not in entry["n"]:
            entry["n"].append(r["n"])
        entry["values"][r["label"]] = r["value"] if r["status"] == "ok" else r["status"]
    table = [
        {
            "suite": suite,
            "task": task,
            "split": split,
            "metric": metric,
            "n": entry["n"],
            "values": [entry["values"].get(label) for label in labels],
        }
        for (suite, task, split, metric), entry in by_key.items()
    ]
    found = answer(rows, origin=scidocs_origin(scidocs), scidocs=scidocs)
    return {"answer": found, "scores": {"labels": labels, "rows": table}}


def drift_reports(store: ArtifactStore, benchmark) -> list[dict[str, Any]]:
    """The drift reports whose later release is this benchmark version (their summary whole, their plot), newest
    first: what this release changed against an earlier one."""
    reports = []
    for m in reversed(store.list_versions(benchmark.snapshot, "drift")):  # the store lists oldest first
        after = [i for i in m.inputs if i.get("side") == "after" and i.get("stage") == "benchmark"]
        if [i.get("version") for i in after] != [benchmark.version]:
            continue
        found = summary_of(store, m)
        (summary_table,) = (t for t in found["tables"] if t["name"] == "summary")
        reports.append(
            {
                "version": m.version,
                "before": m.config.get("before"),
                "summary": summary_table["sample"],
                "plots": found["plots"],
            }
        )
    return reports


def _table(header: list[str], rows: list[list[str]], numeric: frozenset[int] = frozenset()) -> str:
    """A table in its own scrolling box: one wider than the window scrolls there instead of widening the page.
    Columns in `numeric` are right-aligned."""
    # a column name may break after its underscores (mapped_corpus_id): many columns then fit without scrolling
    head = "".join(
        f"<th{' class=n' if i in numeric else ''}>{html.escape(h).replace('_', '_<wbr>')}</th>"
        for i, h in enumerate(header)
    )
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=n' if i in numeric else ''}>{html.escape(c)}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<div class=scroll><table><tr>{head}</tr>{body}</table></div>"


def _score(value: Any) -> str:
    """A score as the papers print it (× 100 already: two decimals), a status word for a row not scored."""
    if value is None:
        return "–"
    return f"{value:.2f}" if isinstance(value, (int, float)) else str(value)


def _scores_table(scores: dict[str, Any]) -> str:
    labels = scores["labels"]
    rows = [
        [r["suite"], r["task"], r["split"], r["metric"], " / ".join(f"{n:,}" for n in r["n"])]
        + [_score(v) for v in r["values"]]
        for r in scores["rows"]
    ]
    numeric = frozenset(range(4, 5 + len(labels)))
    return _table(["suite", "task", "split", "metric", "n", *labels], rows, numeric)


def render_html(summary: dict[str, Any], *, cached: bool | None = None, report_url: str = "") -> str:
    """The artifact page: one self-contained HTML document."""
    from citeflow.evaluation.report import ANSWER_CSS, RESPONSIVE_CSS, answer_html

    e = html.escape
    state = "" if cached is None else (" — cached in this run (not re-run)" if cached else " — built in this run")
    parts = [
        "<!doctype html><meta charset=utf-8><meta name=viewport content='width=device-width'>",
        f"<title>{e(summary['stage'])} {e(summary['version'])}</title>",
        "<style>body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;"
        "margin:.5em 0 1.2em}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}"
        "th{background:#f3f3f3}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}"
        "code,pre{background:#f6f6f6;padding:2px 4px}figure{margin:1em 0}"
        f"{RESPONSIVE_CSS}{ANSWER_CSS}.answer td,.answer th{{border:0;border-bottom:1px solid #ddd}}</style>",
        # a benchmark page opens with its answer, before the version's particulars
        answer_html(summary["answer"]) if summary.get("answer") else "",
        f"<h1>{e(summary['stage'])} · version {e(summary['version'])}</h1>",
        f"<p>Snapshot <b>{e(summary['snapshot'])}</b>{e(state)}. Finished {e(str(summary['finished_at']))} "
        f"in {summary['duration_s']:.1f} s; code {e(summary['code_version'])}.<br>"
        f"<code>{e(summary['path'])}</code></p>",
    ]
    if summary.get("reused_from"):
        parts.append(
            f"<p>Reused from snapshot <b>{e(str(summary['reused_from']['snapshot']))}</b>, which built "
            "this version from the same inputs and settings.</p>"
        )
    if report_url:
        parts.append(f"<p><a href='{e(report_url)}' target=_blank>Benchmark report of this version</a></p>")
    parts.append("<h2>Lineage</h2>")
    inputs = [
        [
            str(i.get("stage") or i.get("kind", "")),
            str(i.get("version") or i.get("fingerprint", ""))[:40],
            str(i.get("path", "")),
        ]
        for i in summary["inputs"]
    ]
    parts.append(_table(["input", "version", "path"], inputs) if inputs else "<p>No inputs.</p>")
    parts.append("<h2>Tables</h2>")
    parts.append(
        _table(
            ["table", "rows", "files", "columns"],
            [[t["name"], f"{t['rows']:,}", str(t["files"]), str(len(t["schema"]))] for t in summary["tables"]],
        )
    )
    for t in summary["tables"]:
        parts.append(f"<h3>{e(t['name'])}</h3>")
        parts.append("<p>" + ", ".join(f"<code>{e(c['name'])}</code> {e(c['type'])}" for c in t["schema"]) + "</p>")
        if t["name"] == "scores" and summary.get("scores"):  # every score, rounded, model beside model
            parts.append(f"<p>All {t['rows']:,} rows, one column per model (× 100).</p>")
            parts.append(_scores_table(summary["scores"]))
        elif t["sample"]:
            columns = list(t["sample"][0])
            parts.append(_table(columns, [[row[c] for c in columns] for row in t["sample"]]))
    for drift in summary.get("drift", []):
        parts.append(
            f"<h2>Drift against snapshot {e(str(drift['before']))}</h2>"
            f"<p>What this release changed (drift version {e(drift['version'])}, "
            f"<code>citeflow compare --snapshot {e(str(drift['before']))} --snapshot {e(summary['snapshot'])}</code>)."
            "</p>"
        )
        columns = ["section", "name", "before", "after", "value"]
        parts.append(_table(columns, [[row.get(c, "") for c in columns] for row in drift["summary"]]))
        parts += [
            f"<figure><img alt='drift {e(name)}' src='data:image/png;base64,{data}'><figcaption>{e(name)}</figcaption>"
            "</figure>"
            for name, data in drift["plots"].items()
        ]
    if summary["plots"]:
        parts.append("<h2>Plots</h2>")
        for name, data in summary["plots"].items():
            parts.append(
                f"<figure><img alt='{e(name)}' src='data:image/png;base64,{data}'>"
                f"<figcaption>{e(name)}</figcaption></figure>"
            )
    parts.append("<h2>Metrics</h2>")
    parts.append(f"<pre>{e(json.dumps(summary['metrics'], indent=2, sort_keys=True, default=str))}</pre>")
    parts.append(
        "<details><summary>Resolved config</summary>"
        f"<pre>{e(json.dumps(summary['config'], indent=2, sort_keys=True, default=str))}</pre></details>"
    )
    return "".join(parts)


def xcom_target(value: Any) -> dict[str, Any]:
    """The artifact a stage task's XCom points at, checked: a tampered or foreign XCom opens nothing."""
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str) and value[k] for k in XCOM_FIELDS):
        raise CiteflowError(
            "this task instance recorded no citeflow artifact (not a stage task, or it failed before writing one)"
        )
    validate_snapshot_id(value["snapshot"])
    if value["stage"] not in (*STAGES, *REPORTS):  # the stages and the registered reports (drift)
        raise CiteflowError(f"the task's XCom names no citeflow stage: {value['stage'][:40]!r}")
    if not VERSION_RE.fullmatch(value["version"]):
        raise CiteflowError(f"the task's XCom names no artifact version: {value['version'][:40]!r}")
    return value


def map_index_of(raw: str | None) -> int:
    """The map index a link names; unmapped tasks get -1.

    Airflow 3.3 leaves its ``{MAP_INDEX}`` placeholder unfilled in external-view links of unmapped task
    instances, so anything that is not an integer means "not mapped" rather than a 422.
    """
    try:
        value = int(raw) if raw is not None else -1
    except ValueError:
        return -1
    return value if value >= -1 else -1


def create_app():
    """The FastAPI app of the Airflow plugin (imports Airflow's API server modules: call it there)."""
    from typing import Annotated

    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.common.db.common import SessionDep
    from airflow.api_fastapi.core_api.security import requires_access_dag
    from airflow.models.xcom import XComModel
    from fastapi import Depends, FastAPI, HTTPException, Query
    from fastapi.responses import HTMLResponse
    from sqlalchemy import select

    app = FastAPI(title="citeflow artifacts", description="Artifact summaries of citeflow stage tasks")
    can_read = [Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE))]

    def target(session, dag_id: str, run_id: str, task_id: str, map_index: int) -> dict[str, Any]:
        row = session.scalar(
            select(XComModel).where(
                XComModel.dag_id == dag_id,
                XComModel.run_id == run_id,
                XComModel.task_id == task_id,
                XComModel.map_index == map_index,
                XComModel.key == "return_value",
            )
        )
        try:
            return xcom_target(None if row is None else XComModel.deserialize_value(row))
        except CiteflowError as exc:
            raise HTTPException(404, str(exc)) from None

    def load(found: dict[str, Any]) -> dict[str, Any]:
        try:
            return summarize(ArtifactStore(found["artifacts"]), found["snapshot"], found["stage"], found["version"])
        except DamagedVersion as exc:  # there, but not what its manifest says: shown as the error it is
            raise HTTPException(409, str(exc)) from None
        except CiteflowError as exc:
            raise HTTPException(404, str(exc)) from None

    class Q:  # the routes' query parameters, as type aliases in a class: a checker reads them as types there
        Ids = Annotated[str, Query(min_length=1, max_length=250)]
        MapIndex = Annotated[str, Query(max_length=20)]

    @app.get("/artifacts/task.json", dependencies=can_read)
    def task_json(
        session: SessionDep, dag_id: Q.Ids, run_id: Q.Ids, task_id: Q.Ids, map_index: Q.MapIndex = "-1"
    ) -> dict:
        found = target(session, dag_id, run_id, task_id, map_index_of(map_index))
        return {**load(found), "cached": bool(found.get("cached"))}

    @app.get("/artifacts/task", response_class=HTMLResponse, dependencies=can_read)
    def task_page(
        session: SessionDep, dag_id: Q.Ids, run_id: Q.Ids, task_id: Q.Ids, map_index: Q.MapIndex = "-1"
    ) -> str:
        found = target(session, dag_id, run_id, task_id, map_index_of(map_index))
        report = ""
        if found.get("report"):
            from urllib.parse import urlencode

            report = "report?" + urlencode(
                {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index_of(map_index)}
            )
        return render_html(load(found), cached=bool(found.get("cached")), report_url=report)

    @app.get("/artifacts/report", response_class=HTMLResponse, dependencies=can_read)
    def report_page(
        session: SessionDep, dag_id: Q.Ids, run_id: Q.Ids, task_id: Q.Ids, map_index: Q.MapIndex = "-1"
    ) -> str:
        found = target(session, dag_id, run_id, task_id, map_index_of(map_index))
        if found["stage"] != "benchmark":
            raise HTTPException(404, "only benchmark tasks have a report")
        store = ArtifactStore(found["artifacts"])
        # The report is the version's own file, found from the store (the version checked), never from the XCom.
        version = load(found)
        path = posixpath.join(version["path"], "report.html")
        if store.fs.get_file_info(path).type.name != "File":
            raise HTTPException(404, f"benchmark version {version['version']} has no report")
        with store.fs.open_input_stream(path) as fh:
            return fh.read().decode()

    return app
