"""A DAG run's settings: the trigger form's params as run settings (JSON, carried by XCom), and the RunConfig
every task builds from them (profile, form fields, the Airflow connections for Spark and PBG's rendezvous,
overrides), reading inputs only under the folders an administrator allowed; and the built-in demo snapshot
generated when a run names it.

Like `cockpit/orchestration.py`, only the standard library and light modules are imported here at module level
(the DAG files import it at parse time); Airflow's and citeflow's other modules are imported inside the functions.
"""

from __future__ import annotations

import os
from typing import Any

from citeflow.cockpit.settings import INPUT_ROOTS_VARIABLE, PBG_CONN_ID, SPARK_CONN_ID

# Settings only the Airflow connection sets: where Spark runs, what it loads and where it writes scratch files.
OPERATOR_SETTINGS = (
    "spark.master",
    "spark.remote",
    "spark.conf",
    "spark.local_dir",
    "embed_graph.rendezvous",
    "embed_graph.launch",
)
DEMO_PAPERS = 20_000


def ensure_demo_snapshot(demo: str, corpus: str) -> None:
    """Generate the built-in sample when a run asks for it and it is not there yet (first run, no make demo)."""
    snapshot = os.path.join(demo, "snapshot")
    if os.path.abspath(corpus) == os.path.join(snapshot, "corpus") and not os.path.exists(
        os.path.join(snapshot, "generator.json")
    ):
        from citeflow.synthcorpus.config import GenerateConfig
        from citeflow.synthcorpus.generate import run

        print(f"generating the built-in demo snapshot ({DEMO_PAPERS:,} papers) in {snapshot}")
        run(GenerateConfig(papers=DEMO_PAPERS, out=snapshot, overwrite=True))


def spark_master_from_connection() -> list[str]:
    """Overrides for Spark taken from the Airflow connection, or none when it is not defined."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = Connection.get(SPARK_CONN_ID)
    except AirflowNotFoundException:
        return []
    host = (conn.host or "").strip()
    if not host:
        return []
    if host.startswith("sc://"):  # Spark Connect: `sc://host`, port apart or in the host, parameters after `/;`
        address, _, params = host.removeprefix("sc://").partition("/")
        if conn.port and ":" not in address:
            address = f"{address}:{conn.port}"
        overrides = [f"spark.remote=sc://{address}" + (f"/{params}" if params else "")]
    else:
        master = f"{host}:{conn.port}" if conn.port and host.startswith(("spark://", "k8s://", "mesos://")) else host
        overrides = [f"spark.master={master}"]
    extra = conn.extra_dejson if isinstance(conn.extra_dejson, dict) else {}
    conf = [f"{k}={v}" for k, v in sorted(extra.items()) if k.startswith("spark.") and "," not in f"{k}={v}"]
    if conf:
        overrides.append(f"spark.conf={','.join(conf)}")
    return overrides


def input_roots() -> list[str]:
    """The folders a run may read its inputs from: the Airflow Variable `citeflow_input_roots` (env
    `CITEFLOW_INPUT_ROOTS_VARIABLE` names another), paths separated by commas; unset, the demo's folder
    ($CITEFLOW_HOME, else `demo/` in the checkout) alone."""
    from airflow.sdk import Variable

    from citeflow.cockpit.params import demo_root
    from citeflow.inputs import parse_roots

    return parse_roots(Variable.get(INPUT_ROOTS_VARIABLE, default=None)) or parse_roots(demo_root(__file__))


def pbg_rendezvous_from_connection() -> list[str]:
    """`embed_graph.rendezvous` from the Airflow connection (host and port), or none when it is not defined."""
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    from citeflow.errors import CiteflowError

    try:
        conn = Connection.get(PBG_CONN_ID)
    except AirflowNotFoundException:
        return []
    if not conn.port:
        raise CiteflowError(f"the Airflow connection {PBG_CONN_ID} needs a port: where rank 0 of PBG listens")
    host = (conn.host or "").strip().removeprefix("tcp://") or "*"
    return [f"embed_graph.rendezvous=tcp://{host}:{conn.port}"]


def run_config(settings: dict[str, Any]):
    """The RunConfig of a DAG run: profile, then form fields, then the Spark connection, then overrides."""
    from citeflow.config import RunConfig, apply_overrides, profile_overrides, validate_snapshot_id
    from citeflow.errors import CiteflowError
    from citeflow.inputs import check_under_roots, input_folders

    validate_snapshot_id(settings["snapshot"])
    for key in ("corpus", "scidocs", "paper_ids"):
        if settings[key] and not os.path.exists(settings[key]):
            raise CiteflowError(f"{key.replace('_', '-')} folder {settings[key]!r} does not exist")
    for item in settings["overrides"]:
        key = item.split("=", 1)[0].strip()
        if key in OPERATOR_SETTINGS:
            raise CiteflowError(
                f"{key} cannot be set from the trigger form: it comes from the Airflow connection {SPARK_CONN_ID}"
            )
    overrides = [*profile_overrides(settings["profile"]), f"build_graph.format={settings['corpus_format']}"]
    if settings["model"] and settings["model"] != "small":
        overrides.append(f"train_encoder.model={settings['model']}")
    # read here, in the task, every time: the connection's extras never travel through XCom
    overrides += spark_master_from_connection()
    overrides += pbg_rendezvous_from_connection()
    overrides += settings["overrides"]
    base = RunConfig(
        snapshot=settings["snapshot"],
        corpus=settings["corpus"],
        scidocs=settings["scidocs"],
        paper_ids=settings["paper_ids"],
        artifacts=settings["artifacts"],
    )
    config = apply_overrides(base, overrides)
    # the trigger form names folders on the workers' disks: only those an administrator allowed are read
    check_under_roots(input_folders(config), input_roots(), f"the Airflow Variable {INPUT_ROOTS_VARIABLE}")
    if config.embed_graph.machines > 1:
        # under Airflow the other ranks are the embed_graph_rank tasks: rank 0 never starts them itself
        if not config.embed_graph.rendezvous:
            raise CiteflowError(
                f"embed_graph.machines={config.embed_graph.machines} needs the Airflow connection {PBG_CONN_ID}: "
                "port (and host) where rank 0 listens, e.g. AIRFLOW_CONN_PBG_RENDEZVOUS='tcp://:29500'"
            )
        config = apply_overrides(config, ["embed_graph.launch=external"])
    return config


def settings_from_params(params: dict[str, Any], **fields: str) -> dict[str, Any]:
    """Run settings (JSON, carried by XCom) from the form's params plus DAG-specific `fields`."""
    settings = {
        key: params[key] for key in ("scidocs", "artifacts", "triplet_strategy", "model", "profile", "corpus_format")
    }
    settings["overrides"] = [str(o) for o in params["overrides"]]
    settings.update(fields)
    return settings
