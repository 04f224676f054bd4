"""Settings of the encoder's two stages, train_encoder and embed_papers: the recipe and how papers are embedded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from citeflow.config.base import _check_fields, _help
from citeflow.errors import CiteflowError

# How the encoder is used when neither a setting nor the model folder says (SPECTER's and SciNCL's way: the [CLS]
# state of up to 512 tokens, not normalised); `citeflow.models.encoder.folder.resolve_usage` applies them.
ENCODER_USAGE_FALLBACK = {"pooling": "cls", "max_length": 512, "normalize": False}
ENCODER_MAX_LENGTH = 8192


@dataclass(frozen=True, kw_only=True)
class TrainEncoderConfig:
    """Stage train_encoder: a Transformer trained on the triplets with triplet loss (docs/reference.md §5).

    Defaults are SPECTER/SciNCL's recipe (README: every setting next to its reference file); the model is a
    local Hugging Face directory (e.g. SciBERT) or `small`, a small BERT with a WordPiece tokenizer trained on the
    snapshot's texts (the demo profile's choice).
    """

    model: str = field(
        default="",
        metadata=_help(
            "local Hugging Face model folder to start from, e.g. a downloaded scibert_scivocab_uncased (SPECTER and "
            "SciNCL start from SciBERT), or 'small': a small BERT trained from scratch, the demo profile's choice. "
            "No default: the full profile needs a real encoder"
        ),
    )
    max_length: int | None = field(
        default=None,
        metadata=_help(
            "tokens per paper (title [SEP] abstract) while training: a cost knob, not a property of the model, "
            "which embeds at inference_max_length; none: inference_max_length",
            at_least=1,
            at_most=ENCODER_MAX_LENGTH,
        ),
    )
    inference_max_length: int | None = field(
        default=None,
        metadata=_help(
            "tokens per paper the trained model embeds with (its sentence_bert_config.json max_seq_length; "
            "embed_papers embeds it and its base at this length); none: the base model's own, its "
            "sentence-transformers max_seq_length, else its tokenizer's limit, else 512 (the small model: max_length)",
            versioned_when_set=True,
            at_least=1,
            at_most=ENCODER_MAX_LENGTH,
        ),
    )
    pooling: Literal["cls", "mean"] | None = field(
        default=None,
        metadata=_help(
            "cls: final [CLS] state; mean: token mean; none: the model folder's 1_Pooling/config.json, else cls"
        ),
    )
    normalize: bool | None = field(
        default=None,
        metadata=_help(
            "unit-length embeddings (trained and embedded so); none: true when the model folder's modules.json has "
            "a Normalize module, else false"
        ),
    )
    epochs: int = field(default=2, metadata=_help("passes over the triplets", at_least=1))
    max_steps: int = field(default=0, metadata=_help("stop after this many optimizer steps; 0: all epochs", at_least=0))
    batch_size: int = field(
        default=32, metadata=_help("effective batch: per_device_batch x accumulation x processes", at_least=1)
    )
    lr: float = field(default=2e-5, metadata=_help("AdamW learning rate", above=0))
    weight_decay: float = field(
        default=0.01, metadata=_help("AdamW weight decay (not on biases and LayerNorm)", at_least=0)
    )
    warmup_fraction: float = field(
        default=0.1, metadata=_help("share of steps with linear warm-up, then decay", at_least=0, below=1)
    )
    loss: Literal["triplet", "triplet_cosine", "in_batch"] = field(
        default="triplet",
        metadata=_help(
            "triplet: SPECTER's and SciNCL's margin loss on L2 distances; triplet_cosine: the same on cosine "
            "distances (1 - cos), for a model trained and used with cosine similarity; in_batch: softmax over "
            "every positive and negative of the optimizer step (sentence-transformers' MultipleNegativesRankingLoss, "
            "the loss all-MiniLM-L6-v2 was trained with), the triplet's negative as a hard one",
            versioned_when_set=True,
        ),
    )
    margin: float = field(
        default=1.0,
        metadata=_help("triplet loss margin: L2 distance (triplet) or cosine distance (triplet_cosine)", above=0),
    )
    scale: float = field(
        default=20.0,
        metadata=_help(
            "in_batch: the cosine similarities' scale (inverse temperature)", versioned_when_set=True, above=0
        ),
    )
    max_grad_norm: float = field(
        default=1.0,
        metadata=_help(
            "clip the global gradient norm at this value (SPECTER grad_clipping 1, HF Trainer 1.0); 0: off", at_least=0
        ),
    )
    bitfit: bool = field(default=False, metadata=_help("train bias terms only (BitFit)"))
    bitfit_lr: float = field(default=1e-4, metadata=_help("learning rate with bitfit", above=0))
    init_from: str = field(
        default="off",
        metadata=_help(
            "start from a previous release's trained model instead of train_encoder.model: off; previous: the "
            "release this release's build_graph was merged from by a diff; or a snapshot id. That snapshot's "
            "train_encoder version of the same strategy and base model is used (one line when there is none, "
            "several, or another architecture or tokenizer); it trains warm_share of the steps",
            versioned=False,  # a warm start enters the version through its source version and steps
        ),
    )
    warm_share: float = field(
        default=0.4,
        metadata=_help("init_from: the share of a run's optimizer steps a warm-started run trains", above=0, at_most=1),
    )
    seed: int = field(
        default=0, metadata=_help("seed of the initialisation (small model) and the data order", at_least=0)
    )
    vocab_size: int = field(default=16_000, metadata=_help("small model: WordPiece vocabulary", at_least=1))
    hidden_size: int = field(default=256, metadata=_help("small model: hidden size", at_least=1))
    layers: int = field(default=4, metadata=_help("small model: Transformer layers", at_least=1))
    heads: int = field(default=4, metadata=_help("small model: attention heads", at_least=1))
    per_device_batch: int = field(
        default=8,
        metadata=_help(
            "triplets per forward pass and process; accumulation makes up the rest of batch_size",
            versioned=False,
            at_least=1,
        ),
    )
    nproc: int = field(
        default=0,
        metadata=_help(
            "training processes (torchrun, one per GPU); 0: one per visible GPU, or 1 on CPU",
            versioned=False,
            at_least=0,
        ),
    )
    precision: Literal["auto", "fp32", "bf16", "fp16"] = field(
        default="auto",
        metadata=_help(
            "autocast; auto: on a GPU bf16 where supported, else fp16; on a CPU bf16 where it has AVX512-BF16 or "
            "AMX, else fp32 (the manifest records which); fp16 on a CPU trains in fp32",
            versioned=False,
        ),
    )
    gradient_checkpointing: bool = field(
        default=False,
        metadata=_help("recompute activations in the backward pass (long inputs on small GPUs)", versioned=False),
    )
    checkpoint_every: int = field(
        default=500, metadata=_help("optimizer steps between checkpoints", versioned=False, at_least=1)
    )
    deterministic: bool = field(
        default=False,
        metadata=_help(
            "torch.use_deterministic_algorithms, one CPU thread per process and a fixed cuBLAS workspace: a resumed "
            "run then ends with the same weights as an uninterrupted one, bit for bit (slower)",
            versioned=False,
        ),
    )

    length_grouping: bool = field(
        default=True,
        metadata=_help(
            "batches of triplets of similar length: each mega-batch of the seeded permutation sorted by triplet "
            "length (its longest paper), its batches shuffled again; false: the plain permutation"
        ),
    )
    length_group_batches: int = field(
        default=50, metadata=_help("length_grouping: optimizer batches per mega-batch sorted by length", at_least=1)
    )
    length_pieces: int = field(
        default=0,
        metadata=_help(
            "forward passes per micro-batch: its papers sorted by length and split, each part padded to its own "
            "longest paper; 1: one pass padded to the longest; 0: 3 on a CPU, 1 on a GPU (smaller parts made "
            "BERT-base 2.6x slower on an H100)",
            versioned=False,
            at_least=0,
        ),
    )
    pad_to_multiple: int = field(
        default=0,
        metadata=_help(
            "pad each part of a micro-batch to a multiple of this many tokens; 1: to its longest paper; 0: 1 on a "
            "CPU, 64 on a GPU (a new shape every step made BERT-base 2.9x slower on an H100)",
            versioned=False,
            at_least=0,
        ),
    )
    prefetch: int = field(
        default=4,
        metadata=_help(
            "micro-batches collated ahead by a background thread (pinned on CUDA); 0: none", versioned=False, at_least=0
        ),
    )
    log_every: int = field(
        default=10,
        metadata=_help(
            "optimizer steps between reads of the loss from the GPU (every step is still logged); a machine without "
            "a GPU writes every step",
            versioned=False,
            at_least=1,
        ),
    )
    compile: bool = field(default=False, metadata=_help("torch.compile the encoder", versioned=False))
    eval_triplets: int = field(
        default=256,
        metadata=_help(
            "triplets of held-out queries (whole queries, drawn with the seed) never trained on, scored every "
            "eval_every steps and after the last: triplet accuracy and MRR among the slice's papers "
            "(docs/train_encoder.md); at most a third of the mined triplets; 0: no evaluation while training",
            at_least=0,
        ),
    )
    eval_every: int = field(
        default=0,
        metadata=_help(
            "optimizer steps between evaluations (the untrained model and the last step are evaluated too); "
            "0: checkpoint_every",
            at_least=0,
        ),
    )
    eval_val_queries: int = field(
        default=0,
        metadata=_help(
            "queries per task (cite, co-cite) of the run's SciDocs val split also scored at each evaluation, a "
            "seeded sample, at the training length; with keep=best their mean picks the step; 0: none",
            versioned_when_set=True,
            at_least=0,
        ),
    )
    keep: Literal["last", "best"] = field(
        default="last",
        metadata=_help(
            "the model the stage commits: last, after the last step; best, the evaluated step of the best score "
            "(the val sample's mean where eval_val_queries is set, else the held-out MRR)",
            versioned_when_set=True,
        ),
    )

    def __post_init__(self) -> None:
        _check_fields(self, "train_encoder")
        if self.keep not in ("last", "best"):
            raise CiteflowError(f"train_encoder.keep must be last or best, not {self.keep!r}")
        if self.keep == "best" and not (self.eval_triplets or self.eval_val_queries):
            raise CiteflowError(
                "train_encoder.keep=best picks an evaluated step: set eval_triplets or eval_val_queries above 0"
            )
        if self.pooling not in ("cls", "mean", None):
            raise CiteflowError(f"train_encoder.pooling must be cls or mean, not {self.pooling!r}")
        if self.loss not in ("triplet", "triplet_cosine", "in_batch"):
            raise CiteflowError(f"train_encoder.loss must be triplet, triplet_cosine or in_batch, not {self.loss!r}")
        if self.init_from not in ("off", "previous"):
            from citeflow.config.base import validate_snapshot_id

            try:
                validate_snapshot_id(self.init_from)
            except CiteflowError as exc:
                raise CiteflowError(f"train_encoder.init_from must be off, previous or a snapshot id: {exc}") from None
        if self.hidden_size % self.heads:
            raise CiteflowError("train_encoder.hidden_size must be a multiple of train_encoder.heads")


@dataclass(frozen=True, kw_only=True)
class EmbedPapersConfig:
    """Stage embed_papers: embeddings of a set of papers (by default the SciDocs papers) by the trained encoder."""

    papers: str = field(
        default="",
        metadata=_help(
            "papers to embed: a SciDocs folder (original or BEIR layout), or JSON lines / Parquet with id, title, "
            "abstract; empty: the run's --scidocs"
        ),
    )
    model: Literal["trained", "base"] = field(
        default="trained",
        metadata=_help("trained: the train_encoder model; base: the model it started from (the untrained baseline)"),
    )
    batch_size: int = field(default=64, metadata=_help("papers per forward pass", versioned=False, at_least=1))
    length_grouping: bool = field(
        default=True,
        metadata=_help(
            "batches of papers of similar length (sorted within chunks of 50 batches; output keeps input order)",
            versioned=False,
        ),
    )
    precision: Literal["auto", "fp32", "bf16"] = field(
        default="auto",
        metadata=_help(
            "autocast; auto: bf16 on a GPU that supports it, else fp32 (a CPU embeds in fp32 under auto: the "
            "vectors sentence-transformers gives; bf16 on a CPU where asked)",
            versioned=False,
        ),
    )

    def __post_init__(self) -> None:
        if self.model not in ("trained", "base"):
            raise CiteflowError(f"embed_papers.model must be trained or base, not {self.model!r}")
        _check_fields(self, "embed_papers")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise CiteflowError(f"embed_papers.precision must be auto, fp32 or bf16, not {self.precision!r}")
