"""The artifact summary behind Airflow's Artifacts tab, and the headline metrics of Asset events."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from citeflow.artifacts import ArtifactStore
from citeflow.cockpit.artifact_view import render_html, summarize, xcom_target
from citeflow.errors import CiteflowError
from citeflow.stage import execute

# the 8-byte PNG signature plus a few bytes: the page inlines the file, it does not decode it
PNG = b"\x89PNG\r\n\x1a\n" + b"citeflow"


def _build(path: str) -> dict:
    os.makedirs(os.path.join(path, "embeddings"))
    table = pa.table(
        {"paper_id": [f"p{i}" for i in range(8)], "embedding": [[float(i), 0.5, 0.25, 0.125, 1.0] for i in range(8)]}
    )
    pq.write_table(table, os.path.join(path, "embeddings", "part-0.parquet"))
    with open(os.path.join(path, "loss.png"), "wb") as fh:
        fh.write(PNG)
    return {"papers": 8, "note": "<script>alert(1)</script>", "by_task": {"mag": 71.5}}


@pytest.fixture()
def built(tmp_path):
    store = ArtifactStore(str(tmp_path))
    manifest = execute(
        store=store,
        snapshot="s1",
        stage="embed_papers",
        stage_version=1,
        config={"k": 1},
        resolved_config={"k": 1},
        inputs=[{"stage": "train_encoder", "version": "abc123", "path": "/x/train_encoder/abc123"}],
        tables=["embeddings"],
        build=_build,
    )
    return store, manifest


def test_summary_reads_the_version_through_its_manifest(built):
    store, manifest = built
    summary = summarize(store, "s1", "embed_papers", manifest.version)
    assert summary["version"] == manifest.version
    assert summary["inputs"] == [{"stage": "train_encoder", "version": "abc123", "path": "/x/train_encoder/abc123"}]
    (table,) = summary["tables"]
    assert (table["name"], table["rows"], table["files"]) == ("embeddings", 8, 1)
    assert [c["name"] for c in table["schema"]] == ["paper_id", "embedding"]
    # five sample rows; a vector shows its first four entries and its length
    assert [row["paper_id"] for row in table["sample"]] == ["p0", "p1", "p2", "p3", "p4"]
    assert table["sample"][3]["embedding"] == "[3, 0.5, 0.25, 0.125, …] (5)"
    assert list(summary["plots"]) == ["loss.png"]
    assert summary["metrics"]["by_task"] == {"mag": 71.5}


def test_page_escapes_what_it_shows_and_inlines_plots(built):
    store, manifest = built
    page = render_html(summarize(store, "s1", "embed_papers", manifest.version), cached=True)
    assert f"<h1>embed_papers · version {manifest.version}</h1>" in page
    assert "cached in this run" in page
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "data:image/png;base64,iVBORw0KGgpjaXRlZmxvdw==" in page
    assert "<td>train_encoder</td><td>abc123</td>" in page


def test_missing_or_incomplete_version_is_a_clear_error(built, tmp_path):
    store, manifest = built
    with pytest.raises(CiteflowError, match="has no manifest"):
        summarize(store, "s1", "embed_papers", "0" * 16)
    (tmp_path / "s1" / "embed_papers" / manifest.version / "_manifest.json").unlink()
    with pytest.raises(CiteflowError, match="has no manifest"):
        summarize(store, "s1", "embed_papers", manifest.version)
    with pytest.raises(CiteflowError, match="invalid snapshot id"):
        summarize(store, "../s1", "embed_papers", manifest.version)


@pytest.mark.parametrize(
    "value", [None, "text", {"stage": "x"}, {"artifacts": "/a", "snapshot": "s", "stage": "x", "version": 3}]
)
def test_xcom_that_names_no_artifact_opens_nothing(value):
    with pytest.raises(CiteflowError, match="recorded no citeflow artifact"):
        xcom_target(value)


@pytest.mark.parametrize(
    "raw, expected", [("3", 3), ("-1", -1), ("{MAP_INDEX}", -1), ("", -1), (None, -1), ("-7", -1), ("0", 0)]
)
def test_map_index_placeholder_left_by_airflow_means_unmapped(raw, expected):
    from citeflow.cockpit.artifact_view import map_index_of

    assert map_index_of(raw) == expected


def test_headline_puts_the_known_metrics_first_and_flattens_one_level():
    from citeflow.cockpit.orchestration import HEADLINE_MAX, headline

    metrics = {
        "zeta": 1,
        "citations": 10,
        "papers": 3,
        "link_prediction": {"mrr": 0.5, "auc": 0.9, "curve": [1]},
        "histogram": [1, 2, 3],
        "long": "x" * 100,
        **{f"m{i}": i for i in range(30)},
    }
    out = headline(metrics)
    assert list(out)[:4] == ["papers", "citations", "link_prediction.mrr", "link_prediction.auc"]
    assert "histogram" not in out and "long" not in out and "link_prediction.curve" not in out
    assert len(out) == HEADLINE_MAX


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("stage", "../../etc", "names no citeflow stage"),
        ("version", "../../../etc/passwd", "names no artifact version"),
        ("version", "ABCDEF0123456789", "names no artifact version"),
        ("snapshot", "../s1", "invalid snapshot id"),
    ],
)
def test_xcom_stage_version_and_snapshot_are_validated(field, value, message):
    good = {"artifacts": "/a", "snapshot": "s1", "stage": "embed_papers", "version": "0123456789abcdef"}
    assert xcom_target(good) == good
    with pytest.raises(CiteflowError, match=message):
        xcom_target({**good, field: value})


def test_a_damaged_version_is_an_error_naming_the_file_not_data(built, tmp_path):
    from citeflow.manifest import DamagedVersion

    store, manifest = built
    (tmp_path / "s1" / "embed_papers" / manifest.version / "embeddings" / "part-0.parquet").unlink()
    with pytest.raises(DamagedVersion, match="embeddings/part-0.parquet is missing"):
        summarize(store, "s1", "embed_papers", manifest.version)


def test_binary_cells_are_shown_escaped_and_secrets_redacted(tmp_path):
    store = ArtifactStore(str(tmp_path))

    def build(path):
        os.makedirs(os.path.join(path, "rejected"))
        table = pa.table({"reason": ["malformed_json"], "raw": pa.array([b"caf\xe9 <b>"], pa.binary())})
        pq.write_table(table, os.path.join(path, "rejected", "part-0.parquet"))
        return {}

    manifest = execute(
        store=store,
        snapshot="s1",
        stage="build_graph",
        stage_version=1,
        config={},
        resolved_config={"spark": {"conf": ["spark.hadoop.fs.s3a.secret.key=S3CR3T-2"]}},
        inputs=[],
        tables=["rejected"],
        build=build,
    )
    summary = summarize(store, "s1", "build_graph", manifest.version)
    page = render_html(summary)
    assert summary["tables"][0]["sample"] == [{"reason": "malformed_json", "raw": "caf\\xe9 <b>"}]
    assert "<td>caf\\xe9 &lt;b&gt;</td>" in page
    assert "S3CR3T-2" not in page and "spark.hadoop.fs.s3a.secret.key=***" in page


def test_a_benchmark_page_shows_the_drift_reports_against_earlier_releases(tmp_path):
    store = ArtifactStore(str(tmp_path))

    def version(stage, snapshot, inputs, build, config=None):
        return execute(
            store=store,
            snapshot=snapshot,
            stage=stage,
            stage_version=1,
            config=config or {},
            resolved_config=config or {},
            inputs=inputs,
            tables=["summary"] if stage == "drift" else ["scores"],
            build=build,
        )

    def scores(path):
        os.makedirs(os.path.join(path, "scores"))
        pq.write_table(pa.table({"task": ["cite"], "value": [80.0]}), os.path.join(path, "scores", "part-0.parquet"))
        return {}

    def report(value):
        def build(path):
            rows = {"section": ["graph"], "name": ["papers added"], "before": [None], "after": [None], "value": [value]}
            os.makedirs(os.path.join(path, "summary"))
            pq.write_table(pa.table(rows), os.path.join(path, "summary", "part-0.parquet"))
            with open(os.path.join(path, "drift.png"), "wb") as fh:
                fh.write(PNG)
            return {}

        return build

    old = version("benchmark", "r1", [], scores)
    new = version("benchmark", "r2", [], scores, {"seed": 1})
    other = version("benchmark", "r2", [], scores, {"seed": 2})
    side = lambda m, s: {**m.lineage(), "snapshot": m.snapshot, "side": s}  # noqa: E731
    version("drift", "r2", [side(old, "before"), side(new, "after")], report(42.0), {"before": "r1"})
    version("drift", "r2", [side(old, "before"), side(other, "after")], report(7.0), {"before": "r1"})

    summary = summarize(store, "r2", "benchmark", new.version)
    (drift,) = summary["drift"]  # the report of this benchmark version, not the other's
    assert drift["before"] == "r1" and drift["summary"][0]["value"] == "42.0"
    page = render_html(summary)
    assert "<h2>Drift against snapshot r1</h2>" in page and "<td>papers added</td>" in page
    assert "alt='drift drift.png'" in page
    assert summarize(store, "r1", "benchmark", old.version)["drift"] == []


def _benchmark(tmp_path, scidocs: str):
    """A benchmark version of tests/support/artifact_pages.py's score rows whose manifest records `scidocs`."""
    from citeflow.snapshot import fingerprint_path
    from tests.support.artifact_pages import score_rows

    store = ArtifactStore(str(tmp_path / "artifacts"))

    def build(path):
        os.makedirs(os.path.join(path, "scores"))
        pq.write_table(pa.Table.from_pylist(score_rows()), os.path.join(path, "scores", "part-0.parquet"))
        return {}

    manifest = execute(
        store=store,
        snapshot="s1",
        stage="benchmark",
        stage_version=1,
        config={},
        resolved_config={},
        inputs=[fingerprint_path("scidocs", scidocs)],
        tables=["scores"],
        build=build,
    )
    return summarize(store, "s1", "benchmark", manifest.version)


