"""The stages, declared once: the only place their order and their edges are written.

Each `Stage` names what a stage builds on (`upstream`; `variants`, an upstream stage read under other
settings; `previous`, whether it reads its own version of an earlier release), the tables it writes, the
`RunConfig` section that holds its settings, whether it runs once per triplet strategy, whether it needs a
local artifact root, and which kind of worker it wants. Everything else reads it: `citeflow.jobs.pipeline` (the only
module that resolves a stage's upstream versions and runs it, and checks that a stage read only what it
declares), the CLI's stage choices and `citeflow settings`, the Airflow task layout (`citeflow.cockpit.orchestration`)
and the artifact views. A stage's code lives in `jobs/<name>.py` as `run_on(ctx) -> Manifest` (ctx: a
`citeflow.jobs.pipeline.StageContext`); no stage calls another.

A new stage is one entry here, one config section in `citeflow.config.run.RunConfig` and one module in `jobs/`
(docs/architecture.md walks through it).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any, Literal

from citeflow.errors import CiteflowError

# Which Airflow pool and queue a stage's task takes (citeflow.cockpit.orchestration maps them).
Worker = Literal["default", "pbg", "gpu"]


@dataclasses.dataclass(frozen=True)
class Variant:
    """An upstream stage that a stage reads a second time, under other settings: the benchmark scores the
    untrained base model beside the trained one, which is embed_papers with `model=base`. `when` names the
    boolean setting (`section.field`) that asks for it. The runner resolves it like any upstream (and Airflow
    gives it a task of its own, `<stage>_<name>`); the stage reads it as `upstream.variants[name]`."""

    name: str
    stage: str
    changes: tuple[tuple[str, Any], ...]  # (field of the stage's section, value)
    when: str

    def wanted(self, config: Any) -> bool:
        section, field = self.when.split(".")
        return bool(getattr(getattr(config, section), field))

    def config(self, config: Any) -> Any:
        """`config` with the variant's settings applied to its stage's section."""
        section = REGISTRY[self.stage].section
        changed = dataclasses.replace(getattr(config, section), **dict(self.changes))
        return dataclasses.replace(config, **{section: changed})

    @property
    def task_id(self) -> str:
        return f"{self.stage}_{self.name}"


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
    variants: tuple[Variant, ...] = ()
    # reads its own version of an earlier release of the corpus: a diff's base, a warm start (found by the stage
    # among the committed versions; never built by this run)
    previous: str = ""
    # stages further up that it reads through its upstream versions' lineage (not resolved by the runner: the
    # version its upstream was built from): the leakage audits read filter_leakage's list of benchmark papers
    lineage: tuple[str, ...] = ()
    # runs Spark jobs (a session, with a local driver its JVM, in the stage's process): `citeflow run` stops the
    # session once the last such stage of the run is done
    spark: bool = False

    @property
    def reads(self) -> tuple[str, ...]:
        """Every stage of this release whose versions it reads: its upstream, its variants' stages, its lineage."""
        variants = tuple(v.stage for v in self.variants if v.stage not in self.upstream)
        return self.upstream + variants + tuple(n for n in self.lineage if n not in self.upstream + variants)

    @property
    def module(self) -> str:
        return f"citeflow.jobs.{self.name}"

    def __post_init__(self) -> None:
        if self.main_table not in self.tables:
            raise ValueError(f"stage {self.name}: main_table {self.main_table!r} is not one of its tables")

    def entry(self) -> Callable[..., Any]:
        """The stage's `run_on(ctx) -> Manifest` (imported on first use: the registry stays light)."""
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
        spark=True,
        previous="the previous release's build_graph: a diff's base (build_graph.diff)",
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
        spark=True,
        previous="the previous release's filter_leakage: the versions built over a diff",
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
        previous="the previous release's embed_graph: a warm start (embed_graph.warm_start)",
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
        lineage=("filter_leakage",),
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
        lineage=("filter_leakage",),
        previous="the previous release's train_encoder: a warm start (train_encoder.warm_start)",
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
        variants=(Variant("base", "embed_papers", (("model", "base"),), when="benchmark.base"),),
    ),
)

REGISTRY: dict[str, Stage] = {stage.name: stage for stage in _DECLARED}
# Stage names in pipeline order.
STAGES: tuple[str, ...] = tuple(REGISTRY)


@dataclasses.dataclass(frozen=True)
class Report:
    """A versioned report over two releases of the corpus, not a stage of one run: it reads a stage's version
    in each release (`after`, whose lineage it follows: `reads`) and writes its tables under the later one.
    `citeflow compare` runs it on any two releases; the releases DAG runs it, once per strategy, after `after`,
    against the release the diff started from (`previous`). Its code lives in `jobs/<name>.py`."""

    name: str
    after: str  # the stage whose version in each release it starts from (its task follows that stage's)
    reads: tuple[str, ...]  # the stages whose versions it reads, in both releases
    tables: tuple[str, ...]
    main_table: str
    per_strategy: bool
    summary: str
    previous: str

    @property
    def module(self) -> str:
        return f"citeflow.jobs.{self.name}"

    def __post_init__(self) -> None:
        if self.main_table not in self.tables:
            raise ValueError(f"report {self.name}: main_table {self.main_table!r} is not one of its tables")


