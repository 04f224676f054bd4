"""Secrets at rest, unreadable shards, corrupt manifests of other snapshots, links out of an input folder and the
minor attacks (a nan setting, a file as the artifact root)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil

import pytest

from tests.faults.conftest import NOT_UTF8, SECRET, SNAPSHOT, STAGE_ORDER, digest, error_lines, finish, read


def test_no_secret_in_any_file_under_the_root_in_the_logs_xcom_or_the_artifacts_tab(world, monkeypatch):
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException, AirflowSkipException

    from citeflow.artifacts import ArtifactStore
    from citeflow.cockpit import orchestration, run_settings
    from citeflow.cockpit.artifact_view import render_html, summarize
    from citeflow.registry import REGISTRY

    monkeypatch.setenv("AIRFLOW_VAR_CITEFLOW_INPUT_ROOTS", str(world.tmp))  # the folders this Airflow may read
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

    class TaskInstance:  # Airflow's XCom as the stage tasks use it: each task pulls what its upstream pushed
        task_id, map_index, xcom = "", -1, {}

        def xcom_push(self, key, value):
            pushed.append({"key": key, "value": value})
            self.xcom[(self.task_id, self.map_index, key)] = value

        def xcom_pull(self, task_ids, map_indexes=-1, key="return_value"):
            return self.xcom.get((task_ids, map_indexes, key))

    ti = TaskInstance()
    context = {"ti": ti, "outlet_events": {}}
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
        run_settings.settings_from_params(
            params,
            snapshot=SNAPSHOT,
            corpus=str(world.snapshot / "corpus"),
            paper_ids=str(world.snapshot / "paper-ids"),
        )
    )
    for stage in STAGE_ORDER:  # all cached: each task pushes its summary and ends skipped
        per_strategy = REGISTRY[stage].per_strategy
        ti.task_id, ti.map_index = orchestration.task_id_of(stage), 0 if per_strategy else -1
        with pytest.raises(AirflowSkipException):
            orchestration.run_stage_task(stage, settings, "scincl" if per_strategy else None)
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
    from citeflow.jobs import build_graph

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
    from citeflow.jobs import build_graph

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
    from citeflow.cockpit.artifact_view import render_html, summarize

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


def test_a_shard_that_links_outside_the_corpus_folder_is_refused_before_any_work(world, tmp_path, capsys):
    """A shard `metadata_1.jsonl -> /etc/passwd` was followed and its lines stored in the committed `rejected`
    table; now the run stops in one line, and writes nothing."""
    from citeflow.jobs.cli import main

    corpus = _corpus_copy(world, "linked-corpus")
    (corpus / "metadata" / "metadata_1.jsonl").symlink_to("/etc/passwd")
    root = tmp_path / "root"
    args = ["run", "--snapshot", SNAPSHOT, "--corpus", str(corpus), "--artifacts", str(root), "--until", "build_graph"]
    assert main(args) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(
        f"citeflow: error: corpus file {corpus / 'metadata' / 'metadata_1.jsonl'} is a link to /etc/passwd, outside "
        f"the corpus folder {corpus}: copy the file into the folder, or set inputs.allow_outside=true"
    ), line
    assert not root.exists()


def _records(shard) -> list[tuple[bytes, dict | None]]:
    """Each line of a gzipped shard with its JSON object (None for a line that is not one)."""
    out = []
    for line in gzip.decompress(shard.read_bytes()).split(b"\n"):
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        out.append((line, record if isinstance(record, dict) else None))
    return out


def _plant_byte_in_a_title(corpus, reference) -> tuple[int, str]:
    """Rewrite the line of a paper that is kept and has one line in the corpus, with the byte 0xFF inside its
    title (the line stays valid JSON); returns (its corpus id, the title as Spark reads it back: U+FFFD for the
    byte)."""
    import collections

    import pyarrow.dataset as ds

    papers = ds.dataset(reference.table_path("papers"), format="parquet", ignore_prefixes=[".", "_"])
    titles = {str(r["corpus_id"]): r["title"] for r in papers.to_table(columns=["corpus_id", "title"]).to_pylist()}
    shards = sorted((corpus / "metadata").glob("*.jsonl.gz"))
    lines = {shard: _records(shard) for shard in shards}
    ids = collections.Counter(str(r.get("paper_id")) for rows in lines.values() for _, r in rows if r is not None)
    shard = shards[0]
    for i, (line, record) in enumerate(lines[shard]):
        paper, title = str((record or {}).get("paper_id")), (record or {}).get("title")
        quoted = json.dumps(title).encode()
        plain = isinstance(title, str) and len(title) > 3 and quoted in line
        if plain and ids[paper] == 1 and titles.get(paper) == title:
            planted = [row for row, _ in lines[shard]]
            planted[i] = line.replace(quoted, quoted[:4] + b"\xff" + quoted[4:], 1)
            shard.write_bytes(gzip.compress(b"\n".join(planted)))
            return int(paper), title[:3] + "\ufffd" + title[3:]
    raise AssertionError(f"no kept paper with a plain title of its own in {shard}")


def test_invalid_utf8_inside_a_title_is_counted_not_silent(world, capsys):
    """A valid JSON line whose title holds a byte that is not UTF-8: the paper is kept with U+FFFD in its place,
    and the stage counts it per field in its metrics, warns about it, and the summaries show it."""
    import pyarrow.dataset as ds

    from citeflow.artifacts import ArtifactStore
    from citeflow.cockpit.artifact_view import render_html, summarize
    from citeflow.jobs.cli import main

    reference = world.manifests["build_graph"]
    assert reference.metrics["lossy_text"] == {}  # the generated corpus holds none
    corpus = _corpus_copy(world, "corpus-lossy-title")
    paper, title = _plant_byte_in_a_title(corpus, reference)
    root = world.tmp / "lossy-title"
    code, log = finish(world.cli(root, "build_graph", args=("--corpus", str(corpus))))
    assert code == 0, log[-3000:]

    manifest = read(root, "build_graph")
    assert manifest.metrics["lossy_text"] == {"title": 1}
    warnings = [line for line in log.splitlines() if "not UTF-8" in line]
    assert len(warnings) == 1 and warnings[0].endswith(
        " WARNING build_graph: bytes that are not UTF-8 were replaced by U+FFFD in kept papers "
        "(papers per field: title 1; metrics lossy_text)"
    ), warnings
    # the record is kept, not rejected; every other count is the reference's
    papers = ds.dataset(manifest.table_path("papers"), format="parquet", ignore_prefixes=[".", "_"])
    kept = papers.to_table(filter=ds.field("corpus_id") == paper).to_pylist()
    assert [r["title"] for r in kept] == [title]
    assert manifest.tables["papers"]["rows"] == reference.tables["papers"]["rows"]
    assert manifest.metrics["rejected"] == reference.metrics["rejected"]

    page = render_html(summarize(ArtifactStore(str(root)), SNAPSHOT, "build_graph", manifest.version))
    assert "&quot;lossy_text&quot;: {\n    &quot;title&quot;: 1\n  }" in page
    capsys.readouterr()
    assert main(["artifacts", "--snapshot", SNAPSHOT, "--artifacts", str(root)]) == 0
    shown = capsys.readouterr().out
    assert "lossy text (bytes that are not UTF-8 replaced by U+FFFD), papers per field: title 1" in shown
