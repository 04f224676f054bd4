"""The SparkSession every Spark stage uses, built from `SparkConfig`.

`local[*]` by default with memory sized for a small machine; any cluster
(`spark://host:7077`, `yarn`, `k8s://...`) by setting `spark.master`, with no
code change. Java is checked first so a missing or old JVM is one clear
message instead of a Py4J traceback.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import warnings

from citeflow.config import SparkConfig
from citeflow.errors import CiteflowError

MIN_JAVA = 17  # Spark 4 runs on Java 17 or 21


def java_version() -> int | None:
    """Major version of the java that Spark will launch, or None when there is none."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major  # "1.8" is Java 8


def check_java() -> None:
    version = java_version()
    if version is None:
        raise CiteflowError(
            f"Spark needs Java {MIN_JAVA} or newer and none was found. Install one "
            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME."
        )
    if version < MIN_JAVA:
        raise CiteflowError(
            f"Spark needs Java {MIN_JAVA} or newer; found Java {version}. Install openjdk-17 and point JAVA_HOME at it."
        )


def get_spark(config: SparkConfig, app_name: str = "citeflow"):
    """Start (or reuse) the SparkSession for `config`."""
    check_java()
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.sql import SparkSession

    # Executors on a cluster must run the same Python as this driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(config.master)
        .config("spark.driver.memory", config.driver_memory)
        .config("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
        .config("spark.sql.adaptive.enabled", "true")
        # Spark's own progress bar, where someone is watching a terminal.
        .config("spark.ui.showConsoleProgress", str(sys.stderr.isatty()).lower())
        .config("spark.sql.session.timeZone", "UTC")
        # Parquet written by Spark must be readable by pyarrow readers downstream.
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    )
    log4j = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
    builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
    if config.local_dir:
        builder = builder.config("spark.local.dir", config.local_dir)
    for item in config.conf:
        key, value = item.split("=", 1)
        builder = builder.config(key.strip(), value.strip())
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
