"""The command line: user mistakes are one line and exit 2, never a traceback."""

import os
import stat
import subprocess
import sys

import pytest

from citeflow.errors import CiteflowError
from jobs.cli import main
from spark import session


def run_cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "jobs.cli", *args], capture_output=True, text=True, timeout=120, env=env
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
    from citeflow.config import STAGES
    from jobs.pipeline import stages_until

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
    from jobs.pipeline import preflight, stages_until

    corpus = tmp_path / "corpus" / "metadata"
    corpus.mkdir(parents=True)
    (corpus / "metadata_0.jsonl").write_text('{"paper_id": "1"}\n')
    full = apply_overrides(RunConfig(snapshot="s", corpus=str(corpus.parent)), list(profile_overrides("full")))
    preflight(full, stages_until("mine_triplets"))
    with pytest.raises(CiteflowError, match="train_encoder.model is not set"):
        preflight(full, stages_until("train_encoder"))


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
    script = "from spark.session import check_java; check_java()"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert "Java 17 or newer and none was found" in done.stderr


def test_current_java_is_accepted():
    assert session.java_version() >= 17
    session.check_java()
