"""What a killed run leaves is cleared by the next: the lease of a run killed just after its manifest appeared
(listed by `citeflow verify`, removed by the next run of the stage); and run logs do not pile up."""

import os
import subprocess
import sys
import time

import pytest

from citeflow.errors import CiteflowError
from citeflow.jobs.cli import log_retention, main, prune_run_logs

# One stage version built by `citeflow.stage.execute` in a process of its own: a one-row table.
BUILD = """
import logging, os, sys
import pyarrow as pa, pyarrow.parquet as pq
from citeflow.artifacts import ArtifactStore
from citeflow.stage import execute

logging.basicConfig(level=logging.INFO)

def build(path):
    os.makedirs(os.path.join(path, "t"))
    pq.write_table(pa.table({"x": [1]}), os.path.join(path, "t", "part-0.parquet"))
    return {"rows": 1}

m = execute(store=ArtifactStore(sys.argv[1]), snapshot="s1", stage="build_graph", stage_version=1, config={},
            resolved_config={}, inputs=[], tables=["t"], build=build)
print(m.version, m.skipped)
"""


def build(root, **env):
    return subprocess.run(
        [sys.executable, "-c", BUILD, str(root)], capture_output=True, text=True, env={**os.environ, **env}
    )


def test_the_lease_of_a_run_killed_after_its_commit_is_listed_then_removed_by_the_next_run(tmp_path, capsys):
    root = tmp_path / "artifacts"
    killed = build(root, CITEFLOW_FAULT_KILL="after-commit")
    assert killed.returncode == -9, killed.stderr
    stage = root / "s1" / "build_graph"
    (version,) = [p.name for p in stage.iterdir() if not p.name.startswith(".")]
    assert (stage / version / "_manifest.json").is_file() and (stage / f".{version}.lease").is_file()

    assert main(["verify", "--artifacts", str(root), "--snapshot", "s1"]) == 0
    out = capsys.readouterr().out
    assert f"DEAD LEASE  s1/build_graph/{version}: {stage}/.{version}.lease of pid {killed_pid(out)}" in out
    assert f"ok          s1/build_graph/{version}" in out

    rerun = build(root)
    assert rerun.returncode == 0 and rerun.stdout.split() == [version, "True"], rerun.stderr
    assert "removed the lease of a run that is gone" in rerun.stderr
    assert sorted(p.name for p in stage.iterdir()) == [version]
    assert main(["verify", "--artifacts", str(root), "--snapshot", "s1"]) == 0
    assert "LEASE" not in capsys.readouterr().out


def killed_pid(verify_output: str) -> str:
    return verify_output.split(" of pid ", 1)[1].split()[0]


def test_run_logs_are_kept_to_a_count_and_an_age(tmp_path, monkeypatch):
    folder = tmp_path / "logs"
    folder.mkdir()
    now = time.time()
    for n in range(6):  # run-0 the oldest, 50 days old; the others a day apart, the newest today
        path = folder / f"run-{n}.log"
        path.write_text("x")
        age = 50 if n == 0 else 5 - n
        os.utime(path, (now - age * 86400, now - age * 86400))
    (folder / "other.txt").write_text("not a run log")
    gone = prune_run_logs(str(folder), keep=4, days=30)
    # room for the run starting: 3 of the newest stay; run-0 is too old, run-1 and run-2 too many
    assert sorted(os.path.basename(p) for p in gone) == ["run-0.log", "run-1.log", "run-2.log"]
    assert sorted(p.name for p in folder.iterdir()) == ["other.txt", "run-3.log", "run-4.log", "run-5.log"]

    monkeypatch.setenv("CITEFLOW_LOG_KEEP", "7")
    monkeypatch.setenv("CITEFLOW_LOG_KEEP_DAYS", "2.5")
    assert log_retention() == (7, 2.5)
    monkeypatch.setenv("CITEFLOW_LOG_KEEP", "none")
    with pytest.raises(CiteflowError, match="CITEFLOW_LOG_KEEP='none': give a number of logs, 1 or more"):
        log_retention()


def test_a_bad_log_retention_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CITEFLOW_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("CITEFLOW_LOG_KEEP_DAYS", "-1")
    assert main(["run", "--snapshot", "s", "--corpus", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["citeflow: error: CITEFLOW_LOG_KEEP_DAYS='-1': give a number of days, 1 or more"]
