"""train_encoder and embed_papers end to end: a small BERT trained on SciNCL triplets of a generated snapshot."""

import json
import os

import numpy as np
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from citeflow.config import apply_overrides
from citeflow.errors import CiteflowError
from citeflow.jobs import embed_papers, train_encoder
from citeflow.jobs.embed_papers import embed_to_parquet
from citeflow.tables import read_table
from tests.support.encoder import TINY

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(generated_topics, topics_config, spark):
    snap, _ = generated_topics
    cfg = apply_overrides(topics_config, TINY)
    return snap, cfg, train_encoder.run(cfg)


def test_training_loss_falls_and_the_model_is_saved(trained):
    _, _, m = trained
    log = pq.read_table(m.table_path("training_log")).to_pydict()
    assert log["step"] == list(range(1, m.metrics["steps"] + 1))
    # the triplets minus the held-out slice (256 asked, whole queries), in whole steps of 32
    held = m.metrics["heldout_triplets"]
    assert 256 <= held < 300 and m.metrics["trained_triplets"] == 20000 - held
    assert m.metrics["steps"] == m.metrics["trained_triplets"] // 32
    # On realistic text the loss stays near the margin for a few hundred steps, then falls (measured on this
    # snapshot: mean of the first 50 steps 0.97, of the last 50 0.76); steps are noisy, so compare means.
    first, last = np.mean(log["loss"][:50]), np.mean(log["loss"][-50:])
    assert last < 0.9 * first, (first, last)
    assert max(log["lr"]) <= 1e-3 and log["lr"][-1] < max(log["lr"])  # warm-up then decay
    for name in (
        "model/model.safetensors",
        "model/tokenizer.json",
        "model/citeflow.json",
        "base_model/model.safetensors",
        "training_loss.png",
    ):
        assert os.path.exists(f"{m.path}/{name}"), name
    about = json.loads(open(f"{m.path}/model/citeflow.json").read())
    assert about["strategy"] == "scincl" and about["pooling"] == "mean" and about["train_encoder_version"] == m.version
    assert about["normalize"] is False and about["max_length"] == 64
    # the small model's folder says nothing: the demo profile's pooling, TINY's length, the fallback's normalisation
    assert m.config["resolved_from"] == {
        "pooling": "train_encoder.pooling (--set or profile)",
        "max_length": "train_encoder.max_length (--set or profile)",
        "normalize": "default",
        "inference_max_length": "train_encoder.max_length (the small model is built at its training length)",
    }
    modules = json.loads(open(f"{m.path}/model/modules.json").read())
    assert [x["type"].rsplit(".", 1)[1] for x in modules] == ["Transformer", "Pooling"]
    assert json.loads(open(f"{m.path}/model/1_Pooling/config.json").read())["pooling_mode_mean_tokens"] is True
    assert m.metrics["leakage_audit"]["mode"] == "report_only" and m.metrics["processes"] == 1
    assert not os.path.exists(os.path.join(os.path.dirname(m.path), ".work", m.version))


def knn_topic_share(vectors, labels, k=10):
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    top = np.argpartition(-sims, k, axis=1)[:, :k]
    return float(np.mean(labels[top] == labels[:, None]))


def test_trained_encoder_separates_unseen_papers_by_subtopic(trained, tmp_path):
    snap, cfg, m = trained
    mine = next(i for i in m.inputs if i["stage"] == "mine_triplets")
    seen = set(pq.read_table(mine["path"] + "/training_texts")["corpus_id"].to_pylist())
    leak = json.loads(open(mine["path"] + "/_manifest.json").read())["inputs"][1]["path"]
    papers = read_table(pafs.LocalFileSystem(), leak + "/papers", ["corpus_id", "title", "abstract"])
    papers = papers.filter(
        pc.invert(pc.is_in(papers["corpus_id"], value_set=__import__("pyarrow").array(sorted(seen))))
    )
    papers = papers.filter(pc.greater(pc.utf8_length(pc.fill_null(papers["abstract"], "")), 0)).slice(0, 1500)
    topics = pq.read_table(snap / "paper_topics.parquet").to_pydict()
    community = dict(zip(topics["corpus_id"], topics["community"], strict=True))
    labels = np.array([community[c] for c in papers["corpus_id"].to_pylist()])
    rows = list(
        zip(
            map(str, papers["corpus_id"].to_pylist()),
            papers["title"].to_pylist(),
            papers["abstract"].to_pylist(),
            strict=True,
        )
    )
    shares = {}
    for which in ("base_model", "model"):
        out = tmp_path / which
        embed_to_parquet(iter(rows), f"{m.path}/{which}", out, max_length=64, pooling="mean", batch_size=128)
        table = pq.read_table(out)
        assert table["paper_id"].to_pylist() == [r[0] for r in rows]
        shares[which] = knn_topic_share(np.stack(table["embedding"].to_numpy(zero_copy_only=False)), labels)
    _, counts = np.unique(labels, return_counts=True)
    chance = float(np.sum((counts / counts.sum()) ** 2))
    # realistic text, the chain repeating bit for bit (topics_config: one PBG worker): 0.143 against the base's
    # 0.043, chance 0.015 (TINY's whole batch of 32 in one micro-batch; 0.176 with two of 16, slower by 23 s).
    # With 2 HOGWILD workers four runs gave 0.086 to 0.156 against 0.040 to 0.049.
    assert shares["model"] > shares["base_model"] + 0.05, (shares, chance)
    assert shares["model"] > 3 * chance, (shares, chance)


