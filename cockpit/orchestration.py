"""The Airflow side of citeflow: stage tasks and Assets, shared by every citeflow DAG.

The trigger forms (Params) are in `cockpit/params.py`; the run settings taken from them, and the RunConfig
every task builds from those (with the Airflow connections below), in `cockpit/run_settings.py`.

The DAG files in `dags/` stay thin: they pick a schedule and the task that turns a DAG run into run
settings (`check_inputs`), then call `stage_tasks(settings)`, which lays out one task per stage of
`citeflow.registry`, on its edges:

    build_graph >> filter_leakage >> embed_graph >> per_strategy[scincl|specter](
        mine_triplets >> train_encoder >> [embed_papers, embed_papers_base] >> benchmark)

- `check_inputs` validates everything a user typed (snapshot id, paths, settings) before any work; a
  mistake fails the run at once with one clear message (`AirflowFailException`: no retries).
- A stage task is handed its inputs: the versions its upstream tasks made in this run (their XCom), read
  back from the artifact root, and runs its stage once on them (`citeflow.jobs.pipeline.run_handed`); it never builds
  another stage. A version that is gone (moved aside by `--repair`, deleted) fails the task in one line
  naming the task to clear. A registered variant (`citeflow.registry.Variant`: the benchmark's untrained base
  model, embed_papers with `model=base`) is a task of its own, `embed_papers_base`, skipped when the run does
  not ask for it. An up-to-date stage is not re-run: its task pushes the
  existing manifest's summary to XCom and ends as *skipped*, so the grid shows at a glance what was
  cached; later stages run anyway (trigger rule `none_failed`).
- A stage that built a version records an Asset event (`citeflow.<stage>`) whose extra carries the
  version, row counts, manifest path and headline metrics. Each task also declares its upstream stage's
  Asset as an inlet, so Airflow's asset graph shows the stages' lineage.
- Spark's master comes from the Airflow connection `spark_default` (env `CITEFLOW_SPARK_CONN_ID`), as
  with the Spark provider's operators: host `local[*]`, `yarn`, `spark://host` + port, `k8s://...`;
  its extra's `spark.*` keys become Spark conf. A host `sc://host` (+ port, default 15002) is a Spark
  Connect server (`spark.remote`): the task holds no driver, only a thin client. Without the connection
  Spark runs `local[*]`. Each task
  reads the connection itself: its extras (keys, passwords) never enter the run settings, XCom or logs,
  and manifests record them redacted (`citeflow.redaction`). Where Spark runs and what it may load or
  write (`spark.master`, `spark.remote`, `spark.conf`, `spark.local_dir`) is the connection's business, the admins':
  the trigger form's overrides cannot set them.
- Training and embedding go to the `gpu` pool (env `CITEFLOW_GPU_POOL`) and queue (`CITEFLOW_GPU_QUEUE`),
  and start training as its own process (`python -m citeflow.models.training.train` / torchrun).
- Distributed PBG (`embed_graph.machines=N` > 1): `embed_graph` runs the stage as rank 0 and
  `embed_graph_rank`, mapped over ranks 1..N-1 (`embed_graph_ranks` lists them; none when N is 1), runs
  one rank per task, wherever a worker takes it; they meet through the shared artifact root
  (`citeflow.jobs.embed_graph.follow`). All N tasks must run at once: they share the `pbg` pool (env
  `CITEFLOW_PBG_POOL`, at least N slots) and queue (`CITEFLOW_PBG_QUEUE`; the rank tasks
  `CITEFLOW_PBG_RANK_QUEUE`). Where rank 0 serves the rendezvous comes from the Airflow connection
  `pbg_rendezvous` (env `CITEFLOW_PBG_CONN_ID`): its port, and its host (the worker `embed_graph` runs on;
  empty: whichever it is, published to the ranks). Like Spark's, the trigger form cannot set it.

Only `airflow.sdk` and the standard library are imported here at module level: the scheduler parses the
DAG files every few seconds. Stage code (pyspark, torch, ...) is imported inside the tasks.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from typing import Any

from airflow.sdk import Asset, get_current_context, task, task_group

from citeflow.cockpit.run_settings import run_config
from citeflow.cockpit.settings import (
    GPU_POOL,
    GPU_QUEUE,
    PBG_POOL,
    PBG_QUEUE,
    PBG_RANK_QUEUE,
    TASK_RETRIES,
    TASK_RETRY_DELAY_S,
)
from citeflow.registry import REGISTRY, REPORTS, STAGES, STRATEGIES, Stage

# Manifest metrics an Asset event carries first (the rest of the scalar metrics follow, up to HEADLINE_MAX).
HEADLINE_FIRST = (
    "papers",
    "citations",
    "mode",
    "mapped_share",
    "removed_papers",
    "entities",
    "final_loss",
    "link_prediction.mrr",
    "link_prediction.auc",
    "queries",
    "triplets",
    "collisions",
    "triplets_per_second",
    "strategy",
    "model",
    "trained.average",
    "base.average",
    "trained.mean",
    "base.mean",
    # the trained model's change over its base on SciDocs' average (or the mean of the numbers there are), with
    # its 95% paired bootstrap interval and whether that leaves 0 out (jobs/benchmark.py `with_gains`)
    "gain.measure",
    "gain.mean",
    "gain.low",
    "gain.high",
    "gain.shown",
    "bootstrap.resamples",
    "bootstrap.seed",
)
HEADLINE_MAX = 20


def task_defaults() -> dict[str, Any]:
    """The `default_args` of citeflow's DAGs: every task retried (`TASK_RETRIES`, `TASK_RETRY_DELAY_S`), since a
    stage task may be retried whole: the stage skips what is committed, its lease is taken over from a holder
    that died, and training resumes from its last checkpoint."""
    return {"retries": TASK_RETRIES, "retry_delay": datetime.timedelta(seconds=TASK_RETRY_DELAY_S)}


def _bound_to_worker() -> None:
    """This task process dies with the worker's process that supervises it. Airflow starts a task in a process
    group of its own, so a worker killed as a whole (its machine lost, its group SIGKILLed) would otherwise leave
    the task running on as an orphan: holding its version's lease (so the retry waits for it) and writing into
    the folder a retry builds in. Its own children (Spark's JVM, the training guard) die with it in turn."""
    from citeflow.process import die_with_parent

    die_with_parent()


def stage_asset(stage: str) -> Asset:
    """The Asset a stage's task updates: one per stage, named after it."""
    return Asset(name=f"citeflow.{stage}", uri=f"citeflow://{stage}")


def _fail(message: str) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    raise AirflowFailException(message)


def check_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Validate a run's settings exactly as the stages will use them; a user mistake fails with one line."""
    from citeflow.errors import CiteflowError
    from citeflow.jobs.pipeline import preflight, stages_until

    try:
        config = run_config(settings)
        preflight(config, stages_until(None))
    except CiteflowError as exc:
        _fail(f"citeflow: {exc}")
    return settings


def headline(metrics: dict[str, Any]) -> dict[str, Any]:
    """A few scalar metrics for the Asset event (nested dicts flattened one level as `a.b`)."""
    flat: dict[str, Any] = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items() if isinstance(v, (int, float, bool, str))})
        elif isinstance(value, (int, float, bool)) or (isinstance(value, str) and len(value) <= 80):
            flat[key] = value
    ordered = [k for k in HEADLINE_FIRST if k in flat] + [k for k in flat if k not in HEADLINE_FIRST]
    return {k: flat[k] for k in ordered[:HEADLINE_MAX]}


