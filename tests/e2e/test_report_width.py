"""The benchmark report and every stage's Artifacts page in headless Chromium, 1,400 px wide (and 1,000 px, about
Airflow's iframe beside its navigation): no page is wider than its window, and the report and the benchmark page
open with their answer sentence.

The fast half of tests/e2e/test_browser.py's width checks: no Airflow, no Spark. The pages are rendered straight
from `citeflow.evaluation.report.write_report` and `citeflow.cockpit.artifact_view.render_html` over the small artifact
root of
tests/support/artifact_pages.py (one version of every stage, with what widened the real pages: 20-column tables,
unbroken ids and paths, a 1,600 px plot, long JSON) and loaded from files. Chromium and Playwright as
test_browser.py uses them (`needs_chromium`: skipped without either).

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/e2e/test_report_width.py

Run as a script, it draws the two screenshots of docs/img/ from the demo's artifact root (`make demo`, realistic
numbers; read only) at 1,400 px: the report (`report-1400.png`, written again by this code into a temp folder)
and the benchmark's Artifacts page (`benchmark-tab-1400.png`):

    .venv/bin/python -m tests.e2e.test_report_width [ARTIFACT_ROOT [SNAPSHOT]]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

from tests.e2e.test_browser import CHROMIUM, CHROMIUM_ARGS, FIRST_LINE, PAGE_WIDTH, needs_chromium

pytestmark = [pytest.mark.slow, pytest.mark.browser]

WIDTHS = (1400, 1000)
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """{name: HTML file}: every stage's Artifacts page and the benchmark version's own report."""
    from citeflow.cockpit.artifact_view import render_html, summarize
    from tests.support.artifact_pages import SNAPSHOT, build_root

    root = tmp_path_factory.mktemp("pages")
    store, versions = build_root(root)
    files = {}
    for stage, version in versions.items():
        summary = summarize(store, SNAPSHOT, stage, version)
        files[stage] = root / f"{stage}.html"
        files[stage].write_text(render_html(summary, report_url="report" if stage == "benchmark" else ""))
        if stage == "benchmark":
            files["report"] = Path(summary["path"]) / "report.html"
    return files


@pytest.fixture(scope="module")
def chromium():
    sync_api = needs_chromium()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_is_wider_than_its_window(pages, chromium, width, tmp_path):
    page = chromium.new_page(viewport={"width": width, "height": 900})
    try:
        wide = {}
        for name, path in pages.items():
            page.goto(path.as_uri())
            if page.evaluate(PAGE_WIDTH) > width:
                page.screenshot(path=str(tmp_path / f"{name}-{width}.png"), full_page=True)
                wide[name] = page.evaluate(PAGE_WIDTH)
        assert wide == {}, f"pages wider than {width} px (screenshots in {tmp_path}): {wide}"
        assert set(pages) >= {"report", "benchmark", "build_graph", "filter_leakage"}
    finally:
        page.close()


def test_the_report_and_the_benchmark_page_open_with_the_answer(pages, chromium):
    from tests.support.artifact_pages import SENTENCE

    page = chromium.new_page(viewport={"width": WIDTHS[0], "height": 900})
    try:
        for name in ("report", "benchmark"):
            page.goto(pages[name].as_uri())
            assert page.evaluate(FIRST_LINE) == SENTENCE, name
            # the answer's table right below it, in the first screen: the average row of trained, base, difference
            # with its 95% interval
            row = page.locator("section.answer tr.main")
            assert row.inner_text().split("\t")[-3:] == ["54.18", "50.72", "+3.46 [+0.96, +4.71]"], name
            assert row.bounding_box()["y"] < 900
            # the plot fits the window too: drawn at most 1,000 px wide, and never wider than its page
            for img in page.locator("img").all():
                assert img.bounding_box()["width"] <= WIDTHS[0], name
    finally:
        page.close()


def screenshots(artifacts: Path, snapshot: str, out: Path) -> list[Path]:
    """docs/img's two screenshots from a real artifact root (read only): the benchmark report, written by this
    code from the version's scores into a temp folder, and the benchmark version's Artifacts page, 1,400 px wide.

    A version built before this code keeps the plot it was drawn with; the page shows the plot this code draws
    (the report's), as a version built now would."""
    import base64

    import pyarrow.parquet as pq
    from playwright.sync_api import sync_playwright

    from citeflow.artifacts import ArtifactStore
    from citeflow.cockpit.artifact_view import render_html, summarize
    from citeflow.evaluation.report import scidocs_input, write_report

    store = ArtifactStore(str(artifacts))
    (benchmark,) = store.list_versions(snapshot, "benchmark")  # the demo holds one; choose none among several
    summary = summarize(store, snapshot, "benchmark", benchmark.version)
    rows = pq.read_table(benchmark.table_path("scores")).to_pylist()
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_report(
            rows, Path(tmp), f"citeflow benchmark — {snapshot}", scidocs=scidocs_input(benchmark.inputs)
        )
        summary["plots"]["scores.png"] = base64.b64encode(Path(paths["plot"]).read_bytes()).decode()
        tab = Path(tmp) / "benchmark.html"
        tab.write_text(render_html(summary, report_url="report"))
        out.mkdir(parents=True, exist_ok=True)
        shots = [out / "report-1400.png", out / "benchmark-tab-1400.png"]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": WIDTHS[0], "height": 900})
            for source, target in zip((Path(paths["html"]), tab), shots, strict=True):
                page.goto(source.as_uri())
                print(f"{target}: {page.evaluate(PAGE_WIDTH)} px wide; opens with: {page.evaluate(FIRST_LINE)}")
                page.screenshot(path=str(target), full_page=True)
            browser.close()
    return shots


if __name__ == "__main__":
    screenshots(
        Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "demo" / "artifacts",
        sys.argv[2] if len(sys.argv) > 2 else "demo",
        REPO / "docs" / "img",
    )
