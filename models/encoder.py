"""The paper encoder: any local Hugging Face encoder, or a small BERT built for demos and tests (SPEC §5).

- `load(model_dir)`: tokenizer and model from a local directory only (SciBERT,
  BERT, a previous citeflow model); a hub name is refused with a clear error.
- `build_small(texts, out, ...)`: trains a lower-cased WordPiece tokenizer on
  the given texts, builds a BertModel from a config (seeded init) and saves
  both as a normal Hugging Face directory.
- `paper_text(title, abstract, sep)`: SPECTER's input, `title [SEP] abstract`.
- `pool(hidden, mask, how, normalize)`: `[CLS]` (the final hidden state of the
  first token, SPECTER/SciNCL) or the masked mean of the tokens, optionally
  scaled to unit length.
- `folder_usage(model_dir)` / `resolve_usage(chosen, said)`: what a model
  folder's sentence-transformers files say about pooling, max length and
  normalisation, and the values a run uses (setting > folder > fallback).
- `write_sentence_transformers_files(folder, ...)`: `modules.json`,
  `1_Pooling/config.json` and `sentence_bert_config.json`, so that
  `SentenceTransformer(folder)` embeds as citeflow does.
- `TokenStore`: token ids of many papers in two memory-mapped arrays
  (offsets, flat ids), written in batches, so training never holds all
  texts or all token lists in Python objects.
- `group_by_length`, `shuffle_groups`, `padding_share`: batches of papers of
  similar length (a batch is padded to its longest member, so mixing short
  and long papers at random spends most of the compute on padding), as
  Hugging Face's `group_by_length` does: sort within mega-batches of a
  seeded permutation, so the data order stays random between batches.
  `collate_pieces` splits one micro-batch's papers (a triplet's three papers
  differ in length whatever the grouping) into parts of similar length that
  the encoder runs one after the other.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from citeflow.config import ENCODER_MAX_LENGTH, ENCODER_USAGE_FALLBACK
from citeflow.errors import CiteflowError

CITEFLOW_FILE = "citeflow.json"
MODULES_FILE = "modules.json"
ST_CONFIG_FILE = "sentence_bert_config.json"
POOLING_DIR = "1_Pooling"
# Checkpoint weights citeflow never loads: BERT's pooler (built with add_pooling_layer=False, as citeflow pools
# the hidden states itself) and its pre-training heads, which checkpoints such as SciBERT's still carry.
UNUSED_HEADS = ("pooler.", "cls.predictions.", "cls.seq_relationship.")
# The messages in which transformers reports a checkpoint's unused or missing weights (5.x, then 4.x wording).
_LOAD_REPORT_MARKS = ("LOAD REPORT", "were not used when initializing")
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

log = logging.getLogger("citeflow")


def paper_text(title: str | None, abstract: str | None, sep: str) -> str:
    return f"{(title or '').strip()} {sep} {(abstract or '').strip()}".strip()


def _quiet_transformers() -> None:
    """No per-file progress bars from transformers: citeflow shows its own progress."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def check_model_dir(model_dir: str) -> Path:
    if not model_dir:
        raise CiteflowError(
            "train_encoder.model is not set: the full and pretrained-cpu profiles train a real encoder, as SPECTER "
            "and SciNCL start from SciBERT; set --set train_encoder.model=/path/to/scibert_scivocab_uncased (a local "
            "Hugging Face folder), or train_encoder.model=small for the demo's small BERT"
        )
    path = Path(model_dir)
    if not path.is_dir():
        raise CiteflowError(
            f"model directory {model_dir!r} does not exist; give a local Hugging Face model folder "
            "(config.json, weights, tokenizer), e.g. a downloaded scibert_scivocab_uncased, "
            "or 'small' for a small BERT trained on the snapshot"
        )
    if not (path / "config.json").is_file():
        raise CiteflowError(f"{model_dir!r} has no config.json: not a Hugging Face model folder")
    check_weights(path)
    return path


