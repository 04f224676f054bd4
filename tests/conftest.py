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


# Test files that share an expensive session fixture, each group run by one worker under `make test`
# (`pytest -n 2 --dist loadfile`): every worker builds its own session fixtures, and loadfile alone would build
# the 20k-paper pipeline of `topics_config` (about 150 s), the fault suite's `world` or the Airflow rebuild of
# `airflow_rebuild` (about 150 s) once per worker that gets one of their files. `tests/unit/test_suite_groups.py`
# checks that every file using them is listed.
FIXTURE_GROUPS = {
    **{f"tests/e2e/{name}.py": "topics" for name in ("test_benchmark", "test_mine_triplets", "test_train_encoder")},
    **{f"tests/faults/{name}.py": "world" for name in ("test_concurrent", "test_inputs", "test_kill", "test_tamper")},
    # the whole pipeline through Airflow, built once (`airflow_rebuild`) and reused by the others' runs
    **{f"tests/e2e/{name}.py": "airflow" for name in ("test_browser", "test_dag_run", "test_releases")},
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's loadfile, with each of FIXTURE_GROUPS' groups as one file. (xdist's own `xdist_group`
    mark needs `--dist loadgroup`, whose renaming of test ids pytest 9 ignores.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LoadFileGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return FIXTURE_GROUPS.get(path, path)

    return LoadFileGroups(config, log)


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