def test_embed_papers_embeds_the_scidocs_papers_like_plain_transformers(trained):
    import torch
    from transformers import AutoModel, AutoTokenizer

    snap, cfg, m = trained
    e = embed_papers.run(cfg)
    metadata = {}
    for name in ("paper_metadata_mag_mesh.json", "paper_metadata_view_cite_read.json"):
        metadata.update(json.loads((snap / "scidocs" / name).read_text()))
    table = pq.read_table(e.table_path("embeddings"))
    assert sorted(table["paper_id"].to_pylist()) == sorted(metadata) and e.metrics["papers"] == len(metadata)
    assert e.metrics["dimension"] == 64 and e.metrics["model"] == "trained" and e.metrics["strategy"] == "scincl"
    # a plain transformers user gets the same vectors (mean pooling over the attention mask)
    tokenizer = AutoTokenizer.from_pretrained(f"{m.path}/model")
    model = AutoModel.from_pretrained(f"{m.path}/model").eval()
    first = table.slice(0, 3).to_pylist()
    texts = [
        f"{(metadata[r['paper_id']]['title'] or '').strip()} {tokenizer.sep_token} "
        f"{(metadata[r['paper_id']]['abstract'] or '').strip()}".strip()
        for r in first
    ]
    enc = tokenizer(texts, truncation=True, max_length=64, padding=True, return_tensors="pt")
    with torch.inference_mode():
        hidden = model(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).float()
    expected = ((hidden * mask).sum(1) / mask.sum(1)).numpy()
    assert np.allclose(np.stack([r["embedding"] for r in first]), expected, atol=1e-5)
    again = embed_papers.run(cfg)
    assert again.skipped and again.version == e.version
    base = embed_papers.run(apply_overrides(cfg, ["embed_papers.model=base"]))
    assert base.version != e.version and base.metrics["model"] == "base"


def test_a_killed_training_resumes_from_its_checkpoint(trained, monkeypatch):
    _, cfg, _ = trained
    cfg = apply_overrides(
        cfg, ["train_encoder.seed=5", "train_encoder.max_steps=12", "train_encoder.checkpoint_every=5"]
    )
    monkeypatch.setenv("CITEFLOW_FAULT_KILL", "train_encoder.step.8")
    with pytest.raises(CiteflowError, match="rerun to resume"):
        train_encoder.run(cfg)
    monkeypatch.delenv("CITEFLOW_FAULT_KILL")
    m = train_encoder.run(cfg)
    assert not m.skipped and m.metrics["resumed_from_step"] == 5 and m.metrics["steps"] == 12


def test_a_missing_model_folder_is_a_clear_error(trained, tmp_path):
    _, cfg, _ = trained
    with pytest.raises(CiteflowError, match="does not exist"):
        train_encoder.run(apply_overrides(cfg, [f"train_encoder.model={tmp_path}/scibert"]))


def test_a_real_encoder_trains_with_the_pooling_and_normalisation_its_folder_says(trained, caplog):
    """all-MiniLM-L6-v2 (mean pooling, a Normalize module, 256 tokens in its sentence-transformers files): with
    pooling and normalisation unset the folder decides; the training length set here is a training cost only: the
    model keeps the folder's 256 tokens to embed with, and nothing is overridden."""
    from tests.support.real_encoder import real_encoder

    _, cfg, _ = trained
    folder = real_encoder()
    over = [f"train_encoder.model={folder}", "train_encoder.pooling=none", "train_encoder.max_length=48"]
    cfg = apply_overrides(cfg, [*over, "train_encoder.max_steps=2", "train_encoder.checkpoint_every=100"])
    with caplog.at_level("WARNING", logger="citeflow"):
        m = train_encoder.run(cfg)
    assert m.metrics["steps"] == 2 and m.config["train_encoder"]["pooling"] == "mean"
    assert m.config["train_encoder"]["normalize"] is True and m.config["train_encoder"]["max_length"] == 48
    assert m.config["resolved_from"] == {
        "pooling": "model folder 1_Pooling/config.json",
        "max_length": "train_encoder.max_length (--set or profile)",
        "normalize": "model folder modules.json (a Normalize module)",
        "inference_max_length": "model folder sentence_bert_config.json max_seq_length",
    }
    assert m.config["train_encoder"]["inference_max_length"] == 256
    assert not any("overrides the model folder" in r.getMessage() for r in caplog.records)
    modules = json.loads(open(f"{m.path}/model/modules.json").read())
    assert [x["type"].rsplit(".", 1)[1] for x in modules] == ["Transformer", "Pooling", "Normalize"]
    sbert = json.loads(open(f"{m.path}/model/sentence_bert_config.json").read())
    assert sbert["max_seq_length"] == 256 and sbert["model_args"] == {"add_pooling_layer": False}
    # the same settings spelled out make the same version: the run computes with the resolved values
    same = apply_overrides(cfg, ["train_encoder.pooling=mean", "train_encoder.normalize=true"])
    again = train_encoder.run(same)
    assert again.skipped and again.version == m.version
