"""The local Airflow: its stop (the whole process group, no zombies left), the settings its components read,
the one home `make demo` and `make airflow` share, and the demo's task logs filed where the UI reads them."""

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from citeflow.cockpit.local_airflow import (
    EXECUTION_API_TIMEOUT_S,
    LocalAirflowConfig,
    TaskLog,
    airflow_env,
    dags_test,
    group_alive,
    stop_group,
    task_log_path,
    task_logs,
)

REPO = Path(__file__).resolve().parents[2]
# Airflow 3's default [logging] log_filename_template, as a migrated database stores it (table log_template)
AIRFLOW3_LOG_TEMPLATE = (
    "dag_id={{ ti.dag_id }}/run_id={{ ti.run_id }}/task_id={{ ti.task_id }}/"
    "{% if ti.map_index >= 0 %}map_index={{ ti.map_index }}/{% endif %}"
    "attempt={{ try_number|default(ti.try_number) }}.log"
)


def test_stop_group_reaps_its_own_children_and_leaves_no_group():
    # two children in a new group, as `start` launches Airflow's components: one ends on SIGTERM, one
    # ignores it (SIGKILLed after the grace period)
    leader = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], process_group=0)
    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"],
        process_group=leader.pid,
    )
    try:
        stop_group(leader.pid, timeout=1, children=[leader, stubborn])
        # a dead child stays in its group (a zombie) until waited for: the group is gone only if both were reaped
        assert not group_alive(leader.pid)
        assert leader.returncode is not None and stubborn.returncode is not None
    finally:
        for child in (leader, stubborn):
            child.kill()
            child.wait()


