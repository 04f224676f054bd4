"""The real statistics the generator is calibrated on: measured on the real samples beside the checkout
(`shared/data/`, not in the repository) and recorded here as TARGETS, with the BOUNDS a generated snapshot must
keep (generator.json's `calibration`, tests/unit/synth/test_calibration.py).

Run `python -m citeflow.synthcorpus.calibration [--data ../shared/data]` to measure the samples again: it prints every
statistic, per sample where several samples have it, and says whether TARGETS and UNMATCHED still equal the
measurement (exit status 1 if not). `--table GENERATOR_JSON` prints a snapshot's calibration as the README's
Markdown table. Reads files only; writes nothing.

What is measured where (stats.py defines each statistic):
- S2ORC 20200705v1 metadata sample (data/s2orc/metadata_sample.jsonl, 1,000 random records): title and abstract
  lengths; vocabulary size and Zipf slope of its abstracts; missing-abstract rate, overall and among papers
  with an outbound citation list; out-degree (outbound_citations list lengths); topic-specific token share and
  same-field text similarity of its abstracts, labelled by their first MAG field of study.
- SciRepEval's SPECTER sample (data/scirepeval/specter_small.json: 200 real training triplets; the positive is
  a paper the query cites): citation text similarity of (query, positive) pairs, title + abstract.
- Lengths only, for comparison (not targets): S2AG papers / abstracts samples, SciRepEval fos / mesh / search
  samples, SPECTER's training-data sample.
- Measured but not matched (UNMATCHED, reported beside the targets): the share of never-cited papers (S2ORC
  inbound_citations lengths: 75%). A 20,000-paper corpus that cites like that loses most of its graph when
  the SciDocs papers are taken out of it (the demo's leakage filter), so the generator keeps preferential
  attachment milder (about a fifth never cited).
- Not measurable here: the share of citations within one field. The S2ORC sample has fields but only 4 of its
  3,107 outbound citations point inside the sample; S2AG's citations sample shares no paper with its papers
  sample and carries no field; the SPECTER samples have no fields. The generator reports its own share
  (`same_field_citations`) without a target.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import citeflow.synthcorpus.stats as stats

# The generator measures its first CALIBRATION_PAPERS papers, a sample the size of the 1,000-record S2ORC
# sample (vocabulary size, topic share and similarity AUCs depend on the sample's size), and
# CALIBRATION_PAIRS citation pairs: three times the real 190, so that its own sampling noise (sd 0.025 at 200
# pairs, 0.008 at 600, over seeds) stays well inside the bound; the AUC's expectation does not depend on it.
CALIBRATION_PAPERS = 1000
CALIBRATION_PAIRS = 600

# Recorded by `python -m citeflow.synthcorpus.calibration` on shared/data (see the module docstring).
TARGETS: dict[str, float] = {
    "title_words_mean": 10.88,
    "title_words_p10": 5.0,
    "title_words_p50": 10.0,
    "title_words_p90": 17.0,
    "abstract_words_mean": 150.0,
    "abstract_words_p10": 52.4,
    "abstract_words_p50": 137.5,
    "abstract_words_p90": 250.6,
    "vocabulary_types_per_50k_tokens": 8403,
    "zipf_slope": -0.79,
    "missing_abstract_rate": 0.512,
    "missing_abstract_rate_citing": 0.1795,
    "out_degree_zero_share": 0.844,
    "out_degree_mean_nonzero": 19.92,
    "out_degree_p10": 2.0,
    "out_degree_p50": 14.0,
    "out_degree_p90": 49.0,
    "topic_token_share": 0.1605,
    "same_field_similarity_auc": 0.59,
    "citation_similarity_auc": 0.9314,
}

# Real values the generator does not try to match, and why: see the module docstring.
UNMATCHED: dict[str, float] = {
    "in_degree_zero_share": 0.75,
}

# How far a generated snapshot may be from each target (absolute): about three standard errors of the real
# sample's own estimate (1,000 records, 488 abstracts, 190 pairs) or of a generated one, whichever is larger;
# the out-degree tail also allows for small corpora, whose niches cannot hold the longest reference lists.
BOUNDS: dict[str, float] = {
    "title_words_mean": 1.0,
    "title_words_p10": 1.0,
    "title_words_p50": 1.0,
    "title_words_p90": 2.0,
    "abstract_words_mean": 12.0,
    "abstract_words_p10": 12.0,
    "abstract_words_p50": 18.0,
    "abstract_words_p90": 25.0,
    "vocabulary_types_per_50k_tokens": 900,
    "zipf_slope": 0.08,
    "missing_abstract_rate": 0.02,
    "missing_abstract_rate_citing": 0.05,
    "out_degree_zero_share": 0.03,
    "out_degree_mean_nonzero": 4.0,
    "out_degree_p10": 1.0,
    "out_degree_p50": 3.0,
    "out_degree_p90": 8.0,
    "topic_token_share": 0.04,
    "same_field_similarity_auc": 0.04,
    "citation_similarity_auc": 0.04,
}

# Where each target was measured (README's calibration table).
SOURCES: dict[str, str] = {
    "title_words": "S2ORC sample, 1,000 titles",
    "abstract_words": "S2ORC sample, 488 abstracts",
    "vocabulary": "S2ORC sample abstracts, first 50,000 tokens",
    "missing_abstract_rate": "S2ORC sample",
    "out_degree": "S2ORC sample, outbound_citations lengths",
    "topic": "S2ORC sample, 468 abstracts with a MAG field",
    "citation_similarity_auc": "SciRepEval specter_small, 190 pairs with both abstracts",
    "in_degree_zero_share": "S2ORC sample, inbound_citations lengths",
}


def text_statistics(
    titles: list[str | None],
    abstracts: list[str | None],
    labels: list[int | str | None],
    out_degree: list[int],
) -> dict[str, float]:
    """The text and degree statistics of one corpus sample (records in file order): titles, abstracts (None when
    missing), a topic label per record (None: unlabelled) and out-degrees. Both the real and the generated
    samples go through here."""
    out: dict[str, float] = {}
    for name, texts in (("title_words", titles), ("abstract_words", abstracts)):
        s = stats.length_stats(texts)
        out.update({f"{name}_{k}": s[k] for k in ("mean", "p10", "p50", "p90")})
    present = [a for a in abstracts if a]
    vocab = stats.vocabulary_stats(present)
    out["vocabulary_types_per_50k_tokens"] = vocab["types"]
    out["zipf_slope"] = vocab["zipf_slope"]
    n = len(abstracts)
    out["missing_abstract_rate"] = stats.round_to(sum(1 for a in abstracts if not a) / max(n, 1))
    citing = [a for a, d in zip(abstracts, out_degree, strict=True) if d > 0]
    out["missing_abstract_rate_citing"] = stats.round_to(sum(1 for a in citing if not a) / max(len(citing), 1))
    deg = stats.degree_stats(out_degree)
    out["out_degree_zero_share"] = deg["zero_share"]
    out["out_degree_mean_nonzero"] = deg["mean_nonzero"]
    out.update({f"out_degree_{k}": deg[k] for k in ("p10", "p50", "p90")})
    labelled = [(a, lab) for a, lab in zip(abstracts, labels, strict=True) if a and lab is not None]
    texts, labs = [a for a, _ in labelled], [lab for _, lab in labelled]
    out["topic_token_share"] = stats.topic_token_share(texts, labs)
    out["same_field_similarity_auc"] = stats.label_similarity_auc(texts, labs)
    return out


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _title_abstract(paper: dict[str, Any]) -> str:
    return f"{paper.get('title') or ''} {paper.get('abstract') or ''}"


def measure_real(data: Path) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """(the targets measured on the samples in `data`, lengths of the other samples for comparison)."""
    s2orc = _jsonl(data / "s2orc" / "metadata_sample.jsonl")
    measured = text_statistics(
        [r["title"] for r in s2orc],
        [r["abstract"] for r in s2orc],
        [(r["mag_field_of_study"] or [None])[0] for r in s2orc],
        [len(r["outbound_citations"] or []) for r in s2orc],
    )
    triplets = json.loads((data / "scirepeval" / "specter_small.json").read_text(encoding="utf-8"))
    pairs = [t for t in triplets if t["query"].get("abstract") and t["pos"].get("abstract")]
    measured["in_degree_zero_share"] = stats.degree_stats([len(r["inbound_citations"] or []) for r in s2orc])[
        "zero_share"
    ]
    measured["citation_similarity_auc"] = stats.citation_similarity_auc(
        [_title_abstract(t["query"]) for t in pairs],
        [_title_abstract(t["pos"]) for t in pairs],
        [t["pos"]["corpus_id"] for t in pairs],
    )

    other: dict[str, dict[str, Any]] = {}

    def lengths(name: str, titles: list[str | None], abstracts: list[str | None]) -> None:
        other[name] = {"titles": stats.length_stats(titles), "abstracts": stats.length_stats(abstracts)}

    s2ag = data / "s2ag"
    lengths(
        "S2AG papers / abstracts samples",
        [r["title"] for r in _jsonl(s2ag / "papers-sample.jsonl")],
        [r["abstract"] for r in _jsonl(s2ag / "abstracts-sample.jsonl")],
    )
    rep = data / "scirepeval"
    for name in ("fos_small", "mesh_small"):
        records = json.loads((rep / f"{name}.json").read_text(encoding="utf-8"))
        lengths(f"SciRepEval {name}", [r["title"] for r in records], [r["abstract"] for r in records])
    search = {c["corpus_id"]: c for q in _jsonl(rep / "search_small.jsonl") for c in q["candidates"]}
    lengths("SciRepEval search_small", [c["title"] for c in search.values()], [c["abstract"] for c in search.values()])
    papers = {p["corpus_id"]: p for t in triplets for p in (t["query"], t["pos"], t["neg"])}
    lengths("SciRepEval specter_small", [p["title"] for p in papers.values()], [p["abstract"] for p in papers.values()])
    meta = json.loads((data / "specter" / "metadata.json").read_text(encoding="utf-8"))
    lengths("SPECTER training sample", [p["title"] for p in meta.values()], [p["abstract"] for p in meta.values()])
    return measured, other


def markdown_table(calibration: dict[str, Any]) -> str:
    """generator.json's `calibration` as a Markdown table: statistic, real target, generated value, bound."""
    rows = ["| statistic | real (target) | generated | bound | within |", "|---|---|---|---|---|"]
    for name, row in calibration["statistics"].items():
        bound = "" if row["bound"] is None else f"±{row['bound']:g}"
        within = {True: "yes", False: "**no**", None: "not a target"}[row["within"]]
        achieved = "none (corpus too small)" if row["achieved"] is None else f"{row['achieved']:g}"
        rows.append(f"| {name} | {row['target']:g} | {achieved} | {bound} | {within} |")
    rows.append(f"| same_field_citations | not measurable | {calibration['same_field_citations']:g} | | not a target |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[3] / "shared" / "data"))
    parser.add_argument("--table", metavar="GENERATOR_JSON", default=None, help="print a snapshot's calibration table")
    args = parser.parse_args(argv)
    if args.table is not None:
        print(markdown_table(json.loads(Path(args.table).read_text(encoding="utf-8"))["calibration"]))
        return 0
    data = Path(args.data)
    if not (data / "s2orc" / "metadata_sample.jsonl").is_file():
        print(f"citeflow: no real samples under {str(data)!r} (expected s2orc/metadata_sample.jsonl)", file=sys.stderr)
        return 2
    measured, other = measure_real(data)
    for title, names in (("TARGETS", [k for k in measured if k not in UNMATCHED]), ("UNMATCHED", list(UNMATCHED))):
        print(f"{title}: dict[str, float] = {{")
        for name in names:
            print(f'    "{name}": {measured[name]!r},')
        print("}")
    for name, lens in other.items():
        t, a = lens["titles"], lens["abstracts"]
        print(
            f"# {name}: title words mean {t['mean']} (p10 {t['p10']}, p50 {t['p50']}, p90 {t['p90']}, n {t['n']}); "
            f"abstract words mean {a['mean']} (p10 {a['p10']}, p50 {a['p50']}, p90 {a['p90']}, n {a['n']})"
        )
    differ = {
        k: ({**TARGETS, **UNMATCHED}.get(k), v) for k, v in measured.items() if {**TARGETS, **UNMATCHED}.get(k) != v
    }
    if differ:
        print(f"# TARGETS differ from this measurement: {differ}", file=sys.stderr)
        return 1
    print("# TARGETS and UNMATCHED equal this measurement")
    return 0


if __name__ == "__main__":
    sys.exit(main())
