"""Typed, frozen configuration for a citeflow run.

One `@dataclass(frozen=True, kw_only=True)` per concern: `SparkConfig` (how
Spark runs: never part of an artifact's version), one `<Stage>Config` per
stage (what a stage computes: part of its version), and `RunConfig`, which
ties a snapshot, its input paths, the artifact root and the stage configs
together.

Command-line overrides look like `--set build_graph.citations_from=inbound`
and are parsed against the field's declared type (`apply_overrides`). Fields
whose metadata says `versioned=False` (performance knobs such as Spark's
master or output partitioning) change how a stage runs, not what it writes,
and are left out of the version hash (`versioned_dict`).
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from citeflow.diffs import RELEASE_ID_RE
from citeflow.errors import CiteflowError

SNAPSHOT_ID_RE = RELEASE_ID_RE  # a snapshot is named by its release id (diffs name releases the same way)
URI_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@]*:[^/@]*@")

# Stage names in pipeline order: `citeflow run` runs them in this order, each from `jobs/<stage>.py`.
STAGES = (
    "build_graph",
    "filter_leakage",
    "embed_graph",
    "mine_triplets",
    "train_encoder",
    "embed_papers",
    "benchmark",
)


def validate_snapshot_id(snapshot: str) -> str:
    """Return `snapshot` if it is a safe id; a snapshot id is never a path."""
    if not isinstance(snapshot, str) or not SNAPSHOT_ID_RE.fullmatch(snapshot) or len(snapshot) > 128:
        raise CiteflowError(
            f"invalid snapshot id {snapshot!r}: use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit (at most 128 characters), e.g. 20200705v1 or 2023-08-29"
        )
    return snapshot


def _help(text: str, *, versioned: bool = True) -> dict[str, Any]:
    return {"help": text, "versioned": versioned}


def _check_finite(config: Any, section: str) -> None:
    """nan and inf are not settings: every float field of a config must be a finite number."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise CiteflowError(f"{section}.{f.name} must be a finite number, not {value!r}")


# PyTorch-BigGraph 1.0.0's ConfigSchema options (torchbiggraph/config.py; a unit test compares this list
# with the installed schema). `embed_graph.pbg` may set any of them except PBG_STAGE_KEYS.
PBG_OPTIONS = frozenset(
    "entities relations dimension init_scale max_norm global_emb comparator bias loss_fn margin entity_path "
    "edge_paths checkpoint_path init_path checkpoint_preservation_interval num_epochs num_edge_chunks "
    "max_edges_per_chunk bucket_order workers batch_size num_batch_negs num_uniform_negs disable_lhs_negs "
    "disable_rhs_negs lr relation_lr eval_fraction eval_num_batch_negs eval_num_uniform_negs background_io verbose "
    "hogwild_delay dynamic_relations num_machines num_partition_servers distributed_init_method "
    "distributed_tree_init_order".split()
)
# Set by the stage itself: where PBG reads and writes (always inside the version folder) and the graph's
# layout that the import wrote. Overriding them would write outside the artifact root or train on other data.
PBG_STAGE_KEYS = frozenset(
    {"entity_path", "edge_paths", "checkpoint_path", "init_path", "entities", "relations", "dynamic_relations"}
)
# Distributed PBG is the stage's too: it starts the ranks, so it sets how many and where they meet.
PBG_DISTRIBUTED_KEYS = {"num_machines": "embed_graph.machines", "distributed_init_method": "embed_graph.rendezvous"}
# tcp://HOST:PORT; HOST may be `*`: rank 0's own host name, published to the other ranks (README).
RENDEZVOUS_RE = re.compile(r"tcp://(\*|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]+\]):([0-9]{1,5})")


