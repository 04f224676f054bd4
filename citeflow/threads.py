"""Thread settings of the compute libraries (torch, FAISS, PyTorch-BigGraph), from the cores this process may use.

torch, FAISS and BLAS each start an OpenMP pool sized from `os.cpu_count()`, whose idle threads spin
(busy-wait) at every barrier before they sleep. On a machine that another process also loads, a spinning
thread takes the time slice the thread the barrier waits for needs, and small kernels (the encoder's, FAISS'
per-block heaps) then run several times slower than the load explains. Two things are the pipeline's to fix:

- pool sizes from the cores the process may run on (`os.sched_getaffinity`: a container's cpuset, `taskset`),
  not from the machine's core count;
- `OMP_WAIT_POLICY=PASSIVE`: idle OpenMP threads sleep at once instead of spinning.

OpenMP reads its environment once, when the runtime starts (at the first `import torch` or `import faiss`),
so `child_env` is what a stage gives the processes it starts (the trainer, PBG), and `configure` sets the
environment of this process when called before those imports, and the pool sizes (which can change later)
in any case. A variable the caller set explicitly is kept.

    from citeflow.threads import configure
    configure()            # before importing torch / faiss where possible
"""

from __future__ import annotations

import os
import sys

# Variables that size a thread pool; all get the usable core count unless set by the caller.
POOL_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), not the machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def child_env(env: dict[str, str] | None = None, threads: int | None = None) -> dict[str, str]:
    """`env` (default: this process's) with passive OpenMP waiting and pool sizes for a compute child process."""
    out = dict(os.environ if env is None else env)
    count = str(threads or usable_cores())
    out.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    for name in POOL_VARIABLES:
        out.setdefault(name, count)
    return out


def configure(threads: int | None = None) -> dict[str, object]:
    """Apply `child_env` to this process and size the pools of torch and FAISS where they are loaded.

    Returns `describe()`. The environment part only takes effect before the libraries start OpenMP.
    """
    for name, value in child_env(threads=threads).items():
        os.environ.setdefault(name, value)
    count = threads or int(os.environ.get("OMP_NUM_THREADS") or usable_cores())
    if "torch" in sys.modules:
        import torch

        torch.set_num_threads(count)
    if "faiss" in sys.modules:
        import faiss

        faiss.omp_set_num_threads(count)
    return describe()


def load_average() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:
        nan = float("nan")
        return nan, nan, nan


def describe() -> dict[str, object]:
    """What a bench prints beside its figures: cores, load, OpenMP settings, the pools of loaded libraries."""
    info: dict[str, object] = {
        "usable_cores": usable_cores(),
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in load_average()],
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "(unset)"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "(unset)"),
    }
    if "torch" in sys.modules:
        import torch

        info["torch_threads"] = torch.get_num_threads()
    if "faiss" in sys.modules:
        import faiss

        info["faiss_threads"] = faiss.omp_get_max_threads()
    return info
