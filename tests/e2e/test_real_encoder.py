"""A real pretrained encoder end to end on real papers: all-MiniLM-L6-v2 (tests/support/real_encoder.py) as
`train_encoder.model`, fine-tuned for a few steps on the SciNCL triplets of a 1,200-paper arXiv HEP-Th sub-graph
(tests/support/hepth.py) with the `pretrained-cpu` profile, then embed_papers, the benchmark on the held-out
citation tasks the converter builds, and export-model, whose folder sentence-transformers loads and encodes with
the vectors citeflow benchmarked.

Sized in steps, not epochs (a real encoder trains at a few triplets a second on this machine). Skipped locally
without ../shared/data/hepth or the encoder package; failed under CI=true, where both are there.
"""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from citeflow.artifacts import ArtifactStore
from citeflow.config import RunConfig, apply_overrides, profile_overrides
from citeflow.jobs.pipeline import run_pipeline
from tests.conftest import TEST_SPARK_OVERRIDES
from tests.support.hepth import HepthConfig, require_hepth, write_releases
from tests.support.real_encoder import real_encoder

pytestmark = pytest.mark.slow
STEPS = 3
SMALL = [
    "embed_graph.workers=1",
    "embed_graph.num_epochs=4",
    "embed_graph.link_prediction=false",
    "embed_graph.holdout=0",
    "mine_triplets.num_queries=200",
    f"train_encoder.max_steps={STEPS}",
    "train_encoder.batch_size=8",
    "train_encoder.per_device_batch=4",
    "train_encoder.max_length=64",
    "train_encoder.checkpoint_every=3",
]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    require_hepth()
    model = real_encoder()
    written = write_releases(
        HepthConfig(out=str(tmp_path_factory.mktemp("hepth") / "releases"), subset=1200, years=(2001,), queries=12)
    )
    (release,) = written.releases
    base = RunConfig(
        snapshot=release.release,
        corpus=str(release.corpus),
        scidocs=str(release.scidocs),
        paper_ids=str(release.paper_ids),
        artifacts=str(tmp_path_factory.mktemp("artifacts")),
    )
    overrides = [*TEST_SPARK_OVERRIDES, *profile_overrides("pretrained-cpu"), f"train_encoder.model={model}", *SMALL]
    config = apply_overrides(base, overrides)
    manifests = {m.stage: m for m in run_pipeline(config, report=lambda line: None)}
    return config, model, manifests


def test_the_real_encoder_trains_on_real_triplets_with_the_folders_own_settings(pipeline):
    _, model, m = pipeline
    train = m["train_encoder"]
    resolved = train.config["train_encoder"]
    # the folder's sentence-transformers files decide pooling, normalisation and the length the model embeds at;
    # the profile's length is the training length
    assert (resolved["pooling"], resolved["normalize"], resolved["max_length"]) == ("mean", True, 64)
    assert resolved["inference_max_length"] == 256
    assert "1_Pooling/config.json" in train.config["resolved_from"]["pooling"]
    log = pq.read_table(train.table_path("training_log")).to_pylist()
    steps = [r for r in log if r.get("step") is not None]
    assert len(steps) == STEPS and all(np.isfinite(r["loss"]) for r in steps)
    assert m["mine_triplets"].metrics["strategy"] == "scincl" and m["mine_triplets"].tables["triplets"]["rows"] > 0


def test_the_benchmark_scores_the_real_model_on_held_out_real_citations(pipeline):
    _, _, m = pipeline
    scores = pq.read_table(m["benchmark"].table_path("scores")).to_pylist()
    got = {(r["model"], r["task"], r["split"], r["metric"]): r for r in scores}
    for model in ("trained", "base"):
        for task in ("cite", "cocite"):
            row = got[(model, task, "test", "map")]
            assert row["status"] == "ok" and row["n"] > 0, row
            # a pretrained encoder ranks real citations far above chance (random vectors: about 22 MAP here)
            assert row["value"] > 40, row
    leak = m["filter_leakage"]
    assert leak.metrics["suites"]["scidocs"]["removed_papers"] > 0  # the held-out papers left the graph


def test_the_exported_model_loads_in_sentence_transformers_with_citeflows_vectors(pipeline, tmp_path):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    from citeflow.jobs.cli.export_model import export_model
    from citeflow.jobs.embed_papers import read_papers
    from citeflow.models.encoder.model import paper_text

    config, _, m = pipeline
    out = export_model(
        snapshot=config.snapshot, strategy="scincl", out=str(tmp_path / "export"), artifacts=config.artifacts
    )
    assert AutoModel.from_pretrained(str(out), local_files_only=True) is not None
    store = ArtifactStore(config.artifacts)
    trained = next(
        e
        for e in (store.read_manifest(config.snapshot, "embed_papers", i["version"]) for i in m["benchmark"].inputs)
        if e is not None and e.metrics["model"] == "trained"
    )
    table = pq.read_table(trained.table_path("embeddings")).to_pydict()
    papers = {paper_id: (title, abstract) for paper_id, title, abstract in read_papers(config.scidocs)}
    model = SentenceTransformer(str(out), device="cpu")
    assert model.max_seq_length == 256  # all-MiniLM-L6-v2's own, though trained at 64
    ids = table["paper_id"][:48]
    texts = [paper_text(*papers[i], model.tokenizer.sep_token) for i in ids]
    ours = np.array(table["embedding"][:48], dtype=np.float32)
    # papers longer than the 64 training tokens are among them: at 64 their vectors would differ
    assert sum(len(ids) > 64 for ids in model.tokenizer(texts)["input_ids"]) >= 10
    assert np.abs(model.encode(texts, batch_size=16, convert_to_numpy=True) - ours).max() <= 1e-5
    about = json.loads((out / "citeflow.json").read_text())
    assert (about["max_length"], about["training_max_length"]) == (256, 64)
    card = (out / "README.md").read_text()
    assert "model-index" in card and config.snapshot in card
    assert json.loads((out / "modules.json").read_text())[1]["type"].endswith("Pooling")
