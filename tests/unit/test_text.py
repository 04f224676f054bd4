"""citeflow/text.py: the title fold, scalar and vectorised, on tricky titles with hand-worked answers, and the
two against each other on every ASCII character and on random ASCII titles (the vectorised fold's own path)."""

import random

import pyarrow as pa
import pytest

from citeflow.text import fold_title, fold_titles
from tests.support.titles import TRICKY

# (title, folded by hand)


@pytest.mark.parametrize(
    "raw, folded",
    [
        ("Café au Lait: a Study", "cafe au lait a study"),
        ("  Deep   learning\tfor CATS!! ", "deep learning for cats"),
        ("Naïve Bayes—revisited", "naive bayes revisited"),
        ("ﬁnite ﬁelds", "finite fields"),  # NFKD folds ligatures
        ("!!!", None),
        (None, None),
    ],
)
def test_fold_title(raw, folded):
    assert fold_title(raw) == folded


@pytest.mark.parametrize("raw, folded", TRICKY)
def test_scalar_fold_of_tricky_titles(raw, folded):
    assert fold_title(raw) == folded


@pytest.mark.parametrize("string_type", [pa.string(), pa.large_string()])
def test_vectorised_fold_of_tricky_titles(string_type):
    titles = pa.array([raw for raw, _ in TRICKY], string_type)
    folded = fold_titles(titles)
    assert folded.type == string_type
    assert folded.to_pylist() == [expected for _, expected in TRICKY]


def test_vectorised_fold_of_a_chunked_array():
    chunks = [[raw for raw, _ in TRICKY[:7]], [raw for raw, _ in TRICKY[7:]]]
    assert fold_titles(pa.chunked_array(chunks, pa.string())).to_pylist() == [expected for _, expected in TRICKY]


def test_every_ascii_character_folds_alike():
    titles = (
        [chr(c) for c in range(128)]
        + [f"Ab{chr(c)}Cd" for c in range(128)]
        + [f"{chr(c)}x{chr(c)}" for c in range(128)]
    )
    assert fold_titles(pa.array(titles)).to_pylist() == [fold_title(t) for t in titles]
    # spot checks of the ASCII rule: letters and digits stay (lower case), everything else separates
    assert fold_title("Ab_Cd") == "ab cd" and fold_title("Ab7Cd") == "ab7cd" and fold_title("AbQCd") == "abqcd"


def test_random_ascii_titles_fold_alike():
    rng = random.Random(17)
    alphabet = [chr(c) for c in range(128)] + list("aeiou AEIOU") * 6
    titles = ["".join(rng.choices(alphabet, k=rng.randint(0, 24))) for _ in range(20_000)]
    assert fold_titles(pa.array(titles)).to_pylist() == [fold_title(t) for t in titles]


def test_mixed_ascii_and_other_titles_keep_their_places():
    titles = ["Plain Title", "Über Alles", None, "x²", "Another: one", "—", "ok"]
    assert fold_titles(pa.array(titles)).to_pylist() == [
        "plain title",
        "uber alles",
        None,
        "x2",
        "another one",
        None,
        "ok",
    ]
