"""The report's answer first, its honest averages, published numbers only beside published data, a page that fits
its window, and the model card (evaluation/report/, evaluation/model_card.py)."""

from __future__ import annotations

import html

import pytest
import yaml

from citeflow.evaluation.model_card import model_card
from citeflow.evaluation.report import GENERATED, GIVEN, UNKNOWN, answer, mean_rows, scidocs_origin, table, write_report
from citeflow.evaluation.report.answer import NOT_SHOWN, NOT_SHOWN_NOTE
from citeflow.evaluation.scidocs import HEADLINE
from tests.support.artifact_pages import BASE, SENTENCE, TRAINED, generated_scidocs, score_rows


def rows_of(label: str, version: str, keys, value: float = 50.0):
    return [
        {
            "task": t,
            "split": "test",
            "metric": m,
            "value": value,
            "status": "ok",
            "label": label,
            "model_version": version,
            "n": 1,
            "missing": 0,
            "reason": "",
            "average_label": "",
        }
        for t, m in keys
    ]


def test_ten_numbers_are_a_mean_of_10_next_to_the_published_mean_of_the_same_10(tmp_path):
    ten = [k for k in HEADLINE if k[0] != "recomm"]
    rows = rows_of("ours", "train_encoder:abc", ten) + rows_of("full", "train_encoder:def", HEADLINE, 60.0)
    ours, published = mean_rows(rows)
    assert ours["average", "avg"] == {"full": pytest.approx(60.0)}  # only the model with all 12
    assert published["average", "avg"]["SPECTER (published)"] == 80.0
    (key,) = [k for k in ours if k != ("average", "avg")]
    assert key[1].startswith("mean of 10 of 12") and ours[key] == {"ours": pytest.approx(50.0)}
    # SPECTER's 10 published non-recomm numbers: (82.0 + 86.4 + 83.6 + 91.5 + 84.5 + 92.4 + 88.3 + 94.9 + 88.1
    # + 94.8) / 10 = 886.5 / 10 = 88.65 (docs/reference.md §6); the models that publish only an average have no
    # such mean
    assert published[key] == {"SPECTER (published)": pytest.approx(88.65)}
    text = write_report(rows, tmp_path, "t") and (tmp_path / "report.md").read_text()
    assert "ours [train_encoder:abc]" in text and "full [train_encoder:def]" in text
    # the table of every score (the answer above it compares no published numbers)
    line = next(x for x in text.splitlines() if x.startswith("| average | mean of 10 of 12"))
    assert "50.00" in line and "88.65" in line and "80.00" not in line


def test_mteb_scores_stay_out_of_the_scidocs_table_and_its_average(tmp_path):
    """MTEB's SCIDOCS (suite mteb) is another benchmark: its own table, never a SciDocs row or in the average."""
    scidocs = rows_of("ours", "v1", HEADLINE, 60.0)
    mteb = [
        dict(row, suite="mteb", details={"main_score": metric == "ndcg_at_10"})
        for metric, value in (("ndcg_at_10", 21.641), ("map_at_10", 12.0), ("ndcg_at_100", 30.0))
        for row in rows_of("ours", "v1", [("SCIDOCS", metric)], value)
    ]
    ours, _ = mean_rows(scidocs + mteb)
    assert ours["average", "avg"] == {"ours": pytest.approx(60.0)}
    _, keys, values = table([dict(r) for r in scidocs + mteb])
    assert not [k for k in keys if k[0] == "SCIDOCS"] and not [k for k in values if k[1] == "SCIDOCS"]
    text = write_report(scidocs + mteb, tmp_path, "t") and (tmp_path / "report.md").read_text()
    scidocs_part, mteb_part = text.split("## MTEB retrieval (not SciDocs)")
    assert "SCIDOCS" not in scidocs_part and "average of 12" in scidocs_part
    assert "Not SciDocs' cite task" in mteb_part
    lines = [x for x in mteb_part.splitlines() if x.startswith("| SCIDOCS")]
    # the main score first, then the @10 scores; MTEB's published all-MiniLM-L6-v2 result beside it
    assert [x.split(" | ")[1] for x in lines] == ["ndcg_at_10", "map_at_10"]
    assert "21.64 | 21.64" in lines[0] and "ndcg_at_100" not in mteb_part
    assert "MTEB retrieval (not SciDocs)" in (tmp_path / "report.html").read_text()