def check_weights(path: Path) -> None:
    """A folder whose weights are pickles (`*.bin`, no safetensors) is loaded only as weights: each file must
    load with torch's weights-only unpickler, which runs no code; one that does not is refused with one line
    before any stage runs (transformers would refuse it too, hours later, in the middle of the training)."""
    if any(path.glob("*.safetensors")):
        return
    for weights in sorted(path.glob("*.bin")):
        import torch

        try:
            try:
                torch.load(weights, map_location="cpu", weights_only=True, mmap=True)  # no copy of big weights
            except RuntimeError as exc:
                if "mmap" not in str(exc):
                    raise
                torch.load(weights, map_location="cpu", weights_only=True)  # a file of torch's legacy format
        except Exception as exc:  # noqa: BLE001 - whatever the unpickler refuses, the file is not plain weights
            import pickle

            why = (
                "it holds objects other than tensors, which unpickling it could run as code"
                if isinstance(exc, pickle.UnpicklingError)
                else f"it does not load as weights ({type(exc).__name__})"
            )
            raise CiteflowError(
                f"model folder {str(path)!r}: {weights.name} is refused: {why}; give a folder with "
                "model.safetensors, or weights saved by torch.save of a state dict"
            ) from None


def load(model_dir: str, *, tokenizer_only: bool = False):
    """(tokenizer, model) from a local directory; nothing is fetched from a hub."""
    from transformers import AutoTokenizer

    path = check_model_dir(model_dir)
    _quiet_transformers()
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if tokenizer_only:
        return tokenizer, None
    extra = {"add_pooling_layer": False} if _is_bert(path) else {}
    try:
        # PyTorch's fused scaled-dot-product attention (flash / memory-efficient kernels on GPU)
        model = _from_pretrained(path, attn_implementation="sdpa", **extra)
    except (ValueError, ImportError):  # an architecture without an SDPA path: its default attention
        model = _from_pretrained(path, **extra)
    return tokenizer, model


class _HoldLoadReport(logging.Filter):
    """Keeps transformers' weight-loading report back, so the caller decides whether it is news."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if any(mark in record.getMessage() for mark in _LOAD_REPORT_MARKS):
            self.held.append(record)
            return False
        return True


def _from_pretrained(path: Path, **kwargs):
    """AutoModel from a local folder. When the only weights it leaves unused are heads citeflow never loads
    (`UNUSED_HEADS`), transformers' report of them (a table of UNEXPECTED keys that reads like a failure) is
    replaced by one line; any other unused, missing or mismatched weight is reported as transformers words it.
    """
    from transformers import AutoModel

    reporter = logging.getLogger("transformers.modeling_utils")
    hold = _HoldLoadReport()
    reporter.addFilter(hold)
    try:
        model, info = AutoModel.from_pretrained(str(path), local_files_only=True, output_loading_info=True, **kwargs)
    finally:
        reporter.removeFilter(hold)
    unexpected = sorted(info.get("unexpected_keys") or ())
    expected = (
        unexpected
        and not info.get("missing_keys")
        and not info.get("mismatched_keys")
        and all(key.startswith(UNUSED_HEADS) for key in unexpected)
    )
    if expected:
        heads = [head.rstrip(".") for head in UNUSED_HEADS if any(key.startswith(head) for key in unexpected)]
        log.info(
            "%s: its %s weights (%d tensors) are left out on purpose: citeflow pools the last hidden states itself",
            path,
            " and ".join(heads),
            len(unexpected),
        )
    else:
        for record in hold.held:
            reporter.handle(record)
    return model


def _is_bert(path: Path) -> bool:
    return json.loads((path / "config.json").read_text()).get("model_type") == "bert"


def build_small(
    texts: Iterable[str],
    out: Path,
    *,
    vocab_size: int,
    hidden: int,
    layers: int,
    heads: int,
    intermediate: int,
    max_length: int,
    seed: int,
    dropout: float = 0.1,
) -> Path:
    """Train a WordPiece tokenizer on `texts`, build a seeded small BERT, save both under `out`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, BertTokenizerFast

    _quiet_transformers()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, special_tokens=special, min_frequency=2, show_progress=False
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.model = models.WordPiece(canonical_vocab(tok.get_vocab(), special), unk_token="[UNK]")
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    tokenizer = BertTokenizerFast(tokenizer_object=tok, do_lower_case=True, model_max_length=max_length)
    config = BertConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        max_position_embeddings=max(512, max_length),
        pad_token_id=tok.token_to_id("[PAD]"),
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    torch.manual_seed(seed)
    model = BertModel(config, add_pooling_layer=False)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    return out


