"""Stage benchmark: SciDocs and SciRepEval-format scores of the trained model and its untrained base.

Reads: the embed_papers version of the run (trained model) and, with
`benchmark.base` (default), embed_papers with `model=base`; the SciDocs
folder of the run; `benchmark.scirepeval` task files, whose papers (and
search queries) are embedded by each model here.
Writes `ARTIFACTS/<snapshot>/benchmark/<version>/scores`: task, split,
metric, value (× 100), n, missing, status (ok / missing / not_evaluated),
reason, model (trained / base), label, model_version (train_encoder),
strategy, leakage_mode; plus `report.md` / `report.html` / `scores.png` of
this version next to the published numbers of docs/reference.md §6. Nothing outside the
version: `citeflow report --benchmark V1 --benchmark V2` puts named versions
(SciNCL- and SPECTER-trained, say) side by side.

Standalone, on any model's embeddings:
    citeflow benchmark --embeddings E.parquet [--embeddings F.parquet] --scidocs DIR --out DIR
    citeflow benchmark --embeddings E.parquet --beir DIR (--query-embeddings Q.parquet | --model DIR) --out DIR
The second scores a BEIR folder as MTEB scores its SCIDOCS retrieval task (`score_beir`, docs/benchmarks-mteb.md):
rows of task "SCIDOCS", suite "mteb", never part of SciDocs' average.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.config import RunConfig, to_dict, versioned_dict
from citeflow.errors import CiteflowError
from citeflow.evaluation.embeddings import load_embeddings
from citeflow.jobs.pipeline import StageContext, entry_point
from citeflow.registry import REGISTRY
from citeflow.stage import execute
from citeflow.tables import write_table

STAGE = "benchmark"
STAGE_VERSION = 4  # 2: reference protocols, details column, model card; 3: suite column; 4: delta columns
TABLES = list(REGISTRY[STAGE].tables)
CARD = "model_card.md"  # the trained model's Hugging Face card, README.md of `citeflow export-model`

log = logging.getLogger("citeflow")

run = entry_point(STAGE)


def check(config: RunConfig) -> None:
    """The SciDocs folder is given (before the runner builds what the benchmark scores)."""
    if not config.scidocs:
        raise CiteflowError("benchmark needs the SciDocs folder: pass --scidocs DIR (or --until embed_papers)")


def run_on(ctx: StageContext) -> Manifest:
    from citeflow.snapshot import fingerprint_path

    config = ctx.config
    check(config)
    trained = ctx.inputs["embed_papers"]
    embedded = {"trained": trained}
    if "base" in ctx.inputs.variants:  # the untrained base model's embeddings (the registry's variant `base`)
        embedded["base"] = ctx.inputs.variants["base"]
    inputs = [m.lineage() for m in embedded.values()] + [fingerprint_path("scidocs", config.scidocs)]
    inputs += [fingerprint_path("scirepeval", p) for p in config.benchmark.scirepeval]
    store = ctx.store
    store.require_local(STAGE)
    manifest = execute(
        store=store,
        snapshot=config.snapshot,
        stage=STAGE,
        stage_version=STAGE_VERSION,
        config=versioned_dict(config.benchmark),
        resolved_config={
            "benchmark": to_dict(config.benchmark),
            "strategy": trained.metrics["strategy"],
            "leakage_mode": trained.metrics["leakage_mode"],
        },
        inputs=inputs,
        tables=TABLES,
        build=lambda path: build(config, store, embedded, Path(path)),
    )
    return manifest


def build(config: RunConfig, store: ArtifactStore, embedded: dict[str, Manifest], path: Path) -> dict[str, Any]:
    import pyarrow as pa

    from citeflow.evaluation.report import write_report

    rows: list[dict[str, Any]] = []
    summary = {}
    for which, manifest in embedded.items():
        vectors = load_embeddings(manifest.table_path("embeddings"))
        label, version = model_label(manifest, which)
        scored = score(
            vectors,
            Path(config.scidocs),
            config.benchmark.scirepeval,
            manifest.metrics["model_folder"],
            n_jobs=config.benchmark.n_jobs or -1,
        )
        for row in scored:
            row.update(
                model=which,
                label=label,
                model_version=version,
                strategy=manifest.metrics["strategy"],
                leakage_mode=manifest.metrics["leakage_mode"],
            )
        rows += scored
        average = next(r for r in scored if r["task"] == "average")
        # "average" only with all 12 SciDocs numbers; "mean" is the mean of those there are (average_label says N)
        summary[which] = {
            "average": average["value"],
            "average_label": average["average_label"],
            "mean": average["details"]["mean_of_available"],
        }
    gain = with_gains(rows)
    write_table(pa.Table.from_pylist(table_rows(rows), schema=scores_schema()), path / "scores")
    write_report(rows, path, f"citeflow benchmark — {config.snapshot}", scidocs=config.scidocs)
    trained_rows = [r for r in rows if r["model"] == "trained"]
    card = card_text(store, config.snapshot, embedded["trained"], trained_rows, path.name)
    (path / CARD).write_text(card, encoding="utf-8")
    return {
        "strategy": embedded["trained"].metrics["strategy"],
        "leakage_mode": embedded["trained"].metrics["leakage_mode"],
        **summary,
        **gain,
    }


def with_gains(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each trained row's change over its base's row of the same number (task, split, metric, suite) into its
    `delta` (points), `delta_low` and `delta_high` (the 95% paired bootstrap interval over the units both scored:
    `citeflow.evaluation.paired`; null where the rows keep no units); the average row's over the numbers both
    models have. Returns the manifest's record: the average's gain, each SciDocs number's, and the bootstrap's
    settings."""
    from citeflow.evaluation.paired import average_gain, bootstrap_settings, cell, row_gain
    from citeflow.evaluation.scidocs import HEADLINE

    def key(row):
        return row["task"], row["split"], row["metric"], row.get("suite")

    base = {key(r): r for r in rows if r.get("model") == "base" and r["status"] == "ok" and r["value"] is not None}
    numbers: dict[str, str] = {}
    for row in rows:
        row.update(delta=None, delta_low=None, delta_high=None)
        other = base.get(key(row))
        if row.get("model") != "trained" or other is None or row["status"] != "ok" or row["value"] is None:
            continue
        row["delta"] = row["value"] - other["value"]
        if row["task"] == "average":
            continue
        gain = row_gain(other, row)
        if gain is not None:
            row["delta_low"], row["delta_high"] = gain.low, gain.high
            if row["split"] == "test" and (row["task"], row["metric"]) in HEADLINE:
                numbers[f"{row['task']} {row['metric']}"] = cell(gain)
    trained = {key(r): r for r in rows if r.get("model") == "trained" and r["status"] == "ok"}
    shared = [(base[k], trained[k]) for k in base if k in trained and k[1] == "test" and k[:3:2] in HEADLINE]
    average = average_gain(shared) if shared else None
    out: dict[str, Any] = {"bootstrap": bootstrap_settings()} if base else {}
    if average is not None:
        measure = "average of 12" if len(shared) == len(HEADLINE) else f"mean of {len(shared)} of 12"
        out["gain"] = {
            "measure": measure,
            "mean": round(average.mean, 4),
            "low": round(average.low, 4),
            "high": round(average.high, 4),
            "shown": average.shown,
        }
        for row in rows:
            if row.get("model") == "trained" and row["task"] == "average" and row["split"] == "test":
                row["delta"], row["delta_low"], row["delta_high"] = average.mean, average.low, average.high
    if numbers:
        out["gains"] = numbers
    return out


