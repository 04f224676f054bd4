"""`citeflow export-model`: the trained model of a snapshot and strategy, with its model card, in one folder.

    citeflow export-model --snapshot demo --strategy scincl --out dist/citeflow-scincl [--benchmark V]

Reads the benchmark version of the snapshot whose strategy is `--strategy` (its manifest and `scores`): the only
one, or the one `--benchmark` names when there are several (never "the newest"), and the trained model it scored
(train_encoder's `model/`: safetensors, config, tokenizer, citeflow.json). Writes `--out` (absent or empty, or
`--overwrite` of a previous export: `citeflow/export_folder.py`), which loads anywhere:
- the Hugging Face layout (`transformers.AutoModel.from_pretrained(out)`);
- the sentence-transformers layout (`modules.json`, `1_Pooling/config.json`, `sentence_bert_config.json`) with
  the pooling, max length and normalisation citeflow trained with, so `SentenceTransformer(out).encode(texts)`
  gives citeflow's own vectors (and MTEB, which runs sentence-transformers models, scores those);
- `README.md`, the model card (evaluation/model_card.py) made afresh from the benchmark's scores and lineage:
  a `model-index` block, the leakage audit and every artifact version.
Its files are copies (never links into the artifact root), staged in a hidden folder of its own beside
`--out` and renamed into place, so a killed export leaves no half folder at `--out`. No ONNX: that needs an
exporter (optimum) citeflow does not depend on (docs/models.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from citeflow.artifacts import ArtifactStore
from citeflow.errors import CiteflowError
from citeflow.evaluation.model_card import usage_of
from citeflow.export_folder import ExportFolder
from citeflow.jobs.benchmark import STAGE, card_text
from citeflow.models.encoder.folder import write_sentence_transformers_files
from citeflow.registry import STRATEGIES
from citeflow.registry import named as one_of


def export_model(
    *, snapshot: str, strategy: str, out: str, artifacts: str, overwrite: bool = False, benchmark: str | None = None
) -> Path:
    one_of("--strategy", strategy, STRATEGIES)
    store = ArtifactStore(artifacts)
    if not store.local:
        raise CiteflowError("export-model reads a local artifact root")
    versions = [m for m in store.list_versions(snapshot, STAGE) if m.metrics.get("strategy") == strategy]
    if not versions:
        raise CiteflowError(
            f"no benchmark of snapshot {snapshot!r} with strategy {strategy!r} under {store.uri}: "
            f"run `citeflow run --snapshot {snapshot} ... --strategy {strategy}` first"
        )
    if benchmark is not None:
        named = [m for m in versions if m.version == benchmark]
        if not named:
            raise CiteflowError(
                f"benchmark version {benchmark!r} is not one of snapshot {snapshot!r}'s {strategy} benchmarks: "
                f"{', '.join(m.version for m in versions)}"
            )
        versions = named
    if len(versions) > 1:
        listed = ", ".join(f"{m.version} ({m.finished_at[:19]})" for m in versions)
        raise CiteflowError(
            f"snapshot {snapshot!r} has {len(versions)} {strategy} benchmarks: name one with --benchmark ({listed})"
        )
    chosen = versions[0]
    embedded = [
        store.read_manifest(snapshot, "embed_papers", item["version"])
        for item in chosen.inputs
        if item.get("stage") == "embed_papers"
    ]
    trained = next((m for m in embedded if m is not None and m.metrics.get("model") == "trained"), None)
    named_folder = trained.metrics.get("model_folder") if trained else None
    model = Path(named_folder) if named_folder else None
    if trained is None or model is None or not (model / "config.json").is_file():
        raise CiteflowError(f"benchmark {chosen.version} has no trained model folder to export")
    folder = ExportFolder(out, overwrite=overwrite, kind="export-model")  # checked before any work
    card = _card(store, snapshot, chosen, trained, folder.target)
    usage = usage_of(store.upstream(trained, "train_encoder").config.get("train_encoder", {}))
    dimension = json.loads((model / "config.json").read_text())["hidden_size"]
    with folder:
        assert folder.staging is not None  # made as the folder was entered
        folder.copy_tree(model)  # copies of the committed files, never links into the artifact root
        # written here, not only copied: versions trained before citeflow wrote them have none
        write_sentence_transformers_files(folder.staging, **usage, dimension=dimension)
        folder.write_text("README.md", card)
    return folder.target


def _card(store: ArtifactStore, snapshot: str, benchmark, trained, out: Path) -> str:
    """The card of `benchmark` from its stored scores (the trained model's rows) and the versions behind it."""
    import pyarrow.parquet as pq

    rows = [r for r in pq.read_table(benchmark.table_path("scores")).to_pylist() if r["model"] == "trained"]
    return card_text(store, snapshot, trained, rows, benchmark.version, model_path=out)
