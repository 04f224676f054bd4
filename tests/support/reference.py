"""The reference evaluators' own output beside the checkout (`../shared/reference/`, its README: how it was made
and the tolerances), and the checks that compare citeflow's scores with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference"
SCIREPEVAL_CLASSIFICATION_TOLERANCE = 0.01
EXACT = 1e-6


def expected(name: str) -> dict:
    return json.loads((REFERENCE / name).read_text())


def load_vectors():
    """The reference's embeddings, as the benchmark stage loads them."""
    from citeflow.evaluation.embeddings import load_embeddings

    return load_embeddings(str(REFERENCE / "embeddings.parquet"))


def check_scirepeval(rows: dict, name: str) -> None:
    want = expected("expected_scirepeval.json")
    for metric, value in want["results"][name].items():
        row = rows[f"scirepeval/{name}", metric]
        assert row["status"] == "ok", row
        unrounded = want["unrounded"][name][metric]
        if metric.startswith(("f1", "accuracy", "precision", "recall")):
            assert abs(row["value"] - unrounded) <= SCIREPEVAL_CLASSIFICATION_TOLERANCE, (name, metric)
        else:  # regression (lightning's LinearSVR) and proximity: exact
            assert row["value"] == pytest.approx(unrounded, abs=EXACT), (name, metric)
            assert round(row["value"], 2) == value
