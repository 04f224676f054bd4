"""`bench/bench_train.py` runs as its docstring says, so that a bench cannot rot unseen: citeflow's trainer and the
bare loop on a tiny model, side by side, with their ratio."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_the_train_bench_times_citeflow_and_the_bare_loop_side_by_side(tmp_path):
    texts = tmp_path / "papers.jsonl"
    texts.write_text(
        "\n".join(
            json.dumps({"title": f"paper {i} on graphs", "abstract": " ".join(["citation"] * (5 + i % 30))})
            for i in range(120)
        )
    )
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bench_train.py"), "--shape", "small", "--tokens", "32"]
        + ["--texts", str(texts), "--batch", "8", "--per-device", "8", "--loss", "in_batch", "--bare"]
        + ["--steps", "4", "--warmup", "1", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "out" / "train_small_32_real.json").read_text())
    runs = {r["settings"]: r for r in result["runs"]}
    assert set(runs) == {"current", "bare"} and all(r["steps"] == 4 for r in runs.values())
    assert result["loss"] == "in_batch" and result["ratio_to_bare"] > 0
    assert result["resolved_precision"] in ("bf16", "fp32")
