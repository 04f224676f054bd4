"""The local Spark driver's JVM start (its settings in a properties file only this user can read, and what it
prints outside log4j into the run's log) and its stop.

The one module besides `class_archive.py` that reaches pyspark's SparkContext: a Spark Connect session has no
JVM in this process, so stage code never comes here (`tests/unit/spark/test_connect_api.py`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import subprocess
import sys
import threading

from citeflow.errors import CiteflowError

SUBMIT_ARGS = "PYSPARK_SUBMIT_ARGS"  # pyspark's spark-submit arguments for the JVM it starts
_launching = threading.Lock()
# How long `stop_driver` waits for the JVM to exit (it writes its class archive then, when asked to:
# class_archive.py) before it kills it.
JVM_EXIT_WAIT_S = 60.0


def launch_driver(settings: dict[str, str]) -> None:
    """Start this process's Spark JVM (pyspark's gateway) with `settings`, unless it runs already.

    The builder would hand pyspark each setting as `--conf key=value` for spark-submit's command line, and
    Spark's launcher copies them onto the JVM's. Here they go in a properties file readable by this user only
    (`citeflow.process.private_file`), named in `PYSPARK_SUBMIT_ARGS` while the JVM starts, with
    `--load-spark-defaults` so that a `spark-defaults.conf` still applies as before; spark-submit reads the
    file as it starts, and it is removed once the JVM is up. A user's own `PYSPARK_SUBMIT_ARGS` follows."""
    from pyspark import SparkContext

    from citeflow.process import private_file

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return  # pyspark reuses the JVM it has, or connects to one started for it
    with _launching:
        if SparkContext._gateway is not None:
            return
        own = os.environ.get(SUBMIT_ARGS)
        with private_file("spark.properties", properties_text(settings)) as path:
            os.environ[SUBMIT_ARGS] = (
                f"--properties-file {shlex.quote(path)} --load-spark-defaults {own or 'pyspark-shell'}"
            )
            try:
                with _jvm_output_to_run_log():
                    SparkContext._ensure_initialized()
            finally:
                if own is None:
                    os.environ.pop(SUBMIT_ARGS, None)
                else:
                    os.environ[SUBMIT_ARGS] = own


@contextlib.contextmanager
def _jvm_output_to_run_log():
    """While the JVM starts, this process's stderr is the run's log (`CITEFLOW_RUN_LOG`), so the JVM keeps it as
    its own: what it prints outside log4j (the JDK's notes, a crash) goes there too. Not on a terminal, where
    Spark's progress bar is wanted, nor with `citeflow -v` (`CITEFLOW_JVM_CONSOLE`)."""
    log_path = os.environ.get("CITEFLOW_RUN_LOG")
    if not log_path or os.environ.get("CITEFLOW_JVM_CONSOLE") or sys.stderr.isatty():
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(target, 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def properties_text(props: dict[str, str]) -> str:
    """`props` as a Java properties file (backslashes escaped; a line break in a value is refused)."""
    lines = []
    for key, value in props.items():
        if any(c in key + value for c in "\r\n"):
            raise CiteflowError(f"the Spark setting {key} holds a line break")
        lines.append(f"{key}={value}".replace("\\", "\\\\"))
    return "\n".join(lines) + "\n"


def driver_running() -> bool:
    """Whether this process has a local Spark driver: a SparkContext, or pyspark's JVM. Never imports pyspark."""
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None or SparkContext._gateway is not None


def stop_driver(wait_s: float = JVM_EXIT_WAIT_S) -> bool:
    """Stop this process's local Spark session and the JVM pyspark started for it; True when there was one.

    A JVM this process did not start (pyspark given one through `PYSPARK_GATEWAY_PORT`, as under spark-submit) is
    left running: its session is stopped, the JVM is its starter's."""
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    stopped = False
    context = SparkContext._active_spark_context
    if context is not None:
        session = SparkSession.getActiveSession()
        if session is not None:
            session.stop()  # the context, and the JVM's record of the session
        else:
            context.stop()
        stopped = True
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if gateway is not None and process is not None:
        _end_jvm(gateway, process, wait_s)
        SparkContext._gateway = None
        SparkContext._jvm = None
        stopped = True
    return stopped


def _end_jvm(gateway, process: subprocess.Popen, wait_s: float) -> None:
    """End pyspark's JVM: its Py4J connections closed, then its standard input, at whose end the gateway server
    exits (as it does when this process exits); killed if it is still there after `wait_s`."""
    try:
        gateway.shutdown()
    except Exception as exc:  # a JVM that died already: nothing left to close
        logging.getLogger("citeflow").debug("Py4J gateway not shut down cleanly", exc_info=exc)
    if process.stdin is not None:
        process.stdin.close()
    try:
        process.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        logging.getLogger("citeflow").warning("Spark's JVM did not exit within %.0f s of its stop: killed", wait_s)
        process.kill()
        process.wait()
