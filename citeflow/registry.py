"""The stages, declared once: the only place their order and their edges are written.

Each `Stage` names what a stage builds on (`upstream`), the tables it writes, the `RunConfig` section that holds
its settings, whether it runs once per triplet strategy, whether it needs a local artifact root, and which kind
of worker it wants. Everything else reads it: `jobs.pipeline` (which resolves a stage's upstream versions and
runs it), the CLI's stage choices and `citeflow settings`, the Airflow task layout (`cockpit.orchestration`)
and the artifact views. A stage's code lives in `jobs/<name>.py` as `run_on(config, upstream) -> Manifest`;
no stage calls another.

A new stage is one entry here, one config section in `citeflow.config.run.RunConfig` and one module in `jobs/`
(docs/architecture.md walks through it).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any, Literal

from citeflow.errors import CiteflowError

# Which Airflow pool and queue a stage's task takes (cockpit.orchestration maps them).
Worker = Literal["default", "pbg", "gpu"]


@dataclasses.dataclass(frozen=True)
class Stage:
    name: str
    upstream: tuple[str, ...]  # the stages whose versions this one reads (their order is the pipeline's)
    tables: tuple[str, ...]  # the Parquet tables of each of its versions
    main_table: str  # the table a reader wants first: an export's default configuration (`load_dataset(OUT)`)
    section: str  # the RunConfig field with its settings (versioned: part of its version ids)
    per_strategy: bool  # runs once per triplet strategy (scincl, specter); the stages before are shared
    local_root: bool  # writes with local tools (PBG, numpy, FAISS, torch); Spark stages write to any root
    worker: Worker
    summary: str  # one line: what it makes from what

    @property
    def module(self) -> str:
        return f"jobs.{self.name}"

    def __post_init__(self) -> None:
        if self.main_table not in self.tables:
            raise ValueError(f"stage {self.name}: main_table {self.main_table!r} is not one of its tables")

    def entry(self) -> Callable[..., Any]:
        """The stage's `run_on(config, upstream) -> Manifest` (imported on first use: the registry stays light)."""
        return importlib.import_module(self.module).run_on

    def check(self, config: Any) -> None:
        """The stage's `check(config)` when it has one: user mistakes caught before its upstream is built."""
        check = getattr(importlib.import_module(self.module), "check", None)
        if check is not None:
            check(config)


_DECLARED = (
    Stage(
        "build_graph",
        upstream=(),
        tables=("papers", "citations", "degrees", "rejected", "degree_histogram"),
        main_table="citations",
        section="build_graph",
        per_strategy=False,
        local_root=False,
        worker="default",
        summary="corpus snapshot -> papers and their citation graph (Spark)",
    ),
    Stage(
        "filter_leakage",
        upstream=("build_graph",),
        tables=("benchmark_ids", "leakage_report", "papers", "citations", "degrees", "paper_keys", "paper_id_lines"),
        main_table="citations",
        section="filter_leakage",
        per_strategy=False,
        local_root=False,
        worker="default",
        summary="graph -> graph without the benchmark's papers, and the leakage report (Spark)",
    ),
    Stage(
        "embed_graph",
        upstream=("filter_leakage",),
        tables=("paper_embeddings", "link_prediction", "training_log"),
        main_table="paper_embeddings",
        section="embed_graph",
        per_strategy=False,
        local_root=True,
        worker="pbg",
        summary="leak-free graph -> graph embeddings (PyTorch-BigGraph)",
    ),
    Stage(
        "mine_triplets",
        upstream=("embed_graph",),
        tables=("triplets", "training_texts", "rank_histogram"),
        main_table="triplets",
        section="mine_triplets",
        per_strategy=True,
        local_root=True,
        worker="default",
        summary="graph embeddings -> (query, positive, negative) triplets (FAISS kNN or citations)",
    ),
    Stage(
        "train_encoder",
        upstream=("mine_triplets",),
        tables=("training_log",),
        main_table="training_log",
        section="train_encoder",
        per_strategy=True,
        local_root=True,
        worker="gpu",
        summary="triplets -> a Transformer encoder fine-tuned with triplet loss (torch, torchrun)",
    ),
    Stage(
        "embed_papers",
        upstream=("train_encoder",),
        tables=("embeddings",),
        main_table="embeddings",
        section="embed_papers",
        per_strategy=True,
        local_root=True,
        worker="gpu",
        summary="encoder -> embeddings of the benchmark's papers",
    ),
    Stage(
        "benchmark",
        upstream=("embed_papers",),
        tables=("scores",),
        main_table="scores",
        section="benchmark",
        per_strategy=True,
        local_root=True,
        worker="default",
        summary="embeddings -> SciDocs (and SciRepEval) scores, report and model card",
    ),
)

REGISTRY: dict[str, Stage] = {stage.name: stage for stage in _DECLARED}
# Stage names in pipeline order.
STAGES: tuple[str, ...] = tuple(REGISTRY)


# Triplet strategies by name: how mine_triplets picks each query's positives and negatives.
STRATEGIES: dict[str, str] = {
    "scincl": "kNN windows over the graph embeddings (SciNCL)",
    "specter": "citations as positives, citations of citations as hard negatives (SPECTER)",
}
# FAISS index kinds by name: how mine_triplets searches the graph embeddings (models/knn.py builds them).
INDEX_KINDS: dict[str, str] = {
    "flat": "exact search (SciNCL's)",
    "ivf": "inverted lists over k-means cells",
    "hnsw": "a graph of nearest neighbours",
    "ivfpq": "inverted lists with product-quantised vectors",
}


def named(what: str, name: str, known: dict[str, str] | tuple[str, ...]) -> str:
    """`name` when it is one of `known`; otherwise one line saying what `what` may be."""
    if name not in known:
        raise CiteflowError(f"{what} must be one of {', '.join(known)}, not {name!r}")
    return name


def stage(name: str) -> Stage:
    """The stage called `name`; an unknown name is one line listing the known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise CiteflowError(f"unknown stage {name!r}; stages are: {', '.join(STAGES)}") from None


def stages_until(until: str | None) -> list[str]:
    """The stages to run, in order, ending with `until` (inclusive; every stage when None)."""
    if until is None:
        return list(STAGES)
    stage(until)
    return list(STAGES[: STAGES.index(until) + 1])


def check_order() -> None:
    """Every stage builds only on stages declared before it (so pipeline order is a topological order)."""
    for i, declared in enumerate(_DECLARED):
        for name in declared.upstream:
            if name not in STAGES[:i]:
                raise CiteflowError(f"stage {declared.name} builds on {name!r}, which is not declared before it")


check_order()
