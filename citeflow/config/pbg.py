"""Stage embed_graph's settings: PyTorch-BigGraph's own options, and which of them the stage owns."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from citeflow.config.base import _check_fields, _help, validate_snapshot_id
from citeflow.errors import CiteflowError

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
class EmbedGraphConfig:
    """Stage embed_graph: PyTorch-BigGraph embeddings of the filtered citation graph.

    Defaults are SciNCL's settings (docs/reference.md §3; malteos/scincl
    biggraph_configs/s2orc_without_scidocs.py, PBG's own defaults for what it leaves unset); the `demo` profile
    shrinks them for one small machine.
    """

    dimension: int = field(default=768, metadata=_help("embedding dimension (SciNCL: 768)", at_least=1))
    comparator: Literal["dot", "cos"] = field(default="dot", metadata=_help("PBG comparator (SciNCL: dot beat cos)"))
    loss_fn: Literal["ranking", "softmax", "logistic"] = field(
        default="ranking", metadata=_help("PBG loss (SciNCL: ranking, PBG's default)")
    )
    margin: float = field(default=0.15, metadata=_help("ranking loss margin (SciNCL: 0.15)", at_least=0))
    lr: float = field(default=0.1, metadata=_help("Adagrad learning rate (SciNCL: 0.1)", above=0))
    num_epochs: int = field(default=20, metadata=_help("training epochs (SciNCL: 20 w/o leakage, 30 full)", at_least=1))
    batch_size: int = field(default=10_000, metadata=_help("edges per batch (SciNCL: 10,000)", at_least=1))
    num_edge_chunks: int = field(
        default=10, metadata=_help("edge chunks per epoch, bounds memory (SciNCL: 10)", at_least=1)
    )
    max_norm: float = field(default=1.0, metadata=_help("embedding norm cap; 0 disables it (SciNCL: 1.0)", at_least=0))
    global_emb: bool = field(
        default=False,
        metadata=_help(
            "add PBG's learned global vector to every embedding when scoring (PBG's default: true; SciNCL: false, "
            "because the exported vectors, which mining searches, do not carry it)"
        ),
    )
    num_partitions: int = field(
        default=1,
        metadata=_help("entity partitions (SciNCL: 1); distributed PBG needs at least 2 per machine", at_least=1),
    )
    num_uniform_negs: int = field(
        default=0,
        metadata=_help(
            "uniformly sampled negatives per batch chunk (SciNCL: 0, in-batch negatives only; PBG: 50)", at_least=0
        ),
    )
    num_batch_negs: int = field(
        default=50, metadata=_help("in-batch negatives per positive (PBG's default 50)", at_least=0)
    )
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
            "share of edges the link-prediction run holds out (SciNCL: 1%); 0 only with link_prediction=false",
            at_least=0,
            below=0.5,
        ),
    )
    eval_negatives: int = field(
        default=1000, metadata=_help("random candidates each held-out edge is ranked against", at_least=1)
    )
    overlap_k: int = field(
        default=25,
        metadata=_help(
            "neighbours compared between the two runs (SciNCL's positive window ends at rank 25)", at_least=1
        ),
    )
    seed: int = field(default=0, metadata=_help("seed for entity order, holdout and training", at_least=0))
    workers: int = field(
        default=0,
        metadata=_help(
            "PBG HOGWILD workers; 0: one per core (PBG's default). With more than one, workers update shared "
            "embeddings without locks and runs are not reproducible (see README)",
            versioned=False,
            at_least=0,
        ),
    )
    machines: int = field(
        default=1,
        metadata=_help(
            "PBG ranks (PBG's num_machines): above 1 the stage trains with PBG's own distributed mode and needs "
            "num_partitions >= 2 x machines. Like workers, it changes how the embeddings are trained, not what "
            "they are trained on, so it is not part of the version (HOGWILD runs differ from run to run anyway)",
            versioned=False,
            at_least=1,
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
            above=0,
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
            "share of num_epochs a warm-started mining run trains (rounded up, at least 1)",
            versioned=False,
            above=0,
            at_most=1,
        ),
    )

    def __post_init__(self) -> None:
        _check_fields(self, "embed_graph")
        if self.warm_start not in ("off", "auto"):
            validate_snapshot_id(self.warm_start)
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
        # entities cannot be trained distributed (docs/reference.md §3).
        if self.machines > 1 and self.num_partitions < 2 * self.machines:
            raise CiteflowError(
                f"distributed PBG on {self.machines} machines needs embed_graph.num_partitions >= "
                f"{2 * self.machines}, not {self.num_partitions}"
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
                "embed_graph.launch=external needs embed_graph.rendezvous=tcp://HOST:PORT, reachable from every rank"
            )
