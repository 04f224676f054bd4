"""A Spark Connect server on this machine, with the local driver's settings: `citeflow spark-server`.

Each `citeflow run` with a local driver starts a JVM, and that JVM's compilers warm up on the stage's own work:
the first tasks of build_graph's parse run 2-3 times slower than the later ones. A server started once pays
the start and the warm-up once; each stage then runs as a thin client of it (`--set spark.remote=sc://...`)
and does the same work (same versions, same rows: tests/e2e/test_spark_cluster.py).

The server is Spark's own (`SparkConnectServer` through pyspark's `bin/spark-submit`), run with the settings a
local driver gets (`SparkConfig`: master, driver memory, local dir, `spark.conf`, and
`session.driver_java_options`), its Python workers on this interpreter (filter_leakage folds non-ASCII titles
in a pandas UDF). Its settings go to spark-submit in a properties file readable by this user only, so that a
secret in `spark.conf` is on no command line; spark-submit reads it as it starts, and it is removed once the
server listens.

Spark Connect authenticates nobody: the server listens on 127.0.0.1 unless `host` says otherwise, and its
web UI is off.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from citeflow.config import SparkConfig
from citeflow.errors import CiteflowError
from citeflow.spark.engine.driver import properties_text

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 15002  # Spark Connect's own default
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Server:
    """A started server: its process (the leader of its own process group), its address and properties file."""

    process: subprocess.Popen
    remote: str
    folder: str  # private folder of the properties file, removed once the server listens (or stops)


def check_address(host: str, port: int) -> None:
    """A one-line error for a port outside 1-65535 or a host that is neither an IP address nor a hostname."""
    if not 1 <= port <= 65535:
        raise CiteflowError(f"--port must be between 1 and 65535, not {port}")
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    labels = host.split(".")
    if (
        not host
        or len(host) > 253
        or not all(
            label and len(label) <= 63 and label.replace("-", "").isalnum() and label.isascii() for label in labels
        )
    ):
        raise CiteflowError(f"--host must be an IP address or a hostname, not {host!r}")


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def properties(config: SparkConfig, host: str, port: int) -> dict[str, str]:
    """The server's Spark settings: the local driver's (`SparkConfig`), then `spark.conf`, then its address."""
    from citeflow.spark.engine.session import driver_java_options

    if config.remote:
        raise CiteflowError("spark-server starts a Spark Connect server itself: leave spark.remote unset")
    props = {
        "spark.master": config.master,
        "spark.driver.memory": config.driver_memory,
        "spark.driver.extraJavaOptions": driver_java_options(),
        "spark.sql.shuffle.partitions": str(config.shuffle_partitions),
        "spark.ui.enabled": "false",
    }
    if config.local_dir:
        props["spark.local.dir"] = config.local_dir
    props.update(config.user_settings())
    props["spark.connect.grpc.binding.address"] = host
    props["spark.connect.grpc.binding.port"] = str(port)
    return props


def command(spark_home: str, properties_file: str) -> list[str]:
    """spark-submit's arguments that run Spark's Connect server with the settings in `properties_file`."""
    return [
        os.path.join(spark_home, "bin", "spark-submit"),
        "--class",
        SERVER_CLASS,
        "--name",
        "citeflow Spark Connect server",
        "--properties-file",
        properties_file,
    ]


def environment(spark_home: str) -> dict[str, str]:
    """The server's environment: pyspark's Spark, and Python workers on this interpreter with citeflow importable."""
    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "SPARK_HOME": spark_home, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": path}
    # the server's JVM logs its errors to its own output (its log, or the terminal of `citeflow spark-server`),
    # not to the log of a run that happened to start it (spark/engine/log4j2.properties)
    env.pop("CITEFLOW_RUN_LOG", None)
    env["CITEFLOW_JVM_CONSOLE"] = env.get("CITEFLOW_JVM_CONSOLE") or "error"
    return env


def _reachable(host: str) -> str:
    """The address a client on this machine reaches a server listening on `host` at (a wildcard: loopback)."""
    return "127.0.0.1" if host in ("0.0.0.0", "::") else host


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((_reachable(host), port), timeout=1):
            return True
    except OSError:
        return False


def start(config: SparkConfig, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, output=None) -> Server:
    """Start the server in a process group of its own and wait until it listens; `output`: where its log goes
    (a file object; None: this process's). A one-line error when the port is taken, Java is missing or the server
    exits or does not listen within `READY_TIMEOUT_S`."""
    import pyspark

    from citeflow.spark.engine.session import check_java

    check_address(host, port)
    if _listening(host, port):
        raise CiteflowError(f"{host}:{port} is in use already: stop what listens there or pick another --port")
    check_java()
    props = properties(config, host, port)
    spark_home = os.path.dirname(os.path.abspath(pyspark.__file__))
    folder = tempfile.mkdtemp(prefix="citeflow-connect-")  # mode 0700: the settings may hold secrets
    props_file = os.path.join(folder, "spark.properties")
    fd = os.open(props_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(properties_text(props))
    process = subprocess.Popen(
        command(spark_home, props_file),
        env=environment(spark_home),
        stdout=output,
        stderr=subprocess.STDOUT if output is not None else None,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    server = Server(process, f"sc://{_reachable(host)}:{port}", folder)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not _listening(host, port):
        if process.poll() is not None:
            stop(server)
            raise CiteflowError(f"the Spark Connect server exited ({process.returncode}) before it listened on {port}")
        if time.monotonic() > deadline:
            stop(server)
            raise CiteflowError(
                f"the Spark Connect server did not listen on {host}:{port} within {READY_TIMEOUT_S:.0f}s"
            )
        time.sleep(0.25)
    shutil.rmtree(folder, ignore_errors=True)  # read at the start: a secret in it stays on disk no longer
    return server


def stop(server: Server) -> None:
    """Stop the server's whole process group (SIGTERM, then SIGKILL after `STOP_TIMEOUT_S`); remove its settings."""
    try:
        if server.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.process.pid, signal.SIGTERM)
            try:
                server.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(server.process.pid, signal.SIGKILL)
                server.process.wait(timeout=STOP_TIMEOUT_S)
    finally:
        shutil.rmtree(server.folder, ignore_errors=True)


@contextlib.contextmanager
def running(config: SparkConfig, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, output=None) -> Iterator[Server]:
    """A started server (`start`), stopped when the block ends."""
    server = start(config, host, port, output)
    try:
        yield server
    finally:
        stop(server)


def free_port() -> int:
    """A TCP port nothing listens on now (for benches and tests that start a server of their own)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
