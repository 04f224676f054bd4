"""Which FAISS build is installed, and whether it can search on the GPU it was installed for.

faiss-cpu (citeflow's default) and the GPU wheels of setup.cfg's extras `faiss-gpu` (CUDA 12.6+) and
`faiss-gpu-cuvs` (CUDA 13.2+) all install the same `faiss` module. Reads installed package metadata only.
"""

from __future__ import annotations

# The PyPI distributions that install the `faiss` module (setup.cfg's extras name the GPU ones).
FAISS_GPU_DISTRIBUTIONS = ("faiss-gpu", "faiss-gpu-cuvs")


def installed_faiss() -> set[str]:
    """Names of the installed distributions that provide the `faiss` module."""
    from importlib import metadata

    names = set()
    for name in ("faiss-cpu", *FAISS_GPU_DISTRIBUTIONS):
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        names.add(name)
    return names


def faiss_build_problem(installed: set[str], gpus: int) -> str | None:
    """Why FAISS may not search on the GPU it was installed for, or None.

    faiss-cpu and the GPU wheels ship the same files (`faiss/_swigfaiss.abi3.so`, `libfaiss.so`): installed
    together, whichever came last wins, and uninstalling either breaks the other.
    """
    gpu_builds = sorted(installed & set(FAISS_GPU_DISTRIBUTIONS))
    if not gpu_builds:
        return None
    fix = f"pip uninstall -y faiss-cpu {' '.join(gpu_builds)} && pip install {gpu_builds[0]}==1.15.1"
    if "faiss-cpu" in installed or len(gpu_builds) > 1:
        return (
            f"both {' and '.join(sorted(installed))} are installed: they overwrite each other's files, so which "
            f"FAISS runs is an accident of install order; keep one: {fix}"
        )
    if gpus == 0:
        return f"{gpu_builds[0]} is installed but FAISS sees no GPU (no CUDA device or driver): searching on the CPU"
    return None