@pytest.fixture(scope="module")
def home_settings(tmp_path_factory) -> tuple[Path, dict]:
    """What Airflow's own config reader makes of the environment every command of a home gets (`airflow_env`),
    read in a child once: a misspelt variable would leave Airflow's default in place."""
    home = tmp_path_factory.mktemp("airflow-home")
    read = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from airflow.configuration import conf; print(json.dumps({"
            "'timeout': conf.getfloat('workers', 'execution_api_timeout'), "
            "'db': conf.get('database', 'sql_alchemy_conn'), "
            "'logs': conf.get('logging', 'base_log_folder'), "
            "'dags': conf.get('core', 'dags_folder')}))",
        ],
        env=airflow_env(LocalAirflowConfig(home=home)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert read.returncode == 0, read.stderr[-2000:]
    return home, json.loads(read.stdout.splitlines()[-1])


def test_task_processes_read_the_longer_execution_api_timeout(home_settings):
    _, settings = home_settings
    assert settings["timeout"] == EXECUTION_API_TIMEOUT_S > 5


def test_every_command_of_a_home_reads_its_database_and_task_log_folder(home_settings):
    # the demo's `airflow dags test` and the server both run with this environment: the server finds the
    # demo's runs in the same database and its task logs in the same folder
    home, settings = home_settings
    assert settings["db"] == f"sqlite:///{home}/airflow.db"
    assert settings["logs"] == f"{home}/logs"
    assert settings["dags"] == str(REPO / "dags")


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_demo_and_make_airflow_use_one_home(tmp_path):
    # `make -n` prints the commands without running them: both targets must go through local_airflow with the
    # same --home and CITEFLOW_HOME, and neither may set up an Airflow home of its own beside it
    dry = subprocess.run(
        ["make", "-n", "--no-print-directory", "demo", "airflow", f"DEMO={tmp_path}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dry.returncode == 0, dry.stderr
    launches = [
        shlex.split(line.split(">")[0]) for line in dry.stdout.splitlines() if "citeflow.cockpit.local_airflow" in line
    ]
    assert len(launches) == 2, dry.stdout
    demo, server = launches
    assert demo[demo.index("--dags-test") + 1] == "citeflow_rebuild" and "--dags-test" not in server
    for launch in (demo, server):
        assert launch[launch.index("--home") + 1] == f"{tmp_path}/airflow"
        assert f"CITEFLOW_HOME={tmp_path}" in launch
    # no Airflow command of the virtualenv run beside local_airflow, in a home it set up itself
    assert "AIRFLOW_HOME=" not in dry.stdout and "bin/airflow " not in dry.stdout


RUN = "manual__2026-12-05T17:04:32.945644+00:00"
# An excerpt of `airflow dags test citeflow_rebuild` (Airflow 3.3; timestamps and padding shortened), cut short:
# bookkeeping outside any task, a task, a mapped task of a task group, a retried task and a last task whose end
# never came.
DAGS_TEST_OUTPUT = "".join(
    f"{line}\n"
    for line in [
        "17:04:31Z [info] Filling up the DagBag from /work/main/dags [airflow.dag_processing.dagbag.BundleDagBag]",
        "17:04:33Z [info] [DAG TEST] starting task_id=check_inputs map_index=-1 [airflow.sdk.definitions.dag]",
        f"17:04:33Z [info] [DAG TEST] running task <TaskInstance: citeflow_rebuild.check_inputs {RUN} "
        "[TaskInstanceState.SCHEDULED] ti_id=01a2472a-217e> [airflow.sdk.definitions.dag]",
        "citeflow: inputs checked",
        "17:04:37Z [info] [DAG TEST] end task task_id=check_inputs map_index=-1 [airflow.sdk.definitions.dag]",
        "17:04:37Z [info] Marking <TaskInstance: citeflow_rebuild.embed_graph_rank> as SKIPPED",
        "17:05:34Z [info] [DAG TEST] starting task_id=per_strategy.mine_triplets map_index=0 [dag]",
        "17:05:34Z [info] [DAG TEST] running task <TaskInstance: citeflow_rebuild.per_strategy.mine_triplets "
        f"{RUN} map_index=0 [TaskInstanceState.SCHEDULED] ti_id=01a2472a-2185> [dag]",
        "mine_triplets: built version 726b4ab55c52fab7",
        "17:05:35Z [info] [DAG TEST] end task task_id=per_strategy.mine_triplets map_index=0 [dag]",
        "17:05:36Z [info] [DAG TEST] starting task_id=build_graph map_index=-1 [dag]",
        f"17:05:36Z [info] [DAG TEST] running task <TaskInstance: citeflow_rebuild.build_graph {RUN} [SCHEDULED]>",
        "RuntimeError: first try fails",
        "17:05:37Z [info] [DAG TEST] end task task_id=build_graph map_index=-1 [dag]",
        "17:05:38Z [info] [DAG TEST] starting task_id=build_graph map_index=-1 [dag]",
        f"17:05:38Z [info] [DAG TEST] running task <TaskInstance: citeflow_rebuild.build_graph {RUN} [SCHEDULED]>",
        "build_graph: built version 19b54b23c8b28fcc",
        "17:05:39Z [info] [DAG TEST] end task task_id=build_graph map_index=-1 [dag]",
        "17:05:40Z [info] [DAG TEST] starting task_id=embed_graph map_index=-1 [dag]",
        f"17:05:40Z [info] [DAG TEST] running task <TaskInstance: citeflow_rebuild.embed_graph {RUN} [SCHEDULED]>",
        "embed_graph: training",
    ]
)


def test_dags_test_output_is_split_into_each_task_attempt():
    logs = task_logs(DAGS_TEST_OUTPUT, "citeflow_rebuild")
    assert [(log.task_id, log.map_index, log.run_id, log.ordinal) for log in logs] == [
        ("check_inputs", -1, RUN, 1),
        ("per_strategy.mine_triplets", 0, RUN, 1),
        ("build_graph", -1, RUN, 1),
        ("build_graph", -1, RUN, 2),
        ("embed_graph", -1, RUN, 1),
    ]
    texts = [log.text.splitlines() for log in logs]
    # each from its start line to its end line, nothing of the run's own bookkeeping
    assert "starting task_id=check_inputs" in texts[0][0] and "end task task_id=check_inputs" in texts[0][-1]
    assert texts[0][2] == "citeflow: inputs checked" and len(texts[0]) == 4
    assert not any("SKIPPED" in line or "DagBag" in line for text in texts for line in text)
    assert "first try fails" in texts[2][2] and "built version 19b54b23c8b28fcc" in texts[3][2]
    # a task cut off keeps what it printed
    assert texts[4][-1] == "embed_graph: training"


def test_a_task_log_is_filed_where_airflow_reads_it():
    # the paths Airflow 3.3's own log reader opened for the demo's tasks (TaskLogReader, by hand on 2026-12-05)
    mapped = TaskLog(task_id="per_strategy.mine_triplets", map_index=0, run_id=RUN, ordinal=1, text="")
    assert task_log_path(AIRFLOW3_LOG_TEMPLATE, mapped, "citeflow_rebuild", 1) == (
        f"dag_id=citeflow_rebuild/run_id={RUN}/task_id=per_strategy.mine_triplets/map_index=0/attempt=1.log"
    )
    plain = TaskLog(task_id="build_graph", map_index=-1, run_id=RUN, ordinal=2, text="")
    assert task_log_path(AIRFLOW3_LOG_TEMPLATE, plain, "citeflow_rebuild", 2) == (
        f"dag_id=citeflow_rebuild/run_id={RUN}/task_id=build_graph/attempt=2.log"
    )
    # Airflow 2's template names the logical date, which the output does not give: no file rather than a wrong one
    with pytest.raises(ValueError, match="ts"):
        task_log_path("{{ ti.dag_id }}/{{ ti.task_id }}/{{ ts }}/{{ try_number }}.log", plain, "citeflow_rebuild", 2)


TINY_DAG = """
import datetime
import pathlib

from airflow.sdk import dag, task


@dag(schedule=None)
def tiny():
    @task(retries=1, retry_delay=datetime.timedelta(seconds=0))
    def wobble():
        flag = pathlib.Path(__file__).with_name("tried")
        if not flag.exists():
            flag.write_text("")
            raise RuntimeError("the first try fails")
        print("the second try works")

    @task
    def shout(word: str):
        print(f"shout {word}")

    wobble() >> shout.expand(word=["ah", "oh"])


tiny()
"""
READ_LOGS = """
import json
from airflow.models.taskinstance import TaskInstance
from airflow.utils.log.log_reader import TaskLogReader
from airflow.utils.session import create_session
from sqlalchemy import select

found = {}
with create_session() as session:
    for ti in session.scalars(select(TaskInstance).where(TaskInstance.dag_id == "tiny")):
        for attempt in range(1, ti.try_number + 1):
            stream, _ = TaskLogReader().read_log_chunks(ti, attempt, {})
            found[f"{ti.task_id}[{ti.map_index}]#{attempt}"] = [str(getattr(m, "event", m)) for m in stream]
print(json.dumps(found))
"""


@pytest.mark.slow  # migrates an Airflow database and runs a DAG: make test, not make test-fast
def test_a_server_of_the_home_reads_the_task_logs_of_a_dags_test_run(tmp_path):
    # `--dags-test` on a tiny DAG (a retried task, a mapped one), then Airflow's own log reader, as the UI's
    # api-server runs it, in the environment a server of that home gets
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "tiny.py").write_text(TINY_DAG)
    cfg = LocalAirflowConfig(home=tmp_path / "home", dags=dags)
    assert dags_test(cfg, "tiny") == 0
    read = subprocess.run(
        [sys.executable, "-c", READ_LOGS], env=airflow_env(cfg), capture_output=True, text=True, timeout=300
    )
    assert read.returncode == 0, read.stderr[-3000:]
    logs = json.loads(read.stdout.splitlines()[-1])
    assert sorted(logs) == ["shout[0]#1", "shout[1]#1", "wobble[-1]#1", "wobble[-1]#2"]
    assert any("the first try fails" in line for line in logs["wobble[-1]#1"])
    assert not any("the second try works" in line for line in logs["wobble[-1]#1"])
    assert "the second try works" in logs["wobble[-1]#2"]
    assert "shout ah" in logs["shout[0]#1"] and "shout oh" in logs["shout[1]#1"]
