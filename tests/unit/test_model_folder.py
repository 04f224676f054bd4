"""What a model folder says about its use (models/encoder/folder.py `folder_usage`, `resolve_usage`), the
sentence-transformers files citeflow writes (`write_sentence_transformers_files`) and the quiet loading of a
checkpoint's pooler head, checked against sentence-transformers itself on the real all-MiniLM-L6-v2 and on the
repository's small BERT."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from citeflow.config import TrainEncoderConfig
from citeflow.errors import CiteflowError
from citeflow.jobs.embed_papers import embed_to_parquet
from citeflow.models.encoder.folder import folder_usage, resolve_usage, write_sentence_transformers_files
from citeflow.models.encoder.model import build_small, load, paper_text
from tests.support import real_encoder as real_encoder_module
from tests.support.real_encoder import real_encoder

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

WORDS = "graph citation embedding protein folding galaxy survey lensing transformer kinetics".split()
PAPERS = [
    ("p1", "Citation graphs for document embeddings", "We train a transformer on citation triplets."),
    ("p2", "Protein folding kinetics", "Folding rates of small proteins measured by fluorescence."),
    ("p3", "A galaxy survey", None),
    ("p4", None, "Only an abstract, about weak lensing of distant quasars."),
    # longer than every max length below: truncation must cut where sentence-transformers cuts
    ("p5", "A long one", " ".join(WORDS * 60)),
]


def st_model(folder: Path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu")


def citeflow_vectors(folder: Path, out: Path, usage: dict) -> np.ndarray:
    embed_to_parquet(iter(PAPERS), str(folder), out, batch_size=2, **usage)
    table = pq.read_table(out)
    assert table["paper_id"].to_pylist() == [p[0] for p in PAPERS]
    return np.stack(table["embedding"].to_numpy(zero_copy_only=False))


def texts_of(tokenizer) -> list[str]:
    return [paper_text(title, abstract, tokenizer.sep_token) for _, title, abstract in PAPERS]


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    rng = np.random.default_rng(0)
    out = tmp_path_factory.mktemp("small") / "model"
    build_small(
        [" ".join(rng.choice(WORDS, 30)) for _ in range(80)],
        out,
        vocab_size=200,
        hidden=32,
        layers=2,
        heads=2,
        intermediate=64,
        max_length=48,
        seed=0,
        dropout=0.0,
    )
    return out


@pytest.fixture(scope="module")
def minilm_trained(tmp_path_factory) -> Path:
    """all-MiniLM-L6-v2 saved as citeflow's trainer saves a model: loaded without its pooler, save_pretrained."""
    out = tmp_path_factory.mktemp("minilm") / "model"
    tokenizer, model = load(str(real_encoder()))
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    return out


def test_the_real_encoders_folder_says_what_sentence_transformers_reads_from_it():
    folder = real_encoder()
    said = folder_usage(folder)
    model = st_model(folder)
    # sentence-transformers' own reading of the same files is the oracle
    assert model[1].pooling_mode == "mean" and said["pooling"] == ("mean", "1_Pooling/config.json")
    assert model.max_seq_length == 256 and said["max_length"] == (256, "sentence_bert_config.json max_seq_length")
    assert [type(m).__name__ for m in model][2:] == ["Normalize"] and said["normalize"][0] is True


def test_a_folder_saved_by_sentence_transformers_6_says_the_same(tmp_path):
    """sentence-transformers 6 writes its own layout (`pooling_mode: "mean"`, the length in the tokenizer's
    config): read like the legacy files the package ships."""
    saved = tmp_path / "saved"
    st_model(real_encoder()).save(str(saved))
    assert "pooling_mode" in json.loads((saved / "1_Pooling" / "config.json").read_text())  # the new layout
    assert {k: v for k, (v, _) in folder_usage(saved).items()} == {
        "pooling": "mean",
        "max_length": 256,
        "normalize": True,
    }
    assert folder_usage(saved)["max_length"][1] == "tokenizer_config.json model_max_length"


def test_citeflow_embeds_the_real_encoder_as_sentence_transformers_does(tmp_path):
    folder = real_encoder()
    usage = resolve_usage({}, folder_usage(folder))
    assert usage.values == {"pooling": "mean", "max_length": 256, "normalize": True}
    assert usage.sources["pooling"] == "model folder 1_Pooling/config.json" and usage.overridden == {}
    model = st_model(folder)
    expected = model.encode(texts_of(model.tokenizer), batch_size=2, convert_to_numpy=True)
    ours = citeflow_vectors(folder, tmp_path / "e", usage.values)
    assert np.abs(ours - expected).max() <= 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    # the same model without the folder's word for it (citeflow before: cls, unnormalised) is another embedding
    plain = citeflow_vectors(folder, tmp_path / "plain", {"pooling": "cls", "max_length": 256, "normalize": False})
    assert np.abs(plain - expected).max() > 0.1


