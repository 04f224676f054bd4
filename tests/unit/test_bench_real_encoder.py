"""`bench/bench_real_encoder.py` runs as its docstring says, so that it cannot rot unseen: all-MiniLM-L6-v2
(tests/support/real_encoder.py) fine-tuned on real arXiv HEP-Th citations (tests/support/hepth.py) by one recipe
variant, scored on the held-out val and test citation tasks beside the untrained model.

Skipped locally without ../shared/data/hepth or the encoder package; failed under CI=true, where both are there.
"""

import json
from pathlib import Path

import pytest

from tests.support.bench import finite, run_bench
from tests.support.hepth import require_hepth
from tests.support.real_encoder import real_encoder

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.jvm]
# the recipe's size, as tests/e2e/test_real_encoder.py trains it: a few steps of short inputs
TINY = [
    "train_encoder.max_steps=3",
    "train_encoder.batch_size=8",
    "train_encoder.per_device_batch=4",
    "train_encoder.max_length=64",
    "train_encoder.checkpoint_every=3",
]
KEYS = [
    f"{split} {task} {metric}" for split in ("val", "test") for task in ("cite", "cocite") for metric in ("map", "ndcg")
]


@pytest.mark.timeout(600)
def test_the_real_encoder_bench_scores_a_variant_beside_the_untrained_model(tmp_path):
    """The smallest run: the release of 1992's 1,367 papers (`--year 1992`, the earliest), 12 queries per task and
    split, one variant of 3 steps. About 90 s: the shared stages up to mine_triplets in one `citeflow run` (a
    Spark driver, PBG, FAISS), then the variant's training, both models' embeddings and the benchmark in
    another."""
    require_hepth()
    model = real_encoder()
    out = tmp_path / "out"
    run_bench(
        "bench_real_encoder.py",
        *("--model", str(model), "--year", "1992", "--queries", "12", "--work", str(tmp_path / "work")),
        *("--out", str(out), "--variant", "tiny=" + ",".join(TINY), "--lengths", "48", "--st", "st"),
        timeout=480,
    )
    report = json.loads((out / "real_encoder.json").read_text())
    assert (report["release"], report["model"]) == ("1993-01-01", str(model))
    assert finite(report["shared"]["seconds"]) and report["shared"]["seconds"] > 0
    assert list(report["variants"]) == ["tiny", "st"]
    name, v = "tiny", report["variants"]["tiny"]
    assert (name, v["settings"], v["steps"]) == ("tiny", TINY, 3)
    assert all(finite(v[k]) and v[k] > 0 for k in ("seconds", "train_seconds", "triplets_per_second"))
    assert finite(v["loss_first10"]) and finite(v["loss_last10"])
    # both models on both splits: the benchmark stage scores test, the bench val (`val_scores`)
    for model_name in ("trained", "base"):
        numbers = v["scores"][model_name]
        assert sorted(numbers) == sorted(KEYS), model_name
        assert all(finite(x) and 0 <= x <= 100 for x in numbers.values()), (model_name, numbers)
    assert sorted(v["delta_vs_untrained"]) == sorted(KEYS) and sorted(v["per_query"]) == sorted(KEYS)
    for key, (mean, low, high) in v["delta_vs_untrained"].items():
        assert all(map(finite, (mean, low, high))) and low <= mean <= high, (key, mean, low, high)
        assert 0 < len(v["per_query"][key]) <= 12, key  # a value per query of the split scored
    # trained at 64 tokens, embedded at the model's own 256, and again at 48 beside its base at 48
    assert (v["training_length"], v["inference_length"]) == (64, 256)
    again = v["at_length"]["48"]
    assert sorted(again["scores"]["trained"]) == sorted(KEYS) and sorted(again["delta_vs_untrained"]) == sorted(KEYS)
    assert [r["step"] for r in v["eval_curve"]] == [0, 3] and v["kept_step"] == 3
    # sentence-transformers' trainer on the same triplets at the same budget, scored against the same base
    st = report["variants"]["st"]
    assert st["steps"] == 3 and st["spec"]["batch_size"] == 8 and st["spec"]["train_length"] == 64
    assert st["spec"]["held_out"] == 256 and st["scores"]["base"] == v["scores"]["base"]
    assert all(finite(x) and 0 <= x <= 100 for x in st["scores"]["trained"].values())
    table = (out / "real_encoder.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith(("| untrained", "| tiny", "| st"))]
    assert [r.split(" | ")[0] for r in rows] == [
        *("| untrained", "| tiny", "| untrained @48", "| tiny @48", "| st", "| st @48"),
        *("| tiny", "| tiny @48", "| st", "| st @48"),
        *("| tiny @48", "| st", "| st @48"),
    ], rows
    assert "nan" not in table
