"""A model folder's sentence-transformers files: what they say, and writing them.

- `folder_usage(model_dir)` / `resolve_usage(chosen, said)`: what a model folder's sentence-transformers files
  say about pooling, max length and normalisation, and the values a run uses (setting > folder > fallback).
- `write_sentence_transformers_files(folder, ...)`: `modules.json`, `1_Pooling/config.json` and
  `sentence_bert_config.json`, so that `SentenceTransformer(folder)` embeds as citeflow does.
- `check_model_folder(model_dir)`: everything a run reads of a folder (config, weights, tokenizer, usage),
  opened before any stage runs.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from citeflow.config import ENCODER_MAX_LENGTH, ENCODER_USAGE_FALLBACK
from citeflow.errors import CiteflowError
from citeflow.models.encoder.model import POOLINGS, is_bert

CITEFLOW_FILE = "citeflow.json"
MODULES_FILE = "modules.json"
ST_CONFIG_FILE = "sentence_bert_config.json"
POOLING_DIR = "1_Pooling"
# sentence-transformers' pooling modes, in the legacy 1_Pooling/config.json keys, by citeflow's names
_LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
# sentence-transformers module classes citeflow reproduces; any other module would change the embedding
_MODULE_KINDS = ("Transformer", "Pooling", "Normalize")


@dataclass(frozen=True)
class Usage:
    """How a run uses its encoder: `values` (pooling, max_length, normalize), `sources` (where each value came
    from, for the manifest) and `overridden` (what the model folder said where a setting won)."""

    values: dict[str, Any]
    sources: dict[str, str]
    overridden: dict[str, Any]


def folder_usage(model_dir: str | Path) -> dict[str, tuple[Any, str]]:
    """What a model folder's sentence-transformers files say: {setting: (value, the file that says it)} for
    `pooling`, `max_length` and `normalize`; {} for a folder without `modules.json` (a plain Hugging Face folder,
    or one sentence-transformers would not read as its own either).

    Both layouts are read: the legacy one (`pooling_mode_mean_tokens: true`, `max_seq_length` in
    `sentence_bert_config.json`) and that of sentence-transformers 5 and later (`pooling_mode: "mean"`, the
    length in the tokenizer's `model_max_length`). A pooling mode citeflow lacks (max, several modes) is returned
    as its name for `resolve_usage` to refuse; a module or input rule citeflow cannot reproduce is refused here.
    """
    folder = Path(model_dir)
    modules_path = folder / MODULES_FILE
    if not modules_path.is_file():
        return {}
    modules = _read_json(modules_path)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise CiteflowError(f"{modules_path} is not a sentence-transformers module list; fix or remove it")
    said: dict[str, tuple[Any, str]] = {}
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    for module, kind in zip(modules, kinds, strict=True):
        if kind not in _MODULE_KINDS:
            raise CiteflowError(
                f"{modules_path} lists {module.get('type')!r}, which changes the embedding in a way citeflow does "
                "not reproduce (it applies Transformer, Pooling and Normalize only); start from a copy of the "
                f"folder without {MODULES_FILE} to use its transformer alone"
            )
        if kind == "Transformer" and module.get("path", "") not in ("", "."):
            raise CiteflowError(
                f"{modules_path}: the transformer lives in {module['path']}/; set train_encoder.model to "
                f"{folder / module['path']}"
            )
    normalize = "Normalize" in kinds
    said["normalize"] = (normalize, f"{MODULES_FILE} ({'a' if normalize else 'no'} Normalize module)")
    pooling = next((m for m, k in zip(modules, kinds, strict=True) if k == "Pooling"), None)
    if pooling is not None:
        config_path = folder / str(pooling.get("path") or POOLING_DIR) / "config.json"
        if config_path.is_file():
            said["pooling"] = (_pooling_mode(_read_json(config_path)), str(config_path.relative_to(folder)))
    st_config = _read_json(folder / ST_CONFIG_FILE) if (folder / ST_CONFIG_FILE).is_file() else {}
    if st_config.get("do_lower_case"):
        raise CiteflowError(
            f"{folder / ST_CONFIG_FILE} asks for lower-casing the input, which citeflow does not do; use a "
            "lower-casing tokenizer instead, or set do_lower_case to false"
        )
    if st_config.get("max_seq_length"):
        said["max_length"] = (int(st_config["max_seq_length"]), f"{ST_CONFIG_FILE} max_seq_length")
    elif limit := tokenizer_limit(folder):
        said["max_length"] = limit
    about = folder / "config_sentence_transformers.json"
    if about.is_file() and _read_json(about).get("default_prompt_name"):
        raise CiteflowError(
            f"{about} puts a default prompt before every text, which citeflow does not; remove default_prompt_name"
        )
    return said


def tokenizer_limit(model_dir: str | Path) -> tuple[int, str] | None:
    """(the tokenizer's `model_max_length`, the file that says it), or None where it names no usable limit (absent,
    or transformers' "no limit" sentinel)."""
    tokenizer_config = Path(model_dir) / "tokenizer_config.json"
    length = _read_json(tokenizer_config).get("model_max_length") if tokenizer_config.is_file() else None
    if isinstance(length, int) and 0 < length <= ENCODER_MAX_LENGTH:
        return length, "tokenizer_config.json model_max_length"
    return None


def inference_length(model_dir: str | Path) -> tuple[int, str] | None:
    """The length a model folder embeds at, as it says it: its sentence-transformers `max_seq_length` (or the
    tokenizer's limit in a sentence-transformers folder that names none: `folder_usage`), else, in a plain Hugging
    Face folder, its tokenizer's limit; None where nothing says."""
    return folder_usage(model_dir).get("max_length") or tokenizer_limit(model_dir)


def _pooling_mode(config: dict) -> str:
    """1_Pooling/config.json's mode by citeflow's name (cls, mean), or the names of what it asks, joined by +."""
    mode = config.get("pooling_mode")
    if mode is not None:
        modes = [mode] if isinstance(mode, str) else list(mode)
        names = {"cls": "cls", "cls_token": "cls", "mean": "mean", "mean_tokens": "mean"}
        modes = [names.get(str(m), str(m)) for m in modes]
    else:
        modes = [name for key, name in _LEGACY_POOLING_KEYS.items() if config.get(key)]
    return "+".join(modes) if modes else "none"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CiteflowError(f"{path} is not readable JSON ({exc}); fix or remove it") from None


def resolve_usage(chosen: dict[str, Any], said: dict[str, tuple[Any, str]]) -> Usage:
    """The pooling, max length and normalisation a run uses: a setting given (`chosen`, not None) wins, then what
    the model folder says (`said`, from `folder_usage`), then `ENCODER_USAGE_FALLBACK`."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    overridden: dict[str, Any] = {}
    for name, fallback in ENCODER_USAGE_FALLBACK.items():
        if chosen.get(name) is not None:
            values[name], sources[name] = chosen[name], f"train_encoder.{name} (--set or profile)"
            if name in said and said[name][0] != chosen[name]:
                overridden[name] = said[name][0]
        elif name in said:
            values[name], sources[name] = said[name][0], f"model folder {said[name][1]}"
        else:
            values[name], sources[name] = fallback, "default"
    if values["pooling"] not in POOLINGS:
        raise CiteflowError(
            f"the model folder's {said['pooling'][1]} asks for {values['pooling']} pooling, which citeflow does "
            f"not implement; set train_encoder.pooling={' or '.join(POOLINGS)} to use it anyway"
        )
    if not 1 <= values["max_length"] <= ENCODER_MAX_LENGTH:
        raise CiteflowError(
            f"the model folder's {said['max_length'][1]} is {values['max_length']}, beyond citeflow's "
            f"{ENCODER_MAX_LENGTH}; set train_encoder.max_length"
        )
    return Usage(values, sources, overridden)


def write_sentence_transformers_files(
    folder: str | Path, *, pooling: str, max_length: int, normalize: bool, dimension: int
) -> None:
    """The sentence-transformers layout beside a Hugging Face model folder's own files, so that
    `SentenceTransformer(folder)` embeds as citeflow does: Transformer -> Pooling (`pooling`) [-> Normalize].

    Written in the legacy layout, which sentence-transformers has read since version 2 (6 reads it too). For
    BERT without pooler weights in its checkpoint (citeflow saves none) `model_args` asks for the transformer
    without a pooler, as citeflow loads it, so nothing is reported missing.
    """
    folder = Path(folder)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": POOLING_DIR, "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    else:
        shutil.rmtree(folder / "2_Normalize", ignore_errors=True)
    (folder / MODULES_FILE).write_text(json.dumps(modules, indent=2) + "\n")
    (folder / POOLING_DIR).mkdir(exist_ok=True)
    (folder / POOLING_DIR / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": dimension,
                # the four keys every sentence-transformers version reads; the one of `pooling` true
                **{key: _LEGACY_POOLING_KEYS[key] == pooling for key in list(_LEGACY_POOLING_KEYS)[:4]},
            },
            indent=2,
        )
        + "\n"
    )
    st_config: dict[str, Any] = {"max_seq_length": max_length, "do_lower_case": False}
    if is_bert(folder) and not _has_weights(folder, "pooler."):
        st_config["model_args"] = {"add_pooling_layer": False}
    (folder / ST_CONFIG_FILE).write_text(json.dumps(st_config, indent=2) + "\n")


def _has_weights(folder: Path, prefix: str) -> bool:
    """Whether the folder's safetensors checkpoint (one file or shards) holds a tensor named `prefix...`."""
    from safetensors import safe_open

    index = folder / "model.safetensors.index.json"
    if index.is_file():
        names = list(_read_json(index).get("weight_map", {}))
    elif not (folder / "model.safetensors").is_file():
        return False  # a PyTorch-format checkpoint: citeflow saves safetensors, so this is not one of its own
    else:
        with safe_open(str(folder / "model.safetensors"), framework="np") as weights:
            names = list(weights.keys())
    return any(name.startswith(prefix) for name in names)


def check_model_folder(model_dir: str) -> Path:
    """Everything a run will read of a model folder, opened before any stage runs (`citeflow.jobs.pipeline.preflight`),
    so a broken folder is one line, not a child's traceback after hours of Spark and PBG: the config, weights
    that are there and whose header agrees with the config (dtype, the word embeddings' shape), a tokenizer that
    loads and fits the config's vocabulary, and the sentence-transformers files' pooling and max length."""
    from citeflow.models.encoder.model import check_model_dir

    path = check_model_dir(model_dir)
    where = f"model folder {model_dir!r}"
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CiteflowError(f"{where}: config.json does not read as JSON ({exc})") from None
    if not isinstance(config, dict):
        raise CiteflowError(f"{where}: config.json is not a JSON object")
    _check_weight_files(path, where, config)
    _check_tokenizer(path, where, config)
    folder_usage(path)  # pooling and max length: a module or pooling citeflow cannot reproduce is one line
    return path


def _check_weight_files(path: Path, where: str, config: dict) -> None:
    """Weights present; each safetensors file's header readable, and the word embeddings floating point, of the
    config's shape (vocab_size, hidden_size)."""
    safetensors = sorted(path.glob("*.safetensors"))
    if not safetensors and not any(path.glob("*.bin")):
        raise CiteflowError(f"{where} has no weights: no model.safetensors (or pytorch_model.bin) beside config.json")
    from safetensors import safe_open

    from citeflow.models.encoder.model import check_weights

    vocab, hidden = config.get("vocab_size"), config.get("hidden_size")
    for file in safetensors:
        try:
            with safe_open(str(file), framework="pt") as weights:
                for key in weights.keys():  # noqa: SIM118 - safe_open has keys(), not iteration
                    if not key.endswith("word_embeddings.weight"):
                        continue
                    tensor = weights.get_slice(key)
                    if not tensor.get_dtype().startswith(("F", "BF")):
                        raise CiteflowError(f"{where}: {file.name}'s {key} is {tensor.get_dtype()}, not floating point")
                    if vocab and hidden:
                        shape = list(tensor.get_shape())
                        if shape != [vocab, hidden]:
                            raise CiteflowError(
                                f"{where}: {file.name}'s {key} is {shape[0]:,} x {shape[-1]:,}, but config.json says "
                                f"vocab_size {vocab:,} and hidden_size {hidden:,}"
                            )
        except CiteflowError:
            raise
        except Exception as exc:  # noqa: BLE001 - a header safetensors cannot read: the file is damaged
            raise CiteflowError(f"{where}: {file.name} is not a readable safetensors file ({exc})") from None
    check_weights(path)


def _check_tokenizer(path: Path, where: str, config: dict) -> None:
    """The tokenizer loads from the folder, and every id it gives has a row in the word embeddings."""
    from transformers import AutoTokenizer

    from citeflow.models.encoder.model import _quiet_transformers

    _quiet_transformers()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - transformers' errors for a missing or bad tokenizer vary
        raise CiteflowError(f"{where}: its tokenizer does not load ({type(exc).__name__}: {exc})"[:400]) from None
    vocab = config.get("vocab_size")
    if isinstance(vocab, int) and len(tokenizer) > vocab:
        raise CiteflowError(
            f"{where}: its tokenizer has {len(tokenizer):,} tokens but config.json's vocab_size is {vocab:,}: "
            "token ids past the embeddings would fail mid-training; give the tokenizer the model was trained with"
        )
