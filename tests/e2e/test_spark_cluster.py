"""build_graph on a real Spark standalone cluster (master + worker on localhost).

Proves the cluster path needs only `--set spark.master=spark://...`: the
same command that runs local[*] runs on the cluster and writes the same
artifact version with the same counts.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from citeflow.spark.engine.connect_server import free_port
from tests.unit.test_tables import make_table

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


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
        "citeflow.jobs.cli",
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


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    """A Spark Connect server as `citeflow spark-server` starts one (spark/engine/connect_server.py), on 2 cores with
    1 GB, shared by this module's tests (each client names its own session); stopped after them, with its
    process group and its private settings folder gone."""
    from citeflow.config import SparkConfig
    from citeflow.spark.engine import connect_server as CS

    log = tmp_path_factory.mktemp("connect-server") / "connect-server.log"
    # a planted secret among its settings (an S3 key no test uses): no process may carry it on its command line
    config = SparkConfig(
        master="local[2]", driver_memory="1g", conf=(f"spark.hadoop.fs.s3a.secret.key={SERVER_SECRET}",)
    )
    with open(log, "w") as out, CS.running(config, port=CS.free_port(), output=out) as server:
        yield {"remote": server.remote, "log": log, "server": server}
    assert server.process.poll() is not None
    assert not os.path.exists(server.folder)


SERVER_SECRET = "cf-srv-" + "S3CR3T-9e0b"


def test_the_servers_settings_reach_it_in_a_file_removed_once_it_listens(connect_server):
    """Every process of the server (spark-submit's launcher, the JVM) is read from /proc: the secret is on no
    command line and the properties file is gone, yet the JVM has the settings (its heap is the 1g driver
    memory of the file) and serves a client."""
    from citeflow.process import descendants

    server = connect_server["server"]
    assert not os.path.exists(server.folder)
    lines = {}
    for pid in [server.process.pid, *descendants(server.process.pid)]:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                lines[pid] = fh.read().decode(errors="replace").split("\0")
        except OSError:
            continue
    (jvm,) = [line for line in lines.values() if "org.apache.spark.deploy.SparkSubmit" in line]
    assert "--properties-file" in jvm and "-Xmx1g" in jvm and SERVER_SECRET not in " ".join(jvm)
    assert [pid for pid, line in lines.items() if SERVER_SECRET in " ".join(line)] == []
    done = subprocess.run(
        [sys.executable, "-c", CONNECT_PLAIN, connect_server["remote"]], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-4000:] + connect_server["log"].read_text()[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "3"
    assert SERVER_SECRET not in connect_server["log"].read_text()


def test_spark_stages_run_through_spark_connect(connect_server, generated_s2orc, generated_s2ag, tmp_path):
    """build_graph and filter_leakage as Spark Connect clients write the versions and rows local mode writes.

    The client runs with JAVA_HOME pointing nowhere: a local driver JVM could not start, so every query ran
    on the server. Local mode's contents are the pin that tests/e2e/test_filter_leakage.py holds it to.
    """
    from citeflow.artifacts import ArtifactStore
    from tests.e2e import contents as C

    artifacts = tmp_path / "artifacts"
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java-here")}
    runs = (("s2orc", generated_s2orc, "filter_leakage"), ("s2ag", generated_s2ag, "build_graph"))
    for name, (snap, _), until in runs:
        pinned = C.check_input(name, snap)
        cmd = [sys.executable, "-m", "citeflow.jobs.cli", "run", "--snapshot", f"connect-{name}", "--until", until]
        cmd += ["--corpus", str(snap / "corpus"), "--scidocs", str(snap / "scidocs")]
        cmd += ["--paper-ids", str(snap / "paper-ids"), "--artifacts", str(artifacts)]
        cmd += ["--set", f"spark.remote={connect_server['remote']}", "--set", "spark.shuffle_partitions=4"]
        cmd += ["--set", "build_graph.output_files=2"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, done.stderr[-4000:] + connect_server["log"].read_text()[-3000:]

        store = ArtifactStore(str(artifacts))
        problems = []
        for stage in ("build_graph", "filter_leakage"):
            if stage not in pinned:
                continue
            (manifest,) = store.list_versions(f"connect-{name}", stage)
            assert manifest.config["spark"]["remote"] == connect_server["remote"]
            problems += [f"{name}/{stage}: {p}" for p in C.compare(C.stage_contents(manifest), pinned[stage])]
        assert problems == []

    # Generated titles are all ASCII, so the runs above start no Python worker on the server: the Python fold
    # of other titles (`folded_other_titles`), through the same server, on a non-ASCII title
    done = subprocess.run(
        [sys.executable, "-c", CONNECT_FOLD, connect_server["remote"]],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-4000:] + connect_server["log"].read_text()[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[(1, 'cafe au lait'), (2, 'plain title')]", done.stdout

    # The rows' positions as the server reports them: a table written over another (spark/output.py
    # `write_over`) names the rows that go by them, through Spark's file metadata
    table = tmp_path / "merged" / "papers"
    make_table(table, {"part-a.parquet": [1, 2, 3], "part-b.parquet": [4, 5]})
    done = subprocess.run(
        [sys.executable, "-c", CONNECT_READ, connect_server["remote"], str(table)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-4000:] + connect_server["log"].read_text()[-3000:]
    assert done.stdout.strip().splitlines()[-1] == (
        "[(1, 'part-a.parquet', 0), (2, 'part-a.parquet', 1), (3, 'part-a.parquet', 2), (4, 'part-b.parquet', 0), "
        "(5, 'part-b.parquet', 1)]"
    )


def test_a_clients_session_is_released_on_the_server_when_it_exits(connect_server):
    """A client process that exits releases its Spark Connect session
    (`citeflow.spark.engine.session._release_at_exit`): a
    client that names the same session id afterwards is refused with SESSION_CLOSED. pyspark's own client,
    the control, leaves its session on the server, where a later client finds it open."""
    import uuid

    outcomes = {}
    for name, code in (("pyspark", CONNECT_PLAIN), ("citeflow", CONNECT_CITEFLOW)):
        remote = f"{connect_server['remote']}/;session_id={uuid.uuid4()}"
        first = subprocess.run([sys.executable, "-c", code, remote], capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr[-4000:] + connect_server["log"].read_text()[-3000:]
        assert first.stdout.strip().splitlines()[-1] == "3"
        again = subprocess.run(
            [sys.executable, "-c", CONNECT_PLAIN, remote], capture_output=True, text=True, timeout=300
        )
        outcomes[name] = "SESSION_CLOSED" if "INVALID_HANDLE.SESSION_CLOSED" in again.stderr else again.returncode
    assert outcomes == {"pyspark": 0, "citeflow": "SESSION_CLOSED"}


CONNECT_PLAIN = """
import sys
from pyspark.sql import SparkSession

print(SparkSession.builder.remote(sys.argv[1]).getOrCreate().range(3).count())
"""


CONNECT_CITEFLOW = """
import sys
from citeflow.config import SparkConfig
from citeflow.spark.engine.session import get_spark

print(get_spark(SparkConfig(remote=sys.argv[1])).range(3).count())
"""


CONNECT_READ = """
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
from citeflow.spark import scans as S
frame = S.read_table(spark, "file://" + sys.argv[2], [100], with_position=True)
print(sorted((r["id"], r["_file_name"], r["_row_index"]) for r in frame.collect()))
"""


CONNECT_FOLD = """
import sys
from pyspark.sql import SparkSession
import pyarrow as pa

spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
# after the session: the module's UDF is made for the kind of session there is (as in the stages)
from citeflow.jobs.filter_leakage.mapping import distinct_ids
from citeflow.jobs.filter_leakage import transforms as L
papers = spark.createDataFrame(
    [(1, "Caf\u00e9 au Lait", None, None, None), (2, "Plain Title", None, None, None)],
    "corpus_id long, title string, doi string, pubmed_id string, arxiv_id string",
)
none = pa.array([None, None], pa.string())
bench = pa.table({"id": ["a", "b"], "task": ["t", "t"], "split": ["x", "x"], "title": ["CAFE AU LAIT", "plain title"],
                  "doi": none, "pubmed_id": none, "arxiv_id": none})
ids = spark.createDataFrame(distinct_ids(bench))
sharing = L.papers_sharing_keys(papers, ids, materialize=lambda frame, name: frame.localCheckpoint())
print(sorted((r["corpus_id"], r["_folded"]) for r in sharing.collect()))
"""
