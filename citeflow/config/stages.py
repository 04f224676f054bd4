"""Settings of the graph, leakage, mining and benchmark stages: what each computes (embed_graph's are in
`citeflow.config.pbg`, the encoder stages' in `citeflow.config.encoder`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from citeflow.config.base import _check_fields, _help
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
    output_files: int = field(default=8, metadata=_help("Parquet files per output table", versioned=False, at_least=1))
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
        _check_fields(self, "build_graph")


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
        default=0.05,
        metadata=_help("fail when more than this share of benchmark ids maps to no corpus id", at_least=0, at_most=1),
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
        default=True,
        metadata=_help(
            "fall back to exact folded-title matching: a title one corpus paper has maps to it, a title up to "
            "max_shared_matches papers share maps to all of them"
        ),
    )
    max_shared_matches: int = field(
        default=5,
        metadata=_help(
            "a DOI, PubMed id, arXiv id or folded title that 2 to this many corpus papers share maps a benchmark id "
            "to every one of them (the same paper held twice, a preprint and its record: when in doubt, leave it "
            "out); a key more papers share is too common to say which, and leaves the id unmapped "
            "(<key>_too_common), counted toward max_unmapped_share",
            at_least=1,
        ),
    )

    def __post_init__(self) -> None:
        _check_fields(self, "filter_leakage")
        if self.mode not in ("exclude", "report_only"):
            raise CiteflowError(f"filter_leakage.mode must be exclude or report_only, not {self.mode!r}")


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
            "candidate pool: papers with a graph embedding and a title or abstract, seeded sample; 0: all of them",
            at_least=0,
        ),
    )
    num_queries: int = field(
        default=136_820, metadata=_help("query papers drawn from the pool; 0: the whole pool", at_least=0)
    )
    positives: int = field(
        default=5, metadata=_help("positives (= triplets) per query, c in docs/reference.md §4", at_least=1)
    )
    hard_negatives: int = field(
        default=2,
        metadata=_help(
            "hard negatives per query (specter: at most this many, as ceil(0.3 x 5) in SPECTER)", at_least=0
        ),
    )
    easy_negatives: int = field(default=3, metadata=_help("easy negatives per query", at_least=0))
    k_pos: int = field(
        default=25, metadata=_help("scincl: positives come from neighbour ranks (k_pos - c, k_pos]", at_least=1)
    )
    k_hard: int = field(
        default=4000,
        metadata=_help(
            "scincl: hard negatives come from ranks (k_hard - c, k_hard]; capped at half the pool, with a warning",
            at_least=1,
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
        metadata=_help(
            "relative windows: the pool size at which they equal k_pos and k_hard (SciNCL's pool)", at_least=1
        ),
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
    nlist: int = field(default=0, metadata=_help("ivf, ivfpq: inverted lists; 0: 4 * sqrt(pool)", at_least=0))
    nprobe: int = field(default=32, metadata=_help("ivf, ivfpq: lists searched per query", at_least=1))
    hnsw_m: int = field(default=32, metadata=_help("hnsw: links per node", at_least=1))
    ef_search: int = field(default=0, metadata=_help("hnsw: search breadth; 0: 2 * k_max", at_least=0))
    pq_m: int = field(
        default=0, metadata=_help("ivfpq: sub-quantisers (must divide the dimension); 0: dimension / 8", at_least=0)
    )
    recall_sample: int = field(
        default=1000,
        metadata=_help(
            "approximate indexes: queries whose neighbours are also searched exactly to measure recall", at_least=0
        ),
    )
    rank_sample: int = field(
        default=1000,
        metadata=_help(
            "queries whose positives and negatives are ranked exactly in the graph-embedding space (histograms)",
            at_least=0,
        ),
    )
    seed: int = field(default=0, metadata=_help("seed of the pool, the queries and every draw", at_least=0))
    batch_size: int = field(
        default=2048, metadata=_help("queries per search batch (bounds memory)", versioned=False, at_least=1)
    )
    gpu: bool = field(default=True, metadata=_help("use FAISS GPUs when there are any", versioned=False))

    def __post_init__(self) -> None:
        _check_fields(self, "mine_triplets")
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
        if self.positives != self.hard_negatives + self.easy_negatives:
            raise CiteflowError(
                f"mine_triplets.positives ({self.positives}) must equal hard_negatives ({self.hard_negatives}) + "
                f"easy_negatives ({self.easy_negatives}): each triplet pairs one positive with one negative"
            )
        if self.k_pos < self.positives or self.k_hard < self.hard_negatives:
            raise CiteflowError("mine_triplets: k_pos must be at least positives and k_hard at least hard_negatives")


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
    n_jobs: int = field(default=0, metadata=_help("parallel SVM fits; 0: one per core", versioned=False, at_least=0))

    def __post_init__(self) -> None:
        _check_fields(self, "benchmark")