def test_model_card_has_front_matter_lineage_and_scores():
    lineage = {
        "train_encoder": {
            "version": "t1",
            "config": {"train_encoder": {"model": "allenai/scibert_scivocab_uncased", "lr": 2e-5, "pooling": "cls"}},
            "metrics": {"strategy": "scincl"},
        },
        "mine_triplets": {
            "version": "m1",
            "metrics": {
                "strategy": "scincl",
                "triplets": 50,
                "queries": 10,
                "negatives": {"hard": 20, "easy": 30},
                "collisions": 0,
            },
        },
        "embed_graph": {"version": "g1", "config": {"embed_graph": {"dimension": 768, "comparator": "dot"}}},
        "filter_leakage": {
            "version": "f1",
            "metrics": {
                "mode": "exclude",
                "benchmark_ids": 100,
                "mapped": 98,
                "removed_papers": 90,
                "removed_citations": 400,
            },
        },
    }
    rows = rows_of("x", "v", HEADLINE[:2], 70.0)
    card = model_card(lineage, rows, snapshot="snap")
    front = yaml.safe_load(card.split("---")[1])
    assert front["base_model"] == "allenai/scibert_scivocab_uncased"
    assert front["library_name"] == "sentence-transformers" and "transformers" in front["tags"]
    results = front["model-index"][0]["results"]
    assert [r["metrics"][0]["value"] for r in results] == [70.0, 70.0]
    assert (
        "exclude" in card
        and "98 of 100" in card
        and "50 (query, positive, negative) from 10 queries" in card
        and '"dimension": 768' in card
    )
    assert "mean of 2 of 12" in card and "not SciDocs' average of 12" in card
    assert "- filter_leakage: `f1`" in card
    # the usage says how the model embeds: [CLS] of at most 512 tokens (the fallback), not normalised
    assert "vectors = hidden[:, 0]" in card and "max_length=512" in card and "normalize" not in card.split("```")[3]


def lineage_of(training: dict, leakage_metrics: dict) -> dict:
    return {
        "filter_leakage": {"version": "f1", "metrics": leakage_metrics, "inputs": [{"stage": "build_graph"}]},
        "build_graph": {"version": "b1", "inputs": [{"kind": "corpus", "path": "/data/x", "fingerprint": "c" * 64}]},
        "train_encoder": {
            "version": "t1",
            "config": {"train_encoder": {"model": "/models/minilm", **training}},
            "metrics": {
                "strategy": "specter",
                "leakage_audit": {"what": "encoder training texts", "checked": 900, "benchmark_hits": 0},
            },
            "inputs": [{"kind": "model", "path": "/models/minilm", "fingerprint": "m" * 64}],
        },
        "embed_papers": {"version": "e1", "metrics": {"model": "trained"}},
        "mine_triplets": {
            "version": "m1",
            "metrics": {
                "strategy": "specter",
                "leakage_audit": [
                    {"what": "training triplets", "checked": 1000, "benchmark_hits": 0},
                    {"what": "training texts", "checked": 900, "benchmark_hits": 2},
                ],
            },
        },
    }


TOTALS = {"mode": "report_only", "benchmark_ids": 100, "mapped": 98, "unmapped": 2, "removed_papers": 0}


