"""`RunConfig`, which ties a snapshot, its inputs and every stage's settings together, and the profiles."""

from __future__ import annotations

from dataclasses import dataclass, field

from citeflow.config.base import URI_PASSWORD, _help, validate_snapshot_id
from citeflow.config.encoder import EmbedPapersConfig, TrainEncoderConfig
from citeflow.config.engines import InputsConfig, SparkConfig, StoreConfig
from citeflow.config.pbg import EmbedGraphConfig
from citeflow.config.stages import BenchmarkConfig, BuildGraphConfig, FilterLeakageConfig, MineTripletsConfig
from citeflow.errors import CiteflowError


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Everything one `citeflow run` needs: where the inputs are and how each stage is set."""

    snapshot: str = field(metadata=_help("snapshot id, e.g. 20200705v1 (letters, digits, . _ -)"))
    corpus: str = field(metadata=_help("snapshot directory (S2ORC metadata/ or S2AG papers/ abstracts/ citations/)"))
    scidocs: str = field(default="", metadata=_help("SciDocs directory (original or BEIR layout)"))
    paper_ids: str = field(default="", metadata=_help("S2AG paper-ids directory (sha -> corpus id)"))
    artifacts: str = field(default="artifacts", metadata=_help("artifact root: a local path or a filesystem URI"))
    spark: SparkConfig = field(default_factory=SparkConfig)
    build_graph: BuildGraphConfig = field(default_factory=BuildGraphConfig)
    filter_leakage: FilterLeakageConfig = field(default_factory=FilterLeakageConfig)
    embed_graph: EmbedGraphConfig = field(default_factory=EmbedGraphConfig)
    mine_triplets: MineTripletsConfig = field(default_factory=MineTripletsConfig)
    train_encoder: TrainEncoderConfig = field(default_factory=TrainEncoderConfig)
    embed_papers: EmbedPapersConfig = field(default_factory=EmbedPapersConfig)
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    inputs: InputsConfig = field(default_factory=InputsConfig)

    def __post_init__(self) -> None:
        validate_snapshot_id(self.snapshot)
        if not self.corpus:
            raise CiteflowError("a corpus path is required (--corpus PATH)")
        if not self.artifacts:
            raise CiteflowError("an artifact root is required (--artifacts ROOT)")
        for name in ("corpus", "scidocs", "paper_ids", "artifacts"):
            if URI_PASSWORD.search(getattr(self, name)):
                # it would be written into manifests, XCom and logs; credentials belong in the environment
                raise CiteflowError(
                    f"{name.replace('_', '-')}: a password in the URI is not accepted; give the credentials "
                    "through the environment or the filesystem's configuration"
                )


# Named sets of overrides, applied before --set. `demo` fits the demo and the tests on a
# 2-core machine; `full` keeps the published settings (and so needs train_encoder.model).
PROFILES: dict[str, tuple[str, ...]] = {
    "demo": (
        "embed_graph.dimension=64",
        "embed_graph.num_epochs=8",
        "embed_graph.batch_size=1000",
        "embed_graph.num_edge_chunks=1",
        "embed_graph.holdout=0.02",
        "mine_triplets.pool_size=0",
        # A pool of ~7k papers, not SciNCL's 681k: rank 25 would be a 100x coarser neighbourhood (on the
        # calibrated demo snapshot only 41% of such positives share the query's niche; at k_pos=5, 70%), and
        # 4,000 queries give the small model twice the triplets (its loss still falls after 2,000).
        "mine_triplets.num_queries=4000",
        "mine_triplets.k_pos=5",
        "mine_triplets.k_hard=1000",
        "mine_triplets.rank_sample=500",
        # A small BERT from scratch has no pre-trained [CLS] summary: mean pooling learns in minutes.
        "train_encoder.model=small",
        "train_encoder.hidden_size=128",
        "train_encoder.layers=2",
        "train_encoder.heads=2",
        "train_encoder.vocab_size=8000",
        "train_encoder.max_length=96",
        "train_encoder.lr=1e-3",
        "train_encoder.pooling=mean",
        "train_encoder.epochs=1",
        "train_encoder.per_device_batch=32",
        "train_encoder.checkpoint_every=100",
    ),
    "full": (),
}
# A real pretrained encoder (train_encoder.model=DIR, e.g. all-MiniLM-L6-v2 or SciBERT) fine-tuned on one small
# 2-core machine: the demo's graph side, then (docs/train_encoder.md, "Training a pretrained encoder on a CPU"; the
# figures in docs/performance.md). Its 420 steps take about 18-21 minutes on 2 cores with bf16 instructions
# (AVX512-BF16 or AMX: bf16 autocast), about 35 on 2 AMD EPYC cores without them (fp32); the table per CPU is in
# docs/train_encoder.md ("How long").
PROFILES["pretrained-cpu"] = (
    *(item for item in PROFILES["demo"] if not item.startswith("train_encoder.")),
    # SciNCL's margin loss on L2 distances pulls a model trained for cosine similarity (all-MiniLM-L6-v2 was
    # trained with in-batch negatives) out of its geometry and damaged it on held-out citations. The in-batch
    # softmax is the named deviation: the other triplets' papers are easy negatives, the mined one a hard one,
    # and the model is trained with the loss it was made with.
    "train_encoder.loss=in_batch",
    # all-MiniLM-L6-v2's and sentence-transformers' scale (a temperature of 0.05)
    "train_encoder.scale=20",
    # 16 triplets a step, all in one forward pass: every query ranks its positive among the step's 32 papers
    # with no second pass (GradCache's) to pay for
    "train_encoder.batch_size=16",
    "train_encoder.per_device_batch=16",
    # sentence-transformers' usual fine-tuning rate (5e-5 and 1e-4 at a quarter of the steps were no better on val)
    "train_encoder.lr=2e-5",
    # training reads 128 tokens of a paper (a real abstract's median is about 150): most of it at half of 256's
    # cost; the model still embeds at its own length (train_encoder.inference_max_length)
    "train_encoder.max_length=128",
    # 420 steps x 16 = 6,720 triplets, one pass over a random third of the 20,000 the demo's graph side mines. On
    # held-out HEP-Th citations this gains on all four test numbers, each outside its 95% interval; a quarter of
    # the steps loses on co-cite (docs/performance.md)
    "train_encoder.epochs=1",
    "train_encoder.max_steps=420",
    "train_encoder.checkpoint_every=60",
    # the held-out triplets scored before training and every quarter of it: each evaluation embeds about 550
    # papers, a few per cent of the training's time
    "train_encoder.eval_every=105",
)


def profile_overrides(name: str) -> tuple[str, ...]:
    if name not in PROFILES:
        raise CiteflowError(f"unknown profile {name!r}; profiles: {', '.join(PROFILES)}")
    return PROFILES[name]
