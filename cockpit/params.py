"""The trigger forms of citeflow's DAGs: the Params a user fills in to start a run, with their defaults.

Defaults run the built-in demo (`demo_root`). `check_inputs` in `cockpit/orchestration.py` validates
what a user typed before any work; the form itself already refuses a malformed snapshot id.
Only `airflow.sdk` and the standard library are imported: the scheduler parses the DAG files often.
"""

from __future__ import annotations

import os

from airflow.sdk import Param

from citeflow.config import SNAPSHOT_ID_RE
from citeflow.registry import STRATEGIES

SNAPSHOT_PATTERN = f"^{SNAPSHOT_ID_RE.pattern}$"


def demo_root(dag_file: str) -> str:
    """Where the built-in demo lives: $CITEFLOW_HOME, else `demo/` beside the DAG folder (the checkout)."""
    return os.environ.get("CITEFLOW_HOME") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(dag_file))), "demo"
    )


def common_params(demo: str) -> dict[str, Param]:
    """Trigger-form fields every citeflow DAG shares (what to train and how); defaults run the demo, with the
    artifact root from $CITEFLOW_ARTIFACTS when set (`python -m citeflow.cockpit.local_airflow --artifacts`)."""
    return {
        "scidocs": Param(
            os.path.join(demo, "snapshot", "scidocs"),
            type="string",
            title="SciDocs folder",
            minLength=1,
            description="SciDocs in the original or BEIR layout: its papers are kept out of training "
            "(leakage), and it is the benchmark",
        ),
        "artifacts": Param(
            os.environ.get("CITEFLOW_ARTIFACTS") or os.path.join(demo, "artifacts"),
            type="string",
            title="Artifact root",
            description="local path or URI (s3://...) under which every stage writes its versions",
        ),
        "triplet_strategy": Param(
            "scincl",
            enum=[*STRATEGIES, "both"],
            title="Triplet strategy",
            description="SciNCL kNN windows, SPECTER citations, or both (two models to compare)",
        ),
        "model": Param(
            "small",
            type="string",
            title="Encoder to start from",
            description="'small' (a small BERT built from a config, tokenizer trained on the corpus) "
            "or a local Hugging Face model folder, e.g. /models/scibert_scivocab_uncased",
        ),
        "profile": Param(
            "demo",
            enum=["demo", "pretrained-cpu", "full"],
            title="Profile",
            description="demo: settings sized for one small machine; pretrained-cpu: a real pretrained encoder "
            "(set the encoder folder above) fine-tuned on one small machine; full: the published settings",
        ),
        "overrides": Param(
            [],
            type="array",
            items={"type": "string", "pattern": r"^[a-z_]+(\.[a-z_]+)?=.*$"},
            title="Setting overrides",
            description="one stage.key=value per line, e.g. mine_triplets.k_hard=3000 "
            "(`citeflow settings` lists them all)",
        ),
    }


def rebuild_params(demo: str) -> dict[str, Param]:
    """The trigger form of `citeflow_rebuild`: which snapshot, where it lies, and the common fields."""
    snapshot = os.path.join(demo, "snapshot")
    return {
        "snapshot": Param(
            "demo",
            type="string",
            pattern=SNAPSHOT_PATTERN,
            maxLength=128,
            title="Snapshot id",
            description="names the snapshot's artifacts (letters, digits, . _ -), e.g. 2023-08-29",
        ),
        "corpus": Param(
            os.path.join(snapshot, "corpus"),
            type="string",
            minLength=1,
            title="Corpus folder",
            description="S2ORC (metadata/*.jsonl.gz) or S2AG (papers/, abstracts/, citations/)",
        ),
        "corpus_format": Param(
            "auto",
            enum=["auto", "s2orc", "s2ag"],
            title="Corpus format",
            description="auto: recognised from the folder's layout",
        ),
        "paper_ids": Param(
            os.path.join(snapshot, "paper-ids"),
            type="string",
            title="paper-ids folder",
            description="S2AG paper-ids shards (sha -> corpus id) to map SciDocs ids; may be empty",
        ),
        **common_params(demo),
    }


def release_params(demo: str, releases_root: str) -> dict[str, Param]:
    """The form of `citeflow_releases`: the folder of dated releases and the common fields."""
    return {
        "releases_root": Param(
            releases_root,
            type="string",
            minLength=1,
            title="Releases folder",
            description="one sub-folder per release, named by its date (YYYY-MM-DD); a run "
            "processes the release of its logical date",
        ),
        "corpus_format": Param("auto", enum=["auto", "s2orc", "s2ag"], title="Corpus format"),
        **common_params(demo),
    }
