"""The local Spark driver's JVM start: its settings in a properties file only this user can read, and what it
prints outside log4j into the run's log.

The one module besides `class_archive.py` that reaches pyspark's SparkContext: a Spark Connect session has no
JVM in this process, so stage code never comes here (`tests/unit/spark/test_connect_api.py`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import threading

from citeflow.errors import CiteflowError

SUBMIT_ARGS = "PYSPARK_SUBMIT_ARGS"  # pyspark's spark-submit arguments for the JVM it starts
_launching = threading.Lock()


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
