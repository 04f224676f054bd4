"""Title folding: how titles are compared across sources (a leaf of the core: standard library and pyarrow only).

`fold_title` is the definition: Unicode compatibility decomposition (NFKD: ligatures, full-width and
superscript forms to plain ones, accents split off), combining marks dropped, case folded (`casefold`: "ß"
becomes "ss", final sigma "σ"), every run of characters that are not letters or digits (punctuation, symbols,
white space, underscores) made one space, trimmed; a title with nothing left folds to None.

`fold_titles` is the same fold for a pyarrow array. ASCII titles (nearly all real ones, all generated ones) go
through pyarrow kernels, the others through `fold_title`. On ASCII the two agree step by step: NFKD leaves
ASCII unchanged and yields no combining marks, `casefold` of ASCII is ASCII lower case, and the ASCII
characters that are neither letters nor digits (`[\\W_]`) are exactly those outside `[a-z0-9]` once lower-cased.
tests/unit/test_text.py checks them against each other.

Used by the leakage filter (jobs/filter_leakage/transforms.py, title matching) and the generator (synthcorpus:
which SciDocs titles are unique or ambiguous), so that the generator's truth is what the filter computes.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_NOT_WORD = re.compile(r"[\W_]+")


def fold_title(title: str | None) -> str | None:
    """Title as compared across sources: accents, case, punctuation and white space folded."""
    if title is None:
        return None
    decomposed = unicodedata.normalize("NFKD", title)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()
    return " ".join(_NOT_WORD.sub(" ", stripped).split()) or None


def fold_titles(titles: pa.Array | pa.ChunkedArray) -> pa.Array:
    """`fold_title` of every element (null stays null), as an array of the same string type."""
    if isinstance(titles, pa.ChunkedArray):
        titles = titles.combine_chunks()
    folded = pc.utf8_trim(pc.replace_substring_regex(pc.ascii_lower(titles), r"[^a-z0-9]+", " "), " ")
    folded = pc.if_else(pc.equal(folded, ""), pa.scalar(None, titles.type), folded)
    other = ~np.asarray(pc.fill_null(pc.string_is_ascii(titles), True).to_numpy(zero_copy_only=False), dtype=bool)
    if other.any():
        values = [fold_title(t) for t in titles.filter(pa.array(other)).to_pylist()]
        folded = pc.replace_with_mask(folded, pa.array(other), pa.array(values, titles.type))
    return folded
