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