def task_id_of(name: str) -> str:
    """The task id of a stage, or of a variant's task (`<stage>_<variant>`), in the DAG `stage_tasks` lays out."""
    stage = REGISTRY.get(name) or REGISTRY[_variant(name).stage]
    return f"per_strategy.{name}" if stage.per_strategy else name


def _variant(task_name: str):
    return next(v for s in REGISTRY.values() for v in s.variants if v.task_id == task_name)


def handed_versions(stage: str, config, ti) -> dict[str, Any]:
    """The versions this task's upstream tasks made in this run (their XCom summaries), read back from the
    artifact root: by `citeflow.jobs.pipeline.handed_inputs`' names, None where a task made none or its version is
    gone."""
    from citeflow.artifacts import ArtifactStore
    from citeflow.jobs.pipeline import handed_inputs

    store = ArtifactStore(config.artifacts, config.store)
    given: dict[str, Any] = {}
    for name, (upstream_stage, _) in handed_inputs(stage, config).items():
        # a per-strategy task reads the task of its own strategy (its map index); a shared one, the unmapped task
        mapped = REGISTRY[upstream_stage].per_strategy
        summary = ti.xcom_pull(task_ids=task_id_of(name), map_indexes=ti.map_index if mapped else -1)
        version = summary.get("version") if isinstance(summary, dict) else None
        given[name] = store.read_manifest(config.snapshot, upstream_stage, version) if version else None
    return given


