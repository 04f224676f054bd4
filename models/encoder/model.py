"""The paper encoder: any local Hugging Face encoder, or a small BERT built for demos and tests (docs/reference.md §5).

- `load(model_dir)`: tokenizer and model from a local directory only (SciBERT,
  BERT, a previous citeflow model); a hub name is refused with a clear error.
- `build_small(texts, out, ...)`: trains a lower-cased WordPiece tokenizer on
  the given texts, builds a BertModel from a config (seeded init) and saves
  both as a normal Hugging Face directory.
- `paper_text(title, abstract, sep)`: SPECTER's input, `title [SEP] abstract`.
- `pool(hidden, mask, how, normalize)`: `[CLS]` (the final hidden state of the
  first token, SPECTER/SciNCL) or the masked mean of the tokens, optionally
  scaled to unit length.

A model folder's sentence-transformers files are read and written in `models/encoder/folder.py`; the token ids
training reads, and the batches it pads, in `models/training/token_batches.py`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, overload

from citeflow.errors import CiteflowError

# Checkpoint weights citeflow never loads: BERT's pooler (built with add_pooling_layer=False, as citeflow pools
# the hidden states itself) and its pre-training heads, which checkpoints such as SciBERT's still carry.
UNUSED_HEADS = ("pooler.", "cls.predictions.", "cls.seq_relationship.")
# The messages in which transformers reports a checkpoint's unused or missing weights (5.x, then 4.x wording).
_LOAD_REPORT_MARKS = ("LOAD REPORT", "were not used when initializing")
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


@overload
def load(model_dir: str, *, tokenizer_only: Literal[True]) -> tuple[Any, None]: ...
@overload
def load(model_dir: str, *, tokenizer_only: Literal[False] = False) -> tuple[Any, Any]: ...
def load(model_dir: str, *, tokenizer_only: bool = False) -> tuple[Any, Any]:
    """(tokenizer, model) from a local directory; nothing is fetched from a hub."""
    from transformers import AutoTokenizer

    path = check_model_dir(model_dir)
    _quiet_transformers()
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if tokenizer_only:
        return tokenizer, None
    extra = {"add_pooling_layer": False} if is_bert(path) else {}
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


def is_bert(path: Path) -> bool:
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
    from transformers import BertConfig, BertModel, BertTokenizer  # transformers 5's fast one (was BertTokenizerFast)

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
    tokenizer = BertTokenizer(tokenizer_object=tok, do_lower_case=True, model_max_length=max_length)
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


def cls_pooling(hidden, mask):
    """The first token's final hidden state ([CLS]): SPECTER's and SciNCL's paper embedding."""
    return hidden[:, 0]


def mean_pooling(hidden, mask):
    """The mean of the final hidden states over the real tokens (sentence-transformers' mean pooling)."""
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)


# The poolings by name (train_encoder.pooling): adding one is one function above and one entry here.
POOLINGS = {"cls": cls_pooling, "mean": mean_pooling}


def pool(hidden, mask, how: str, normalize: bool = False):
    """Paper embeddings from the final hidden states by the pooling `how` names (`POOLINGS`); with `normalize`,
    scaled to unit L2 length (sentence-transformers' Normalize module)."""
    if how not in POOLINGS:
        raise ValueError(f"pooling must be {' or '.join(POOLINGS)}, not {how!r}")
    vectors = POOLINGS[how](hidden, mask)
    if normalize:
        import torch.nn.functional as F

        vectors = F.normalize(vectors, p=2, dim=-1)
    return vectors
