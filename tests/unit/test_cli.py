"""The command line: user mistakes are one line and exit 2, never a traceback."""

import os
import stat
import subprocess
import sys

import pytest

from citeflow.errors import CiteflowError
from citeflow.jobs.cli import main
from citeflow.spark.engine import session


def run_cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "citeflow.jobs.cli", *args], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--snapshot", "../../etc", "--corpus", "x"], "invalid snapshot id '../../etc'"),
        (["run", "--snapshot", "ok", "--corpus", "/does/not/exist"], "corpus path '/does/not/exist' does not exist"),
        (["run", "--snapshot", "ok", "--corpus", "x", "--set", "build_graph.colour=red"], "unknown setting"),
        (["run", "--snapshot", "ok", "--corpus", "x", "--set", "spark.shuffle_partitions=lots"], "expects an integer"),
        (["artifacts", "--snapshot", "nothing-here", "--artifacts", "/tmp/citeflow-no-such-root"], "no artifacts"),
    ],
)
def test_user_mistakes_are_one_clear_line(args, message):
    done = run_cli(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_corpus_of_unknown_layout_is_explained(tmp_path):
    (tmp_path / "readme.txt").write_text("not a snapshot")
    done = run_cli("run", "--snapshot", "ok", "--corpus", str(tmp_path), "--artifacts", str(tmp_path / "a"))
    assert done.returncode == 2 and "cannot tell the format" in done.stderr


def test_until_names_the_stages_to_run():
    from citeflow.jobs.pipeline import stages_until
    from citeflow.registry import STAGES

    assert stages_until("build_graph") == ["build_graph"]
    assert stages_until(None) == list(STAGES)
    with pytest.raises(CiteflowError, match="unknown stage 'nope'"):
        stages_until("nope")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "train_encoder.model=/no/such/scibert"], "model directory '/no/such/scibert' does not exist"),
        # the full profile trains a real encoder: the small demo BERT is never its silent default
        (["--profile", "full", "--scidocs", "/tmp"], "train_encoder.model is not set"),
        ([], "needs the SciDocs folder"),
        (["--scidocs", "/tmp", "--set", "benchmark.scirepeval=/no/such/task.json"], "does not exist"),
    ],
)
def test_late_mistakes_are_caught_before_any_work(tmp_path, args, message):
    corpus = tmp_path / "corpus" / "metadata"
    corpus.mkdir(parents=True)
    (corpus / "metadata_0.jsonl").write_text('{"paper_id": "1"}\n')
    done = run_cli("run", "--snapshot", "ok", "--corpus", str(corpus.parent), "--artifacts", str(tmp_path / "a"), *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "a").exists()


def test_the_full_profile_needs_no_encoder_when_it_stops_before_training(tmp_path):
    from citeflow.config import RunConfig, apply_overrides, profile_overrides
    from citeflow.jobs.pipeline import preflight, stages_until

    corpus = tmp_path / "corpus" / "metadata"
    corpus.mkdir(parents=True)
    (corpus / "metadata_0.jsonl").write_text('{"paper_id": "1"}\n')
    full = apply_overrides(RunConfig(snapshot="s", corpus=str(corpus.parent)), list(profile_overrides("full")))
    preflight(full, stages_until("mine_triplets"))
    with pytest.raises(CiteflowError, match="train_encoder.model is not set"):
        preflight(full, stages_until("train_encoder"))


def test_a_remote_root_is_refused_before_any_work_for_the_stages_that_write_local_files(tmp_path):
    from citeflow.config import RunConfig
    from citeflow.jobs.pipeline import preflight, stages_until

    corpus = tmp_path / "corpus" / "metadata"
    corpus.mkdir(parents=True)
    (corpus / "metadata_0.jsonl").write_text('{"paper_id": "1"}\n')
    remote = RunConfig(snapshot="s", corpus=str(corpus.parent), artifacts="memory://bucket/root")
    preflight(remote, stages_until("filter_leakage"))  # Spark writes through the store: any root
    with pytest.raises(CiteflowError) as refused:
        preflight(remote, stages_until("benchmark"))
    assert str(refused.value).startswith(
        "embed_graph, mine_triplets, train_encoder, embed_papers, benchmark need a local artifact root"
    )
    assert "memory://" in str(refused.value) and "\n" not in str(refused.value)


def test_settings_lists_every_stage_setting(capsys):
    assert main(["settings"]) == 0
    out = capsys.readouterr().out
    assert "build_graph.citations_from" in out and "spark.master" in out


def fake_java(tmp_path, version_line):
    bin_dir = tmp_path / "jdk" / "bin"
    bin_dir.mkdir(parents=True)
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return tmp_path / "jdk"


def test_old_java_is_one_clear_message(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path, 'openjdk version "11.0.2" 2019-01-15')))
    with pytest.raises(CiteflowError, match="found Java 11"):
        session.check_java()
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path / "old", 'java version "1.8.0_292"')))
    with pytest.raises(CiteflowError, match="found Java 8"):
        session.check_java()