def canonical_vocab(vocab: dict[str, int], special: list[str]) -> dict[str, int]:
    """The trained vocabulary with ids in a fixed order: special tokens first, as given, then the rest sorted.

    HF tokenizers' WordPiece trainer breaks frequency ties in hash-map order, so builds on the same texts
    pick the same tokens (three builds on 20k training texts: identical sets) under different ids, and a
    seeded model then starts from different embedding rows. WordPiece matches tokens by string (longest
    prefix in the vocabulary), so renumbering changes no tokenisation.
    """
    rest = sorted(token for token in vocab if token not in special)
    return {token: i for i, token in enumerate([t for t in special if t in vocab] + rest)}


def pool(hidden, mask, how: str, normalize: bool = False):
    """Paper embeddings from the final hidden states: `cls` (token 0) or masked `mean`; with `normalize`, scaled
    to unit L2 length (sentence-transformers' Normalize module)."""
    if how == "cls":
        vectors = hidden[:, 0]
    elif how == "mean":
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        vectors = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)
    else:
        raise ValueError(f"pooling must be cls or mean, not {how!r}")
    if normalize:
        import torch.nn.functional as F

        vectors = F.normalize(vectors, p=2, dim=-1)
    return vectors


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
    else:
        tokenizer_config = folder / "tokenizer_config.json"
        length = _read_json(tokenizer_config).get("model_max_length") if tokenizer_config.is_file() else None
        if isinstance(length, int) and 0 < length <= ENCODER_MAX_LENGTH:  # not the "no limit" sentinel
            said["max_length"] = (length, "tokenizer_config.json model_max_length")
    about = folder / "config_sentence_transformers.json"
    if about.is_file() and _read_json(about).get("default_prompt_name"):
        raise CiteflowError(
            f"{about} puts a default prompt before every text, which citeflow does not; remove default_prompt_name"
        )
    return said


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
    if values["pooling"] not in ("cls", "mean"):
        raise CiteflowError(
            f"the model folder's {said['pooling'][1]} asks for {values['pooling']} pooling, which citeflow does "
            "not implement; set train_encoder.pooling=cls or mean to use it anyway"
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
                "pooling_mode_cls_token": pooling == "cls",
                "pooling_mode_mean_tokens": pooling == "mean",
                "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False,
            },
            indent=2,
        )
        + "\n"
    )
    st_config: dict[str, Any] = {"max_seq_length": max_length, "do_lower_case": False}
    if _is_bert(folder) and not _has_weights(folder, "pooler."):
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