def test_a_setting_wins_over_the_folder_and_the_fallback_comes_last():
    said = folder_usage(real_encoder())
    usage = resolve_usage({"pooling": "cls", "max_length": None, "normalize": False}, said)
    assert usage.values == {"pooling": "cls", "max_length": 256, "normalize": False}
    assert usage.overridden == {"pooling": "mean", "normalize": True}
    assert usage.sources == {
        "pooling": "train_encoder.pooling (--set or profile)",
        "max_length": "model folder sentence_bert_config.json max_seq_length",
        "normalize": "train_encoder.normalize (--set or profile)",
    }
    bare = resolve_usage({"pooling": None, "max_length": None, "normalize": None}, {})
    assert bare.values == {"pooling": "cls", "max_length": 512, "normalize": False}
    assert set(bare.sources.values()) == {"default"}


def test_a_plain_hugging_face_folder_says_nothing(small):
    assert folder_usage(small) == {}


def sentence_folder(tmp_path: Path, small: Path, modules: list[dict], pooling: dict | None = None) -> Path:
    folder = tmp_path / "st"
    shutil.copytree(small, folder)
    (folder / "modules.json").write_text(json.dumps(modules))
    if pooling is not None:
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return folder


TRANSFORMER = {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}
POOLING = {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}


def test_a_pooling_citeflow_lacks_is_refused_unless_a_setting_overrides_it(tmp_path, small):
    folder = sentence_folder(tmp_path, small, [TRANSFORMER, POOLING], {"pooling_mode_max_tokens": True})
    said = folder_usage(folder)
    assert said["pooling"][0] == "max" and said["normalize"][0] is False
    with pytest.raises(CiteflowError, match="asks for max pooling.*set train_encoder.pooling=cls or mean"):
        resolve_usage({}, said)
    assert resolve_usage({"pooling": "mean"}, said).values["pooling"] == "mean"


def test_a_module_citeflow_cannot_reproduce_is_refused(tmp_path, small):
    dense = {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    folder = sentence_folder(tmp_path, small, [TRANSFORMER, POOLING, dense], {"pooling_mode_cls_token": True})
    with pytest.raises(CiteflowError, match="Dense.*without modules.json"):
        folder_usage(folder)
    (folder / "modules.json").write_text("[not json")
    with pytest.raises(CiteflowError, match="modules.json is not readable JSON"):
        folder_usage(folder)


def test_the_train_stage_takes_the_folders_usage_and_says_when_a_setting_overrides_it(caplog):
    from citeflow.jobs.train_encoder import encoder_usage

    folder = str(real_encoder())
    assert encoder_usage(TrainEncoderConfig(model=folder)).values == {
        "pooling": "mean",
        "max_length": 256,
        "normalize": True,
        "inference_max_length": 256,
    }
    with caplog.at_level(logging.WARNING, logger="citeflow"):
        usage = encoder_usage(TrainEncoderConfig(model=folder, pooling="cls", max_length=128))
    # a shorter training length is a cost knob: the model still embeds at the folder's 256, and nothing is overridden
    assert usage.values == {"pooling": "cls", "max_length": 128, "normalize": True, "inference_max_length": 256}
    assert usage.sources["inference_max_length"] == "model folder sentence_bert_config.json max_seq_length"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "train_encoder.pooling=cls overrides the model folder's mean (1_Pooling/config.json)" in m for m in warned
    )
    assert not any("max_length" in m for m in warned), warned
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="citeflow"):
        usage = encoder_usage(TrainEncoderConfig(model=folder, max_length=64, inference_max_length=200))
    assert (usage.values["max_length"], usage.values["inference_max_length"]) == (64, 200)
    assert any(
        "train_encoder.inference_max_length=200 overrides the model folder's 256" in r.getMessage()
        for r in caplog.records
    )
    assert encoder_usage(TrainEncoderConfig(model="small")).values == {
        "pooling": "cls",
        "max_length": 512,
        "normalize": False,
        "inference_max_length": 512,
    }
    # the small model is built at its training length, which is then its own
    assert encoder_usage(TrainEncoderConfig(model="small", max_length=96)).values["inference_max_length"] == 96


