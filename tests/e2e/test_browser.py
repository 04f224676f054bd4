"""Airflow's own UI in headless Chromium: log in, trigger `citeflow_rebuild` from its Params form, wait for
the run, then open a task instance's "Artifacts" tab (the citeflow plugin's external view), and the benchmark's,
which shows the drift report against an earlier release (`citeflow compare`); then every stage task's Artifacts
tab and the benchmark's report, each no wider than the 1,400 px window, the benchmark's opening with its answer
(screenshots `benchmark-tab-1400` and `report-1400`). tests/e2e/test_report_width.py checks the same pages'
widths in a few seconds, without Airflow.

Runs a real Airflow (`cockpit/local_airflow/`: standalone, SQLite, LocalExecutor) in a temp AIRFLOW_HOME
on a free port, on the generated 3,000-paper snapshot; a few minutes on 2 cores. The artifact root holds
`citeflow_rebuild`'s versions of the same snapshot but its build_graph (`seeded_artifacts`): the run builds
build_graph (a real Spark job in a LocalExecutor task process) and reuses the versions after it. Needs
Debian's Chromium (`apt-get install chromium`; the test skips without it) and Playwright for Python, which
drives that Chromium: Playwright's own browser downloads are never used. Screenshots of every step go to
the test's temp folder, and to `test-screenshots/` in the repository when CITEFLOW_SCREENSHOTS is set:

    CITEFLOW_SCREENSHOTS=1 .venv/bin/python -m pytest tests/e2e/test_browser.py -m browser
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import urllib.parse
from pathlib import Path

import pytest

from tests.e2e.airflow_cli import FAST_OVERRIDES
from tests.e2e.airflow_server import REPO, RestClient, airflow_local, http_get

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DAG_ID = "citeflow_rebuild"
RUN_ID = "browser-test"
RUN_TIMEOUT_S = 15 * 60
ARTIFACT_PAGE = "/citeflow/artifacts/task?dag_id={dag_id}&run_id={run_id}&task_id={task_id}&map_index=-1"
REPORT_PAGE = "/citeflow/artifacts/report?dag_id={dag_id}&run_id={run_id}&task_id={task_id}&map_index={map_index}"
WIDTH = 1400  # the window's width: no page may be wider
PAGE_WIDTH = "document.documentElement.scrollWidth"
FIRST_LINE = "document.body.innerText.trim().split('\\n')[0]"  # the first line of text a reader sees


def needs_chromium():
    if not os.path.exists(CHROMIUM):
        pytest.skip("no Chromium at /usr/bin/chromium (apt-get install chromium; .ci/run installs it)")
    return pytest.importorskip(
        "playwright.sync_api", reason="Playwright for Python is not installed (pip install -e .[test])"
    )


@pytest.fixture(scope="module")
def airflow_server(airflow_rebuild, tmp_path_factory):
    """A local Airflow with citeflow's DAGs and plugins in a temp home; stopped whatever happens.

    Started after `airflow_rebuild` (which the run's artifact root is seeded from) is built, so that the
    server's processes, busy even when idle, do not share the cores with that build.
    """
    home = tmp_path_factory.mktemp("airflow-server")
    cfg = airflow_local.LocalAirflowConfig(home=home, port=airflow_local.free_port(), dags=REPO / "dags")
    handle = airflow_local.start(cfg, timeout=300)
    try:
        RestClient(handle).wait_for_dag(DAG_ID)
        yield handle
    finally:
        # a component outlives SIGTERM by the whole default grace (30 s) after a DAG run; a throwaway home
        # needs no graceful shutdown: SIGKILL after 5 s (the test of stop_group: tests/unit/test_local_airflow.py)
        handle.stop(timeout=5)


def artifact_url(handle, run_id: str, task_id: str = "build_graph") -> str:
    return handle.url + ARTIFACT_PAGE.format(dag_id=DAG_ID, run_id=urllib.parse.quote(run_id, safe=""), task_id=task_id)


def test_artifact_view_refuses_anonymous_requests(airflow_server):
    url = artifact_url(airflow_server, "x")
    anonymous, body = http_get(url)
    assert anonymous in (401, 403), f"plugin route served without a login: {anonymous} {body[:300]}"
    # with a login it gets past authentication: run x has no artifact, so the plugin itself answers (404)
    logged_in, body = http_get(url, token=airflow_server.token())
    assert logged_in not in (401, 403) and logged_in < 500, f"{logged_in} {body[:500]}"


class Screenshots:
    """Numbered screenshots in the test's folder, copied to <repo>/test-screenshots when asked for."""

    def __init__(self, page, folder: Path):
        self.page, self.folder, self.count = page, folder, 0
        folder.mkdir(parents=True, exist_ok=True)

    def __call__(self, name: str) -> Path:
        self.count += 1
        path = self.folder / f"{self.count:02d}-{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def publish(self) -> None:
        if os.environ.get("CITEFLOW_SCREENSHOTS"):
            target = REPO / "test-screenshots"
            target.mkdir(exist_ok=True)
            for stale in target.glob("*.png"):  # of an earlier run
                stale.unlink()
            for shot in self.folder.glob("*.png"):
                shutil.copy2(shot, target / shot.name)


@pytest.mark.timeout(RUN_TIMEOUT_S + 600)
def test_trigger_form_run_and_artifacts_tab(airflow_server, generated_s2orc, seeded_artifacts, tmp_path):
    sync_api = needs_chromium()
    snap, _ = generated_s2orc
    artifacts = seeded_artifacts
    shutil.rmtree(artifacts / "dag-demo" / "build_graph")
    rest = RestClient(airflow_server)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": WIDTH, "height": 1000})
        page = context.new_page()
        page.set_default_timeout(30_000)
        shot = Screenshots(page, tmp_path / "screenshots")
        try:
            _log_in(sync_api, page, airflow_server, shot)
            _trigger_from_form(page, airflow_server, shot, snap, artifacts)

            run = rest.wait_for_run(DAG_ID, RUN_ID, timeout=RUN_TIMEOUT_S)
            page.reload()
            shot("run-finished")
            assert run["state"] == "success", rest.failure_report(DAG_ID, RUN_ID)
            # the run got exactly what the form was filled with
            assert {
                k: run["conf"][k] for k in ("snapshot", "corpus", "artifacts", "triplet_strategy", "overrides")
            } == {
                "snapshot": "browser-test",
                "corpus": str(snap / "corpus"),
                "artifacts": str(artifacts),
                "triplet_strategy": "specter",
                "overrides": FAST_OVERRIDES,
            }
            (manifest_path,) = artifacts.glob("browser-test/build_graph/*/_manifest.json")
            manifest = json.loads(manifest_path.read_text())
            version = manifest["version"]
            assert manifest["reused_from"] is None  # built in this run
            (leak_path,) = artifacts.glob("browser-test/filter_leakage/*/_manifest.json")
            assert json.loads(leak_path.read_text())["reused_from"]["snapshot"] == "dag-demo"

            _artifacts_tab(page, airflow_server, shot, version)
            _drift_in_the_benchmark_tab(page, airflow_server, shot, snap, artifacts)
            _every_artifacts_page_fits(page, airflow_server, shot)

            # the logged-in user's token (the UI's `_token` cookie) opens the page; no credentials do not
            token = next(c["value"] for c in context.cookies() if c["name"] == "_token")
            url = artifact_url(airflow_server, RUN_ID)
            assert http_get(url)[0] in (401, 403)
            status, body = http_get(url, token=token)
            assert status == 200 and version in body, f"{status} {body[:500]}"
        except BaseException:
            with contextlib.suppress(Exception):
                shot("failure")
            raise
        finally:
            shot.publish()
            browser.close()


def _log_in(sync_api, page, server, shot) -> None:
    page.goto(server.url + "/")
    page.get_by_label("Username").wait_for()  # the simple auth manager's login page
    shot("login")
    page.get_by_label("Username").fill(server.cfg.user)
    page.get_by_label("Password").fill(server.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(server.url + "/")
    page.get_by_role("link", name="Dags").first.click()
    page.wait_for_url(server.url + "/dags")
    page.get_by_role("link", name=DAG_ID, exact=True).wait_for()
    shot("dags")
    page.get_by_role("link", name=DAG_ID, exact=True).click()
    page.wait_for_url(f"**/dags/{DAG_ID}")
    # the list (one Trigger button per DAG) lingers a moment after the URL changed
    sync_api.expect(page.get_by_role("button", name="Trigger Dag")).to_have_count(1)
    page.get_by_role("link", name="Overview", exact=True).wait_for()
    shot("dag")


def _trigger_from_form(page, server, shot, snap: Path, artifacts: Path) -> None:
    """Fill the trigger dialog's Params form field by field (not the JSON), then Trigger."""
    page.get_by_role("button", name="Trigger Dag").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="Run Parameters").wait_for()

    # A form field's label is not tied to its input (no accessible name); each input is named
    # `element_<param key>`, which is also the conf key it sets.
    def field(key: str):
        return dialog.locator(f"[name=element_{key}]")

    def field_group(key: str):  # the row of one Param: its label, input and description
        return dialog.get_by_role("group").filter(has=page.locator(f"[name=element_{key}]"))

    field("snapshot").fill("browser-test")  # string Param: a text input
    field("corpus").fill(str(snap / "corpus"))
    field("paper_ids").fill(str(snap / "paper-ids"))
    field("scidocs").fill(str(snap / "scidocs"))
    field("artifacts").fill(str(artifacts))
    # enum Param: a combobox (react-select) whose choice lands in a hidden input of the same name
    field_group("triplet_strategy").get_by_role("combobox").click()
    page.get_by_role("listbox").get_by_role("option", name="specter", exact=True).click()
    assert field("triplet_strategy").input_value() == "specter"
    # array-of-strings Param: a textarea, one item a line
    field("overrides").fill("\n".join(FAST_OVERRIDES))
    unpause = dialog.get_by_role("checkbox", name=re.compile("^Unpause"))
    assert unpause.is_checked(), "the DAG starts paused; the form's 'Unpause on trigger' must stay on"
    shot("trigger-form")
    dialog.get_by_role("button", name="Advanced Options").click()
    dialog.get_by_label("Run ID").fill(RUN_ID)
    shot("trigger-advanced")
    dialog.get_by_role("button", name="Trigger", exact=True).click()
    page.wait_for_url(f"**/dags/{DAG_ID}/runs/{RUN_ID}")
    # Airflow's UI may render the same toast twice (two elements, one id: seen in a fresh clone's suite), and
    # Playwright's strict mode refuses a locator that matches two
    page.get_by_text("Dag run has been successfully triggered").first.wait_for()
    shot("triggered")


def _artifacts_tab(page, server, shot, version: str) -> None:
    """From the run's task list to build_graph's task instance, then its Artifacts tab (the plugin's iframe)."""
    page.goto(f"{server.url}/dags/{DAG_ID}/runs/{RUN_ID}")
    page.get_by_role("table").get_by_role("link", name="build_graph", exact=True).click()
    page.wait_for_url(f"**/dags/{DAG_ID}/runs/{RUN_ID}/tasks/build_graph")
    page.get_by_role("link", name="Logs", exact=True).wait_for()
    shot("task-instance")
    page.get_by_role("link", name="Artifacts", exact=True).click()
    frame = page.frame_locator('iframe[title="Artifacts"]')
    frame.locator("body").wait_for(timeout=60_000)  # the plugin's page is plain HTML: no later rendering
    shot("artifacts-tab")
    src = page.locator('iframe[title="Artifacts"]').get_attribute("src")
    heading = frame.get_by_role("heading", level=1)
    assert heading.count() == 1, f"Artifacts tab ({src}) shows no <h1>: {frame.locator('body').inner_text()[:800]}"
    text = heading.inner_text()
    assert "build_graph" in text and "version" in text and version in text, text


def _drift_in_the_benchmark_tab(page, server, shot, snap: Path, artifacts: Path) -> None:
    """An earlier release of the same inputs (`browser-before`, every stage reused from the run's versions),
    compared with the run's release from the command line; the run's benchmark task (mapped over strategies:
    index 0, specter) then shows that drift report, its table and its plot, in its Artifacts tab."""
    from citeflow.cockpit.params import rebuild_params
    from citeflow.cockpit.run_settings import run_config, settings_from_params
    from citeflow.jobs.cli import main
    from citeflow.jobs.pipeline import run_pipeline

    params = {key: param.value for key, param in rebuild_params(str(artifacts)).items()}
    paths = {"corpus": str(snap / "corpus"), "paper_ids": str(snap / "paper-ids")}
    params |= {"scidocs": str(snap / "scidocs"), "artifacts": str(artifacts), "triplet_strategy": "specter"}
    params |= {"overrides": FAST_OVERRIDES, **paths}
    earlier = run_config(settings_from_params(params, snapshot="browser-before", **paths))
    built = run_pipeline(earlier, strategies=["specter"], report=lambda line: None)
    assert all(m.reused_from for m in built), [m.stage for m in built if not m.reused_from]
    compare = ["compare", "--snapshot", "browser-before", "--snapshot", RUN_ID, "--strategy", "specter"]
    assert main([*compare, "--artifacts", str(artifacts)]) == 0

    page.goto(f"{server.url}/dags/{DAG_ID}/runs/{RUN_ID}/tasks/per_strategy.benchmark/mapped/0")
    page.get_by_role("link", name="Artifacts", exact=True).click()
    frame = page.frame_locator('iframe[title="Artifacts"]')
    frame.locator("body").wait_for(timeout=60_000)
    heading = frame.get_by_role("heading", name="Drift against snapshot browser-before", level=2)
    heading.wait_for(timeout=30_000)
    shot("benchmark-drift")
    body = frame.locator("body").inner_text()
    assert "benchmark" in frame.get_by_role("heading", level=1).inner_text()
    assert "papers added" in body and "top-10 neighbour overlap mean" in body, body[:2000]
    assert frame.locator("img[alt='drift drift.png']").count() == 1


def _every_artifacts_page_fits(page, server, shot) -> None:
    """Each stage task's Artifacts tab of the run (the per-strategy ones at map index 0, specter), then the
    benchmark's report: neither Airflow's page nor the plugin's page in its iframe wider than the window; the
    benchmark tab and the report open with their answer, the tab's on a generated snapshot with no published
    numbers."""
    from citeflow.registry import REGISTRY, STAGES

    for stage in STAGES:
        task = f"per_strategy.{stage}/mapped/0" if REGISTRY[stage].per_strategy else stage
        page.goto(f"{server.url}/dags/{DAG_ID}/runs/{RUN_ID}/tasks/{task}")
        page.get_by_role("link", name="Artifacts", exact=True).click()
        page.frame_locator('iframe[title="Artifacts"]').get_by_role("heading", level=1).wait_for(timeout=60_000)
        inner = page.locator('iframe[title="Artifacts"]').element_handle().content_frame()
        wide, room = inner.evaluate(f"[{PAGE_WIDTH}, document.documentElement.clientWidth]")
        outer = page.evaluate(PAGE_WIDTH)
        if outer > WIDTH or wide > room:
            shot(f"too-wide-{stage}")
        assert outer <= WIDTH and wide <= room <= WIDTH, f"{stage}: page {outer} px, Artifacts {wide} px in {room}"
        if stage == "benchmark":
            first = inner.evaluate(FIRST_LINE)
            assert first.startswith("The trained model scores") and "not the published SciDocs" in first, first
            assert "(published" not in inner.locator("body").inner_text()
            shot("benchmark-tab-1400")
    benchmark = "per_strategy.benchmark"
    report = REPORT_PAGE.format(
        dag_id=DAG_ID, run_id=urllib.parse.quote(RUN_ID, safe=""), task_id=benchmark, map_index=0
    )
    page.goto(server.url + report)
    page.locator("section.answer").wait_for()
    shot("report-1400")
    assert page.evaluate(PAGE_WIDTH) <= WIDTH, f"report: {page.evaluate(PAGE_WIDTH)} px"
    first = page.evaluate(FIRST_LINE)
    assert first.startswith("The trained model scores"), first