def test_model_card_usage_follows_the_training_and_the_lineage_lists_every_version():
    lineage = lineage_of({"pooling": "mean", "max_length": 256, "normalize": True}, TOTALS)
    card = model_card(lineage, rows_of("x", "v", HEADLINE[:1], 70.0), snapshot="2023-01-03", benchmark_version="k1")
    python = card.split("```python")[2].split("```")[0]
    assert "(hidden * mask).sum(1) / mask.sum(1)" in python and "normalize(vectors, dim=-1)" in python
    assert "max_length=256" in python and "hidden[:, 0]" not in python
    assert "mean of the tokens of the last hidden layer, scaled to unit length" in card
    lineage_lines = card.split("## Lineage")[1].strip().splitlines()
    assert lineage_lines == [
        "- release (snapshot): `2023-01-03`",
        f"- build_graph: `b1` (corpus `{'c' * 16}`)",
        "- filter_leakage: `f1`",
        "- mine_triplets: `m1`",
        f"- train_encoder: `t1` (model `{'m' * 16}`)",
        "- embed_papers: `e1`",
        "- benchmark: `k1`",
    ]
    assert "/data/x" not in card and "base_model" not in card.split("---")[1]  # no local paths published


def test_model_card_leakage_audit_takes_per_suite_counts_when_the_manifest_has_them():
    totals = model_card(lineage_of({}, TOTALS), [], snapshot="s")
    audit = totals.split("## Leakage audit")[1].split("## Lineage")[0]
    assert (
        "| all | 100 | 98 | 2 | 0 |" in audit
        and "| suite | benchmark ids | mapped | unmapped | removed papers |" in audit
    )
    assert "- mine_triplets: 2 benchmark papers among 900 papers of the training texts" in audit
    assert "- train_encoder: 0 benchmark papers among 900 papers of the encoder's training texts" in audit
    from citeflow.jobs.filter_leakage.mapping import suite_totals

    # a filter_leakage report's per-suite and overall rows (citeflow.jobs.filter_leakage.mapping.leakage_report)
    report = [
        {"suite": s, "task": "all", "split": "all", "total": t, "unmapped": u, "in_snapshot": i}
        | {"removed_papers": p, "removed_edges": e, "one_hop_papers": 0, "one_hop_edges": 0}
        for s, t, u, i, p, e in (
            ("scidocs", 70, 1, 60, 58, 300),
            ("scirepeval", 30, 1, 20, 20, 90),
            ("all", 99, 2, 78, 76, 380),
        )
    ]
    suites = {**TOTALS, "suites": suite_totals(report)}
    audit = model_card(lineage_of({}, suites), [], snapshot="s").split("## Leakage audit")[1]
    assert "| scidocs | 70 | 69 | 1 | 60 | 58 | 300 |" in audit
    assert "| scirepeval | 30 | 29 | 1 | 20 | 20 | 90 |" in audit and "| all | 99 | 97 | 2 | 78 | 76 | 380 |" in audit
    assert "one hop" not in audit  # strict off


def test_model_card_model_index_reads_as_hugging_face_hub_reads_it():
    from huggingface_hub import ModelCard

    rows = rows_of("x", "v", HEADLINE, 61.5)
    card = ModelCard(model_card(lineage_of({}, TOTALS), rows, snapshot="s"))
    results = card.data.eval_results
    assert len(results) == 12 and {r.dataset_type for r in results} == {"scidocs"}
    assert {(r.dataset_name, r.metric_type) for r in results} == {(f"SciDocs {t}", m) for t, m in HEADLINE}
    assert {r.metric_value for r in results} == {61.5} and {r.task_type for r in results} == {"feature-extraction"}
    assert card.data.library_name == "sentence-transformers"


def answer_section(page: str) -> str:
    return page.split("<section class=answer>", 1)[1].split("</section>", 1)[0]


