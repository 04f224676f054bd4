"""models/training/warm.py: which previous model may start a run, and how many steps the warm run trains."""

import json

import pytest

from citeflow.config import RunConfig, apply_overrides
from citeflow.errors import CiteflowError
from citeflow.models.training.warm import check_compatible, warm_steps


def folder(path, vocab="a\nb\n", **config):
    path.mkdir()
    shape = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}
    (path / "config.json").write_text(json.dumps({**shape, **config}))
    (path / "vocab.txt").write_text(vocab)
    return path


def test_a_previous_model_of_another_shape_or_tokenizer_is_refused_in_one_line(tmp_path):
    base = folder(tmp_path / "base")
    check_compatible(folder(tmp_path / "same"), base)
    with pytest.raises(CiteflowError, match=r"another architecture .*hidden_size 64 vs 32") as err:
        check_compatible(folder(tmp_path / "wider", hidden_size=64), base)
    assert "\n" not in str(err.value) and "init_from=off" in str(err.value)
    with pytest.raises(CiteflowError, match="another tokenizer"):
        check_compatible(folder(tmp_path / "other-vocab", vocab="a\nc\n"), base)
    # the small BERT: its shape from the settings, its tokenizer the previous model's own
    check_compatible(folder(tmp_path / "small", vocab="x\n"), None, {"hidden_size": 32, "num_hidden_layers": 2})
    with pytest.raises(CiteflowError, match="num_hidden_layers 2 vs 4"):
        check_compatible(folder(tmp_path / "small2"), None, {"num_hidden_layers": 4})


def test_a_warm_run_trains_its_share_of_a_full_runs_steps():
    assert warm_steps(0.4, triplets=1000, batch_size=32, epochs=2, max_steps=0) == (25, 62)  # 31 a pass
    assert warm_steps(0.4, triplets=1000, batch_size=32, epochs=2, max_steps=40) == (16, 40)
    assert warm_steps(0.01, triplets=64, batch_size=32, epochs=1, max_steps=0) == (1, 2)  # at least one


def test_init_from_is_off_previous_or_a_snapshot_id():
    base = RunConfig(snapshot="s", corpus="c")
    assert apply_overrides(base, ["train_encoder.init_from=previous"]).train_encoder.init_from == "previous"
    assert apply_overrides(base, ["train_encoder.init_from=2024-01-01"]).train_encoder.init_from == "2024-01-01"
    with pytest.raises(CiteflowError, match="init_from must be off, previous or a snapshot id"):
        apply_overrides(base, ["train_encoder.init_from=../x"])
    with pytest.raises(CiteflowError, match="warm_share"):
        apply_overrides(base, ["train_encoder.warm_share=0"])