def run_stage_task(
    stage: str, settings: dict[str, Any], strategy: str | None = None, variant: str | None = None
) -> dict[str, Any]:
    """Body of a stage task: run the stage once on the versions its upstream tasks made (never building one),
    then publish an Asset event or, when cached, end as skipped. `variant`: the task of a registered variant
    (`<stage>_<variant>`), the stage under the variant's settings; skipped when the run does not want it."""
    from airflow.sdk.exceptions import AirflowSkipException

    from citeflow.errors import CiteflowError
    from citeflow.jobs.pipeline import MissingInput, run_handed, with_strategy
    from citeflow.redaction import redact

    _bound_to_worker()
    context = get_current_context()
    try:
        config = run_config(settings)
    except CiteflowError as exc:
        _fail(f"citeflow: {exc}")
    if strategy is not None:
        config = with_strategy(config, strategy)
    if variant is not None:
        wanted = _variant(variant)
        if not wanted.wanted(config):
            raise AirflowSkipException(f"{variant}: not asked for ({wanted.when} is off)")
        config = wanted.config(config)
    try:
        manifest = run_handed(stage, config, handed_versions(stage, config, context["ti"]))
    except MissingInput as exc:
        _fail(f"citeflow: {exc}")  # no retry rebuilds it: the user clears the task named
    summary = {
        "stage": stage,
        "artifacts": settings["artifacts"],
        "snapshot": manifest.snapshot,
        "version": manifest.version,
        "manifest": f"{manifest.path}/_manifest.json",
        "cached": manifest.skipped,
        "strategy": strategy,
        "rows": {name: t["rows"] for name, t in manifest.tables.items()},
        "metrics": headline(manifest.metrics),
    }
    summary["built"], how = how_built(manifest)
    if stage == "benchmark":
        summary["report"] = os.path.join(manifest.path, "report.html")
        print(f"benchmark report of version {manifest.version}: {summary['report']}")
    summary = redact(summary)  # manifests are redacted already; older ones may not be
    if manifest.skipped:
        # XCom first, so the artifact view and later readers find the version this run used.
        context["ti"].xcom_push(key="return_value", value=summary)
        print(f"{stage}: cached version {manifest.version} at {manifest.path}")
        raise AirflowSkipException(f"{stage}: cached, version {manifest.version} is up to date")
    if manifest.reused_from:
        where = f"of snapshot {how} (same inputs and settings) at {manifest.path}"
        print(f"{stage}: reused version {manifest.version} {where}")
    else:
        print(f"{stage}: built version {manifest.version} {how} at {manifest.path}")
    context["outlet_events"][stage_asset(stage)].extra = {
        k: summary[k] for k in ("snapshot", "version", "manifest", "strategy", "built", "rows", "metrics")
    }
    return summary


def how_built(manifest) -> tuple[str, str]:
    """How a stage's version came to be, for the task log and the Asset event's `built`: `cached` (up to
    date, not re-run), `reused` (copied from another snapshot's identical version), `from_diff` (build_graph
    merged a base release's build with a release diff, or filter_leakage applied a paper-ids diff to a base
    release's lines), `warm_start` (embed_graph started from a previous release's embeddings), `keys_carried`
    (filter_leakage on a graph merged from a diff, with the base release's paper keys carried over, its
    paper-ids table parsed) or `full`; and the words the log line says it with."""
    if manifest.skipped:
        return "cached", "up to date"
    if manifest.reused_from:
        return "reused", str(manifest.reused_from["snapshot"])
    diff = manifest.metrics.get("from_diff")
    if isinstance(diff, dict):
        base = diff.get("base", {})
        return "from_diff", (
            f"from the diff {diff.get('start')} -> {diff.get('end')} onto version {base.get('version')} of "
            f"snapshot {base.get('snapshot')}"
        )
    warm = manifest.metrics.get("warm_start")
    if isinstance(warm, dict):
        return "warm_start", (
            f"warm-started from version {warm.get('version')} of snapshot {warm.get('snapshot')} "
            f"({warm.get('epochs')} epochs)"
        )
    keys = manifest.metrics.get("paper_keys")
    carried = None
    if isinstance(keys, dict) and isinstance(keys.get("carried_from"), dict):
        source = keys["carried_from"]
        carried = (
            f"the paper keys of version {source.get('version')} of snapshot {source.get('snapshot')} "
            f"carried over ({keys.get('papers_keyed')} papers keyed)"
        )
    lines = manifest.metrics.get("paper_id_lines")
    applied = lines.get("from_diff") if isinstance(lines, dict) else None
    if isinstance(applied, dict):
        base = applied.get("base", {})
        words = (
            f"with the paper-ids diff {applied.get('start')} -> {applied.get('end')} applied onto the lines of "
            f"version {base.get('version')} of snapshot {base.get('snapshot')}"
        )
        return "from_diff", words + (f" and {carried}" if carried else "")
    if carried:
        return "keys_carried", f"with {carried}"
    return "full", "in full"