def test_the_report_opens_with_the_answer_trained_against_base(tmp_path):
    """The first words of the page are the sentence; then one table: SciDocs' average and each number, test split,
    the queries (papers, clicks) scored, trained, base and the difference, as the papers print them."""
    scidocs = generated_scidocs(tmp_path / "data")
    write_report(score_rows(), tmp_path / "out", "citeflow benchmark", scidocs=scidocs)
    page = (tmp_path / "out" / "report.html").read_text()
    body = page.split("</style>", 1)[1]
    assert body.startswith(f"<section class=answer><p class=lede>{html.escape(SENTENCE)}</p>")
    assert body.index("</section>") < body.index("<h1>citeflow benchmark</h1>")
    section = answer_section(page)
    assert f"<caption>trained: {TRAINED} · base: {BASE}</caption>" in section
    # tests/support/artifact_pages.py works the numbers by hand: averages 54.18 and 50.72; per task the rounded
    # values and their difference (coview map 50.126 -> 50.13, base 46.126 -> 46.13: +4.00; mesh: base above)
    # each change with its interval (tests/support/artifact_pages.py: a point but for coview MAP, whose interval
    # holds 0 and is marked so)
    noise = f"<td class='n noise' title='{html.escape(NOT_SHOWN_NOTE)}'>"
    for task, metric, n, trained, base, delta in [
        ("all tasks", "average of 12", "12 of 12 numbers", "54.18", "50.72", "<td class=n>+3.46 [+0.96, +4.71]"),
        ("mag", "f1", "200 papers", "60.00", "56.00", "<td class=n>+4.00 [+4.00, +4.00]"),
        ("mesh", "f1", "200 papers", "70.00", "72.50", "<td class=n>-2.50 [-2.50, -2.50]"),
        ("coview", "map", "100 queries", "50.13", "46.13", noise + f"+4.00 [-26.00, +19.00] {NOT_SHOWN}"),
        ("recomm", "adj-p@1", "1,500 clicks", "15.00", "11.00", "<td class=n>+4.00 [+4.00, +4.00]"),
    ]:
        cells = f"<td>{task}</td><td>{metric}</td><td class=n>{n}</td><td class=n>{trained}</td>"
        assert cells + f"<td class=n>{base}</td>{delta}</td></tr>" in section, task
    assert section.count("<tr") == 1 + 13  # the header, the average, the 12 numbers
    assert section.count(NOT_SHOWN) == 3  # the one mark, its title saying what it means, and the note under the table
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert markdown.startswith(f"# citeflow benchmark\n\n{SENTENCE}\n")
    assert "| all tasks | average of 12 | 12 of 12 numbers | **54.18** | **50.72** | **+3.46 [+0.96, +4.71]** |" in (
        markdown
    )
    assert f"| coview | map | 100 queries | 50.13 | 46.13 | +4.00 [-26.00, +19.00] {NOT_SHOWN} |" in markdown
    assert NOT_SHOWN_NOTE in markdown
    # the first "| task |" line is still the header of the table of every score (tests/e2e/test_benchmark.py reads it)
    header = next(line for line in markdown.splitlines() if line.startswith("| task |"))
    assert (
        header
        == f"| task | metric | {TRAINED} [train_encoder:e51bb2085f2e3b08] | {BASE} [base_model_of:e51bb2085f2e3b08] |"
    )


def test_published_numbers_only_beside_data_that_may_be_the_published_scidocs(tmp_path):
    generated = generated_scidocs(tmp_path / "gen")
    given = tmp_path / "scidocs"  # a SciDocs folder no generator wrote
    given.mkdir()
    out = {}
    for name, folder in (("generated", generated), ("given", str(given)), ("untold", None)):
        write_report(score_rows(), tmp_path / name, "t", scidocs=folder)
        out[name] = (tmp_path / name / "report.html").read_text(), (tmp_path / name / "report.md").read_text()
    for text in out["generated"]:  # not one published number, and a plain word why
        assert "(published" not in text and "80.00" not in text and "81.80" not in text
        assert "not the published SciDocs" in text and "Published SPECTER / SciNCL numbers are left out" in text
    page, markdown = out["given"]
    # SPECTER's published average of 12 (docs/reference.md §6: 80.0), labelled as the published benchmark's
    assert "SPECTER (published) 80.00" in answer_section(page) and "on the published SciDocs test split" in page
    assert "SPECTER (published)" in markdown.split("## Every score")[1]
    page, markdown = out["untold"]  # shown in the table of every score, marked as not known to be comparable
    assert "SPECTER (published)" not in answer_section(page) and "Not known to be comparable" in page
    assert "| SPECTER (published) |" in markdown