def test_a_plain_folder_embeds_at_its_tokenizers_limit(tmp_path):
    """Without sentence-transformers files the base model's length is its tokenizer's `model_max_length`; the
    "no limit" sentinel transformers writes is no length."""
    from citeflow.jobs.train_encoder import encoder_usage
    from citeflow.models.encoder.folder import inference_length, tokenizer_limit

    plain = tmp_path / "plain"
    shutil.copytree(real_encoder(), plain)
    for name in ("modules.json", "sentence_bert_config.json"):
        (plain / name).unlink()
    config = json.loads((plain / "tokenizer_config.json").read_text())
    (plain / "tokenizer_config.json").write_text(json.dumps({**config, "model_max_length": 384}))
    assert tokenizer_limit(plain) == inference_length(plain) == (384, "tokenizer_config.json model_max_length")
    usage = encoder_usage(TrainEncoderConfig(model=str(plain), max_length=128))
    assert (usage.values["max_length"], usage.values["inference_max_length"]) == (128, 384)
    (plain / "tokenizer_config.json").write_text(json.dumps({**config, "model_max_length": int(1e30)}))
    assert tokenizer_limit(plain) is None and inference_length(plain) is None
    assert encoder_usage(TrainEncoderConfig(model=str(plain))).values["inference_max_length"] == 512


@pytest.mark.parametrize(("pooling", "normalize"), [("cls", False), ("mean", True)])
def test_the_written_layout_makes_sentence_transformers_embed_as_citeflow(tmp_path, small, caplog, pooling, normalize):
    from transformers import AutoModel

    folder = tmp_path / "export"
    shutil.copytree(small, folder)
    usage = {"pooling": pooling, "max_length": 40, "normalize": normalize}
    write_sentence_transformers_files(folder, **usage, dimension=32)
    assert {k: v for k, (v, _) in folder_usage(folder).items()} == usage  # citeflow reads back what it wrote
    with caplog.at_level(logging.INFO):
        model = st_model(folder)
    # no pooler reported missing: sentence-transformers loads the transformer as citeflow does
    assert not [r for r in caplog.records if "LOAD REPORT" in r.getMessage()]
    assert model[1].pooling_mode == pooling and model.max_seq_length == 40
    assert [type(m).__name__ for m in model][2:] == (["Normalize"] if normalize else [])
    expected = model.encode(texts_of(model.tokenizer), batch_size=2, convert_to_numpy=True)
    ours = citeflow_vectors(folder, tmp_path / "e", usage)
    assert np.abs(ours - expected).max() <= 1e-5
    AutoModel.from_pretrained(str(folder), local_files_only=True)


def test_the_written_layout_of_a_trained_real_encoder_reproduces_its_mean_and_normalisation(tmp_path, minilm_trained):
    usage = {"pooling": "mean", "max_length": 256, "normalize": True}
    folder = tmp_path / "export"
    shutil.copytree(minilm_trained, folder)
    write_sentence_transformers_files(folder, **usage, dimension=384)
    model = st_model(folder)
    expected = model.encode(texts_of(model.tokenizer), batch_size=2, convert_to_numpy=True)
    assert np.abs(citeflow_vectors(folder, tmp_path / "e", usage) - expected).max() <= 1e-5
    # and they are the upstream model's own vectors: citeflow's save lost nothing sentence-transformers uses
    upstream = st_model(real_encoder()).encode(texts_of(model.tokenizer), batch_size=2, convert_to_numpy=True)
    assert np.abs(expected - upstream).max() <= 1e-5


def load_records(caplog, folder: Path) -> tuple[list[str], list[str]]:
    """(transformers' loading reports, citeflow's lines) logged while citeflow loads `folder`."""
    caplog.clear()
    with caplog.at_level(logging.INFO):
        load(str(folder))
    reports = [
        r.getMessage() for r in caplog.records if r.name.startswith("transformers") and "LOAD REPORT" in r.getMessage()
    ]
    return reports, [r.getMessage() for r in caplog.records if r.name == "citeflow"]


def test_loading_the_real_encoder_says_one_line_about_its_pooler_not_a_table(caplog):
    reports, lines = load_records(caplog, real_encoder())
    assert reports == []
    assert len(lines) == 1 and "pooler weights (2 tensors) are left out on purpose" in lines[0]


def test_other_unused_weights_are_still_reported_as_transformers_reports_them(tmp_path, small, caplog):
    from safetensors.numpy import load_file, save_file

    folder = tmp_path / "extra"
    shutil.copytree(small, folder)
    weights = load_file(str(folder / "model.safetensors"))
    weights["pooler.dense.bias"] = np.zeros(32, np.float32)
    weights["extra_head.weight"] = np.zeros((2, 32), np.float32)
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    reports, lines = load_records(caplog, folder)
    assert len(reports) == 1 and "extra_head.weight" in reports[0] and "UNEXPECTED" in reports[0]
    assert lines == []


def test_the_real_encoder_is_skipped_when_absent_locally_and_fails_under_ci(monkeypatch):
    monkeypatch.setattr(real_encoder_module.util, "find_spec", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        real_encoder()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="not installed"):
        real_encoder()
