"""Generated snapshots shared by the end-to-end tests (made once per session)."""

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.airflow_cli import FAST_OVERRIDES, AirflowHome

GENERATED_PAPERS = 3000


def _generate(tmp_path_factory, fmt: str):
    from citeflow.synthcorpus.config import GenerateConfig
    from citeflow.synthcorpus.generate import run

    out = tmp_path_factory.mktemp(f"gen-{fmt}") / "snapshot"
    run(GenerateConfig(papers=GENERATED_PAPERS, out=str(out), seed=7, format=fmt, shards=3))
    return out, json.loads((out / "generator.json").read_text())


def release_config(root: Path, release: str, artifacts: Path, overrides: list[str]):
    """The RunConfig of a release folder `root/release` (its corpus, SciDocs and paper-ids) with `overrides`."""
    from citeflow.config import RunConfig, apply_overrides

    base = RunConfig(
        snapshot=release,
        corpus=str(root / release / "corpus"),
        scidocs=str(root / release / "scidocs"),
        paper_ids=str(root / release / "paper-ids"),
        artifacts=str(artifacts),
    )
    return apply_overrides(base, overrides)


@pytest.fixture(scope="session")
def generated_s2orc(tmp_path_factory):
    return _generate(tmp_path_factory, "s2orc")


@pytest.fixture(scope="session")
def generated_s2ag(tmp_path_factory):
    return _generate(tmp_path_factory, "s2ag")


TOPICS_PAPERS = 20_000


@pytest.fixture(scope="session")
def generated_topics(tmp_path_factory):
    """A 20k-paper snapshot: communities (~125 papers per subtopic in the graph) large enough for the
    neighbourhood tests of mine_triplets and the encoder, whose truth is in paper_topics.parquet."""
    from citeflow.synthcorpus.config import GenerateConfig
    from citeflow.synthcorpus.generate import run

    out = tmp_path_factory.mktemp("gen-topics") / "snapshot"
    run(GenerateConfig(papers=TOPICS_PAPERS, out=str(out), seed=7, format="s2orc", shards=3))
    return out, json.loads((out / "generator.json").read_text())


@pytest.fixture(scope="session")
def topics_config(generated_topics, tmp_path_factory):
    """RunConfig over generated_topics for the stages after embed_graph.

    report_only keeps the whole graph: the generator's SciDocs set takes most of a small corpus's edges
    with it, which leaves PBG too little graph for topical neighbourhoods. The demo profile scales the
    windows to the pool (k_pos=5: rank 25 of 15k papers is a 20x coarser neighbourhood than rank 25 of
    SciNCL's 681k) and mines 4,000 queries: on the calibrated (realistic) snapshot the small encoder needs
    its 625 steps before its loss falls clearly (with 1,000 queries it does not beat its base).
    """
    from citeflow.config import RunConfig, apply_overrides, profile_overrides
    from tests.conftest import SHARED_DATA, TEST_SPARK_OVERRIDES

    snap, _ = generated_topics
    # the real SciRepEval samples, scored by the chain's benchmark (tests/e2e/test_benchmark.py) where they are at
    # hand: a benchmark task joins filter_leakage's audit, so adding them later would build the chain again
    scirepeval = SHARED_DATA / "scirepeval"
    scored_too = [f"benchmark.scirepeval={scirepeval}"] if scirepeval.is_dir() else []
    base = RunConfig(
        snapshot="topics",
        corpus=str(snap / "corpus"),
        scidocs=str(snap / "scidocs"),
        paper_ids=str(snap / "paper-ids"),
        artifacts=str(tmp_path_factory.mktemp("topics-artifacts")),
    )
    return apply_overrides(
        base,
        [
            *TEST_SPARK_OVERRIDES,
            *profile_overrides("demo"),
            "filter_leakage.mode=report_only",
            # the mining and encoder tests need the mining run only: skip the link-prediction run
            "embed_graph.link_prediction=false",
            "embed_graph.holdout=0",
            # one HOGWILD worker: the chain repeats bit for bit, so the neighbourhood and encoder thresholds
            # are checked on one outcome rather than on a draw (with 2 workers the encoder's unseen-paper
            # share ranged 0.086 to 0.156 over four runs)
            "embed_graph.workers=1",
            *scored_too,
        ],
    )


@dataclass(frozen=True)
class AirflowRebuild:
    """One `airflow dags test citeflow_rebuild` run: its Airflow home, artifact root, conf and log."""

    airflow: AirflowHome
    conf: dict
    log: str

    @property
    def artifacts(self) -> Path:
        return Path(self.conf["artifacts"])


