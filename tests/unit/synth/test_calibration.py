"""The generator against the real statistics it is calibrated on (synthcorpus/calibration.py).

- The recorded TARGETS are what `python -m citeflow.synthcorpus.calibration` measures on the real samples (skipped
  without shared/data beside the checkout).
- A default snapshot, read back from its files the way the real S2ORC sample is read, is within BOUNDS of every
  target, and generator.json's `calibration` table says the same.
- The difficulty knob orders the snapshots: the easier, the more text follows topics and citations.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from citeflow.errors import CiteflowError
from citeflow.synthcorpus import stats
from citeflow.synthcorpus.calibration import BOUNDS, TARGETS, UNMATCHED, markdown_table, measure_real, text_statistics
from citeflow.synthcorpus.config import DIFFICULTY_ANCHORS, GenerateConfig, topic_strength
from citeflow.synthcorpus.generate import run
from tests.support.snapshot_files import kept, s2orc_score

PAPERS = 20_000  # the demo snapshot's size


def test_recorded_targets_equal_a_fresh_measurement(shared_data):
    measured, other = measure_real(shared_data)
    assert measured == {**TARGETS, **UNMATCHED}
    assert len(other) == 6  # the other samples' lengths, for comparison


def test_every_target_has_a_bound():
    assert set(BOUNDS) == set(TARGETS) and all(b > 0 for b in BOUNDS.values())


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> tuple[Path, dict, list[dict]]:
    """A default-difficulty snapshot and its papers' kept records in corpus order."""
    out = tmp_path_factory.mktemp("calibration") / "snap"
    truth = run(GenerateConfig(papers=PAPERS, out=str(out), seed=0))
    records = []
    for path in sorted(
        (out / "corpus" / "metadata").glob("*.jsonl.gz"), key=lambda p: int(p.name.split("_")[1].split(".")[0])
    ):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    best = kept(records, "paper_id", s2orc_score)
    return out, truth, [r for r in records if best[r["paper_id"]] is r]


def _from_files(papers: list[dict]) -> dict[str, float]:
    """The statistics of calibration.py measured on the written records: text on the first 1,000 papers (as
    the 1,000-record real sample), missing abstracts and out-degrees over all, citation similarity on 600
    random clean edges drawn here."""
    first = papers[:1000]
    got = text_statistics(
        [r["title"] for r in first],
        [r["abstract"] for r in first],
        [(r["mag_field_of_study"] or [None])[0] for r in first],
        [len(r["outbound_citations"]) for r in first],
    )
    degree = stats.degree_stats(np.array([len(r["outbound_citations"]) for r in papers]))
    got.update({f"out_degree_{k}": degree[k] for k in ("p10", "p50", "p90")})
    got["out_degree_zero_share"], got["out_degree_mean_nonzero"] = degree["zero_share"], degree["mean_nonzero"]
    missing = [not r["abstract"] for r in papers]
    got["missing_abstract_rate"] = sum(missing) / len(papers)
    citing = [m for m, r in zip(missing, papers, strict=True) if r["outbound_citations"]]
    got["missing_abstract_rate_citing"] = sum(citing) / len(citing)
    by_id = {r["paper_id"]: r for r in papers}
    edges = [
        (r, by_id[c])
        for r in papers
        for c in dict.fromkeys(r["outbound_citations"])
        if c in by_id
        and c != r["paper_id"]
        and r["abstract"]
        and r["title"]
        and by_id[c]["abstract"]
        and by_id[c]["title"]
    ]
    pairs = random.Random(1).sample(edges, 600)
    got["citation_similarity_auc"] = stats.citation_similarity_auc(
        [f"{a['title']} {a['abstract']}" for a, _ in pairs],
        [f"{b['title']} {b['abstract']}" for _, b in pairs],
        [b["paper_id"] for _, b in pairs],
    )
    return got


def test_a_default_snapshot_read_from_its_files_is_within_bounds_of_every_target(snapshot):
    _, _, papers = snapshot
    assert len(papers) == PAPERS
    got = _from_files(papers)
    off = {k: (got[k], TARGETS[k], BOUNDS[k]) for k in TARGETS if abs(got[k] - TARGETS[k]) > BOUNDS[k]}
    assert off == {}


