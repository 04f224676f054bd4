"""The local Airflow's stop: the whole process group, and none of it left behind as zombies."""

import subprocess
import sys

from cockpit.local_airflow import group_alive, stop_group


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