def test_missing_java_is_one_clear_message(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path), "JAVA_HOME": ""}
    env.pop("JAVA_HOME")
    script = "from citeflow.spark.engine.session import check_java; check_java()"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert "Java 17 or newer and none was found" in done.stderr


def test_current_java_is_accepted():
    assert session.java_version() >= 17
    session.check_java()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--set", "embed_graph.pbg=checkpoint_path=/elsewhere"], "checkpoint_path is set by the stage"),
        (["--set", "train_encoder.lr=nan"], "expects a finite number"),
        (["--artifacts", "/etc/hostname"], "artifact root '/etc/hostname' is a file, not a folder"),
    ],
)
def test_user_side_faults_of_issue_16_are_one_line(tmp_path, extra, message):
    corpus = tmp_path / "corpus" / "metadata"
    corpus.mkdir(parents=True)
    (corpus / "metadata_0.jsonl").write_text('{"paper_id": "1"}\n')
    args = ["run", "--snapshot", "ok", "--corpus", str(corpus.parent), "--until", "build_graph"]
    done = run_cli(*args, *(["--artifacts", str(tmp_path / "a")] if "--artifacts" not in extra else []), *extra)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def _store_with_one_version(root):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from citeflow.artifacts import ArtifactStore
    from citeflow.stage import execute

    def build(path):
        os.makedirs(os.path.join(path, "papers"))
        pq.write_table(pa.table({"a": [1, 2, 3]}), os.path.join(path, "papers", "part-0.parquet"))
        return {}

    return execute(
        store=ArtifactStore(str(root)),
        snapshot="s1",
        stage="build_graph",
        stage_version=1,
        config={},
        resolved_config={},
        inputs=[],
        tables=["papers"],
        build=build,
    )


def test_verify_passes_an_intact_store_and_names_the_damaged_file(tmp_path, capsys):
    manifest = _store_with_one_version(tmp_path)
    assert main(["verify", "--artifacts", str(tmp_path)]) == 0
    assert f"ok          s1/build_graph/{manifest.version}" in capsys.readouterr().out
    part = tmp_path / "s1" / "build_graph" / manifest.version / "papers" / "part-0.parquet"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 1
    part.write_bytes(bytes(data))
    assert main(["verify", "--artifacts", str(tmp_path), "--snapshot", "s1", "--stage", "build_graph"]) == 1
    out = capsys.readouterr().out
    assert f"DAMAGED     s1/build_graph/{manifest.version}" in out
    assert "papers/part-0.parquet: content hash differs from the manifest" in out
    assert "1 versions: 0 intact, 1 damaged, 0 unverifiable" in out


def test_artifacts_lists_a_damaged_version_instead_of_failing(tmp_path, capsys):
    manifest = _store_with_one_version(tmp_path)
    (tmp_path / "s1" / "build_graph" / manifest.version / "_manifest.json").write_text("{broken")
    assert main(["artifacts", "--snapshot", "s1", "--artifacts", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{manifest.version}  DAMAGED: _manifest.json: not JSON" in out
    assert "--repair" in out


def test_verify_of_nothing_is_one_clear_line(tmp_path):
    done = run_cli("verify", "--artifacts", str(tmp_path))
    assert done.returncode == 2 and "no committed versions of any snapshot" in done.stderr


@pytest.mark.jvm
@pytest.mark.parametrize(
    "extra, message",
    [
        # a setting Spark checks as the driver starts: the folder of its event log must exist
        (
            ["spark.conf=spark.eventLog.enabled=true,spark.eventLog.dir={missing}"],
            "Spark's driver did not start: java.io.FileNotFoundException: File file:{missing} does not exist",
        ),
        # a SQL setting of the wrong type, which Spark checks when the session's settings are first read
        (
            ["spark.conf=spark.sql.shuffle.partitions=abc"],
            "The value 'abc' in the config \"spark.sql.shuffle.partitions\" is invalid",
        ),
        # a master URL Spark has no scheduler for: refused before a JVM starts
        (["spark.master=bogus://x"], "spark.master 'bogus://x' is not a Spark master URL"),
    ],
)
def test_a_spark_setting_spark_refuses_is_one_line(tmp_path, extra, message):
    corpus = tmp_path / "corpus" / "metadata"
    corpus.mkdir(parents=True)
    (corpus / "metadata_0.jsonl").write_text('{"paper_id": "1"}\n')
    missing = str(tmp_path / "no-such-folder")
    args = ["run", "--snapshot", "ok", "--corpus", str(corpus.parent), "--until", "build_graph"]
    args += ["--artifacts", str(tmp_path / "a"), *(f"--set={e.format(missing=missing)}" for e in extra)]
    done = run_cli(*args)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("citeflow: error:")]
    assert len(errors) == 1 and message.format(missing=missing) in errors[0], done.stderr
    # neither Python's traceback nor the JVM's stack trace (Spark's own log of the failed start)
    assert "Traceback" not in done.stderr and "\tat " not in done.stderr, done.stderr
