"""The Airflow glue keeps secrets out of XCom and keeps the trigger form away from Spark's settings."""

import json

import pytest

pytest.importorskip("airflow.sdk")

from citeflow.cockpit import orchestration as O  # noqa: E402
from citeflow.cockpit import params as P  # noqa: E402
from citeflow.cockpit import run_settings as S  # noqa: E402
from citeflow.errors import CiteflowError  # noqa: E402

SECRET = "S3CR3T-conn-extra"


@pytest.fixture
def connections(monkeypatch):
    """The Airflow connections the tasks read, by id (absent ones raise as Airflow does)."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    known: dict[str, Connection] = {}

    def get(cls, conn_id):
        if conn_id not in known:
            raise AirflowNotFoundException(conn_id)
        return known[conn_id]

    monkeypatch.setattr(Connection, "get", classmethod(get))
    return known


@pytest.fixture
def connection(connections):
    from airflow.sdk import Connection

    conn = Connection(
        conn_id="spark_default",
        conn_type="spark",
        host="local[2]",
        extra=json.dumps({"spark.hadoop.fs.s3a.secret.key": SECRET, "spark.executor.memory": "1g"}),
    )
    connections["spark_default"] = conn
    return conn


@pytest.fixture
def params(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_CITEFLOW_INPUT_ROOTS", str(tmp_path))  # the folders this Airflow may read
    corpus = tmp_path / "corpus" / "metadata"
    corpus.mkdir(parents=True)
    (corpus / "metadata_0.jsonl").write_text('{"paper_id": "1"}\n')
    (tmp_path / "scidocs").mkdir()
    return {
        "scidocs": str(tmp_path / "scidocs"),
        "artifacts": str(tmp_path / "artifacts"),
        "triplet_strategy": "scincl",
        "model": "small",
        "profile": "demo",
        "corpus_format": "auto",
        "overrides": [],
        "snapshot": "s1",
        "corpus": str(corpus.parent),
        "paper_ids": "",
    }


def test_connection_extras_reach_spark_but_never_the_settings_xcom(connection, params):
    settings = O.check_settings(S.settings_from_params(params, snapshot="s1", corpus=params["corpus"], paper_ids=""))
    assert SECRET not in json.dumps(settings)  # what check_inputs returns is the XCom every task reads
    config = S.run_config(settings)  # what each stage task builds, reading the connection itself
    assert config.spark.master == "local[2]"
    assert f"spark.hadoop.fs.s3a.secret.key={SECRET}" in config.spark.conf


@pytest.mark.parametrize(
    "override", ["spark.conf=spark.jars=http://x/evil.jar", "spark.master=local[1]", "spark.local_dir=/root"]
)
def test_the_trigger_form_cannot_set_where_spark_runs_or_what_it_loads(connection, params, override):
    settings = {**params, "overrides": [override]}
    with pytest.raises(CiteflowError, match="cannot be set from the trigger form"):
        S.run_config(settings)


def test_the_trigger_form_may_still_size_spark(connection, params):
    config = S.run_config({**params, "overrides": ["spark.shuffle_partitions=3", "spark.driver_memory=1g"]})
    assert config.spark.shuffle_partitions == 3 and config.spark.driver_memory == "1g"


def test_a_stage_tasks_xcom_and_asset_event_carry_no_secret(connection, params, monkeypatch, capsys):
    from collections import defaultdict
    from types import SimpleNamespace

    from citeflow.artifacts import Manifest
    from citeflow.jobs import pipeline

    manifest = Manifest(
        stage="build_graph",
        snapshot="s1",
        version="0123456789abcdef",
        path="/a/s1/build_graph/0123456789abcdef",
        config={"spark": {"conf": [f"spark.hadoop.fs.s3a.secret.key={SECRET}"]}},  # as an old manifest may hold
        inputs=[],
        tables={"papers": {"rows": 3}},
        metrics={"papers": 3, "service_token": SECRET},
        code_version="x",
        started_at="t",
        finished_at="t",
        duration_s=1.0,
    )
    monkeypatch.setattr(pipeline, "run_handed", lambda stage, config, given: manifest)
    pushed, events = [], defaultdict(SimpleNamespace)
    context = {"ti": SimpleNamespace(xcom_push=lambda **kw: pushed.append(kw)), "outlet_events": events}
    monkeypatch.setattr(O, "get_current_context", lambda: context)
    settings = S.settings_from_params(params, snapshot="s1", corpus=params["corpus"], paper_ids="")
    summary = O.run_stage_task("build_graph", settings)
    assert summary["metrics"]["papers"] == 3 and summary["metrics"]["service_token"] == "***"
    assert SECRET not in json.dumps([summary, pushed, [vars(e) for e in events.values()]])
    assert SECRET not in capsys.readouterr().out


@pytest.mark.parametrize(
    "changes, built, words",
    [
        ({}, "full", "build_graph: built version 0123456789abcdef in full at"),
        (
            {
                "metrics": {
                    "papers": 3,
                    "from_diff": {"base": {"snapshot": "r1", "version": "aaaa"}, "start": "r1", "end": "s1"},
                }
            },
            "from_diff",
            "build_graph: built version 0123456789abcdef from the diff r1 -> s1 onto version aaaa of snapshot r1 at",
        ),
        (
            {"metrics": {"warm_start": {"snapshot": "r1", "version": "bbbb", "epochs": 6}}},
            "warm_start",
            "build_graph: built version 0123456789abcdef warm-started from version bbbb of snapshot r1 (6 epochs) at",
        ),
        (
            {"metrics": {"paper_keys": {"carried_from": {"snapshot": "r1", "version": "cccc"}, "papers_keyed": 40}}},
            "keys_carried",
            "build_graph: built version 0123456789abcdef with the paper keys of version cccc of snapshot r1 carried "
            "over (40 papers keyed) at",
        ),
        (
            {
                "metrics": {
                    "paper_keys": {"carried_from": {"snapshot": "r1", "version": "cccc"}, "papers_keyed": 40},
                    "paper_id_lines": {
                        "source": "x",
                        "from_diff": {"base": {"snapshot": "r1", "version": "dddd"}, "start": "r1", "end": "s1"},
                    },
                }
            },
            "from_diff",
            "build_graph: built version 0123456789abcdef with the paper-ids diff r1 -> s1 applied onto the lines of "
            "version dddd of snapshot r1 and the paper keys of version cccc of snapshot r1 carried over (40 papers "
            "keyed) at",
        ),
        (
            {"metrics": {"paper_keys": {"carried_from": None}, "paper_id_lines": {"source": "x", "from_diff": None}}},
            "full",
            "built version 0123456789abcdef in full at",
        ),
        ({"metrics": {"paper_keys": {"carried_from": None}}}, "full", "built version 0123456789abcdef in full at"),
        (
            {"reused_from": {"snapshot": "r0", "path": "/a/r0", "bytes": 1}},
            "reused",
            "build_graph: reused version 0123456789abcdef of snapshot r0 (same inputs and settings) at",
        ),
    ],
)
def test_the_task_log_and_asset_event_say_how_a_version_was_built(
    connection, params, monkeypatch, capsys, changes, built, words
):
    import dataclasses
    from collections import defaultdict
    from types import SimpleNamespace

    from citeflow.artifacts import Manifest
    from citeflow.jobs import pipeline

    manifest = Manifest(
        stage="build_graph",
        snapshot="s1",
        version="0123456789abcdef",
        path="/a/s1/build_graph/0123456789abcdef",
        config={},
        inputs=[],
        tables={"papers": {"rows": 3}},
        metrics={"papers": 3},
        code_version="x",
        started_at="t",
        finished_at="t",
        duration_s=1.0,
    )
    manifest = dataclasses.replace(manifest, **changes)
    monkeypatch.setattr(pipeline, "run_handed", lambda stage, config, given: manifest)
    events = defaultdict(SimpleNamespace)
    context = {"ti": SimpleNamespace(xcom_push=lambda **kw: None), "outlet_events": events}
    monkeypatch.setattr(O, "get_current_context", lambda: context)
    settings = S.settings_from_params(params, snapshot="s1", corpus=params["corpus"], paper_ids="")
    summary = O.run_stage_task("build_graph", settings)
    assert summary["built"] == built
    assert events[O.stage_asset("build_graph")].extra["built"] == built
    assert words in capsys.readouterr().out


def _pbg_connection(connections, host, port):
    from airflow.sdk import Connection

    connections["pbg_rendezvous"] = Connection(conn_id="pbg_rendezvous", conn_type="generic", host=host, port=port)


@pytest.mark.parametrize("host, expected", [("pbg-0.cluster", "tcp://pbg-0.cluster:29500"), ("", "tcp://*:29500")])
def test_distributed_pbg_meets_where_the_connection_says_and_rank_0_never_starts_the_others(
    connection, connections, params, host, expected
):
    _pbg_connection(connections, host, 29500)
    settings = {**params, "overrides": ["embed_graph.num_partitions=4", "embed_graph.machines=2"]}
    config = S.run_config(settings)
    assert config.embed_graph.rendezvous == expected
    assert config.embed_graph.launch == "external"  # ranks 1.. are the embed_graph_rank tasks
    single = S.run_config(params)
    assert single.embed_graph.machines == 1 and single.embed_graph.launch == "local"


def test_distributed_pbg_under_airflow_needs_the_rendezvous_connection(connection, params):
    settings = {**params, "overrides": ["embed_graph.num_partitions=4", "embed_graph.machines=2"]}
    with pytest.raises(CiteflowError, match="needs the Airflow connection pbg_rendezvous"):
        S.run_config(settings)
    assert S.run_config(params).embed_graph.machines == 1  # one machine needs no connection


def test_a_rendezvous_connection_without_port_is_refused(connection, connections, params):
    _pbg_connection(connections, "h", None)
    with pytest.raises(CiteflowError, match="pbg_rendezvous needs a port"):
        S.run_config(params)


@pytest.mark.parametrize("override", ["embed_graph.rendezvous=tcp://evil:1", "embed_graph.launch=local"])
def test_the_trigger_form_cannot_say_where_pbg_ranks_meet(connection, params, override):
    with pytest.raises(CiteflowError, match="cannot be set from the trigger form"):
        S.run_config({**params, "overrides": [override]})


def test_a_rank_task_of_a_cached_version_is_skipped_and_a_failing_one_fails_with_one_line(
    connection, connections, params, monkeypatch
):
    from types import SimpleNamespace

    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    from citeflow.jobs import pipeline

    _pbg_connection(connections, "", 29500)
    settings = {**params, "overrides": ["embed_graph.num_partitions=6", "embed_graph.machines=3"]}
    leakage = SimpleNamespace(stage="filter_leakage", version="f1")
    handed = {"filter_leakage": leakage}
    monkeypatch.setattr(O, "get_current_context", lambda: {"ti": None})
    monkeypatch.setattr(O, "handed_versions", lambda stage, config, ti: handed)
    seen = []
    cached = SimpleNamespace(skipped=True, version="v1", path="/a/v1")
    monkeypatch.setattr(
        pipeline, "follow_rank", lambda config, rank, given: seen.append((config.embed_graph, rank, given)) or cached
    )
    with pytest.raises(AirflowSkipException, match="version v1 is up to date; rank 2 not needed"):
        O.run_rank_task(settings, 2)
    assert seen[0][1] == 2 and seen[0][2] is leakage and seen[0][0].launch == "external" and seen[0][0].machines == 3
    built = SimpleNamespace(skipped=False, version="v1", path="/a/v1")
    monkeypatch.setattr(pipeline, "follow_rank", lambda config, rank, given: built)
    assert O.run_rank_task(settings, 1) == {
        "stage": "embed_graph",
        "rank": 1,
        "version": "v1",
        "manifest": "/a/v1/_manifest.json",
    }

    def gone(config, rank, given):
        raise CiteflowError("PBG rank 1: rank 0 is gone (its lease ended); this rank was stopped")

    monkeypatch.setattr(pipeline, "follow_rank", gone)
    with pytest.raises(AirflowFailException, match="citeflow: PBG rank 1: rank 0 is gone"):
        O.run_rank_task(settings, 1)
    # the filter_leakage version its task made is gone: one line naming the task to clear, nothing rebuilt
    handed["filter_leakage"] = None
    with pytest.raises(AirflowFailException, match="it is gone: clear task filter_leakage"):
        O.run_rank_task(settings, 1)


def test_the_trigger_forms_artifact_root_defaults_to_citeflow_artifacts(monkeypatch, tmp_path):
    monkeypatch.setenv("CITEFLOW_ARTIFACTS", str(tmp_path / "root"))
    assert P.common_params("/srv/demo")["artifacts"].value == str(tmp_path / "root")
    monkeypatch.delenv("CITEFLOW_ARTIFACTS")
    assert P.common_params("/srv/demo")["artifacts"].value == "/srv/demo/artifacts"


def test_a_run_reads_inputs_only_under_the_folders_the_variable_allows(connection, params, monkeypatch, tmp_path):
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    (elsewhere / "metadata").mkdir(parents=True)
    (elsewhere / "metadata" / "metadata_0.jsonl").write_text('{"paper_id": "1"}\n')
    with pytest.raises(CiteflowError) as caught:
        S.run_config({**params, "corpus": str(elsewhere)})
    assert str(caught.value) == (
        f"corpus folder {elsewhere} is outside the input folders this Airflow allows ({tmp_path}): move it under one "
        "of them, or add its folder to the Airflow Variable citeflow_input_roots"
    )
    # an override naming a folder elsewhere is refused too
    with pytest.raises(CiteflowError, match=r"^BEIR folder .* is outside the input folders"):
        S.run_config({**params, "overrides": [f"filter_leakage.beir={elsewhere}"]})
    # a link under an allowed folder leads nowhere else
    (tmp_path / "link").symlink_to(elsewhere)
    with pytest.raises(CiteflowError, match="is outside the input folders"):
        S.run_config({**params, "corpus": str(tmp_path / "link")})
    monkeypatch.setenv("AIRFLOW_VAR_CITEFLOW_INPUT_ROOTS", f"{tmp_path}, {elsewhere}")
    assert S.run_config({**params, "corpus": str(elsewhere)}).corpus == str(elsewhere)


def test_without_the_variable_only_the_demo_folder_is_read(connection, params, monkeypatch, tmp_path):
    monkeypatch.delenv("AIRFLOW_VAR_CITEFLOW_INPUT_ROOTS")
    monkeypatch.setenv("CITEFLOW_HOME", str(tmp_path / "demo"))
    with pytest.raises(CiteflowError, match=rf"this Airflow allows \({tmp_path / 'demo'}\)"):
        S.run_config(params)
