"""One embed_graph PBG training run launched: its PBG config from the stage's settings (`pbg_settings`), then
one process on this host (`citeflow.models.pbg.train.train_in_subprocess`) or PBG's distributed mode over
`embed_graph.machines` ranks meeting at `rendezvous_address` (launch=local: every rank here; launch=external:
rank 0 here, the others through their embed_graph_rank tasks, `models/pbg/ranks.py`), and the run's summary.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from citeflow.config import EmbedGraphConfig
from citeflow.errors import CiteflowError

log = logging.getLogger("citeflow")


def pbg_settings(
    cfg: EmbedGraphConfig,
    work: Path,
    edges: str,
    run: str,
    workers: int | None,
    init_path: str | None = None,
    num_epochs: int | None = None,
) -> dict[str, Any]:
    """The PBG config of one run: `edges` (a folder under `work`) in, `work/run/checkpoint` out; a warm start
    sets PBG's `init_path` and fewer epochs."""
    from citeflow.models.pbg.train import pbg_config

    extra = {}
    for item in cfg.pbg:
        key, value = item.split("=", 1)
        try:
            extra[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            extra[key.strip()] = value
    return pbg_config(
        entities=str(work / "entities"),
        train_edges=str(work / edges),
        checkpoint=str(work / run / "checkpoint"),
        num_partitions=cfg.num_partitions,
        dimension=cfg.dimension,
        comparator=cfg.comparator,
        loss_fn=cfg.loss_fn,
        margin=cfg.margin,
        lr=cfg.lr,
        num_epochs=num_epochs or cfg.num_epochs,
        batch_size=cfg.batch_size,
        num_edge_chunks=cfg.num_edge_chunks,
        max_norm=cfg.max_norm or None,
        workers=workers,
        num_uniform_negs=cfg.num_uniform_negs,
        num_batch_negs=cfg.num_batch_negs,
        global_emb=cfg.global_emb,
        extra={**extra, **({"init_path": init_path} if init_path else {})},
    )


def train_run(
    cfg: EmbedGraphConfig,
    work: Path,
    edges: str,
    run: str,
    entities: int,
    edge_count: int,
    workers: int | None,
    stale_s: float = 300.0,
    init_path: str | None = None,
    num_epochs: int | None = None,
):
    """One PBG training run in its own process(es); returns its summary (losses popped by the caller)."""
    import time

    from citeflow.models.pbg.train import train_in_subprocess, training_losses

    folder = work / run
    folder.mkdir(parents=True, exist_ok=True)
    settings = pbg_settings(cfg, work, edges, run, workers, init_path, num_epochs)
    epochs = settings["num_epochs"]
    log.info(
        "embed_graph: %s run: %d-d embeddings of %s papers on %s edges for %d epochs (%s workers%s)",
        run,
        cfg.dimension,
        f"{entities:,}",
        f"{edge_count:,}",
        epochs,
        workers or "all cores'",
        f" on each of {cfg.machines} ranks" if cfg.machines > 1 else "",
    )
    t0 = time.monotonic()
    if cfg.machines == 1:
        train_in_subprocess(settings, folder / "config.json", folder / "train.log", seed=cfg.seed)
    else:
        _train_distributed(cfg, settings, folder, run, stale_s)
    seconds = time.monotonic() - t0
    losses = training_losses(folder / "checkpoint")
    return {
        "edges": edge_count,
        "edge_path": edges,
        "train_seconds": round(seconds, 2),
        "epochs": epochs,
        "edges_per_second": round(edge_count * epochs / max(seconds, 1e-9), 1),
        "final_loss": losses[-1]["loss"] if losses else None,
        "machines": cfg.machines,
        "losses": losses,
    }


def _train_distributed(cfg: EmbedGraphConfig, settings: dict[str, Any], folder: Path, run: str, stale_s: float) -> None:
    """PBG's distributed mode: every rank on this host (launch=local) or rank 0 here, the others elsewhere."""
    from citeflow.models.pbg import ranks as pbg_ranks
    from citeflow.models.pbg.train import describe_exit, pbg_env, rank_command, rank_log, train_ranks

    what = f"embed_graph ({run} run)"
    settings = {**settings, "num_machines": cfg.machines, "distributed_init_method": rendezvous_address(cfg)}
    if cfg.launch == "local":
        train_ranks(settings, folder / "config.json", folder, seed=cfg.seed, what=what)
        return
    from citeflow.lease import LEASE_ENV

    token = os.environ.get(LEASE_ENV)
    if not token:  # execute() holds the version's lease while it builds: its token names this attempt
        raise RuntimeError("embed_graph launch=external must run under the version's lease")
    (folder / "config.json").write_text(json.dumps(settings, indent=2))
    rank_log(folder, 0).write_bytes(b"")
    pbg_ranks.publish_launch(folder, token=token, machines=cfg.machines, seed=cfg.seed)
    log.info(
        "%s: rank 0 of %d listens at %s; ranks 1..%d join from their embed_graph_rank tasks",
        what,
        cfg.machines,
        settings["distributed_init_method"],
        cfg.machines - 1,
    )
    try:
        pbg_ranks.lead(
            folder,
            command=rank_command(folder / "config.json", 0),
            log_path=rank_log(folder, 0),
            env=pbg_env(cfg.seed),
            token=token,
            machines=cfg.machines,
            wait_s=cfg.rank_wait_s,
            stale_s=stale_s,
            describe_exit=describe_exit,
        )
    except CiteflowError as exc:
        raise CiteflowError(f"{what}: {exc}; every rank was stopped and nothing was committed") from None


def rendezvous_address(cfg: EmbedGraphConfig) -> str:
    """PBG's `distributed_init_method`: a free local port (launch=local, no rendezvous set), or the setting with
    `*` replaced by this host's name; rank 0 serves it, so its host must be this one."""
    import socket

    if not cfg.rendezvous:
        if cfg.launch == "external":
            raise CiteflowError("embed_graph.launch=external needs embed_graph.rendezvous=tcp://HOST:PORT")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    host, port = cfg.rendezvous.removeprefix("tcp://").rsplit(":", 1)
    if host == "*":
        return f"tcp://{socket.getfqdn()}:{port}"
    try:
        with socket.socket(socket.AF_INET6 if host.startswith("[") else socket.AF_INET) as probe:
            probe.bind((host.strip("[]"), 0))
    except OSError:
        raise CiteflowError(
            f"embed_graph.rendezvous {cfg.rendezvous} names a host that is not this one ({socket.gethostname()}), "
            "but rank 0 serves it: run embed_graph on that host, or give the host as * to use this one's name"
        ) from None
    return cfg.rendezvous
