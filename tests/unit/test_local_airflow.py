"""The local Airflow: its stop (the whole process group, no zombies left) and the settings its components read."""

import subprocess
import sys

from cockpit.local_airflow import (
    EXECUTION_API_TIMEOUT_S,
    LocalAirflowConfig,
    airflow_env,
    group_alive,
    stop_group,
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


def test_task_processes_read_the_longer_execution_api_timeout(tmp_path):
    # Airflow's own config reader, in a child with the environment every component gets: a misspelt
    # variable would leave the 5 s default in place
    env = airflow_env(LocalAirflowConfig(home=tmp_path))
    read = subprocess.run(
        [
            sys.executable,
            "-c",
            "from airflow.configuration import conf; print(conf.getfloat('workers', 'execution_api_timeout'))",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert read.returncode == 0, read.stderr[-2000:]
    assert float(read.stdout.split()[-1]) == EXECUTION_API_TIMEOUT_S > 5
