"""The model card's words on the base model and its examples (evaluation/model_card.py); the examples run
against a real export in tests/e2e/test_benchmark.py."""

import ast

from citeflow.evaluation.model_card import describe_base, model_card
from tests.cards import code_blocks

MINILM = {"model_type": "bert", "num_hidden_layers": 6, "hidden_size": 384, "vocab_size": 30522}


def test_the_base_model_is_named_by_what_it_is():
    small = describe_base({"model": "small"}, {"num_hidden_layers": 2, "hidden_size": 128, "vocab_size": 8000})
    assert small.startswith("none: a small BERT initialised at random") and "2 layers, hidden size 128" in small
    folder = describe_base({"model": "/home/me/models/all-MiniLM-L6-v2/model"}, MINILM)
    assert folder == (
        "a pretrained bert of 6 layers, hidden size 384, 30,522-token vocabulary, from a local folder "
        "`.../all-MiniLM-L6-v2/model`"
    )
    assert "/home/me" not in folder  # a card is published: no path of the machine
    hub = describe_base({"model": "allenai/scibert_scivocab_uncased"}, MINILM)
    assert hub.startswith("`allenai/scibert_scivocab_uncased` (Hugging Face Hub)")


def test_the_examples_are_python_with_the_exports_path_and_real_papers():
    papers = [("A 'quoted' title", 'An abstract with "quotes" and a\\backslash.'), ("Second", "Its abstract.")]
    card = model_card({}, [], snapshot="s", model_path="/exports/my model", papers=papers)
    blocks = code_blocks(card)
    assert len(blocks) == 2
    for block in blocks:
        tree = ast.parse(block)  # valid Python as printed
        literals = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        assert "/exports/my model" in literals and papers[0][1] in literals and "Its abstract." in literals


def test_the_card_gives_each_gain_with_its_interval_and_both_lengths():
    """A trained model's rows carry their change over the base (the benchmark stage's delta columns): the card
    prints each with its interval, marks one that holds 0, and says the length it embeds at beside the one it was
    trained at."""
    row = {"split": "test", "status": "ok", "suite": "scidocs"}
    rows = [
        row | {"task": "cite", "metric": "map", "value": 78.62, "delta": 1.9, "delta_low": 0.31, "delta_high": 3.53},
        row | {"task": "cite", "metric": "ndcg", "value": 89.69, "delta": 0.4, "delta_low": -0.2, "delta_high": 1.1},
        row | {"task": "cocite", "metric": "map", "value": 65.0, "delta": None},
        row
        | {"task": "average", "metric": "avg", "value": None, "status": "partial"}
        | {"delta": 1.15, "delta_low": 0.25, "delta_high": 2.1},
    ]
    training = {"model": "/m/all-MiniLM-L6-v2", "pooling": "mean", "normalize": True, "max_length": 128}
    lineage = {"train_encoder": {"config": {"train_encoder": training | {"inference_max_length": 256}}}}
    card = model_card(lineage, rows, snapshot="s")
    assert "| cite | map | 78.62 | +1.90 [+0.31, +3.53] |" in card
    assert "| cite | ndcg | 89.69 | +0.40 [-0.20, +1.10] ○ |" in card
    assert "| cocite | map | 65.00 | – |" in card
    assert "Over its untrained base: +1.15 [+0.25, +2.10] (95% paired bootstrap interval)." in card
    assert "at most 256 tokens (trained on the first 128)" in card
    assert '"max_length": 128' in card and '"inference_max_length": 256' in card
    # a version from before the two lengths were apart embedded at its training length, and says no more
    older = {"train_encoder": {"config": {"train_encoder": training}}}
    assert "at most 128 tokens;" in model_card(older, rows, snapshot="s")