def test_a_benchmark_page_opens_with_its_answer_and_every_score_rounded(tmp_path):
    import html as h

    from tests.support.artifact_pages import BASE, SENTENCE, TRAINED, generated_scidocs

    summary = _benchmark(tmp_path, generated_scidocs(tmp_path / "gen"))
    page = render_html(summary)
    body = page.split("</style>", 1)[1]
    assert body.startswith(f"<section class=answer><p class=lede>{h.escape(SENTENCE)}</p>")
    assert body.index("</section>") < body.index("<h1>benchmark · version")
    # the answer's table: averages worked by hand in tests/support/artifact_pages.py, trained 54.18, base 50.72,
    # the change with its interval
    cells = "<td>all tasks</td><td>average of 12</td><td class=n>12 of 12 numbers</td><td class=n>54.18</td>"
    assert cells + "<td class=n>50.72</td><td class=n>+3.46 [+0.96, +4.71]</td></tr>" in page
    assert "<td>cite</td><td>map</td><td class=n>100 queries</td><td class=n>45.00</td>" in page
    # generated SciDocs: not one published number
    assert "(published" not in page and "80.00" not in page and "not the published SciDocs" in page
    # every score below, both models side by side, two decimals: no 15-digit floats, no trained-rows-only sample
    wbr = lambda label: label.replace("_", "_<wbr>")  # noqa: E731  (a header may break after an underscore)
    assert f"<th class=n>{wbr(TRAINED)}</th><th class=n>{wbr(BASE)}</th>" in page
    assert "<td>scidocs</td><td>mesh</td><td>test</td><td>f1</td><td class=n>200</td>" in page
    assert "<td class=n>70.00</td><td class=n>72.50</td></tr>" in page  # mesh: trained, base
    assert "<td class=n>50.13</td><td class=n>46.13</td></tr>" in page  # coview map 50.126, 46.126
    assert "50.126" not in page and "54.177" not in page  # the rows' unrounded values and average
    assert summary["answer"]["comparisons"][0]["rows"][0]["delta"] == 3.46  # the JSON route carries it too