@dataclass(frozen=True, kw_only=True)
class SparkConfig:
    """How Spark runs. None of these change an artifact, so none is versioned."""

    master: str = field(
        default="local[*]",
        metadata=_help(
            "Spark master URL: local[*], spark://host:7077, yarn, k8s://https://host:443. "
            "A cluster needs the artifact root on storage every executor can reach.",
            versioned=False,
        ),
    )
    remote: str = field(
        default="",
        metadata=_help(
            "Spark Connect server, sc://host:port (optionally /;use_ssl=true;token=...): every Spark stage runs "
            "as a thin client of it and this process starts no JVM; master, driver_memory and local_dir are then "
            "the server's own settings and must stay unset here. The server reads the corpus and writes the "
            "artifact root itself (the same paths must reach it), and its Python workers need citeflow "
            "importable (filter_leakage folds non-ASCII titles in a pandas UDF). Empty: a local driver.",
            versioned=False,
        ),
    )
    driver_memory: str = field(
        default="4g",
        metadata=_help("spark.driver.memory (in local mode the executors live in the driver JVM)", versioned=False),
    )
    shuffle_partitions: int = field(
        default=16,
        metadata=_help("spark.sql.shuffle.partitions (adaptive execution coalesces small ones)", versioned=False),
    )
    local_dir: str = field(
        default="",
        metadata=_help("spark.local.dir for shuffle and spill files; empty: Spark's default", versioned=False),
    )
    broadcast_rows: int = field(
        default=5_000_000,
        metadata=_help(
            "largest set of papers (corpus ids, degrees, duplicates) that the Spark stages join as a broadcast "
            "copy instead of shuffling both sides; a broadcast of N ids costs about 24*N bytes on the driver "
            "and on every executor",
            versioned=False,
        ),
    )
    conf: tuple[str, ...] = field(
        default=(),
        metadata=_help("extra Spark settings as 'key=value' strings, e.g. spark.executor.memory=8g", versioned=False),
    )

    def __post_init__(self) -> None:
        if not self.master:
            raise CiteflowError("spark.master must not be empty")
        if self.remote:
            if not re.fullmatch(r"sc://[^\s/:;]+(:\d{1,5})?(/(;[A-Za-z_]+=[^;\s]*)*)?", self.remote):
                raise CiteflowError(
                    "spark.remote must be a Spark Connect URL such as sc://host:15002 "
                    "(optionally followed by /;name=value parameters)"
                )
            defaults = {f.name: f.default for f in dataclasses.fields(self)}
            unused = [n for n in ("master", "driver_memory", "local_dir") if getattr(self, n) != defaults[n]]
            if unused:
                names = ", ".join(f"spark.{n}" for n in unused)
                raise CiteflowError(
                    f"spark.remote runs Spark on the Spark Connect server, so {names} "
                    "would be ignored: set them on the server, or drop spark.remote to run a local driver"
                )
        if not re.fullmatch(r"\d+[kmgt]?", self.driver_memory.lower()):
            raise CiteflowError(f"spark.driver_memory {self.driver_memory!r} is not a JVM size such as 4g or 2048m")
        if self.shuffle_partitions < 1:
            raise CiteflowError("spark.shuffle_partitions must be at least 1")
        if self.broadcast_rows < 0:
            raise CiteflowError("spark.broadcast_rows must be 0 (never broadcast) or more")
        for item in self.conf:
            if "=" not in item or not item.split("=", 1)[0].startswith("spark."):
                from citeflow.redaction import redact_setting

                raise CiteflowError(f"spark.conf entry {redact_setting(item)!r} must look like spark.some.key=value")


