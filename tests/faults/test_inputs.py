"""Secrets at rest (issue #16, attack 4), unreadable shards and corrupt manifests of other snapshots (7)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil

import pytest

from tests.faults.conftest import NOT_UTF8, SECRET, SNAPSHOT, STAGE_ORDER, digest, error_lines, finish


def test_no_secret_in_any_file_under_the_root_in_the_logs_xcom_or_the_artifacts_tab(world, monkeypatch):
    from types import SimpleNamespace

    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException, AirflowSkipException

    from citeflow.artifacts import ArtifactStore
    from cockpit import orchestration
    from cockpit.artifact_view import render_html, summarize

    files = [p for p in world.reference.rglob("*") if p.is_file()]
    assert len(files) > 50
    assert [str(p) for p in files if SECRET.encode() in p.read_bytes()] == []
    assert SECRET not in world.logs and "spark.hadoop.fs.s3a.secret.key=***" in json.dumps(
        world.manifests["build_graph"].config
    )

    # the Artifacts tab of every version
    store = ArtifactStore(str(world.reference))
    for stage in STAGE_ORDER:
        page = render_html(summarize(store, SNAPSHOT, stage, world.manifests[stage].version))
        assert SECRET not in page

    # the XCom of check_inputs and of every stage task, with the secret in the Spark connection's extras
    conn = Connection(
        conn_id="spark_default",
        conn_type="spark",
        host="local[2]",
        extra=json.dumps({"spark.hadoop.fs.s3a.secret.key": SECRET}),
    )

    def get(cls, conn_id):
        if conn_id != conn.conn_id:  # no other connection (pbg_rendezvous: one machine)
            raise AirflowNotFoundException(conn_id)
        return conn

    monkeypatch.setattr(Connection, "get", classmethod(get))
    pushed = []
    context = {"ti": SimpleNamespace(xcom_push=lambda **kw: pushed.append(kw)), "outlet_events": {}}
    monkeypatch.setattr(orchestration, "get_current_context", lambda: context)
    params = {
        "scidocs": str(world.snapshot / "scidocs"),
        "artifacts": str(world.reference),
        "triplet_strategy": "scincl",
        "model": str(world.model),
        "profile": "demo",
        "corpus_format": "auto",
        "overrides": [s for s in world.settings if not s.startswith("spark.conf=") and "model=" not in s],
    }
    settings = orchestration.check_settings(
        orchestration.settings_from_params(
            params,
            snapshot=SNAPSHOT,
            corpus=str(world.snapshot / "corpus"),
            paper_ids=str(world.snapshot / "paper-ids"),
        )
    )
    for stage in STAGE_ORDER:  # all cached: each task pushes its summary and ends skipped
        with pytest.raises(AirflowSkipException):
            orchestration.run_stage_task(
                stage, settings, "scincl" if stage in ("mine_triplets", "train_encoder") else None
            )
    assert [p["value"]["version"] for p in pushed] == [world.manifests[s].version for s in STAGE_ORDER]
    assert SECRET not in json.dumps([settings, pushed])


def _corpus_copy(world, name):
    corpus = world.tmp / name
    shutil.copytree(world.snapshot / "corpus", corpus)
    return corpus


@pytest.mark.parametrize("damage", ["truncated", "not gzip"])
def test_an_unreadable_shard_fails_with_one_line_naming_it(world, damage):
    from citeflow.artifacts import ArtifactStore
    from citeflow.errors import CiteflowError
    from jobs import build_graph

    corpus = _corpus_copy(world, f"corpus-{damage.replace(' ', '-')}")
    shard = sorted((corpus / "metadata").glob("*.jsonl.gz"))[-1]
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2] if damage == "truncated" else gzip.decompress(data)[:5000])
    root = world.tmp / f"root-{damage.replace(' ', '-')}"
    config = dataclasses.replace(world.config(root), corpus=str(corpus))
    with pytest.raises(CiteflowError) as caught:
        build_graph.run(config)
    message = str(caught.value)
    assert message.startswith(f"corpus file {shard} cannot be read (") and "\n" not in message
    store = ArtifactStore(str(root))
    assert store.list_versions(SNAPSHOT, "build_graph") == []
    assert [p.name for p in (root / SNAPSHOT / "build_graph").iterdir() if p.name.endswith(".lease")] == []


def test_a_corrupt_manifest_of_another_snapshot_is_skipped_with_a_warning(world, caplog):
    from jobs import build_graph

    reference = world.manifests["build_graph"]
    root = world.copy("other-snapshot", without=("filter_leakage", "embed_graph", "mine_triplets", "train_encoder"))
    # "a-broken" sorts before "faults": the reuse lookup reads it first
    broken = root / "a-broken" / "build_graph" / reference.version
    shutil.copytree(root / SNAPSHOT / "build_graph" / reference.version, broken)
    (broken / "_manifest.json").write_text('{"stage": "build_graph", "tru')
    reused = build_graph.run(dataclasses.replace(world.config(root), snapshot="third"))
    assert reused.reused_from["snapshot"] == SNAPSHOT
    assert f"not reusing build_graph {reference.version} of snapshot a-broken" in caplog.text
    assert digest(reused)["tables"] == world.digests["build_graph"]["tables"]


def test_a_line_that_is_not_utf8_is_kept_as_bytes_and_every_reader_opens_the_table(world):
    """Attack 6: rejected.raw was a string column; one invalid UTF-8 line made every reader fail."""
    import pyarrow.dataset as ds

    from citeflow.artifacts import ArtifactStore
    from cockpit.artifact_view import render_html, summarize

    manifest = world.manifests["build_graph"]
    table = ds.dataset(manifest.table_path("rejected"), format="parquet", ignore_prefixes=[".", "_"]).to_table()
    rows = [r for r in table.to_pylist() if r["raw"] == NOT_UTF8]
    assert [(r["kind"], r["reason"]) for r in rows] == [("paper", "malformed_json")]
    page = render_html(summarize(ArtifactStore(str(world.reference)), SNAPSHOT, "build_graph", manifest.version))
    assert "<h3>rejected</h3>" in page


def test_the_minor_attacks_end_in_one_line(world):
    """Attack 9 (nan as a learning rate) and attack 7 (--artifacts pointing at a file), through the CLI."""
    (world.tmp / "a-file").write_text("not a folder")
    for extra, root, message in (
        (["train_encoder.lr=nan"], world.tmp / "nan", "train_encoder.lr expects a finite number, not 'nan'"),
        ([], world.tmp / "a-file", f"artifact root '{world.tmp / 'a-file'}' is a file, not a folder"),
    ):
        code, log = finish(world.cli(root, "build_graph", *extra))
        assert code == 2 and error_lines(log) == [f"citeflow: error: {message}"] and "Traceback" not in log, log