def test_a_benchmark_page_on_a_scidocs_folder_no_generator_wrote_names_the_published_numbers(tmp_path):
    folder = tmp_path / "scidocs"
    folder.mkdir()
    (folder / "x.csv").write_text("pid,class_label\n")
    page = render_html(_benchmark(tmp_path, str(folder)))
    answer = page.split("<section class=answer>", 1)[1].split("</section>", 1)[0]
    # docs/reference.md §6: SPECTER's published average of 12 is 80.0, SciNCL's (w/ leakage) 81.8
    assert "SPECTER (published) 80.00" in answer and "SciNCL (published, w/ leakage) 81.80" in answer
    assert "comparable when this folder is the published SciDocs" in answer


def test_every_stage_page_fits_its_window(tmp_path):
    """The CSS every page needs to fit 1,400 px (or Airflow's narrower iframe): plots shrink, tables scroll in
    their own box, long JSON wraps. tests/e2e/test_report_width.py measures the same pages in Chromium."""
    from citeflow.registry import STAGES
    from tests.support.artifact_pages import SNAPSHOT, build_root

    store, versions = build_root(tmp_path)
    assert list(versions) == list(STAGES)
    for stage, version in versions.items():
        page = render_html(summarize(store, SNAPSHOT, stage, version))
        style = page.split("<style>", 1)[1].split("</style>", 1)[0]
        assert "img{max-width:100%;height:auto}" in style and ".scroll{overflow-x:auto;max-width:100%}" in style
        assert "pre{white-space:pre-wrap;overflow-wrap:anywhere;" in style and "code{overflow-wrap:anywhere}" in style
        assert page.count("<table") == page.count("<div class=scroll><table") >= 2, stage
        assert page.count("<pre>") == 2, stage  # metrics and config, both under the pre rule
        # a column name breaks after its underscores instead of widening its table
        if stage != "benchmark":
            assert "<th>mapped_<wbr>by_<wbr>some_<wbr>long_<wbr>column_<wbr>name_<wbr>0</th>" in page


def test_sample_floats_are_rounded_to_six_digits_and_short_ones_kept():
    from citeflow.cockpit.artifact_view import _cell

    assert _cell(30.538220191145076) == "30.5382"
    assert _cell(42.0) == "42.0" and _cell(0.125) == "0.125" and _cell(7) == "7"