def run_report_task(name: str, settings: dict[str, Any], strategy: str) -> dict[str, Any]:
    """Body of a registered report's task (`citeflow.registry.REPORTS`; the releases DAG's `drift`, after the
    benchmark): the report of this release against the release its graph was merged from (the report module's
    `previous_release`); skipped for a release built from its shards (it has no previous one)."""
    import importlib

    from airflow.sdk.exceptions import AirflowSkipException

    from citeflow.artifacts import ArtifactStore
    from citeflow.errors import CiteflowError

    _bound_to_worker()
    report = importlib.import_module(REPORTS[name].module)
    context = get_current_context()
    try:
        config = run_config(settings)
        store = ArtifactStore(config.artifacts, config.store)
        before = report.previous_release(store, config.snapshot, strategy)
        if before is None:
            raise AirflowSkipException(f"{name}: this release was built from its shards; no previous release")
        manifest = report.run(store, before, config.snapshot, strategy=strategy)
    except CiteflowError as exc:
        _fail(f"citeflow: {exc}")
    summary = {
        "stage": name,
        "artifacts": settings["artifacts"],
        "snapshot": manifest.snapshot,
        "version": manifest.version,
        "manifest": f"{manifest.path}/_manifest.json",
        "cached": manifest.skipped,
        "strategy": strategy,
        "rows": {table: t["rows"] for table, t in manifest.tables.items()},
        "metrics": headline(manifest.metrics),
    }
    context["ti"].xcom_push(key="return_value", value=summary)
    print(report.table_text(manifest))
    return summary


def run_rank_task(settings: dict[str, Any], rank: int) -> dict[str, Any]:
    """Body of an `embed_graph_rank` task: rank `rank` of distributed PBG; skipped when the version is cached."""
    from airflow.sdk.exceptions import AirflowSkipException

    from citeflow.errors import CiteflowError
    from citeflow.jobs.pipeline import MissingInput, follow_rank

    _bound_to_worker()
    try:
        config = run_config(settings)
        leakage = handed_versions("embed_graph", config, get_current_context()["ti"])["filter_leakage"]
        if leakage is None:
            raise MissingInput(
                "embed_graph's ranks need the version that task filter_leakage of this run made, and it is gone: "
                "clear task filter_leakage to build it again"
            )
        manifest = follow_rank(config, rank, leakage)
    except CiteflowError as exc:
        _fail(f"citeflow: {exc}")
    if manifest.skipped:
        raise AirflowSkipException(f"embed_graph: version {manifest.version} is up to date; rank {rank} not needed")
    print(f"embed_graph: rank {rank} trained its share of version {manifest.version} at {manifest.path}")
    return {
        "stage": "embed_graph",
        "rank": rank,
        "version": manifest.version,
        "manifest": f"{manifest.path}/_manifest.json",
    }


def _worker_slots(stage: Stage) -> dict[str, Any]:
    """The Airflow pool and queue of the kind of worker a stage declares (`citeflow.registry.Stage.worker`)."""
    return {
        "default": {},
        "pbg": {"pool": PBG_POOL, "queue": PBG_QUEUE},
        "gpu": {"pool": GPU_POOL, "queue": GPU_QUEUE},
    }[stage.worker]