def card_text(
    store: ArtifactStore,
    snapshot: str,
    trained: Manifest,
    rows: list[dict[str, Any]],
    version: str,
    *,
    model_path: str | Path | None = None,
) -> str:
    """The model card of benchmark `version`: the trained model's scores `rows` and every version it came from
    (`trained`: its embed_papers version). Its examples load `model_path` (an export's folder; by default the
    trained model's folder in the artifact root) and embed two papers of the training texts."""
    from citeflow.evaluation.model_card import model_card

    upstream = upstream_manifests(store, trained)
    lineage = {"embed_papers": trained.to_json(), **{m.stage: m.to_json() for m in upstream}}
    folder = Path(trained.metrics.get("model_folder", ""))
    config_file = folder / "config.json"
    triplets = next((m for m in upstream if m.stage == "mine_triplets"), None)
    return model_card(
        lineage,
        rows,
        snapshot=snapshot,
        benchmark_version=version,
        model_path=str(model_path or folder),
        model_config=json.loads(config_file.read_text()) if config_file.is_file() else {},
        papers=example_papers(triplets) if triplets is not None else [],
    )


def example_papers(triplets: Manifest, count: int = 2) -> list[tuple[str, str]]:
    """`count` (title, abstract) pairs of a mine_triplets version's training texts for the model card's
    examples: real papers of the release, the shortest of its first thousand with an abstract of a few
    sentences, so the examples stay readable."""
    import pyarrow.dataset as ds

    table = ds.dataset(triplets.table_path("training_texts"), format="parquet")
    head = table.head(1000, columns=["title", "abstract"]).to_pylist()
    papers = [
        (r["title"].strip(), r["abstract"].strip())
        for r in head
        if r["title"] and r["title"].strip() and r["abstract"] and len(r["abstract"].strip()) >= 200
    ]
    return sorted(papers, key=lambda p: len(p[0]) + len(p[1]))[:count]


