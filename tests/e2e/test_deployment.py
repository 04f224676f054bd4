"""citeflow's DAGs on Airflow as teams deploy it: PostgreSQL as the metadata database, Redis as Celery's broker,
Celery workers on citeflow's queues (`python -m citeflow.cockpit.deployment`, one deployment for every test
here: the module fixture `deployment`), driven through the REST API as a user's script drives it.

- The rebuild of a generated snapshot, triggered twice at once: every task succeeds on a worker that serves the
  queue its registry entry declares (the metadata database says which: the task instance's queue, and Celery's
  result of its message the worker); PBG's two ranks run on two workers at once; the second trigger waits for
  the first and finds every stage up to date; the artifacts equal those of `citeflow run` on the same snapshot.
- A worker that dies: its process group SIGKILLed while build_graph commits, then (the other worker) while
  train_encoder trains past a checkpoint. The scheduler fails each lost task when its heartbeat stops, the DAGs'
  retries run it again on the restarted worker, training resumes from its checkpoint, and the run ends with
  verified versions and no lease, staging folder or training work folder left.
- A backfill of three release dates with three runs at once: one version per stage and release, each release
  reading and writing only its own.
- The UI: the run's grid and a task's Artifacts tab, in headless Chromium.

Long tier (tests/conftest.py LONG_SCOPES). Needs Debian's postgresql and redis-server (`.ci/run` installs them).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from citeflow.cockpit.deployment.config import DEFAULT_WORKERS, DeploymentConfig
from citeflow.registry import REGISTRY, STAGES
from tests.e2e.conftest import DEPLOYED_OVERRIDES
from tests.e2e.deployment import quoted

DAG = "citeflow_rebuild"
RUN_TIMEOUT_S = 30 * 60
# the first test also waits for the deployment and its rebuild (module fixtures), the kill tests for their run
pytestmark = [pytest.mark.slow, pytest.mark.timeout(RUN_TIMEOUT_S + 15 * 60)]
DEFAULTS = DeploymentConfig()
# the queue each kind of worker a registry entry declares (`citeflow.registry.Stage.worker`) is sent to
QUEUE_OF_WORKER = {"default": "default", "gpu": DEFAULTS.gpu_queue, "pbg": DEFAULTS.pbg_queue}
HELPERS = {"check_inputs": "default", "triplet_strategies": "default", "embed_graph_ranks": "default"}


def declared_queue(task_id: str) -> str:
    """The queue a task of the rebuild must run on, from the registry (and the deployment's queue names)."""
    if task_id in HELPERS:
        return HELPERS[task_id]
    if task_id == "embed_graph_rank":
        return DEFAULTS.pbg_rank_queue
    name = task_id.removeprefix("per_strategy.")
    stage = REGISTRY.get(name) or next(
        REGISTRY[v.stage] for s in REGISTRY.values() for v in s.variants if v.task_id == name
    )
    return QUEUE_OF_WORKER[stage.worker]


def tasks_of(deployment, dag_id: str, run_id: str) -> dict[tuple[str, int], dict]:
    """Each task instance of a run, from the metadata database, with the Celery worker that ran it (Celery's
    result of the task's message, kept in the same database)."""
    rows = deployment.query(
        "select ti.task_id, ti.map_index, ti.state, ti.queue, ti.try_number, ti.start_date, ti.end_date, ct.worker "
        "from task_instance ti left join celery_taskmeta ct on ct.task_id = ti.external_executor_id "
        "where ti.dag_id = %s and ti.run_id = %s",
        dag_id,
        run_id,
    )
    keys = ("state", "queue", "try_number", "start", "end", "worker")
    return {(task, index): dict(zip(keys, rest, strict=True)) for task, index, *rest in rows}


def test_every_task_runs_on_a_worker_of_its_declared_queue(deployment, deployed_rebuild):
    first, second = deployed_rebuild.runs
    assert first["state"] == "success", deployment.rest().failure_report(DAG, deployed_rebuild.run_ids[0])
    tasks = tasks_of(deployment, DAG, deployed_rebuild.run_ids[0])
    serves = deployment.workers()
    assert serves == {w.name: w.queues for w in DEFAULT_WORKERS}
    ran_on: dict[str, set[str]] = {}
    for (task, index), ti in sorted(tasks.items()):
        assert ti["state"] == "success", (task, index, ti)
        assert ti["queue"] == declared_queue(task), (task, ti["queue"])
        worker = (ti["worker"] or "").split("@")[0]
        assert ti["queue"] in serves.get(worker, ()), f"{task} ({ti['queue']}) ran on worker {ti['worker']!r}"
        ran_on.setdefault(worker, set()).add(task)
    # every kind of worker did its share
    assert {"per_strategy.train_encoder", "per_strategy.embed_papers"} <= ran_on["gpu"]
    assert ran_on["pbg"] == {"embed_graph_rank"}
    assert {"build_graph", "filter_leakage", "embed_graph", "per_strategy.mine_triplets"} <= ran_on["default"]

    # PBG's two ranks: rank 0 (embed_graph) and rank 1 (embed_graph_rank[0]) on two workers, at the same time
    rank0, rank1 = tasks[("embed_graph", -1)], tasks[("embed_graph_rank", 0)]
    assert rank0["worker"] != rank1["worker"]
    assert max(rank0["start"], rank1["start"]) < min(rank0["end"], rank1["end"]), (rank0, rank1)
    (graph,) = deployed_rebuild.artifacts.glob("deployed/embed_graph/*/_manifest.json")
    report = json.loads((graph.parent / "pbg" / "mining" / "rank-1.json").read_text())
    launch = json.loads((graph.parent / "pbg" / "mining" / "launch.json").read_text())
    assert report["state"] == "done" and report["token"] == launch["token"] and launch["machines"] == 2

    # the second trigger of the same snapshot waited for the first, then found every stage up to date
    assert second["state"] == "success"
    assert second["start_date"] >= first["end_date"], (first, second)
    again = tasks_of(deployment, DAG, deployed_rebuild.run_ids[1])
    stages = {task: ti["state"] for (task, _), ti in again.items() if task not in HELPERS}
    assert set(stages.values()) == {"skipped"}, stages
    for stage in STAGES:
        assert len(list(deployed_rebuild.artifacts.glob(f"deployed/{stage}/[!.]*"))) == 1 + (stage == "embed_papers")


def test_deployed_artifacts_equal_a_citeflow_run(deployed_rebuild, generated_s2orc, tmp_path):
    """`citeflow run` of the same snapshot and settings (the same starting encoder folder too) into a root of its
    own, given only the deployment's embed_graph version (distributed PBG trains differently on every run,
    HOGWILD): it builds build_graph and filter_leakage itself, finds embed_graph up to date (the same version
    id), and builds every later stage from it. Every version id is the deployment's, and every table and the
    trained model equal the deployment's."""
    from citeflow.artifacts import ArtifactStore
    from tests.faults.conftest import digest

    snap, _ = generated_s2orc
    deployed = ArtifactStore(str(deployed_rebuild.artifacts))
    (graph,) = deployed.list_versions("deployed", "embed_graph")
    reference = tmp_path / "reference"
    shutil.copytree(graph.path, reference / "deployed" / "embed_graph" / graph.version)
    command = [sys.executable, "-m", "citeflow.jobs.cli", "run", "--snapshot", "deployed"]
    command += ["--corpus", str(snap / "corpus"), "--scidocs", str(snap / "scidocs")]
    command += ["--paper-ids", str(snap / "paper-ids"), "--artifacts", str(reference), "--strategy", "scincl"]
    model = f"train_encoder.model={deployed_rebuild.conf['model']}"
    for item in ["build_graph.format=auto", model, *DEPLOYED_OVERRIDES]:
        command += ["--set", item]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert f"embed_graph: version {graph.version} is up to date" in done.stdout + done.stderr

    built = ArtifactStore(str(reference))
    for stage in STAGES:
        ours = {m.version: m for m in deployed.list_versions("deployed", stage)}
        theirs = {m.version: m for m in built.list_versions("deployed", stage)}
        assert sorted(ours) == sorted(theirs), stage
        if stage == "embed_graph":
            continue
        for version, manifest in ours.items():
            assert digest(manifest) | {"metrics": None} == digest(theirs[version]) | {"metrics": None}, stage


def _leftovers(root: Path, snapshot: str, stage: str) -> list[str]:
    """What a killed build may have left in a stage's folder: a lease, a `.work` folder, a version folder
    without its manifest (a staging folder), a manifest's temporary file."""
    folder = root / snapshot / stage
    left = [p.name for p in folder.iterdir() if p.name.startswith(".") and p.name != ".leases.lock"]
    left += [
        p.name
        for p in folder.iterdir()
        if p.is_dir() and not p.name.startswith(".") and not (p / "_manifest.json").is_file()
    ]
    left += [str(p.relative_to(folder)) for p in folder.glob("*/.*.tmp")]
    return left


@pytest.fixture(scope="module")
def killed_workers(deployment, deployed_rebuild, tmp_path_factory):
    """One rebuild of the deployed snapshot in a copy of its artifact root without build_graph and
    train_encoder, during which two workers die: the default worker's whole process group is SIGKILLed while
    build_graph writes its manifest (`manifest-staged`: the manifest's temporary file written, not yet renamed),
    and the gpu worker's while train_encoder trains (held at step 4, just after its first checkpoint)."""
    root = tmp_path_factory.mktemp("killed") / "artifacts"
    shutil.copytree(deployed_rebuild.artifacts, root, copy_function=os.link)
    for stage in ("build_graph", "train_encoder"):
        shutil.rmtree(root / "deployed" / stage)
    conf = {**deployed_rebuild.conf, "artifacts": str(root)}
    rest = deployment.rest()
    kills = {}
    deployment.arm("manifest-staged")
    rest.trigger(DAG, "killed", conf)
    for stage, point, worker in (
        ("build_graph", "manifest-staged", "worker-default"),
        ("train_encoder", "train_encoder.step.4", "worker-gpu"),
    ):
        if stage != "build_graph":
            deployment.arm(point)
        held = deployment.held(timeout_s=RUN_TIMEOUT_S)
        assert held is not None, f"no process reached {point}: {rest.task_states(DAG, 'killed')}"
        restarts = deployment.restarts(worker)
        os.killpg(deployment.group_of(worker), signal.SIGKILL)
        kills[stage] = {"pid": held, "worker": worker, "at": time.monotonic()}
        # the held process (the task, or its training child) died with the worker
        deadline = time.monotonic() + 30
        while Path(f"/proc/{held}").exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        kills[stage]["orphan"] = Path(f"/proc/{held}").exists()
        while deployment.restarts(worker) == restarts:  # the launcher starts it again
            assert time.monotonic() < deadline + 60, f"{worker} was not restarted"
            time.sleep(1)
    run = rest.wait_for_run(DAG, "killed", timeout=RUN_TIMEOUT_S)
    return {"root": root, "run": run, "kills": kills, "tasks": tasks_of(deployment, DAG, "killed")}


def _history(deployment, task_id: str) -> list[tuple[int, str]]:
    return deployment.query(
        "select try_number, state from task_instance_history where dag_id = %s and run_id = %s and task_id = %s "
        "order by try_number",
        DAG,
        "killed",
        task_id,
    )


def _attempt_log(deployment, task_id: str, attempt: int) -> str:
    folder = deployment.home / "logs" / f"dag_id={DAG}" / "run_id=killed" / f"task_id={task_id}"
    paths = sorted(folder.glob(f"**/attempt={attempt}.log"))
    assert paths, f"no log of attempt {attempt} of {task_id} under {folder}"
    return paths[0].read_text(errors="replace")


def test_a_worker_killed_while_build_graph_commits_is_retried_to_a_clean_version(
    deployment, deployed_rebuild, killed_workers
):
    from citeflow.artifacts import ArtifactStore
    from tests.faults.conftest import digest

    assert killed_workers["run"]["state"] == "success", deployment.rest().failure_report(DAG, "killed")
    assert not killed_workers["kills"]["build_graph"]["orphan"], "the task outlived its worker"
    ti = killed_workers["tasks"][("build_graph", -1)]
    assert ti["state"] == "success" and ti["try_number"] == 2, ti
    assert [state for _, state in _history(deployment, "build_graph")] == ["failed"]
    assert "built version" in _attempt_log(deployment, "build_graph", 2)
    root = killed_workers["root"]
    store = ArtifactStore(str(root))
    (rebuilt,) = store.list_versions("deployed", "build_graph")
    (original,) = ArtifactStore(str(deployed_rebuild.artifacts)).list_versions("deployed", "build_graph")
    assert store.verify(rebuilt) == []
    assert digest(rebuilt) | {"metrics": None} == digest(original) | {"metrics": None}
    assert _leftovers(root, "deployed", "build_graph") == []
    # the stages after it found their versions up to date: the same version id as before the kill
    assert killed_workers["tasks"][("filter_leakage", -1)]["state"] == "skipped"


def test_a_worker_killed_while_training_resumes_from_the_checkpoint(deployment, deployed_rebuild, killed_workers):
    from citeflow.artifacts import ArtifactStore
    from tests.faults.conftest import digest

    assert killed_workers["run"]["state"] == "success", deployment.rest().failure_report(DAG, "killed")
    assert not killed_workers["kills"]["train_encoder"]["orphan"], "the training outlived its worker"
    task = "per_strategy.train_encoder"
    ti = killed_workers["tasks"][(task, 0)]
    assert ti["state"] == "success" and ti["try_number"] == 2, ti
    log = _attempt_log(deployment, task, 2)
    assert "resuming from ckpt-" in log and "(step 4 of" in log, log[-3000:]
    root = killed_workers["root"]
    store = ArtifactStore(str(root))
    (resumed,) = store.list_versions("deployed", "train_encoder")
    (original,) = ArtifactStore(str(deployed_rebuild.artifacts)).list_versions("deployed", "train_encoder")
    assert resumed.metrics["resumed_from_step"] == 4
    assert store.verify(resumed) == []
    # the resumed training is the uninterrupted one: the same model, the same training log
    assert digest(resumed) | {"metrics": None} == digest(original) | {"metrics": None}
    assert _leftovers(root, "deployed", "train_encoder") == []
    assert not (root / "deployed" / "train_encoder" / ".work").exists()


RELEASES = ("2024-01-01", "2024-01-02", "2024-01-03")


def test_a_backfill_of_three_releases_at_once_gives_each_its_own_versions(
    deployment, deployed_rebuild, generated_s2orc, tmp_path
):
    """Three dated releases of the generated snapshot, backfilled through the REST API with three runs at a time
    (the DAG itself runs one scheduled run at a time), into a copy of the deployed rebuild's artifact root: every
    release gets one version of each stage, its own (named after it, its inputs its own release's), each reused
    from the rebuild's versions of the same inputs and settings."""
    snap, _ = generated_s2orc
    releases = tmp_path / "releases"
    for date in RELEASES:
        shutil.copytree(snap, releases / date, copy_function=os.link)
    root = tmp_path / "artifacts"
    shutil.copytree(deployed_rebuild.artifacts, root, copy_function=os.link)
    overrides = [o for o in DEPLOYED_OVERRIDES if not o.startswith("embed_graph.machines")]
    conf = {
        "releases_root": str(releases),
        "artifacts": str(root),
        "triplet_strategy": "scincl",
        "model": deployed_rebuild.conf["model"],
        "overrides": overrides,
    }
    rest = deployment.rest()
    rest.wait_for_dag("citeflow_releases")
    status, dag = rest.send("PATCH", "dags/citeflow_releases", {"is_paused": False})
    assert status == 200, dag
    body = {
        "dag_id": "citeflow_releases",
        "from_date": f"{RELEASES[0]}T00:00:00Z",
        "to_date": f"{RELEASES[-1]}T00:00:00Z",
        "max_active_runs": 3,
        "dag_run_conf": conf,
        "reprocess_behavior": "none",
    }
    status, backfill = rest.send("POST", "backfills", body)
    assert status == 200, backfill
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        _, listing = rest.get("dags/citeflow_releases/dagRuns", limit=20)
        runs = [r for r in listing.get("dag_runs", []) if r.get("run_type") == "backfill"]
        if len(runs) == len(RELEASES) and all(r["state"] in ("success", "failed") for r in runs):
            break
        assert time.monotonic() < deadline, [(r["run_id"], r["state"]) for r in runs]
        time.sleep(10)
    assert all(r["state"] == "success" for r in runs), [
        rest.failure_report("citeflow_releases", r["run_id"]) for r in runs
    ]
    # more than one ran at a time
    spans = sorted((r["start_date"], r["end_date"]) for r in runs)
    assert any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False)), spans

    for date in RELEASES:
        for stage in STAGES:
            manifests = [json.loads(p.read_text()) for p in (root / date / stage).glob("*/_manifest.json")]
            expected = 2 if stage == "embed_papers" else 1  # the trained model's and the base model's
            assert len(manifests) == expected, (date, stage, [m["version"] for m in manifests])
            assert len([p for p in (root / date / stage).iterdir() if not p.name.startswith(".")]) == expected
            for manifest in manifests:
                assert manifest["snapshot"] == date
                assert manifest["reused_from"] is not None, (date, stage)
                for item in manifest["inputs"]:
                    if "path" in item and item["path"].startswith(str(root)):
                        assert item["path"].startswith(str(root / date) + "/"), (date, stage, item)
            assert _leftovers(root, date, stage) == []
    assert sorted(p.name for p in root.iterdir()) == sorted(["deployed", *RELEASES])