@pytest.fixture(scope="session")
def airflow_rebuild(generated_s2orc, tmp_path_factory) -> AirflowRebuild:
    """`citeflow_rebuild` through Airflow's own command line on generated_s2orc, both triplet strategies,
    Spark's master from the Airflow connection: the first run that `test_dag_run` checks, made once.

    Its artifact root seeds the other whole-pipeline Airflow tests (`seeded_artifacts`), whose runs reuse
    its versions instead of building the same 3,000-paper pipeline again (each build is minutes here).
    """
    snap, _ = generated_s2orc
    base = tmp_path_factory.mktemp("airflow-rebuild")
    airflow = AirflowHome(
        base / "airflow", AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]"})
    )
    conf = {
        "snapshot": "dag-demo",
        "corpus": str(snap / "corpus"),
        "scidocs": str(snap / "scidocs"),
        "paper_ids": str(snap / "paper-ids"),
        "artifacts": str(base / "artifacts"),
        "triplet_strategy": "both",
        "overrides": FAST_OVERRIDES,
    }
    log = airflow.dags_test("citeflow_rebuild", conf)
    return AirflowRebuild(airflow, conf, log)


@pytest.fixture
def seeded_artifacts(airflow_rebuild, tmp_path) -> Path:
    """An artifact root of the test's own holding a copy of airflow_rebuild's (snapshot `dag-demo`): a run of
    the same inputs and settings under another snapshot id reuses those versions (cross-snapshot reuse)."""
    target = tmp_path / "artifacts"
    shutil.copytree(airflow_rebuild.artifacts, target)
    return target


# The trigger conf's settings of the runs on the deployment (tests/e2e/test_deployment.py): the fast settings,
# distributed PBG over two ranks (which needs four partitions) for the mining run only, a checkpoint every 4
# training steps.
DEPLOYED_OVERRIDES = [
    *FAST_OVERRIDES,
    "embed_graph.num_partitions=4",
    "embed_graph.machines=2",
    "embed_graph.link_prediction=false",
    "train_encoder.checkpoint_every=4",
]


@pytest.fixture(scope="session")
def deployed_encoder(generated_s2orc, tmp_path_factory) -> Path:
    """A small encoder folder every train_encoder run on the deployment starts from (the trigger form's encoder
    field), so that a training repeats bit for bit. With `model=small` the stage trains a WordPiece vocabulary
    first, and on a few hundred texts the tokens tied at its size limit are chosen in hash-map order: another
    vocabulary (so another model) in another process."""
    import contextlib
    import gzip

    from citeflow.models.encoder.model import build_small, paper_text

    snap, _ = generated_s2orc
    papers = []
    with gzip.open(sorted((snap / "corpus" / "metadata").glob("*.jsonl.gz"))[0], "rt", errors="replace") as fh:
        for line in fh:
            with contextlib.suppress(ValueError):  # the generator's deliberately broken records
                papers.append(json.loads(line))
    folder = tmp_path_factory.mktemp("deployed-encoder") / "small"
    texts = (paper_text(p.get("title") or "", p.get("abstract") or "", "") for p in papers if isinstance(p, dict))
    build_small(texts, folder, vocab_size=2000, hidden=32, layers=1, heads=2, intermediate=64, max_length=32, seed=0)
    return folder


@pytest.fixture(scope="module")
def deployment():
    """The deployment launcher's Airflow (PostgreSQL, Redis, Celery workers on citeflow's queues) in a home of
    its own, shared by the tests of tests/e2e/test_deployment.py; stopped as a user stops it, and nothing it
    started may outlive it. Module-scoped: stopped once that module's last test is done, not left idling beside
    the rest of its worker's session (45 processes, about 2 GiB, a tenth of a core at rest)."""
    from tests.e2e.deployment import DeployedAirflow, deployment_root, remove_root

    root = deployment_root()
    try:
        handle = DeployedAirflow.start(root)
        try:
            handle.rest().wait_for_dag("citeflow_rebuild")
            yield handle
        finally:
            handle.stop()
    finally:
        remove_root(root)


@dataclass(frozen=True)
class DeployedRebuild:
    """Two triggers of `citeflow_rebuild` for one snapshot, sent through the REST API at once: their run ids
    (in the order sent), conf, and the runs as the API reports them once finished."""

    run_ids: tuple[str, str]
    conf: dict
    runs: tuple[dict, dict]
    seconds: float

    @property
    def artifacts(self) -> Path:
        return Path(self.conf["artifacts"])


@pytest.fixture(scope="module")
def deployed_rebuild(deployment, generated_s2orc, deployed_encoder, tmp_path_factory) -> DeployedRebuild:
    """The rebuild on the deployment, triggered twice at once for the same snapshot: the first builds every
    stage, the second waits for it (the DAG runs one run at a time) and then finds every stage up to date."""
    import time

    snap, _ = generated_s2orc
    conf = {
        "snapshot": "deployed",
        "corpus": str(snap / "corpus"),
        "scidocs": str(snap / "scidocs"),
        "paper_ids": str(snap / "paper-ids"),
        "artifacts": str(tmp_path_factory.mktemp("deployed") / "artifacts"),
        "triplet_strategy": "scincl",
        "model": str(deployed_encoder),
        "overrides": DEPLOYED_OVERRIDES,
    }
    rest = deployment.rest()
    run_ids = ("deployed-1", "deployed-2")
    t0 = time.monotonic()
    for run_id in run_ids:
        rest.trigger("citeflow_rebuild", run_id, conf)
    runs = tuple(rest.wait_for_run("citeflow_rebuild", run_id, timeout=40 * 60) for run_id in run_ids)
    return DeployedRebuild(run_ids, conf, runs, time.monotonic() - t0)