def model_label(manifest: Manifest, which: str) -> tuple[str, str]:
    """(column label, model version) of an embed_papers version: the trained model is the train_encoder version;
    the base is the model it started from (`small`: its initialisation in that version's base_model/)."""
    strategy, trained = manifest.metrics["strategy"], manifest.metrics["train_encoder_version"]
    if which == "trained":
        return f"{strategy} trained (train_encoder {trained[:8]})", f"train_encoder:{trained}"
    folder = manifest.metrics.get("model_folder", "")
    if folder.rstrip("/").endswith("base_model"):
        return f"{strategy} base (untrained init of {trained[:8]})", f"base_model_of:{trained}"
    return f"{strategy} base ({Path(folder).name}, untrained)", f"base:{folder}"


def upstream_manifests(store: ArtifactStore, manifest: Manifest) -> list[Manifest]:
    """Every stage version `manifest` was built from, nearest first, each stage once."""
    seen: dict[str, Manifest] = {}
    todo = [manifest]
    while todo:
        current = todo.pop(0)
        for item in current.inputs:
            stage = item.get("stage")
            if stage and stage not in seen:
                seen[stage] = store.upstream(current, stage)
                todo.append(seen[stage])
    return list(seen.values())


def scores_schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("task", pa.string()),
            ("suite", pa.string()),
            ("split", pa.string()),
            ("metric", pa.string()),
            ("value", pa.float64()),
            ("n", pa.int64()),
            ("missing", pa.int64()),
            ("status", pa.string()),
            ("reason", pa.string()),
            ("average_label", pa.string()),
            ("model", pa.string()),
            ("label", pa.string()),
            ("model_version", pa.string()),
            ("strategy", pa.string()),
            ("leakage_mode", pa.string()),
            ("details", pa.string()),
            # trained rows: the change over the base's row of the same number, points, and its 95% paired
            # bootstrap interval (`with_gains`); null on the base's rows, without a base, or without units
            ("delta", pa.float64()),
            ("delta_low", pa.float64()),
            ("delta_high", pa.float64()),
        ]
    )


def table_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Score rows as the `scores` table stores them: `details` as a JSON string."""
    return [{**r, "details": json.dumps(r.get("details") or {}, sort_keys=True)} for r in rows]


def embedder(model_dir: str | None):
    """A function (records, fields) -> {doc_id: vector} with the model, or None without one.

    A record's text is its `fields` that are set, joined by " <sep> " (SciRepEval's `SimpleDataset`)."""
    if not model_dir:
        return None
    from citeflow.models.encoder.folder import CITEFLOW_FILE, check_model_folder, folder_usage, resolve_usage
    from citeflow.models.encoder.model import load

    # the folder's own account of its use: citeflow's record of its training, else its sentence-transformers
    # files, else the fallback
    about = Path(model_dir) / CITEFLOW_FILE
    recorded = json.loads(about.read_text()) if about.is_file() else {}
    settings = resolve_usage(recorded, folder_usage(check_model_folder(model_dir))).values
    tokenizer, _ = load(model_dir, tokenizer_only=True)  # fail early on a bad folder

    def embed(records, fields):
        import tempfile

        from citeflow.models.encoder.embed_rows import embed_to_parquet

        sep = f" {tokenizer.sep_token} "
        rows = (
            (str(r["doc_id"]), sep.join(str(r[f]) for f in fields if r.get(f)).strip(), None)
            for r in records
            if r.get("doc_id") is not None
        )
        with tempfile.TemporaryDirectory() as tmp:
            embed_to_parquet(
                rows,
                model_dir,
                Path(tmp) / "e",
                max_length=settings["max_length"],
                pooling=settings["pooling"],
                normalize=settings["normalize"],
                batch_size=64,
                joined=True,
            )
            return load_embeddings(str(Path(tmp) / "e"))

    return embed


def score(
    vectors: dict[str, Any],
    scidocs: Path | None,
    scirepeval: tuple[str, ...] = (),
    model_dir: str | None = None,
    *,
    n_jobs: int | None = None,
    splits: tuple[str, ...] = ("test",),
) -> list[dict[str, Any]]:
    """Rows of every available task, and one `average` row over SciDocs' 12 headline numbers.

    SciRepEval papers are looked up in `vectors` first; the model (when given) embeds the rest, and the queries of
    ad-hoc search."""
    from citeflow.evaluation import scidocs as S
    from citeflow.evaluation import scirepeval as R

    rows = S.evaluate(scidocs, vectors, splits=splits, n_jobs=n_jobs) if scidocs else []
    if scidocs:
        average = S.average(rows)
        rows.append(
            {
                "task": "average",
                "split": "test",
                "metric": "avg",
                "value": average["value"],
                "n": average["of"],
                "missing": average["total"] - average["of"],
                "status": "ok" if average["value"] is not None else "partial",
                "reason": average["label"],
                "average_label": average["label"],
                "details": {"mean_of_available": average["partial"], "numbers": [list(k) for k in average["keys"]]},
            }
        )
    embed = embedder(model_dir)
    try:
        tasks = R.discover(scirepeval)
    except (ValueError, KeyError, json.JSONDecodeError) as exc:
        raise CiteflowError(f"SciRepEval task list: {exc}") from None
    for task in tasks:
        try:
            rows += R.evaluate_task(task, vectors, embed, n_jobs=n_jobs)
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
            raise CiteflowError(f"SciRepEval task {task.name!r}: {exc}") from None
    for row in rows:
        row.setdefault("suite", suite_of(row["task"]))
        row.setdefault("average_label", "")
        row.setdefault("details", {})
    return rows


def suite_of(task: str) -> str:
    """The benchmark suite a SciDocs or SciRepEval score row belongs to (MTEB rows carry theirs)."""
    return "scirepeval" if task.startswith("scirepeval/") else "scidocs"


def score_beir(
    vectors: dict[str, Any],
    folder,
    *,
    query_vectors: dict[str, Any] | None = None,
    model_dir: str | None = None,
    task: str = "SCIDOCS",
    similarity: str | None = None,
    ignore_identical_ids: bool | None = None,
) -> list[dict[str, Any]]:
    """Rows of MTEB's retrieval task `task` on a BEIR folder (`citeflow.evaluation.beir.read_beir`): documents from
    `vectors` (by corpus id), queries from `query_vectors` (by query id) or embedded from their text by the model.

    `similarity` / `ignore_identical_ids`: None keeps the task's (SCIDOCS: cosine, identical ids kept)."""
    from citeflow.evaluation import mteb_retrieval as M

    if task not in M.TASKS:
        raise CiteflowError(f"unknown MTEB task {task!r}; known: {', '.join(M.TASKS)}")
    spec = M.with_settings(M.TASKS[task], similarity=similarity, ignore_identical_ids=ignore_identical_ids)
    if query_vectors is None:
        embed = embedder(model_dir)
        if embed is None:
            raise CiteflowError(
                f"MTEB's {task} needs the queries' own vectors: give --query-embeddings PARQUET or --model DIR"
            )
        searched, _, _ = M.evaluated_queries(folder, spec.split)
        texts = dict(zip(folder.queries.ids, folder.queries.texts, strict=True))
        # MTEB encodes a query's text alone (for SCIDOCS a paper title), with the query-side settings of the model
        query_vectors = embed([{"doc_id": q, "text": texts[q]} for q in searched], ("text",))
    scores = M.retrieval_scores(spec, folder, vectors, query_vectors)
    log.info(
        "MTEB %s: %s = %.5f over %d queries (%s, ignore_identical_ids=%s)",
        spec.name,
        spec.main_score,
        scores.reported["main_score"],
        scores.evaluated,
        spec.similarity,
        spec.ignore_identical_ids,
    )
    return M.score_rows(scores)