class TokenStore:
    """Token ids of papers, row i = the i-th corpus id of `ids` (sorted): `offsets.npy` and `tokens.npy`."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.ids = np.load(self.folder / "ids.npy", mmap_mode="r")
        self.offsets = np.load(self.folder / "offsets.npy", mmap_mode="r")
        self.tokens = np.load(self.folder / "tokens.npy", mmap_mode="r")

    def __len__(self) -> int:
        return len(self.ids)

    def rows(self, corpus_ids: np.ndarray) -> np.ndarray:
        at = np.searchsorted(self.ids, corpus_ids)
        bad = (at >= len(self.ids)) | (np.asarray(self.ids)[np.minimum(at, len(self.ids) - 1)] != corpus_ids)
        if bad.any():
            raise CiteflowError(
                f"{int(bad.sum())} triplet papers have no text (e.g. corpus id "
                f"{int(corpus_ids[bad][0])}); training_texts and triplets disagree"
            )
        return at

    def get(self, row: int) -> np.ndarray:
        return np.asarray(self.tokens[self.offsets[row] : self.offsets[row + 1]])

    @staticmethod
    def write(
        folder: Path,
        batches: Iterator[tuple[np.ndarray, list[str | None], list[str | None]]],
        tokenizer,
        max_length: int,
        total_rows: int,
    ) -> TokenStore:
        """Tokenise (ids, titles, abstracts) batches into memory-mapped arrays, written via a temp folder."""
        folder = Path(folder)
        tmp = folder.with_name(folder.name + ".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        ids_out = np.lib.format.open_memmap(tmp / "ids.npy", mode="w+", dtype=np.int64, shape=(total_rows,))
        offsets = np.lib.format.open_memmap(tmp / "offsets.npy", mode="w+", dtype=np.int64, shape=(total_rows + 1,))
        offsets[0] = 0
        chunks_path = tmp / "tokens.bin"
        row = 0
        with open(chunks_path, "wb") as fh:
            for ids, titles, abstracts in batches:
                texts = [paper_text(t, a, tokenizer.sep_token) for t, a in zip(titles, abstracts, strict=True)]
                encoded = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
                lengths = np.fromiter((len(e) for e in encoded), dtype=np.int64, count=len(encoded))
                flat = np.fromiter((t for e in encoded for t in e), dtype=np.int32, count=int(lengths.sum()))
                fh.write(flat.tobytes())
                ids_out[row : row + len(ids)] = ids
                offsets[row + 1 : row + 1 + len(ids)] = offsets[row] + np.cumsum(lengths)
                row += len(ids)
        if row != total_rows:
            raise RuntimeError(f"tokenised {row} papers, expected {total_rows}")
        if total_rows and not (np.diff(ids_out) > 0).all():
            raise RuntimeError("token store ids must be sorted and distinct")
        flat = np.memmap(chunks_path, dtype=np.int32, mode="r") if offsets[-1] else np.zeros(0, np.int32)
        tokens = np.lib.format.open_memmap(tmp / "tokens.npy", mode="w+", dtype=np.int32, shape=(int(offsets[-1]),))
        tokens[:] = flat
        tokens.flush()
        ids_out.flush()
        offsets.flush()
        del flat, tokens, ids_out, offsets
        os.remove(chunks_path)
        if folder.exists():
            import shutil

            shutil.rmtree(folder)
        os.replace(tmp, folder)
        return TokenStore(folder)


def collate(sequences: list[np.ndarray], pad_id: int):
    """Pad token id arrays to the longest: (input_ids, attention_mask) int64 tensors."""
    import torch

    longest = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), longest), dtype=torch.long)
    for i, s in enumerate(sequences):
        ids[i, : len(s)] = torch.from_numpy(s.astype(np.int64))
        mask[i, : len(s)] = 1
    return ids, mask


def collate_pieces(
    store: TokenStore, rows: np.ndarray, pad_id: int, pieces: int, multiple: int = 1, limit: int | None = None
):
    """Token-store rows collated in `pieces` parts of similar length (`length_pieces`), each padded to a
    multiple of `multiple` tokens, at most `limit` (`collate_rows`).

    Returns ([(input_ids, attention_mask) per part], inverse): concatenating the parts' outputs and taking
    rows `inverse` restores the order of `rows`.
    """
    import torch

    offsets = np.asarray(store.offsets)
    parts = length_pieces(offsets[rows + 1] - offsets[rows], pieces)
    inverse = np.argsort(np.concatenate(parts), kind="stable")
    return [collate_rows(store, rows[part], pad_id, multiple, limit) for part in parts], torch.from_numpy(inverse)


def padded_length(longest: int, multiple: int = 1, limit: int | None = None) -> int:
    """The width a batch whose longest paper has `longest` tokens is padded to: rounded up to a multiple of
    `multiple`, but never beyond `limit` (the model's positions) nor below `longest`."""
    rounded = -(-longest // multiple) * multiple
    return max(longest, min(rounded, limit)) if limit else rounded


def collate_rows(store: TokenStore, rows: np.ndarray, pad_id: int, multiple: int = 1, limit: int | None = None):
    """`collate` of token-store rows, gathered with one vectorised read instead of a Python loop per paper;
    the batch is padded to its longest paper rounded up to a multiple of `multiple` tokens (`pad_to_multiple`:
    a GPU runs a bounded set of shapes much faster than a new shape each step), but never beyond `limit` (the
    model's positions) nor below its longest paper."""
    import torch

    starts = np.asarray(store.offsets[rows], dtype=np.int64)
    lengths = np.asarray(store.offsets[rows + 1], dtype=np.int64) - starts
    longest = int(lengths.max()) if len(rows) else 0
    longest = padded_length(longest, multiple, limit)
    position = np.arange(longest, dtype=np.int64)
    real = position[None, :] < lengths[:, None]
    ids = np.full((len(rows), longest), pad_id, dtype=np.int64)
    ids[real] = store.tokens[(starts[:, None] + position[None, :])[real]]
    return torch.from_numpy(ids), torch.from_numpy(real.astype(np.int64))


def group_by_length(order: np.ndarray, lengths: np.ndarray, batch: int, group: int) -> np.ndarray:
    """`order` with each mega-batch of `group` x `batch` consecutive entries sorted by length, longest first.

    `lengths[i]` is entry i's length. Only whole batches are regrouped: the last `len(order) % batch` entries
    (those an epoch drops) stay where they are, so the same entries are dropped as without grouping. The sort
    is stable, so equal lengths keep their permuted order.
    """
    order = np.asarray(order)
    whole = len(order) - len(order) % batch
    out = order.copy()
    span = group * batch
    for lo in range(0, whole, span):
        chunk = order[lo : min(lo + span, whole)]
        out[lo : lo + len(chunk)] = chunk[np.argsort(-np.asarray(lengths)[chunk], kind="stable")]
    return out


def shuffle_groups(order: np.ndarray, batch: int, group: int, rng: np.random.Generator) -> np.ndarray:
    """The batches of each mega-batch (see `group_by_length`) in a random order, each batch kept whole.

    Without this every mega-batch would run from its longest batch to its shortest, tying length to position.
    """
    order = np.asarray(order)
    whole = len(order) - len(order) % batch
    out = order.copy()
    span = group * batch
    for lo in range(0, whole, span):
        batches = order[lo : min(lo + span, whole)].reshape(-1, batch)
        out[lo : lo + batches.size] = batches[rng.permutation(len(batches))].ravel()
    return out


def length_pieces(lengths: np.ndarray, pieces: int) -> list[np.ndarray]:
    """Positions of `lengths` sorted by length (stable) and split into `pieces` near-equal parts.

    A micro-batch's papers run through the encoder in these parts, each padded to its own longest paper.
    """
    order = np.argsort(np.asarray(lengths), kind="stable")
    return [part for part in np.array_split(order, min(pieces, len(order))) if len(part)]


def padding_share(
    lengths: np.ndarray, micro_batches: np.ndarray, pieces: int = 1, multiple: int = 1, limit: int | None = None
) -> float:
    """Share of padding tokens when each micro-batch runs in `pieces` forward passes (`length_pieces`),
    each padded as `collate_rows` pads it (`padded_length`).

    `lengths`: (items, k) token counts (k sequences per item, e.g. a triplet's three papers);
    `micro_batches`: (batches, size) item indices, one row per micro-batch.
    """
    real = padded = 0.0
    for batch in np.asarray(lengths)[micro_batches].reshape(len(micro_batches), -1):
        real += float(batch.sum())
        padded += float(
            sum(
                padded_length(int(batch[part].max()), multiple, limit) * len(part)
                for part in length_pieces(batch, pieces)
            )
        )
    return 1 - real / padded if padded else 0.0
