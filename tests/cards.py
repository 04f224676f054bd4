"""The code blocks of a card (a dataset card or a model card), each run verbatim in a fresh interpreter, as a
user pastes them: offline, with a throwaway Hugging Face cache, from a folder that is not the export's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def code_blocks(card: str) -> list[str]:
    return BLOCK.findall(card)


def run_code_blocks(card: str, workdir: Path, timeout: float = 600) -> list[str]:
    """Each block's stdout; a block that fails fails the test with its stderr."""
    blocks = code_blocks(card)
    assert blocks, "the card has no python block"
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(workdir / "hf-home")}
    outputs = []
    for n, block in enumerate(blocks):
        done = subprocess.run(
            [sys.executable, "-c", block], cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, f"block {n} of the card failed:\n{block}\n{done.stderr[-3000:]}"
        outputs.append(done.stdout)
    return outputs