def compare_report(store: ArtifactStore, snapshot: str, versions: list[str], out: Path) -> dict[str, str]:
    """report.md / report.html / scores.png in `out` with the named benchmark versions side by side (and the
    published numbers): what `citeflow report` writes. The versions are named, never looked up; a label two
    of them share (the same strategy benchmarked twice) gets the version appended, so no column hides another.
    """
    import pyarrow.parquet as pq

    from citeflow.evaluation.report import scidocs_input, write_report
    from citeflow.manifest import VERSION_RE

    if not versions:
        raise CiteflowError("name the benchmark versions to compare: --benchmark VERSION (repeatable)")
    manifests = []
    for version in dict.fromkeys(versions):
        if not VERSION_RE.fullmatch(version):
            raise CiteflowError(f"{version!r} is not a version id (16 hex characters, as `citeflow artifacts` lists)")
        manifest = store.read_manifest(snapshot, STAGE, version)
        if manifest is None:
            raise CiteflowError(f"snapshot {snapshot!r} has no complete benchmark version {version}")
        manifests.append(manifest)
    tables = [pq.read_table(m.table_path("scores")).to_pylist() for m in manifests]
    seen: dict[str, int] = {}
    for rows in tables:
        for label in {r["label"] for r in rows}:
            seen[label] = seen.get(label, 0) + 1
    rows = []
    for manifest, table in zip(manifests, tables, strict=True):
        for row in table:
            if seen[row["label"]] > 1:
                row["label"] = f"{row['label']} ({manifest.version})"
            rows.append(row)
    out.mkdir(parents=True, exist_ok=True)
    # published numbers only beside scores of one SciDocs folder that may be the published one
    folders = {scidocs_input(m.inputs) for m in manifests}
    title = f"citeflow benchmark — snapshot {snapshot}: {', '.join(dict.fromkeys(versions))}"
    return write_report(rows, out, title, scidocs=folders.pop() if len(folders) == 1 else None)
