"""benchmark end to end: SciDocs tasks of a generated snapshot, trained vs untrained, report, standalone CLI."""

import json
import os
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from citeflow.config import apply_overrides
from citeflow.jobs import benchmark
from tests.support.encoder import TINY

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scored(generated_topics, topics_config, spark):
    snap, truth = generated_topics
    cfg = apply_overrides(topics_config, TINY)
    return snap, truth, cfg, benchmark.run(cfg)


def test_every_scidocs_task_of_the_snapshot_is_scored(scored):
    _, truth, _, m = scored
    rows = [r for r in pq.read_table(m.table_path("scores")).to_pylist() if r["suite"] == "scidocs"]
    ok = {(r["model"], r["task"], r["metric"]) for r in rows if r["status"] == "ok"}
    for model in ("trained", "base"):
        for task, metric in [("mag", "f1"), ("mesh", "f1")] + [
            (t, x) for t in ("cite", "cocite", "coview", "coread") for x in ("map", "ndcg")
        ]:
            assert (model, task, metric) in ok, (model, task, metric)
    by = {(r["model"], r["task"], r["metric"]): r for r in rows}
    for model in ("trained", "base"):  # the generator writes recomm: all 12 numbers, a true average
        assert by[model, "recomm", "adj-ndcg"]["status"] == by[model, "recomm", "adj-p@1"]["status"] == "ok"
        assert by[model, "recomm", "adj-ndcg"]["n"] == truth["scidocs"]["tasks"]["recomm"]["test"]
        assert by[model, "average", "avg"]["reason"] == "average of 12"
        twelve = [r["value"] for r in rows if r["model"] == model and r["split"] == "test" and r["task"] != "average"]
        twelve = [v for v in twelve if v is not None]
        assert len(twelve) == 12 and by[model, "average", "avg"]["value"] == pytest.approx(sum(twelve) / 12)
    assert by["trained", "cite", "map"]["n"] == truth["scidocs"]["tasks"]["cite"]["test"]["queries"]
    assert by["trained", "mag", "f1"]["n"] == truth["scidocs"]["tasks"]["mag"]["test"]
    assert {r["strategy"] for r in rows} == {"scincl"} and {r["leakage_mode"] for r in rows} == {"report_only"}
    assert all(0 <= r["value"] <= 100 for r in rows if r["status"] == "ok")


def test_the_trained_model_beats_its_untrained_base(scored):
    _, _, _, m = scored
    trained, base = m.metrics["trained"]["mean"], m.metrics["base"]["mean"]
    assert trained > base + 3, (trained, base)


def test_the_versions_report_opens_with_the_answer_and_leaves_published_numbers_out_of_generated_data(scored):
    _, _, cfg, m = scored
    report = m.path + "/report.md"
    text = open(report).read()
    # the title, then the answer in one sentence
    assert text.split("\n\n")[1].startswith("The trained model scores "), text[:300]
    assert "scincl trained" in text and "scincl base" in text and "| mag | f1 |" in text
    # a generated snapshot's SciDocs is not the published one: no published number stands beside its scores
    assert "SPECTER (published)" not in text and "not the published SciDocs" in text
    assert "average of 12" in text and "mean of 10 of 12" not in text
    html = open(report.replace(".md", ".html")).read()
    assert "data:image/png;base64," in html
    assert not os.path.exists(m.path.rsplit("/", 1)[0] + "/report.html")  # nothing outside the version
    again = benchmark.run(cfg)
    assert again.skipped and again.version == m.version