@dataclass(frozen=True, kw_only=True)
class StoreConfig:
    """How a run treats the artifact store: leases on versions and repairs. None of it is versioned."""

    lease_wait_s: float = field(
        default=600.0,
        metadata=_help(
            "when another live run holds the lease on a version this run needs, wait up to this many seconds "
            "for it (then use what it built); 0: stop at once with a message naming the holder",
            versioned=False,
        ),
    )
    lease_heartbeat_s: float = field(
        default=10.0,
        metadata=_help("seconds between refreshes of a held lease's heartbeat", versioned=False),
    )
    lease_stale_s: float = field(
        default=300.0,
        metadata=_help(
            "a lease held from another host whose heartbeat is older than this is stale and may be taken over "
            "(on the holder's own host, the process table decides: a live holder is never taken over)",
            versioned=False,
        ),
    )
    repair: bool = field(
        default=False,
        metadata=_help(
            "verify the content hashes of every version the run reads; move a damaged one aside to "
            "<stage>/.damaged/ and rebuild it (citeflow run --repair)",
            versioned=False,
        ),
    )

    def __post_init__(self) -> None:
        _check_finite(self, "store")
        if self.lease_wait_s < 0:
            raise CiteflowError("store.lease_wait_s must not be negative")
        if self.lease_heartbeat_s <= 0 or self.lease_stale_s <= 2 * self.lease_heartbeat_s:
            raise CiteflowError("store.lease_stale_s must be more than twice store.lease_heartbeat_s, both positive")


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
        metadata=_help("more benchmark id lists (one id per line, or JSON lines), e.g. SciRepEval test papers"),
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
class EmbedGraphConfig:
    """Stage embed_graph: PyTorch-BigGraph embeddings of the filtered citation graph.

    Defaults are SciNCL's settings (SPEC §3; malteos/scincl biggraph_configs/s2orc_without_scidocs.py, PBG's
    own defaults for what it leaves unset); the `demo` profile shrinks them for one small machine.
    """

    dimension: int = field(default=768, metadata=_help("embedding dimension (SciNCL: 768)"))
    comparator: Literal["dot", "cos"] = field(default="dot", metadata=_help("PBG comparator (SciNCL: dot beat cos)"))
    loss_fn: Literal["ranking", "softmax", "logistic"] = field(
        default="ranking", metadata=_help("PBG loss (SciNCL: ranking, PBG's default)")
    )
    margin: float = field(default=0.15, metadata=_help("ranking loss margin (SciNCL: 0.15)"))
    lr: float = field(default=0.1, metadata=_help("Adagrad learning rate (SciNCL: 0.1)"))
    num_epochs: int = field(default=20, metadata=_help("training epochs (SciNCL: 20 w/o leakage, 30 full)"))
    batch_size: int = field(default=10_000, metadata=_help("edges per batch (SciNCL: 10,000)"))
    num_edge_chunks: int = field(default=10, metadata=_help("edge chunks per epoch, bounds memory (SciNCL: 10)"))
    max_norm: float = field(default=1.0, metadata=_help("embedding norm cap; 0 disables it (SciNCL: 1.0)"))
    global_emb: bool = field(
        default=False,
        metadata=_help(
            "add PBG's learned global vector to every embedding when scoring (PBG's default: true; SciNCL: false, "
            "because the exported vectors, which mining searches, do not carry it)"
        ),
    )
    num_partitions: int = field(
        default=1, metadata=_help("entity partitions (SciNCL: 1); distributed PBG needs at least 2 per machine")
    )
    num_uniform_negs: int = field(
        default=0,
        metadata=_help("uniformly sampled negatives per batch chunk (SciNCL: 0, in-batch negatives only; PBG: 50)"),
    )
    num_batch_negs: int = field(default=50, metadata=_help("in-batch negatives per positive (PBG's default 50)"))
    link_prediction: bool = field(
        default=True,
        metadata=_help(
            "train a second PBG run without the held-out edges and measure link prediction on them, as SciNCL "
            "does (its mining embeddings see every edge); false skips it (half the training time), and the "
            "manifest says so"
        ),
    )
    holdout: float = field(
        default=0.01,
        metadata=_help(
            "share of edges the link-prediction run holds out (SciNCL: 1%); 0 only with link_prediction=false"
        ),
    )
    eval_negatives: int = field(default=1000, metadata=_help("random candidates each held-out edge is ranked against"))
    overlap_k: int = field(
        default=25,
        metadata=_help("neighbours compared between the two runs (SciNCL's positive window ends at rank 25)"),
    )
    seed: int = field(default=0, metadata=_help("seed for entity order, holdout and training"))
    workers: int = field(
        default=0,
        metadata=_help(
            "PBG HOGWILD workers; 0: one per core (PBG's default). With more than one, workers update shared "
            "embeddings without locks and runs are not reproducible (see README)",
            versioned=False,
        ),
    )
    machines: int = field(
        default=1,
        metadata=_help(
            "PBG ranks (PBG's num_machines): above 1 the stage trains with PBG's own distributed mode and needs "
            "num_partitions >= 2 x machines. Like workers, it changes how the embeddings are trained, not what "
            "they are trained on, so it is not part of the version (HOGWILD runs differ from run to run anyway)",
            versioned=False,
        ),
    )
    launch: Literal["local", "external"] = field(
        default="local",
        metadata=_help(
            "with machines > 1: local starts every rank on this host (the command line); external runs rank 0 "
            "here and waits for ranks 1..machines-1 started elsewhere on the same shared artifact root (the "
            "Airflow DAGs' embed_graph_rank tasks set this themselves)",
            versioned=False,
        ),
    )
    rendezvous: str = field(
        default="",
        metadata=_help(
            "where the ranks meet, tcp://HOST:PORT served by rank 0 (HOST may be * for rank 0's own host name); "
            "empty: 127.0.0.1 and a free port (launch=local only). Airflow takes it from the connection "
            "pbg_rendezvous",
            versioned=False,
        ),
    )
    rank_wait_s: float = field(
        default=3600.0,
        metadata=_help(
            "launch=external: how long the ranks wait for each other (the other ranks wait for rank 0's import, "
            "rank 0 for every rank to report); then the stage fails with a message naming the missing ranks",
            versioned=False,
        ),
    )
    pbg: tuple[str, ...] = field(
        default=(),
        metadata=_help(
            "any other PBG ConfigSchema option as 'key=value' (JSON values), e.g. init_scale=0.01; PBG's paths "
            "(entity_path, edge_paths, checkpoint_path, init_path), graph layout, num_machines and "
            "distributed_init_method are the stage's own"
        ),
    )

    warm_start: str = field(
        default="off",
        metadata=_help(
            "start the mining run from a previous release's embeddings (PBG init_path): off; auto: the release "
            "this release's build_graph was merged from by a diff; or a snapshot id. Surviving papers keep their "
            "vectors, new papers start random; used only when that snapshot has an embed_graph version of the "
            "same dimension, comparator and partitions (else a cold start, said in one log line). The "
            "link-prediction run always starts cold: warm, it would score held-out edges the previous release "
            "trained on",
            versioned=False,  # a warm start enters the version through its source version and epochs
        ),
    )
    warm_epochs: float = field(
        default=0.3,
        metadata=_help(
            "share of num_epochs a warm-started mining run trains (rounded up, at least 1)", versioned=False
        ),
    )

    def __post_init__(self) -> None:
        _check_finite(self, "embed_graph")
        for name in (
            "dimension",
            "num_epochs",
            "batch_size",
            "num_edge_chunks",
            "num_partitions",
            "eval_negatives",
            "overlap_k",
            "machines",
        ):
            if getattr(self, name) < 1:
                raise CiteflowError(f"embed_graph.{name} must be at least 1")
        if self.num_uniform_negs < 0 or self.num_batch_negs < 0:
            raise CiteflowError("embed_graph.num_uniform_negs and num_batch_negs must not be negative")
        if not 0 < self.warm_epochs <= 1:
            raise CiteflowError("embed_graph.warm_epochs must be above 0 and at most 1")
        if self.warm_start not in ("off", "auto"):
            validate_snapshot_id(self.warm_start)
        if not 0 <= self.holdout < 0.5:
            raise CiteflowError("embed_graph.holdout must be at least 0 and below 0.5")
        if self.link_prediction and self.holdout == 0:
            raise CiteflowError(
                "embed_graph.holdout=0 leaves no edges for link prediction: set embed_graph.link_prediction=false "
                "to skip it, or a holdout such as 0.01"
            )
        for item in self.pbg:
            if "=" not in item:
                raise CiteflowError(f"embed_graph.pbg entry {item!r} must look like key=value")
            key, value = (part.strip() for part in item.split("=", 1))
            if key not in PBG_OPTIONS:
                raise CiteflowError(f"embed_graph.pbg: {key!r} is not a PyTorch-BigGraph option")
            if key in PBG_STAGE_KEYS:
                raise CiteflowError(
                    f"embed_graph.pbg: {key} is set by the stage (PBG reads and writes inside the version folder) "
                    "and cannot be overridden"
                )
            if key in PBG_DISTRIBUTED_KEYS:
                raise CiteflowError(
                    f"embed_graph.pbg: {key} is set by the stage (it starts the ranks): use "
                    f"{PBG_DISTRIBUTED_KEYS[key]} instead"
                )
            if key == "num_partition_servers" and value.strip() not in ("-1", "0"):
                # more would have to be started by hand (torchbiggraph_partitionserver); the stage does not
                raise CiteflowError(
                    "embed_graph.pbg: num_partition_servers must be -1 (each rank serves partitions, PBG's default) "
                    "or 0 (partitions swap through the shared checkpoint folder)"
                )
            if value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
                raise CiteflowError(f"embed_graph.pbg: {key} must be a finite number, not {value!r}")
        # Distributed PBG trains disjoint buckets on each machine: unpartitioned
        # entities cannot be trained distributed (SPEC §3).
        if self.machines > 1 and self.num_partitions < 2 * self.machines:
            raise CiteflowError(
                f"distributed PBG on {self.machines} machines needs embed_graph.num_partitions >= "
                f"{2 * self.machines}, not {self.num_partitions} (--set applies in order: set num_partitions first)"
            )
        if self.rendezvous:
            match = RENDEZVOUS_RE.fullmatch(self.rendezvous)
            # file:// (or env://) would have PBG create files or read settings from wherever they point
            if match is None or not 0 < int(match.group(2)) < 65536:
                raise CiteflowError(
                    f"embed_graph.rendezvous must look like tcp://HOST:PORT (port 1-65535), not {self.rendezvous!r}"
                )
        if self.machines > 1 and self.launch == "external" and not self.rendezvous:
            raise CiteflowError(
                "embed_graph.launch=external needs embed_graph.rendezvous=tcp://HOST:PORT, reachable from every rank "
                "(--set applies in order: set rendezvous first)"
            )
        if self.rank_wait_s <= 0:
            raise CiteflowError("embed_graph.rank_wait_s must be positive")