REPORTS: dict[str, Report] = {
    report.name: report
    for report in (
        Report(
            "drift",
            after="benchmark",
            reads=STAGES,
            tables=("summary", "histogram"),
            main_table="summary",
            per_strategy=True,
            summary="two releases' benchmarks and their lineage -> what the later release changed (drift report)",
            previous="the release this release's build_graph was merged from by a diff (citeflow compare: any)",
        ),
    )
}


# Triplet strategies by name: how mine_triplets picks each query's positives and negatives.
STRATEGIES: dict[str, str] = {
    "scincl": "kNN windows over the graph embeddings (SciNCL)",
    "specter": "citations as positives, citations of citations as hard negatives (SPECTER)",
}
# FAISS index kinds by name: how mine_triplets searches the graph embeddings (models/triplets/knn.py builds them).
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
    """Every stage builds only on stages declared before it (so pipeline order is a topological order), and a
    report reads only stages."""
    for i, declared in enumerate(_DECLARED):
        for name in declared.reads:
            if name not in STAGES[:i]:
                raise CiteflowError(f"stage {declared.name} builds on {name!r}, which is not declared before it")
    for report in REPORTS.values():
        if report.after not in report.reads or not set(report.reads) <= set(STAGES) or report.name in REGISTRY:
            raise CiteflowError(f"report {report.name} reads {report.reads!r}: stages only, {report.after} among them")


def undeclared_reads(stage_name: str, snapshot: str, inputs: list[dict[str, Any]]) -> list[str]:
    """The versions among a manifest's `inputs` that its stage's entry does not declare: a stage of this release
    outside `reads`, or an earlier release's version where the stage declares no `previous` read (of itself)."""
    if stage_name in REPORTS:  # a report reads both releases' versions of the stages it declares
        report = REPORTS[stage_name]
        return [f"{i['stage']} {i.get('version')}" for i in inputs if i.get("stage") not in (None, *report.reads)]
    spec = REGISTRY[stage_name]
    found = []
    for item in inputs:
        name = item.get("stage")
        if name is None:
            continue  # an input from outside the artifact root (corpus, SciDocs, a model folder)
        earlier = item.get("snapshot", snapshot) != snapshot
        if (earlier and not (spec.previous and name == stage_name)) or (not earlier and name not in spec.reads):
            found.append(f"{name} {item.get('version')}" + (f" of snapshot {item['snapshot']}" if earlier else ""))
    return found


check_order()

WORKERS = {"default": "default pool", "pbg": "PBG pool", "gpu": "GPU pool"}


def mermaid() -> str:
    """The registry's graph as a Mermaid flowchart (docs/architecture.md holds it; `python -m citeflow.registry`
    prints it): each stage with its worker and tables, its upstream edges, its variants (dashed, with their
    settings), its lineage reads (dotted), its previous-release reads (a loop) and the reports after it."""

    def node(name: str, kind: str, tables: tuple[str, ...]) -> str:
        return f'  {name}["<b>{name}</b> ({kind})<br/>{", ".join(tables)}"]'

    def kind(s: Stage) -> str:
        return f"{'local' if s.local_root else 'Spark'}, {WORKERS[s.worker]}"

    lines = ["flowchart TD"]
    shared = [s for s in REGISTRY.values() if not s.per_strategy]
    per = [s for s in REGISTRY.values() if s.per_strategy]
    lines += [node(s.name, kind(s), s.tables) for s in shared]
    lines.append('  subgraph per_strategy["once per triplet strategy"]')
    lines += ["  " + node(s.name, kind(s), s.tables) for s in per]
    lines += ["  " + node(r.name, "report over two releases", r.tables) for r in REPORTS.values() if r.per_strategy]
    lines.append("  end")
    for s in REGISTRY.values():
        lines += [f"  {name} --> {s.name}" for name in s.upstream]
        for v in s.variants:
            settings = ", ".join(f"{field}={value}" for field, value in v.changes)
            lines.append(f'  {v.stage} -. "variant {v.name}: {settings}" .-> {s.name}')
        lines += [f'  {name} -. "lineage" .-> {s.name}' for name in s.lineage]
        if s.previous:
            lines.append(f'  {s.name} -. "previous release" .-> {s.name}')
    for r in REPORTS.values():
        lines.append(f'  {r.after} == "both releases" ==> {r.name}')
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(mermaid(), end="")
