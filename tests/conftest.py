"""Shared fixtures: one local SparkSession per test session, small and quiet."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support.shared import missing

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SCRATCH = "CITEFLOW_TEST_SCRATCH"  # the session's scratch folder, set by the process that made it
_made_scratch: list[Path] = []  # that folder, in the process that made it (and removes it)

# Small Spark for a 2-core machine: few shuffle partitions, modest memory.
TEST_SPARK_OVERRIDES = ["spark.shuffle_partitions=4", "spark.driver_memory=2g", "build_graph.output_files=2"]


# Test files that share an expensive session fixture, each group run by one worker under `make test`
# (`pytest -n 2 --dist loadfile`): every worker builds its own session fixtures, and loadfile alone would build
# the 20k-paper pipeline of `topics_config` (about 150 s), the fault suite's `world` or the Airflow rebuild of
# `airflow_rebuild` (about 150 s) once per worker that gets one of their files. `tests/unit/test_suite_groups.py`
# checks that every file using them is listed.
FIXTURE_GROUPS = {
    **{f"tests/e2e/{name}.py": "topics" for name in ("test_benchmark", "test_mine_triplets", "test_train_encoder")},
    **{
        f"tests/faults/{name}.py": "world"
        for name in ("test_concurrent", "test_failures", "test_inputs", "test_kill", "test_secrets", "test_tamper")
    },
    # the whole pipeline through Airflow, built once (`airflow_rebuild`) and reused by the others' runs
    **{f"tests/e2e/{name}.py": "airflow" for name in ("test_browser", "test_dag_run", "test_readers", "test_releases")},
}


# What the longest scopes (a group or a file) take under `make test-all`, whole seconds of one worker's time (the
# junit report summed per scope, 2 workers): they are handed out first, the longest first, and the many short
# files fill in behind them: xdist's own order (the most tests first) can start a long file last, with one
# worker on it while the other has nothing left. The suite is bound by the cores (docs/development.md), so the
# order only shortens its tail. A scope not listed keeps its place after these;
# `tests/unit/test_suite_groups.py` checks that every one listed exists.
SCOPE_SECONDS = {
    "tests/e2e/test_deployment.py": 1690,
    "tests/e2e/test_real_encoder_wins.py": 1050,
    "world": 937,
    "airflow": 902,
    "topics": 815,
    "tests/e2e/test_incremental.py": 736,
    "tests/e2e/test_pbg_distributed.py": 276,
    "tests/e2e/test_real_releases.py": 259,
    "tests/e2e/test_spark_cluster.py": 227,
    "tests/unit/test_encoder.py": 151,
    "tests/e2e/test_build_graph.py": 122,
    "tests/unit/test_reference_scirepeval.py": 100,
    "tests/e2e/test_filter_leakage.py": 98,
    "tests/e2e/test_hepth_releases.py": 93,
    "tests/unit/spark/test_leakage.py": 90,
    "tests/unit/test_cli.py": 81,
    "tests/e2e/test_real_encoder.py": 70,
    "tests/unit/spark/test_class_archive.py": 65,
    "tests/unit/test_reference_fixture.py": 65,
    "tests/unit/test_pbg_train.py": 51,
    "tests/unit/test_hepth_support.py": 49,
    "tests/e2e/test_embed_graph.py": 47,
}

# The scopes `make test` leaves to `make test-long` (marked `long`): the whole pipeline through Airflow, the
# 20k-paper chain, the fault suite's world, the release-diff oracles, distributed PBG, the real releases (the
# backfill, and HEP-Th's release 2 from its diff), the Spark cluster / Connect runs, the real encoder's win on
# held-out citations, the deployment (PostgreSQL, Redis and Celery workers: the rebuild routed to its queues,
# workers killed, a backfill of three releases at once), the two bench smoke tests that run whole pipelines (the
# incremental bench: two builds of a release and a PBG warm start; the real-encoder bench) and the run whose
# processes are watched for a JVM left after its Spark stages (the memory bench's smoke test). Each builds whole
# pipelines or starts several JVMs, and together they are three quarters of the suite's CPU time: with them
# `make test` would not fit in 15 minutes on 2 cores. CI (.ci/run) runs both tiers, so no bench can rot unseen.
LONG_SCOPES = frozenset(
    {
        "world",
        "airflow",
        "topics",
        "tests/e2e/test_incremental.py",
        "tests/e2e/test_pbg_distributed.py",
        "tests/e2e/test_real_releases.py",
        "tests/e2e/test_hepth_releases.py",
        "tests/e2e/test_spark_cluster.py",
        "tests/e2e/test_pipeline_spark.py",
        "tests/e2e/test_real_encoder_wins.py",
        "tests/e2e/test_deployment.py",
        "tests/unit/test_bench_incremental.py",
        "tests/unit/test_bench_real_encoder.py",
    }
)


def _check_install() -> None:
    """A package file added since the last `make install` has no link in the development install yet, so its
    module cannot be imported: one line saying so, instead of a ModuleNotFoundError in some test."""
    from tests.support.install import unlinked_files

    unlinked = unlinked_files()
    if unlinked:
        raise pytest.UsageError(
            f"citeflow's development install has no link for {', '.join(unlinked[:3])}"
            f"{f' and {len(unlinked) - 3} more' if len(unlinked) > 3 else ''}: run `make install` (docs/development.md)"
        )


def pytest_itemcollected(item):
    """`jvm`: a test that starts a Spark JVM (through the `spark` fixture, or any test of tests/unit/spark):
    `make test-fast` leaves them out. `long`: a test of one of `LONG_SCOPES`, which `make test` leaves to
    `make test-long`."""
    if "spark" in getattr(item, "fixturenames", ()) or item.nodeid.startswith("tests/unit/spark/"):
        item.add_marker(pytest.mark.jvm)
    if scope_of(item.nodeid) in LONG_SCOPES:
        item.add_marker(pytest.mark.long)


def scope_of(nodeid: str) -> str:
    """The scope a test is scheduled in: its file, or the FIXTURE_GROUPS group its file is in."""
    path = nodeid.split("::", 1)[0]
    return FIXTURE_GROUPS.get(path, path)


def pytest_collection_modifyitems(config, items):
    """In an xdist worker (whose collection the scheduler hands out), the longest scopes first (`SCOPE_SECONDS`),
    each scope's tests in their order."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: -SCOPE_SECONDS.get(scope_of(item.nodeid), 0))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's loadfile, with each of FIXTURE_GROUPS' groups as one file, handed out in collection order
    (`pytest_collection_modifyitems`: the longest first). (xdist's own `xdist_group` mark needs `--dist
    loadgroup`, whose renaming of test ids pytest 9 ignores.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # xdist would put the scopes with the most tests first

    class LoadFileGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return LoadFileGroups(config, log)


def pytest_configure(config):
    _check_install()
    # Spark's Python workers (pandas UDFs) must run this interpreter, with its packages.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    import tempfile

    # One scratch folder per test session, made by the first process (xdist's workers inherit it) and removed by
    # that process at the end: the runs' logs (jobs/cli `log_folder`), not the user's state folder, and every
    # Spark JVM's local dirs (SPARK_LOCAL_DIRS wins over spark.local.dir), so the block managers of the JVMs the
    # kill tests SIGKILL do not stay behind in /tmp.
    if SCRATCH not in os.environ:
        scratch = Path(tempfile.mkdtemp(prefix="citeflow-tests-"))
        os.environ[SCRATCH] = str(scratch)
        _made_scratch.append(scratch)
        for name, sub in (("CITEFLOW_LOG_DIR", "logs"), ("SPARK_LOCAL_DIRS", "spark")):
            if name not in os.environ:
                (scratch / sub).mkdir()
                os.environ[name] = str(scratch / sub)
    # the folders the tests' Airflow runs may read inputs from: pytest's temp folders and the shared samples
    # (citeflow.cockpit.run_settings.input_roots; tests/unit/test_orchestration.py checks the default)
    os.environ.setdefault("AIRFLOW_VAR_CITEFLOW_INPUT_ROOTS", f"{tempfile.gettempdir()},{REPO.parent / 'shared'}")


def pytest_unconfigure(config):
    import shutil

    for scratch in _made_scratch:
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="session")
def spark():
    from citeflow.config import SparkConfig
    from citeflow.spark.engine.session import get_spark

    session = get_spark(SparkConfig(shuffle_partitions=4, driver_memory="2g"), app_name="citeflow-tests")
    yield session


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        missing(f"real samples not found at {SHARED_DATA}")
    return SHARED_DATA