@dataclass(frozen=True, kw_only=True)
class MineTripletsConfig:
    """Stage mine_triplets: (query, positive, negative) triplets, SciNCL or SPECTER style (SPEC §4).

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
    positives: int = field(default=5, metadata=_help("positives (= triplets) per query, c in SPEC §4"))
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
        if self.strategy not in ("scincl", "specter"):
            raise CiteflowError(f"mine_triplets.strategy must be scincl or specter, not {self.strategy!r}")
        if self.index not in ("flat", "ivf", "hnsw", "ivfpq"):
            raise CiteflowError(f"mine_triplets.index must be flat, ivf, hnsw or ivfpq, not {self.index!r}")
        if self.windows not in ("absolute", "relative"):
            raise CiteflowError(f"mine_triplets.windows must be absolute or relative, not {self.windows!r}")
        if self.easy_negatives_from not in ("queries", "pool"):
            raise CiteflowError(
                f"mine_triplets.easy_negatives_from must be queries or pool, not {self.easy_negatives_from!r}"
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


@dataclass(frozen=True, kw_only=True)
class TrainEncoderConfig:
    """Stage train_encoder: a Transformer trained on the triplets with triplet loss (SPEC §5).

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
    max_length: int = field(default=512, metadata=_help("tokens per paper (title [SEP] abstract)"))
    pooling: Literal["cls", "mean"] = field(default="cls", metadata=_help("cls: final [CLS] state; mean: token mean"))
    epochs: int = field(default=2, metadata=_help("passes over the triplets"))
    max_steps: int = field(default=0, metadata=_help("stop after this many optimizer steps; 0: all epochs"))
    batch_size: int = field(default=32, metadata=_help("effective batch: per_device_batch x accumulation x processes"))
    lr: float = field(default=2e-5, metadata=_help("AdamW learning rate"))
    weight_decay: float = field(default=0.01, metadata=_help("AdamW weight decay (not on biases and LayerNorm)"))
    warmup_fraction: float = field(default=0.1, metadata=_help("share of steps with linear warm-up, then decay"))
    margin: float = field(default=1.0, metadata=_help("triplet loss margin (L2 distance)"))
    max_grad_norm: float = field(
        default=1.0,
        metadata=_help("clip the global gradient norm at this value (SPECTER grad_clipping 1, HF Trainer 1.0); 0: off"),
    )
    bitfit: bool = field(default=False, metadata=_help("train bias terms only (BitFit)"))
    bitfit_lr: float = field(default=1e-4, metadata=_help("learning rate with bitfit"))
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

    def __post_init__(self) -> None:
        _check_finite(self, "train_encoder")
        if self.pooling not in ("cls", "mean"):
            raise CiteflowError(f"train_encoder.pooling must be cls or mean, not {self.pooling!r}")
        for name in (
            "max_length",
            "epochs",
            "batch_size",
            "vocab_size",
            "hidden_size",
            "layers",
            "heads",
            "per_device_batch",
            "checkpoint_every",
        ):
            if getattr(self, name) < 1:
                raise CiteflowError(f"train_encoder.{name} must be at least 1")
        if self.max_length > 8192:
            raise CiteflowError("train_encoder.max_length must be at most 8192")
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

    def __post_init__(self) -> None:
        if self.model not in ("trained", "base"):
            raise CiteflowError(f"embed_papers.model must be trained or base, not {self.model!r}")
        if self.batch_size < 1:
            raise CiteflowError("embed_papers.batch_size must be at least 1")


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