def test_the_ui_shows_the_run_grid_and_a_task_artifacts_tab(deployment, deployed_rebuild, tmp_path):
    from tests.e2e.test_browser import CHROMIUM, CHROMIUM_ARGS, Screenshots, _log_in, needs_chromium

    sync_api = needs_chromium()
    run_id = deployed_rebuild.run_ids[0]
    (graph,) = deployed_rebuild.artifacts.glob("deployed/build_graph/*/_manifest.json")
    version = json.loads(graph.read_text())["version"]
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.set_default_timeout(30_000)
        shot = Screenshots(page, tmp_path / "screenshots")
        try:
            _log_in(sync_api, page, deployment, shot)
            page.goto(f"{deployment.url}/dags/{DAG}/runs/{quoted(run_id)}")
            grid = page.get_by_role("link", name="build_graph", exact=True).first
            grid.wait_for()
            shot("run-grid")
            page.goto(f"{deployment.url}/dags/{DAG}/runs/{quoted(run_id)}/tasks/build_graph")
            page.get_by_role("link", name="Artifacts", exact=True).click()
            heading = page.frame_locator('iframe[title="Artifacts"]').get_by_role("heading", level=1)
            heading.wait_for(timeout=60_000)
            shot("artifacts-tab")
            text = heading.inner_text()
            assert "build_graph" in text and version in text, text
        finally:
            shot.publish()
            browser.close()