def _variant_operator(stage: Stage, variant):
    """The task of a registered variant (`<stage>_<variant>`, e.g. embed_papers_base): the stage under the variant's
    settings, on the worker and with the Assets of its stage; always per strategy when its stage is."""
    decorate = task(
        task_id=variant.task_id,
        outlets=[stage_asset(stage.name)],
        inlets=[stage_asset(name) for name in stage.upstream],
        trigger_rule="none_failed",
        doc_md=f"{stage.summary} ({variant.name}: {dict(variant.changes)}, when {variant.when})",
        **_worker_slots(stage),
    )

    def per_strategy(settings: dict, strategy: str) -> dict:
        return run_stage_task(stage.name, settings, strategy, variant=variant.task_id)

    return decorate(per_strategy)


def _stage_operator(stage: Stage) -> Callable[..., Any]:
    """The task of one registered stage: its Asset as outlet, its upstream stages' Assets as inlets."""
    decorate = task(
        task_id=stage.name,
        outlets=[stage_asset(stage.name)],
        inlets=[stage_asset(name) for name in stage.upstream],
        trigger_rule="none_failed",
        doc_md=stage.summary,
        **_worker_slots(stage),
    )
    if stage.per_strategy:

        def per_strategy(settings: dict, strategy: str) -> dict:
            return run_stage_task(stage.name, settings, strategy)

        return decorate(per_strategy)

    def shared(settings: dict) -> dict:
        return run_stage_task(stage.name, settings)

    return decorate(shared)


def stage_tasks(settings: Any, *, reports: bool = False) -> None:
    """Lay out one task per registered stage after `settings` (the XComArg of the DAG's check_inputs task), on
    the registry's edges: the shared stages first, then the per-strategy ones in the `per_strategy` task group,
    mapped over the triplet strategies; with `reports`, each registered report (the drift report against the
    previous release) follows the stage it starts from. Distributed PBG's other ranks (`embed_graph_rank`) run beside
    `embed_graph`, after what it builds on."""
    shared = [REGISTRY[name] for name in STAGES if not REGISTRY[name].per_strategy]
    per = [REGISTRY[name] for name in STAGES if REGISTRY[name].per_strategy]

    @task(trigger_rule="none_failed")
    def embed_graph_ranks(settings: dict) -> list[int]:
        try:
            machines = run_config(settings).embed_graph.machines
        except Exception as exc:  # noqa: BLE001 - check_inputs validated these settings; say what changed
            _fail(f"citeflow: {exc}")
        return list(range(1, machines))

    @task(task_id="embed_graph_rank", pool=PBG_POOL, queue=PBG_RANK_QUEUE, trigger_rule="none_failed")
    def embed_graph_rank(settings: dict, rank: int) -> dict:
        return run_rank_task(settings, rank)

    @task
    def triplet_strategies(settings: dict) -> list[str]:
        choice = settings["triplet_strategy"]
        return list(STRATEGIES) if choice == "both" else [choice]

    def report_operator(name: str):
        @task(task_id=name, trigger_rule="none_failed")
        def report_task(settings: dict, strategy: str) -> dict:
            return run_report_task(name, settings, strategy)

        return report_task

    @task_group(group_id="per_strategy")
    def per_strategy(settings: dict, strategy: str) -> None:
        inside: dict[str, Any] = {}
        for stage in per:
            inside[stage.name] = _stage_operator(stage)(settings, strategy)
            for name in stage.upstream:
                if name in inside:
                    inside[name] >> inside[stage.name]
            for variant in stage.variants:  # its own task, on the edges of the stage it varies
                read = REGISTRY[variant.stage]
                inside[variant.task_id] = _variant_operator(read, variant)(settings, strategy)
                for name in read.upstream:
                    if name in inside:
                        inside[name] >> inside[variant.task_id]
                inside[variant.task_id] >> inside[stage.name]
        for report in REPORTS.values() if reports else ():  # a per-strategy report (all of them are, so far)
            inside[report.after] >> report_operator(report.name)(settings, strategy)

    tasks: dict[str, Any] = {}
    for stage in shared:
        tasks[stage.name] = _stage_operator(stage)(settings)
        for name in stage.upstream:
            tasks[name] >> tasks[stage.name]
        if stage.name == "embed_graph":
            # the other PBG ranks run beside rank 0, each its own task (one per rank, on any worker of the pool)
            ranks = embed_graph_rank.partial(settings=settings).expand(rank=embed_graph_ranks(settings))
            for name in stage.upstream:
                tasks[name] >> ranks
    group = per_strategy.partial(settings=settings).expand(strategy=triplet_strategies(settings))
    for name in {name for stage in per for name in stage.upstream if name in tasks}:
        tasks[name] >> group