def test_named_versions_side_by_side_in_one_report(scored, tmp_path):
    _, _, cfg, m = scored
    # a second benchmark version of the same trained model (a benchmark setting alone: SciRepEval's tasks would
    # join filter_leakage's audit and so make another model)
    other = benchmark.run(apply_overrides(cfg, ["benchmark.base=false"]))
    out = tmp_path / "side-by-side"
    done = subprocess.run(
        [sys.executable, "-m", "citeflow.jobs.cli", "report", "--snapshot", cfg.snapshot, "--artifacts", cfg.artifacts]
        + ["--benchmark", m.version, "--benchmark", other.version, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    text = (out / "report.md").read_text()
    # both versions hold a "scincl trained" column: each is named by its version, neither hides the other
    header = next(line for line in text.splitlines() if line.startswith("| task |"))
    trained = [c.strip() for c in header.split("|") if c.strip().startswith("scincl trained")]
    assert len(trained) == 2 and f"({m.version})" in trained[0] and f"({other.version})" in trained[1], header
    assert "scincl base" in text  # only the first version scored the base
    bad = subprocess.run(
        [sys.executable, "-m", "citeflow.jobs.cli", "report", "--snapshot", cfg.snapshot, "--artifacts", cfg.artifacts]
        + ["--benchmark", "../../etc", "--out", str(tmp_path / "bad")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "is not a version id" in bad.stderr and "Traceback" not in bad.stderr


def test_scirepeval_samples_are_scored(scored, shared_data):
    _, _, cfg, m = scored
    assert cfg.benchmark.scirepeval == (str(shared_data / "scirepeval"),)  # topics_config scores them
    rows = {
        r["task"]: r
        for r in pq.read_table(m.table_path("scores")).to_pylist()
        if r["task"].startswith("scirepeval/") and r["status"] == "ok" and r["model"] == "trained"
    }
    assert set(rows) == {"scirepeval/fos_small", "scirepeval/mesh_small", "scirepeval/search_small"}
    assert all(r["n"] > 0 for r in rows.values()), rows
    assert len(json.loads(rows["scirepeval/fos_small"]["details"])["chosen_C"]) > 1  # one C per label
    assert rows["scirepeval/search_small"]["metric"] == "ndcg"
    # the sample folder's task list names Hugging Face datasets: reported, not silently dropped
    missing = [r for r in pq.read_table(m.table_path("scores")).to_pylist() if r["status"] == "missing"]
    assert any("Hugging Face dataset" in r["reason"] for r in missing)


def test_standalone_cli_scores_any_embeddings(scored, tmp_path):
    snap, _, cfg, m = scored
    paths = [i["path"] + "/embeddings" for i in m.inputs if i.get("stage") == "embed_papers"]  # trained, base
    assert len(paths) == 2
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "citeflow.jobs.cli",
            "benchmark",
            "--embeddings",
            paths[0],
            "--embeddings",
            paths[1],
            "--label",
            "one",
            "--label",
            "two",
            "--scidocs",
            str(snap / "scidocs"),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "one" in done.stdout and "cocite" in done.stdout and (tmp_path / "out" / "report.html").is_file()
    table = pq.read_table(tmp_path / "out" / "scores.parquet").to_pylist()
    ours = {(r["task"], r["metric"]): r["value"] for r in table if r["label"] == "one" and r["status"] == "ok"}
    stage = {
        (r["task"], r["metric"]): r["value"]
        for r in pq.read_table(m.table_path("scores")).to_pylist()
        if r["model"] == "trained" and r["status"] == "ok" and not r["task"].startswith("scirepeval/")
    }
    assert ours == pytest.approx(stage)
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "citeflow.jobs.cli",
            "benchmark",
            "--embeddings",
            str(tmp_path / "nope"),
            "--scidocs",
            str(snap / "scidocs"),
            "--out",
            str(tmp_path / "x"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "do not exist" in bad.stderr


def run_export_model(cfg, *args: str) -> subprocess.CompletedProcess:
    """`citeflow export-model` of the config's snapshot's SciNCL model with `args`, as a user types it."""
    cmd = [sys.executable, "-m", "citeflow.jobs.cli", "export-model", "--snapshot", cfg.snapshot]
    cmd += ["--strategy", "scincl", "--artifacts", cfg.artifacts, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_export_model_assembles_model_and_card_loadable_with_automodel_and_sentence_transformers(scored, tmp_path):
    import numpy as np
    import yaml
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    from citeflow.artifacts import ArtifactStore
    from citeflow.jobs.embed_papers import read_papers
    from citeflow.models.encoder.model import paper_text

    _, _, cfg, m = scored
    out = tmp_path / "export"
    versions = ArtifactStore(cfg.artifacts).list_versions(cfg.snapshot, "benchmark")
    scincl = [v for v in versions if v.metrics.get("strategy") == "scincl"]
    if len({v.version for v in scincl}) > 1:  # the other tests of this module benchmarked scincl twice
        ambiguous = run_export_model(cfg, "--out", str(tmp_path / "ambiguous"))
        assert ambiguous.returncode == 2 and "name one with --benchmark" in ambiguous.stderr
        assert m.version in ambiguous.stderr and not (tmp_path / "ambiguous").exists()
    done = run_export_model(cfg, "--out", str(out), "--benchmark", m.version)
    assert done.returncode == 0, done.stderr[-3000:]
    card = (out / "README.md").read_text()
    front = yaml.safe_load(card.split("---")[1])
    assert front["library_name"] == "sentence-transformers" and "scincl" in front["tags"]
    results = front["model-index"][0]["results"]
    assert {r["dataset"]["name"] for r in results} >= {"SciDocs mag", "SciDocs cite"}
    assert "report_only" in card and "triplets:" in card and "average of 12" in card
    assert f"- benchmark: `{m.version}`" in card and "## Leakage audit" in card and "| all |" in card
    # the card's facts are counted from the artifacts, triplets and papers named apart; its base named in words
    assert "base model: none: a small BERT initialised at random" in card
    assert re.search(r"- triplets: [\d,]+ \(query, positive, negative\) from [\d,]+ queries, over [\d,]+ papers", card)
    assert re.search(r"- mine_triplets: [\d,]+ benchmark papers among [\d,]+ papers of the training triplets", card)
    # its examples run as printed: this export's path, two papers of the release
    from tests.cards import run_code_blocks

    dimension = json.loads((out / "config.json").read_text())["hidden_size"]
    outputs = run_code_blocks(card, tmp_path)
    assert [o.strip() for o in outputs] == [f"(2, {dimension})", f"torch.Size([2, {dimension}])"]
    AutoModel.from_pretrained(str(out), local_files_only=True)
    AutoTokenizer.from_pretrained(str(out), local_files_only=True)
    # sentence-transformers gives embed_papers' own vectors: the demo's mean pooling, 64 tokens (TINY)
    store = ArtifactStore(cfg.artifacts)
    trained = next(
        e
        for e in (store.read_manifest(cfg.snapshot, "embed_papers", i["version"]) for i in m.inputs if "stage" in i)
        if e.metrics["model"] == "trained"
    )
    table = pq.read_table(trained.table_path("embeddings")).to_pydict()
    papers = {paper_id: (title, abstract) for paper_id, title, abstract in read_papers(cfg.scidocs)}
    model = SentenceTransformer(str(out), device="cpu")
    assert model[1].pooling_mode == "mean" and model.max_seq_length == 64
    ids = table["paper_id"][:64]
    texts = [paper_text(*papers[i], model.tokenizer.sep_token) for i in ids]
    ours = np.array(table["embedding"][:64], dtype=np.float32)
    assert np.abs(model.encode(texts, batch_size=16, convert_to_numpy=True) - ours).max() <= 1e-5
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "citeflow.jobs.cli",
            "export-model",
            "--snapshot",
            cfg.snapshot,
            "--strategy",
            "specter",
            "--out",
            str(tmp_path / "x"),
            "--artifacts",
            cfg.artifacts,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 2 and "no benchmark" in again.stderr
    # --overwrite replaces the previous export, never a folder of the user's
    from citeflow.errors import CiteflowError
    from citeflow.jobs.cli.export_model import export_model

    kwargs = dict(snapshot=cfg.snapshot, strategy="scincl", artifacts=cfg.artifacts, benchmark=m.version)
    assert export_model(out=str(out), overwrite=True, **kwargs) == out.resolve()
    users = tmp_path / "users"
    (users / "sub").mkdir(parents=True)
    (users / "sub" / "notes.md").write_text("mine")
    with pytest.raises(CiteflowError, match="was not written by a citeflow export"):
        export_model(out=str(users), overwrite=True, **kwargs)
    assert (users / "sub" / "notes.md").read_text() == "mine"