def test_generator_json_puts_targets_and_achieved_values_side_by_side(snapshot):
    _, truth, papers = snapshot
    cal = truth["calibration"]
    assert cal["difficulty"] == 0.5 and cal["papers_measured"] == 1000 and cal["pairs_measured"] == 600
    table = cal["statistics"]
    assert set(table) == set(TARGETS) | set(UNMATCHED)
    for name in TARGETS:
        row = table[name]
        assert row["target"] == TARGETS[name] and row["bound"] == BOUNDS[name]
        assert row["within"] is True, (name, row)
    for name in UNMATCHED:
        assert table[name]["target"] == UNMATCHED[name] and table[name]["bound"] is table[name]["within"] is None
    text = markdown_table(cal)
    assert text.count("\n") == len(table) + 2 and "| citation_similarity_auc | 0.9314 |" in text
    # Its text statistics are those of the files' first 1,000 papers (same sample, same definitions); its own
    # citation pairs are another random draw, so only close.
    got = _from_files(papers)
    text = [k for k in TARGETS if k.startswith(("title", "abstract", "vocabulary", "zipf", "topic", "same_field"))]
    assert {k: table[k]["achieved"] for k in text} == {k: got[k] for k in text}
    assert abs(table["citation_similarity_auc"]["achieved"] - got["citation_similarity_auc"]) < 0.02
    for name in ("out_degree_zero_share", "out_degree_mean_nonzero", "missing_abstract_rate"):
        assert table[name]["achieved"] == pytest.approx(got[name], abs=1e-3)
    uncited = sum(not r["inbound_citations"] for r in papers) / len(papers)
    assert table["in_degree_zero_share"]["achieved"] == pytest.approx(uncited, abs=1e-3)


def test_the_same_field_citation_share_is_reported_without_a_target(snapshot):
    out, truth, papers = snapshot
    topics = pq.read_table(out / "paper_topics.parquet").to_pydict()
    field = dict(zip(map(str, topics["corpus_id"]), topics["field"], strict=True))
    by_id = {r["paper_id"] for r in papers}
    same = [
        field[r["paper_id"]] == field[c]
        for r in papers
        for c in set(r["outbound_citations"])
        if c in by_id and c != r["paper_id"]
    ]
    assert "same_field_citations" not in TARGETS
    assert truth["calibration"]["same_field_citations"] == pytest.approx(sum(same) / len(same), abs=1e-3)
    assert 0.75 < truth["calibration"]["same_field_citations"] < 0.97


def _measured(difficulty: float, tmp_path: Path) -> dict:
    truth = run(GenerateConfig(papers=6000, out=str(tmp_path / str(difficulty)), seed=3, difficulty=difficulty))
    return {k: v["achieved"] for k, v in truth["calibration"]["statistics"].items()}


def test_difficulty_orders_how_strongly_topics_shape_text(tmp_path):
    easy, real, hard = (_measured(d, tmp_path) for d in (0.0, 0.5, 1.0))
    assert easy["same_field_similarity_auc"] > real["same_field_similarity_auc"] + 0.15
    assert real["same_field_similarity_auc"] > hard["same_field_similarity_auc"]
    assert easy["topic_token_share"] > real["topic_token_share"] > hard["topic_token_share"]
    assert real["citation_similarity_auc"] > hard["citation_similarity_auc"]
    # lengths, vocabulary tails and degrees are calibrated whatever the difficulty
    for name in ("abstract_words_mean", "out_degree_zero_share"):
        assert abs(easy[name] - TARGETS[name]) <= BOUNDS[name] and abs(hard[name] - TARGETS[name]) <= BOUNDS[name]


def test_difficulty_anchors_and_range():
    for point, strength in DIFFICULTY_ANCHORS:
        assert topic_strength(point) == strength
    half = topic_strength(0.25)
    assert half.niche_words == pytest.approx(
        (DIFFICULTY_ANCHORS[0][1].niche_words + DIFFICULTY_ANCHORS[1][1].niche_words) / 2
    )
    for bad in (-0.1, 1.5, True, "easy"):
        with pytest.raises(CiteflowError, match="difficulty must be"):
            GenerateConfig(papers=1000, out="x", difficulty=bad)
