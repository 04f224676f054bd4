"""FAISS on GPUs: which installs work, and (marked `gpu`) GPU search equals exact search where a GPU exists.

The `gpu` tests run only where a CUDA device and a FAISS GPU build (setup.cfg extras `faiss-gpu` /
`faiss-gpu-cuvs`) are present, and skip otherwise; the expected neighbours come from numpy's brute force.
"""

from __future__ import annotations

import configparser
from pathlib import Path

import numpy as np
import pytest

from citeflow.models.triplets.faiss_build import faiss_build_problem, installed_faiss

REPO = Path(__file__).resolve().parents[2]


def test_the_extras_pin_the_gpu_wheels_of_the_installed_faiss_release():
    from importlib import metadata

    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    extras = {
        k: [line.strip() for line in v.splitlines() if line.strip() and not line.strip().startswith("#")]
        for k, v in cfg["options.extras_require"].items()
    }
    cpu = metadata.version("faiss-cpu") if "faiss-cpu" in installed_faiss() else "1.15.1"
    assert extras["faiss-gpu"] == [f"faiss-gpu=={cpu}"]
    assert extras["faiss-gpu-cuvs"] == [f"faiss-gpu-cuvs=={cpu}"]
    base = [line.strip() for line in cfg["options"]["install_requires"].splitlines()]
    assert f"faiss-cpu=={cpu}" in base


@pytest.mark.parametrize(
    "installed, gpus, expected",
    [
        ({"faiss-cpu"}, 0, None),
        ({"faiss-gpu"}, 1, None),
        ({"faiss-gpu-cuvs"}, 2, None),
        ({"faiss-cpu", "faiss-gpu"}, 1, "both faiss-cpu and faiss-gpu are installed"),
        ({"faiss-gpu", "faiss-gpu-cuvs"}, 1, "both faiss-gpu and faiss-gpu-cuvs are installed"),
        ({"faiss-gpu"}, 0, "faiss-gpu is installed but FAISS sees no GPU"),
    ],
)
def test_faiss_build_problems(installed, gpus, expected):
    problem = faiss_build_problem(installed, gpus)
    if expected is None:
        assert problem is None
    else:
        assert expected in problem
        if "both" in expected:
            assert "pip uninstall -y faiss-cpu" in problem and "pip install faiss-gpu" in problem


def _gpus() -> int:
    faiss = pytest.importorskip("faiss")
    return faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0


needs_gpu = pytest.mark.skipif(_gpus() == 0, reason="no CUDA device or no FAISS GPU build")


def _vectors(n=20_000, dim=64, seed=0):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.gpu
@needs_gpu
def test_gpu_flat_search_finds_the_exact_neighbours():
    from citeflow.models.triplets.knn import build_index, search_neighbours

    vectors = _vectors()
    queries = np.arange(0, 20_000, 97)
    k = 200
    index, description = build_index(vectors, "flat", k_max=k, use_gpu=True)
    assert "GPU" in description
    found = search_neighbours(index, vectors, queries, k)
    scores = vectors[queries] @ vectors.T
    scores[np.arange(len(queries)), queries] = -np.inf
    expected = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    assert (found == expected).mean() > 0.999  # float32 ties on a GPU may swap a pair


@pytest.mark.gpu
@needs_gpu
def test_gpu_ivf_search_recall_and_the_k_limit_falls_back_to_the_cpu(caplog):
    from citeflow.models.triplets.knn import GPU_MAX_K, build_index, neighbour_recall, search_neighbours

    vectors = _vectors()
    queries = np.arange(0, 20_000, 211)
    exact, _ = build_index(vectors, "flat", k_max=50, use_gpu=False)
    ivf, description = build_index(vectors, "ivf", k_max=50, nprobe=64, use_gpu=True)
    assert "GPU" in description
    recall = neighbour_recall(
        search_neighbours(ivf, vectors, queries, 50), search_neighbours(exact, vectors, queries, 50), 50
    )
    assert recall > 0.9
    _, description = build_index(vectors, "flat", k_max=GPU_MAX_K, use_gpu=True)
    assert "GPU" not in description and "runs on the CPU" in caplog.text