def profile_overrides(name: str) -> tuple[str, ...]:
    if name not in PROFILES:
        raise CiteflowError(f"unknown profile {name!r}; profiles: {', '.join(PROFILES)}")
    return PROFILES[name]


def versioned_dict(config: Any) -> dict[str, Any]:
    """The fields of a stage config that define what it computes (the version's input)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        if not f.metadata.get("versioned", True):
            continue
        value = getattr(config, f.name)
        out[f.name] = versioned_dict(value) if dataclasses.is_dataclass(value) else _plain(value)
    return out


def to_dict(config: Any) -> dict[str, Any]:
    """Every field, nested, as JSON-ready values (for manifests and logs)."""
    return {f.name: _plain(getattr(config, f.name)) for f in dataclasses.fields(config)}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return to_dict(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def describe(config_cls: type) -> list[tuple[str, str, Any, str]]:
    """(name, type, default, help) per field, for `citeflow settings`."""
    rows = []
    hints = typing.get_type_hints(config_cls)
    for f in dataclasses.fields(config_cls):
        default = f.default if f.default is not dataclasses.MISSING else None
        rows.append((f.name, _type_name(hints[f.name]), default, f.metadata.get("help", "")))
    return rows


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is Literal:
        return "|".join(str(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))


def _parse_value(raw: str, tp: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    if origin is Literal:
        choices = typing.get_args(tp)
        if raw not in choices:
            raise CiteflowError(f"{key} must be one of {', '.join(map(str, choices))}, not {raw!r}")
        return raw
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if raw.lower() in ("none", "null", ""):
            return None
        return _parse_value(raw, args[0], key)
    if origin is tuple:
        (item_tp, *_rest) = typing.get_args(tp)
        return tuple(_parse_value(part, item_tp, key) for part in raw.split(",") if part)
    if tp is bool:
        lowered = raw.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise CiteflowError(f"{key} expects true or false, not {raw!r}")
    if tp is int:
        try:
            return int(raw)
        except ValueError:
            raise CiteflowError(f"{key} expects an integer, not {raw!r}") from None
    if tp is float:
        try:
            value = float(raw)
        except ValueError:
            raise CiteflowError(f"{key} expects a number, not {raw!r}") from None
        if not math.isfinite(value):
            raise CiteflowError(f"{key} expects a finite number, not {raw!r}")
        return value
    if tp is str:
        return raw
    raise CiteflowError(f"{key} cannot be set from the command line")


def apply_overrides(config: Any, overrides: list[str] | tuple[str, ...]) -> Any:
    """Return a copy of `config` with `section.key=value` (or `key=value`) overrides applied.

    Each value is parsed against the declared type of its field; unknown keys and
    values of the wrong type raise a `CiteflowError` naming the valid choices.
    """
    for item in overrides:
        if "=" not in item:
            raise CiteflowError(f"override {item!r} must look like stage.key=value")
        dotted, raw = item.split("=", 1)
        config = _set_path(config, dotted.strip().split("."), raw.strip(), dotted.strip())
    return config


def _set_path(config: Any, path: list[str], raw: str, key: str) -> Any:
    hints = typing.get_type_hints(type(config))
    names = [f.name for f in dataclasses.fields(config)]
    head = path[0]
    if head not in names:
        raise CiteflowError(f"unknown setting {key!r}; valid here: {', '.join(names)}")
    current = getattr(config, head)
    if len(path) > 1:
        if not dataclasses.is_dataclass(current):
            raise CiteflowError(f"{key!r}: {head} has no sub-settings")
        return dataclasses.replace(config, **{head: _set_path(current, path[1:], raw, key)})
    if dataclasses.is_dataclass(current):
        raise CiteflowError(
            f"{key!r} is a section; set one of its keys, e.g. {key}.{dataclasses.fields(current)[0].name}=..."
        )
    return dataclasses.replace(config, **{head: _parse_value(raw, hints[head], key)})
