"""build_graph on a real Spark standalone cluster (master + worker on localhost).

Proves the cluster path needs only `--set spark.master=spark://...`: the
same command that runs local[*] runs on the cluster and writes the same
artifact version with the same counts.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(path: Path, text: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise AssertionError(f"{text!r} not in {path} after {timeout}s:\n{path.read_text(errors='replace')[-3000:]}")


@pytest.fixture
def standalone_cluster(tmp_path):
    import pyspark

    spark_home = os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(spark_home, "bin", "spark-class")
    env = {**os.environ, "SPARK_HOME": spark_home, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    port = free_port()
    master_log, worker_log = tmp_path / "master.log", tmp_path / "worker.log"
    procs = []
    try:
        with open(master_log, "w") as out:
            procs.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.master.Master",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--webui-port",
                        str(free_port()),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        wait_for(master_log, "I have been elected leader")
        with open(worker_log, "w") as out:
            procs.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--webui-port",
                        str(free_port()),
                        "--work-dir",
                        str(tmp_path / "work"),
                        f"spark://127.0.0.1:{port}",
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
        wait_for(worker_log, "Successfully registered with master")
        yield {"master": f"spark://127.0.0.1:{port}", "master_log": master_log, "work": tmp_path / "work"}
    finally:
        for proc in reversed(procs):
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def test_build_graph_runs_on_a_standalone_cluster(standalone_cluster, shared_data, tmp_path):
    artifacts = tmp_path / "artifacts"
    cmd = [
        sys.executable,
        "-m",
        "jobs.cli",
        "run",
        "--snapshot",
        "cluster",
        "--until",
        "build_graph",
        "--corpus",
        str(shared_data / "s2orc" / "metadata_sample.jsonl"),
        "--artifacts",
        str(artifacts),
        "--set",
        f"spark.master={standalone_cluster['master']}",
        "--set",
        "spark.driver_memory=1g",
        "--set",
        "spark.shuffle_partitions=2",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]

    # The application really ran on the cluster's worker, not in a local JVM.
    assert "Registering app citeflow-build_graph-cluster" in standalone_cluster["master_log"].read_text()
    assert any(p.name.startswith("app-") for p in standalone_cluster["work"].iterdir())

    (manifest_path,) = artifacts.glob("cluster/build_graph/*/_manifest.json")
    manifest = json.loads(manifest_path.read_text())
    assert manifest["config"]["spark"]["master"] == standalone_cluster["master"]
    # Same numbers as the local run of the real sample (tests/e2e/test_build_graph.py).
    assert manifest["tables"]["papers"]["rows"] == 1000
    assert manifest["metrics"]["rejected"] == {"citation.cited_not_in_corpus": 3103, "citation.self_citation": 4}
