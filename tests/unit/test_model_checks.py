"""A broken `train_encoder.model` folder is one line before any stage runs
(`citeflow.models.encoder.folder.check_model_folder`,
called by `citeflow.jobs.pipeline.preflight`), not a child's traceback after the graph side was built."""

import json
import shutil

import pytest

from citeflow.errors import CiteflowError
from citeflow.models.encoder.folder import check_model_folder
from citeflow.models.encoder.model import build_small
from tests.unit.test_cli import run_cli

TEXTS = [f"paper {i} about graph embeddings and citation {i % 7} with words {i * 3}" for i in range(60)]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    small = dict(hidden=16, layers=1, heads=2, intermediate=32, max_length=32, seed=0)
    good = build_small(TEXTS, root / "good", vocab_size=120, **small)
    bigger = build_small(TEXTS * 3 + [f"token{i}" for i in range(400)], root / "bigger", vocab_size=600, **small)
    return root, good, bigger


def broken(root, good, name, change):
    folder = root / name
    if not folder.exists():
        shutil.copytree(good, folder)
        change(folder)
    return folder


def no_weights(folder):
    (folder / "model.safetensors").unlink()


def damaged_weights(folder):
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")


def smaller_config(folder):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "vocab_size": 50}))


def bad_pooling(folder):
    (folder / "modules.json").write_text(json.dumps([{"idx": 0, "path": "", "type": "x.models.Dense"}]))


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        ("no_weights", no_weights, "has no weights: no model.safetensors"),
        ("damaged", damaged_weights, "model.safetensors is not a readable safetensors file"),
        ("config", smaller_config, "but config.json says vocab_size 50"),
        ("pooling", bad_pooling, "modules.json"),
    ],
)
def test_a_broken_model_folder_is_one_line(folders, name, change, message):
    root, good, _ = folders
    with pytest.raises(CiteflowError, match=message) as refused:
        check_model_folder(str(broken(root, good, name, change)))
    assert "\n" not in str(refused.value)


def test_a_tokenizer_larger_than_the_embeddings_is_one_line(folders):
    root, good, bigger = folders

    def swap(folder):
        for file in bigger.iterdir():
            if file.name.startswith(("tokenizer", "vocab", "special_tokens")):
                shutil.copy(file, folder / file.name)

    folder = broken(root, good, "tokenizer", swap)
    too_many = r"its tokenizer has [\d,]+ tokens but config.json's vocab_size is [\d,]+: "
    with pytest.raises(CiteflowError, match=too_many):
        check_model_folder(str(folder))
    check_model_folder(str(good))  # the folders it was made from pass


def test_the_run_refuses_a_broken_model_before_any_stage(folders, tmp_path):
    root, good, _ = folders
    corpus = tmp_path / "corpus" / "metadata"
    corpus.mkdir(parents=True)
    (corpus / "metadata_0.jsonl").write_text('{"paper_id": "1"}\n')
    folder = broken(root, good, "no_weights", no_weights)
    done = run_cli(
        "run",
        "--snapshot",
        "ok",
        "--corpus",
        str(corpus.parent),
        "--artifacts",
        str(tmp_path / "a"),
        "--scidocs",
        str(tmp_path),
        "--set",
        f"train_encoder.model={folder}",
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "has no weights" in done.stderr and not (tmp_path / "a").exists()