def test_scidocs_origin_reads_the_generators_truth_file(tmp_path):
    import json

    generated = generated_scidocs(tmp_path / "gen")
    assert scidocs_origin(generated) == GENERATED
    assert scidocs_origin(generated + "/") == GENERATED
    plain = tmp_path / "plain" / "scidocs"
    plain.mkdir(parents=True)
    assert scidocs_origin(str(plain)) == GIVEN
    # a generated snapshot's generator.json names its own SciDocs folder: a neighbour of another name is not it
    other = tmp_path / "gen" / "snapshot" / "scidocs-real"
    other.mkdir()
    assert scidocs_origin(str(other)) == GIVEN
    assert scidocs_origin(None) == UNKNOWN and scidocs_origin(str(tmp_path / "gone")) == UNKNOWN
    (tmp_path / "plain" / "generator.json").write_text(json.dumps({"not": "the generator's"}))
    assert scidocs_origin(str(plain)) == GIVEN


def test_fewer_than_12_numbers_are_compared_as_the_mean_of_those_not_as_the_average():
    ten = [r for r in score_rows() if r["task"] not in ("recomm", "average")]
    found = answer(ten, origin=GIVEN)
    (comparison,) = found["comparisons"]
    # the 10 non-recomm numbers: trained 60 + 70 + 50.126 + 70 + 40 + 60 + 45 + 65 + 50 + 70 = 580.126, / 10 =
    # 58.0126 -> 58.01; base 580.126 - 36 (9 numbers 4 lower) + 2.5 (mesh) = 546.626 -> 54.66; +3.35
    assert comparison["measure"] == "mean of 10 of 12"
    head = dict(comparison["rows"][0])
    # its interval: 8 changes of +4 and mesh's -2.5 are points, coview MAP's runs from -26 to +19: (29.5 - 26) / 10
    # to (29.5 + 19) / 10
    assert head.pop("interval") == pytest.approx((0.35, 4.85))
    assert head == {
        "task": "all tasks",
        "metric": "mean of 10 of 12",
        "n": "10 of 12 numbers",
        "model": 58.01,
        "base": 54.66,
        "delta": 3.35,
    }
    assert "the mean of 10 of 12 SciDocs numbers (not SciDocs' average)" in found["sentence"]
    # SPECTER's mean of the same 10 (886.5 / 10, test_ten_numbers_... above); no average of 12 beside a mean of 10
    assert found["published"] == {"SPECTER (published)": 88.65}


def test_versions_side_by_side_each_get_their_comparison():
    """`citeflow report`: a version's trained rows, its base's, then the next version's (here without a base)."""
    first = score_rows()
    second = [dict(r, label="specter trained (train_encoder 0badc0de)") for r in first if r["model"] == "trained"]
    found = answer(first + second)
    assert [(c["model"], c["base"]) for c in found["comparisons"]] == [
        (TRAINED, BASE),
        ("specter trained (train_encoder 0badc0de)", None),
    ]
    assert found["sentence"] == (
        f"On SciDocs (test split): {TRAINED} 54.18 against 50.72 for its base, +3.46 (average of 12); "
        "specter trained (train_encoder 0badc0de) 54.18 (average of 12)."
    )


def test_the_page_fits_its_window_plots_shrink_and_tables_scroll_in_their_box(tmp_path):
    import struct

    paths = write_report(score_rows(), tmp_path, "t", scidocs=generated_scidocs(tmp_path / "gen"))
    page = (tmp_path / "report.html").read_text()
    style = page.split("<style>", 1)[1].split("</style>", 1)[0]
    assert "img{max-width:100%;height:auto}" in style and ".scroll{overflow-x:auto;max-width:100%}" in style
    assert "pre{white-space:pre-wrap;" in style
    assert page.count("<table") == page.count("<div class=scroll><table") > 1  # every table in its own box
    with open(paths["plot"], "rb") as fh:  # PNG: the IHDR chunk's width and height follow the 16-byte header
        width, height = struct.unpack(">II", fh.read(24)[16:24])
    assert width <= 1000 and height < width, (width, height)  # was 1,408 px wide
