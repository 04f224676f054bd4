"""Settings of the stages other than embed_graph (see `citeflow.config.pbg`): what each computes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from citeflow.config.base import _check_finite, _help
from citeflow.errors import CiteflowError
from citeflow.registry import INDEX_KINDS, STRATEGIES, named


@dataclass(frozen=True, kw_only=True)
class BuildGraphConfig:
    """Stage build_graph: parse a snapshot into papers, citations and rejected rows."""

    format: Literal["auto", "s2orc", "s2ag"] = field(
        default="auto", metadata=_help("snapshot format; auto detects metadata/ (S2ORC) or papers/ (S2AG)")
    )
    citations_from: Literal["outbound", "inbound"] = field(
        default="outbound",
        metadata=_help("S2ORC only: build edges from each paper's outbound_citations (SciNCL) or inbound_citations"),
    )
    output_files: int = field(default=8, metadata=_help("Parquet files per output table", versioned=False))
    diffs: str = field(
        default="auto",
        metadata=_help(
            "S2AG release diffs (Datasets API layout, citeflow/diffs.py): auto: the diffs/ folder beside the "
            "corpus folder, if any; off: always build from the shards; or a diffs folder. A diff to this "
            "snapshot from a release the artifact root holds a build of is merged with that build instead of "
            "parsing every shard (same tables as a full build)",
            versioned=False,
        ),
    )

    def __post_init__(self) -> None:
        if self.format not in ("auto", "s2orc", "s2ag"):
            raise CiteflowError(f"build_graph.format must be auto, s2orc or s2ag, not {self.format!r}")
        if self.citations_from not in ("outbound", "inbound"):
            raise CiteflowError(f"build_graph.citations_from must be outbound or inbound, not {self.citations_from!r}")
        if self.output_files < 1:
            raise CiteflowError("build_graph.output_files must be at least 1")


@dataclass(frozen=True, kw_only=True)
class FilterLeakageConfig:
    """Stage filter_leakage: map benchmark papers to corpus ids and take them out of the graph."""

    mode: Literal["exclude", "report_only"] = field(
        default="exclude",
        metadata=_help(
            "exclude: remove every mapped benchmark paper and its edges (SciNCL 'w/o leakage'); "
            "report_only: keep the graph intact to replicate published 'w/ leakage' numbers"
        ),
    )
    max_unmapped_share: float = field(
        default=0.05, metadata=_help("fail when more than this share of benchmark ids maps to no corpus id")
    )
    extra_ids: tuple[str, ...] = field(
        default=(),
        metadata=_help("more benchmark id lists (one id per line, or JSON lines; suite id_list, task = file stem)"),
    )
    scirepeval: tuple[str, ...] = field(
        default=(),
        metadata=_help(
            "SciRepEval task lists, folders or flat record files whose papers are benchmark papers too (suite "
            "scirepeval); benchmark.scirepeval's are always included, so every task the run scores is audited"
        ),
    )
    beir: tuple[str, ...] = field(
        default=(),
        metadata=_help(
            "BEIR / MTEB-layout folders (corpus.jsonl, queries.jsonl, qrels/) whose documents and queries are "
            "benchmark papers too (suite beir, task = the folder's name), e.g. MTEB's SCIDOCS"
        ),
    )
    strict: bool = field(
        default=False,
        metadata=_help(
            "also remove every paper one citation away from a benchmark paper (and its edges); the leakage "
            "report says what it costs in papers and edges per suite"
        ),
    )
    match_titles: bool = field(
        default=True, metadata=_help("fall back to exact folded-title matching (unique titles only)")
    )

    def __post_init__(self) -> None:
        _check_finite(self, "filter_leakage")
        if self.mode not in ("exclude", "report_only"):
            raise CiteflowError(f"filter_leakage.mode must be exclude or report_only, not {self.mode!r}")
        if not 0 <= self.max_unmapped_share <= 1:
            raise CiteflowError("filter_leakage.max_unmapped_share must be between 0 and 1")


@dataclass(frozen=True, kw_only=True)
class MineTripletsConfig:
    """Stage mine_triplets: (query, positive, negative) triplets, SciNCL or SPECTER style (docs/reference.md §4).

    Defaults are SciNCL's: 680,967 pool papers, 136,820 queries, k_pos=25, k_hard=4000, exact search (README:
    every setting next to the reference file it comes from).
    """

    strategy: Literal["scincl", "specter"] = field(
        default="scincl",
        metadata=_help(
            "scincl: kNN windows over the graph embeddings; specter: citations and citations of "
            "citations. Mine both by running the stage once per strategy (citeflow run --strategy both)"
        ),
    )
    pool_size: int = field(
        default=680_967,
        metadata=_help(
            "candidate pool: papers with a graph embedding and a title or abstract, seeded sample; 0: all of them"
        ),
    )
    num_queries: int = field(default=136_820, metadata=_help("query papers drawn from the pool; 0: the whole pool"))
    positives: int = field(default=5, metadata=_help("positives (= triplets) per query, c in docs/reference.md §4"))
    hard_negatives: int = field(
        default=2,
        metadata=_help("hard negatives per query (specter: at most this many, as ceil(0.3 x 5) in SPECTER)"),
    )
    easy_negatives: int = field(default=3, metadata=_help("easy negatives per query"))
    k_pos: int = field(default=25, metadata=_help("scincl: positives come from neighbour ranks (k_pos - c, k_pos]"))
    k_hard: int = field(
        default=4000,
        metadata=_help(
            "scincl: hard negatives come from ranks (k_hard - c, k_hard]; capped at half the pool, with a warning"
        ),
    )
    windows: Literal["absolute", "relative"] = field(
        default="absolute",
        metadata=_help(
            "scincl: absolute takes k_pos and k_hard as ranks (SciNCL); relative (beyond the references) scales "
            "them with the pool, k x pool_papers / reference_pool, so that they cut the same quantiles of the "
            "pool as SciNCL's did at its pool size (on small pools rank 25 is a much coarser neighbourhood)"
        ),
    )
    reference_pool: int = field(
        default=680_967,
        metadata=_help("relative windows: the pool size at which they equal k_pos and k_hard (SciNCL's pool)"),
    )
    easy_negatives_from: Literal["queries", "pool"] = field(
        default="queries",
        metadata=_help(
            "scincl: draw easy negatives among the query papers, as SciNCL's sampler does (its random list is "
            "made of the queries), or among the whole pool"
        ),
    )
    easy_negatives_sampling: Literal["uniform", "window"] = field(
        default="uniform",
        metadata=_help(
            "scincl: uniform draws each query's easy negatives at random among the papers allowed; window takes "
            "them as SciNCL's sampler does: the first ones outside the query's k_max neighbours (the query itself "
            "allowed) of a window of 2 x easy_negatives entries, starting at the query's index, of one list of "
            "the queries shuffled once, where consecutive queries share negatives and about a third of the "
            "queries is never one (docs/parity-samplers.md). Window needs easy_negatives_from=queries; with "
            "distinct_easy_negatives=false it is the reference's rule exactly",
            versioned_when_set=True,
        ),
    )
    specter_query_rule: Literal["generator", "parallel"] = field(
        default="generator",
        metadata=_help(
            "specter: which queries give triplets. generator (SPECTER's TripletGenerator): a query with a "
            "citation of a citation; parallel (triplet_sampling_parallel.py, which SPECTER's "
            "create_training_files.py runs): also at least three candidates, so a query citing one paper that "
            "cites one other gets none (docs/parity-samplers.md)",
            versioned_when_set=True,
        ),
    )
    distinct_easy_negatives: bool = field(
        default=True,
        metadata=_help(
            "a query's easy negatives are distinct papers (both references draw with replacement; a repeat "
            "teaches nothing new and is rare on large pools but common on small ones)"
        ),
    )
    index: Literal["flat", "ivf", "hnsw", "ivfpq"] = field(
        default="flat",
        metadata=_help(
            "scincl: FAISS index; flat is exact, ivf / hnsw / ivfpq approximate (recall reported in the manifest)"
        ),
    )
    nlist: int = field(default=0, metadata=_help("ivf, ivfpq: inverted lists; 0: 4 * sqrt(pool)"))
    nprobe: int = field(default=32, metadata=_help("ivf, ivfpq: lists searched per query"))
    hnsw_m: int = field(default=32, metadata=_help("hnsw: links per node"))
    ef_search: int = field(default=0, metadata=_help("hnsw: search breadth; 0: 2 * k_max"))
    pq_m: int = field(default=0, metadata=_help("ivfpq: sub-quantisers (must divide the dimension); 0: dimension / 8"))
    recall_sample: int = field(
        default=1000,
        metadata=_help("approximate indexes: queries whose neighbours are also searched exactly to measure recall"),
    )
    rank_sample: int = field(
        default=1000,
        metadata=_help(
            "queries whose positives and negatives are ranked exactly in the graph-embedding space (histograms)"
        ),
    )
    seed: int = field(default=0, metadata=_help("seed of the pool, the queries and every draw"))
    batch_size: int = field(default=2048, metadata=_help("queries per search batch (bounds memory)", versioned=False))
    gpu: bool = field(default=True, metadata=_help("use FAISS GPUs when there are any", versioned=False))

    def __post_init__(self) -> None:
        _check_finite(self, "mine_triplets")
        named("mine_triplets.strategy", self.strategy, STRATEGIES)
        named("mine_triplets.index", self.index, INDEX_KINDS)
        if self.windows not in ("absolute", "relative"):
            raise CiteflowError(f"mine_triplets.windows must be absolute or relative, not {self.windows!r}")
        if self.easy_negatives_from not in ("queries", "pool"):
            raise CiteflowError(
                f"mine_triplets.easy_negatives_from must be queries or pool, not {self.easy_negatives_from!r}"
            )
        if self.easy_negatives_sampling not in ("uniform", "window"):
            raise CiteflowError(
                f"mine_triplets.easy_negatives_sampling must be uniform or window, not {self.easy_negatives_sampling!r}"
            )
        if self.easy_negatives_sampling == "window" and self.easy_negatives_from != "queries":
            raise CiteflowError(
                "mine_triplets.easy_negatives_sampling=window reads SciNCL's list of the queries: "
                "set mine_triplets.easy_negatives_from=queries, or easy_negatives_sampling=uniform"
            )
        if self.specter_query_rule not in ("generator", "parallel"):
            raise CiteflowError(
                f"mine_triplets.specter_query_rule must be generator or parallel, not {self.specter_query_rule!r}"
            )
        for name in (
            "pool_size",
            "num_queries",
            "hard_negatives",
            "easy_negatives",
            "nlist",
            "ef_search",
            "pq_m",
            "recall_sample",
            "rank_sample",
        ):
            if getattr(self, name) < 0:
                raise CiteflowError(f"mine_triplets.{name} must not be negative")
        for name in ("positives", "k_pos", "k_hard", "nprobe", "hnsw_m", "batch_size", "reference_pool"):
            if getattr(self, name) < 1:
                raise CiteflowError(f"mine_triplets.{name} must be at least 1")
        if self.positives != self.hard_negatives + self.easy_negatives:
            raise CiteflowError(
                f"mine_triplets.positives ({self.positives}) must equal hard_negatives ({self.hard_negatives}) + "
                f"easy_negatives ({self.easy_negatives}): each triplet pairs one positive with one negative"
            )
        if self.k_pos < self.positives or self.k_hard < self.hard_negatives:
            raise CiteflowError("mine_triplets: k_pos must be at least positives and k_hard at least hard_negatives")


# How the encoder is used when neither a setting nor the model folder says (SPECTER's and SciNCL's way: the [CLS]
# state of up to 512 tokens, not normalised); `models.model_folder.resolve_usage` applies them.
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
            "tokens per paper (title [SEP] abstract); none: the model folder's sentence-transformers max_seq_length, "
            "else 512 (docs/models.md)"
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
    epochs: int = field(default=2, metadata=_help("passes over the triplets"))
    max_steps: int = field(default=0, metadata=_help("stop after this many optimizer steps; 0: all epochs"))
    batch_size: int = field(default=32, metadata=_help("effective batch: per_device_batch x accumulation x processes"))
    lr: float = field(default=2e-5, metadata=_help("AdamW learning rate"))
    weight_decay: float = field(default=0.01, metadata=_help("AdamW weight decay (not on biases and LayerNorm)"))
    warmup_fraction: float = field(default=0.1, metadata=_help("share of steps with linear warm-up, then decay"))
    loss: Literal["triplet", "triplet_cosine", "in_batch"] = field(
        default="triplet",
        metadata=_help(
            "triplet: SPECTER's and SciNCL's margin loss on L2 distances; triplet_cosine: the same on cosine "
            "distances (1 - cos), for a model trained and used with cosine similarity; in_batch: softmax over "
            "every positive and negative of the micro-batch (sentence-transformers' MultipleNegativesRankingLoss, "
            "the loss all-MiniLM-L6-v2 was trained with), the triplet's negative as a hard one",
            versioned_when_set=True,
        ),
    )
    margin: float = field(
        default=1.0, metadata=_help("triplet loss margin: L2 distance (triplet) or cosine distance (triplet_cosine)")
    )
    scale: float = field(
        default=20.0,
        metadata=_help("in_batch: the cosine similarities' scale (inverse temperature)", versioned_when_set=True),
    )
    max_grad_norm: float = field(
        default=1.0,
        metadata=_help("clip the global gradient norm at this value (SPECTER grad_clipping 1, HF Trainer 1.0); 0: off"),
    )
    bitfit: bool = field(default=False, metadata=_help("train bias terms only (BitFit)"))
    bitfit_lr: float = field(default=1e-4, metadata=_help("learning rate with bitfit"))
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
        default=0.4, metadata=_help("init_from: the share of a run's optimizer steps a warm-started run trains")
    )
    seed: int = field(default=0, metadata=_help("seed of the initialisation (small model) and the data order"))
    vocab_size: int = field(default=16_000, metadata=_help("small model: WordPiece vocabulary"))
    hidden_size: int = field(default=256, metadata=_help("small model: hidden size"))
    layers: int = field(default=4, metadata=_help("small model: Transformer layers"))
    heads: int = field(default=4, metadata=_help("small model: attention heads"))
    per_device_batch: int = field(
        default=8,
        metadata=_help(
            "triplets per forward pass and process; accumulation makes up the rest of batch_size", versioned=False
        ),
    )
    nproc: int = field(
        default=0,
        metadata=_help(
            "training processes (torchrun, one per GPU); 0: one per visible GPU, or 1 on CPU", versioned=False
        ),
    )
    precision: Literal["auto", "fp32", "bf16", "fp16"] = field(
        default="auto",
        metadata=_help(
            "GPU autocast; auto: bf16 where supported, else fp16. CPU always trains in fp32", versioned=False
        ),
    )
    gradient_checkpointing: bool = field(
        default=False,
        metadata=_help("recompute activations in the backward pass (long inputs on small GPUs)", versioned=False),
    )
    checkpoint_every: int = field(default=500, metadata=_help("optimizer steps between checkpoints", versioned=False))
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
        default=50, metadata=_help("length_grouping: optimizer batches per mega-batch sorted by length")
    )
    length_pieces: int = field(
        default=0,
        metadata=_help(
            "forward passes per micro-batch: its papers sorted by length and split, each part padded to its own "
            "longest paper; 1: one pass padded to the longest; 0: 3 on a CPU, 1 on a GPU (smaller parts made "
            "BERT-base 2.6x slower on an H100)",
            versioned=False,
        ),
    )
    pad_to_multiple: int = field(
        default=0,
        metadata=_help(
            "pad each part of a micro-batch to a multiple of this many tokens; 1: to its longest paper; 0: 1 on a "
            "CPU, 64 on a GPU (a new shape every step made BERT-base 2.9x slower on an H100)",
            versioned=False,
        ),
    )
    prefetch: int = field(
        default=4,
        metadata=_help(
            "micro-batches collated ahead by a background thread (pinned on CUDA); 0: none", versioned=False
        ),
    )
    log_every: int = field(
        default=10,
        metadata=_help(
            "optimizer steps between reads of the loss from the GPU (every step is still logged); a machine without "
            "a GPU writes every step",
            versioned=False,
        ),
    )
    compile: bool = field(default=False, metadata=_help("torch.compile the encoder", versioned=False))

    def __post_init__(self) -> None:
        _check_finite(self, "train_encoder")
        if self.pooling not in ("cls", "mean", None):
            raise CiteflowError(f"train_encoder.pooling must be cls or mean, not {self.pooling!r}")
        if self.loss not in ("triplet", "triplet_cosine", "in_batch"):
            raise CiteflowError(f"train_encoder.loss must be triplet, triplet_cosine or in_batch, not {self.loss!r}")
        if self.scale <= 0:
            raise CiteflowError("train_encoder.scale must be positive")
        if self.init_from not in ("off", "previous"):
            from citeflow.config.base import validate_snapshot_id

            try:
                validate_snapshot_id(self.init_from)
            except CiteflowError as exc:
                raise CiteflowError(f"train_encoder.init_from must be off, previous or a snapshot id: {exc}") from None
        if not 0 < self.warm_share <= 1:
            raise CiteflowError("train_encoder.warm_share must be above 0 and at most 1")
        if self.max_length is not None and not 1 <= self.max_length <= ENCODER_MAX_LENGTH:
            raise CiteflowError(f"train_encoder.max_length must be between 1 and {ENCODER_MAX_LENGTH}")
        for name in (
            "epochs",
            "batch_size",
            "vocab_size",
            "hidden_size",
            "layers",
            "heads",
            "per_device_batch",
            "checkpoint_every",
            "length_group_batches",
            "log_every",
        ):
            if getattr(self, name) < 1:
                raise CiteflowError(f"train_encoder.{name} must be at least 1")
        if self.prefetch < 0:
            raise CiteflowError("train_encoder.prefetch must be at least 0")
        if self.pad_to_multiple < 0:
            raise CiteflowError("train_encoder.pad_to_multiple must be at least 0 (0: 1 on a CPU, 64 on a GPU)")
        if self.length_pieces < 0:
            raise CiteflowError("train_encoder.length_pieces must be at least 0 (0: 3 on a CPU, 1 on a GPU)")
        if self.hidden_size % self.heads:
            raise CiteflowError("train_encoder.hidden_size must be a multiple of train_encoder.heads")
        if not 0 <= self.warmup_fraction < 1:
            raise CiteflowError("train_encoder.warmup_fraction must be in [0, 1)")
        if self.lr <= 0 or self.bitfit_lr <= 0:
            raise CiteflowError("train_encoder learning rates must be positive")
        if self.max_steps < 0 or self.nproc < 0 or self.max_grad_norm < 0:
            raise CiteflowError("train_encoder.max_steps, nproc and max_grad_norm must not be negative")


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
    batch_size: int = field(default=64, metadata=_help("papers per forward pass", versioned=False))
    length_grouping: bool = field(
        default=True,
        metadata=_help(
            "batches of papers of similar length (sorted within chunks of 50 batches; output keeps input order)",
            versioned=False,
        ),
    )
    precision: Literal["auto", "fp32", "bf16"] = field(
        default="auto",
        metadata=_help("GPU autocast; auto: bf16 where supported, else fp32. CPU embeds in fp32", versioned=False),
    )

    def __post_init__(self) -> None:
        if self.model not in ("trained", "base"):
            raise CiteflowError(f"embed_papers.model must be trained or base, not {self.model!r}")
        if self.batch_size < 1:
            raise CiteflowError("embed_papers.batch_size must be at least 1")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise CiteflowError(f"embed_papers.precision must be auto, fp32 or bf16, not {self.precision!r}")


@dataclass(frozen=True, kw_only=True)
class BenchmarkConfig:
    """Stage benchmark: SciDocs (original layout) and SciRepEval-format tasks on the trained and base models."""

    scirepeval: tuple[str, ...] = field(
        default=(),
        metadata=_help(
            "SciRepEval task files or folders (JSON / JSON lines in SciRepEval's layout), embedded by each model"
        ),
    )
    base: bool = field(default=True, metadata=_help("also score the untrained model the encoder started from"))
    n_jobs: int = field(default=0, metadata=_help("parallel SVM fits; 0: one per core", versioned=False))

    def __post_init__(self) -> None:
        if self.n_jobs < 0:
            raise CiteflowError("benchmark.n_jobs must not be negative")
