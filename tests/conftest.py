"""Shared fixtures: one local SparkSession per test session, small and quiet."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

# Small Spark for a 2-core machine: few shuffle partitions, modest memory.
TEST_SPARK_OVERRIDES = ["spark.shuffle_partitions=4", "spark.driver_memory=2g", "build_graph.output_files=2"]


def pytest_configure(config):
    # Spark's Python workers (pandas UDFs) must run this interpreter, with its packages.
    os.environ["PYSPARK_PYTHON"] = sys.executable


@pytest.fixture(scope="session")
def spark():
    from citeflow.config import SparkConfig
    from spark.session import get_spark

    session = get_spark(SparkConfig(shuffle_partitions=4, driver_memory="2g"), app_name="citeflow-tests")
    yield session


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real samples not found at {SHARED_DATA}")
    return SHARED_DATA
