"""citeflow.threads: the thread settings every compute stage gives torch, FAISS and PBG."""

import os
import subprocess
import sys

import pytest

from citeflow import threads


def test_child_env_sets_passive_waiting_and_pool_sizes_but_keeps_explicit_settings():
    env = threads.child_env({"PATH": "/bin", "OMP_NUM_THREADS": "5"}, threads=3)
    assert env == {
        "PATH": "/bin",
        "OMP_NUM_THREADS": "5",  # the caller's
        "OMP_WAIT_POLICY": "PASSIVE",
        "MKL_NUM_THREADS": "3",
        "OPENBLAS_NUM_THREADS": "3",
    }
    assert threads.child_env({"OMP_WAIT_POLICY": "ACTIVE"})["OMP_WAIT_POLICY"] == "ACTIVE"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")
def test_usable_cores_follow_the_affinity_not_the_machine():
    # a child pinned to one core sees one usable core, and its torch and FAISS pools get one thread
    code = (
        "import os; os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})\n"
        "from citeflow import threads; info = threads.configure()\n"
        "import torch, faiss; info = threads.configure()\n"
        "print(info['usable_cores'], info['torch_threads'], info['faiss_threads'], info['OMP_WAIT_POLICY'])"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "1", "1", "PASSIVE"]
