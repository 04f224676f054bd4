"""Train PyTorch-BigGraph embeddings in a process of their own, and read them back.

    python -m citeflow.models.pbg.train CONFIG.json              # what `train_in_subprocess` runs
    python -m citeflow.models.pbg.train CONFIG.json --rank R     # one rank of distributed PBG (`train_ranks`)

PBG trains with `spawn`ed worker processes. Inside an Airflow 3 task those
workers would re-execute Airflow's entry point and die on its masked
database URL, so training always runs in a fresh Python process started
here, with a plain JSON config (SciNCL's settings by default, docs/reference.md §3).
Reading results uses PBG's file formats directly: `embeddings_paper_{p}.v{N}.h5`
(dataset `embeddings`, rows in `entity_names_paper_{p}.json` order) and
`training_stats.json` (one JSON object per epoch and partition bucket).

Seeding: the training process seeds Python, numpy and torch (entity
initialisation and edge order happen there). PBG seeds each HOGWILD worker
with its process id, so that workers draw different uniform negatives;
`worker_initializer` keeps them different but reproducible: worker i of the
pool gets a seed derived from (seed, i). With one worker a run is then
repeatable bit for bit; with several, HOGWILD's lock-free updates interleave
differently each run (see README, "Determinism").

Distributed PBG (`num_machines` > 1 in the config): every rank runs this
module with `--rank R` on the same config (PBG's `torchbiggraph_train --rank`).
Each rank's trainer starts, as PBG designs it (`torchbiggraph/train.py`),
its own parameter server and client and, with PBG's default
`num_partition_servers` -1, its own partition server; rank 0 also starts the
lock server that hands out buckets. They meet at `distributed_init_method`
(`tcp://HOST:PORT`, served by rank 0). All ranks read the same entity and
edge files and write their partitions into the same checkpoint folder, so
these must be one shared folder. Rank R > 0 seeds from (seed, R) and its
workers from (seed, worker, R), so ranks never draw the same numbers.
`train_ranks` starts N ranks on this host as one gang (`citeflow.process.
run_together`): a rank that dies stops all the others, which would otherwise
wait for it forever.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import numpy as np

from citeflow.errors import CiteflowError


def pbg_config(
    *,
    entities: str,
    train_edges: str,
    checkpoint: str,
    num_partitions: int,
    dimension: int,
    comparator: str,
    loss_fn: str,
    margin: float,
    lr: float,
    num_epochs: int,
    batch_size: int,
    num_edge_chunks: int,
    max_norm: float | None,
    workers: int | None,
    num_uniform_negs: int,
    num_batch_negs: int,
    global_emb: bool = False,
    extra: dict | None = None,
) -> dict:
    """A PBG config dict for one entity type (paper) and one relation (cites), as SciNCL's configs write it."""
    config = {
        "entity_path": entities,
        "edge_paths": [train_edges],
        "checkpoint_path": checkpoint,
        "entities": {"paper": {"num_partitions": num_partitions}},
        "relations": [{"name": "cites", "lhs": "paper", "rhs": "paper", "operator": "none"}],
        "dimension": dimension,
        "comparator": comparator,
        "loss_fn": loss_fn,
        "margin": margin,
        "lr": lr,
        "num_epochs": num_epochs,
        "batch_size": batch_size,
        "num_edge_chunks": num_edge_chunks,
        "max_norm": max_norm,
        "global_emb": global_emb,
        "workers": workers,
        "num_uniform_negs": num_uniform_negs,
        "num_batch_negs": num_batch_negs,
        "eval_fraction": 0.0,
        "verbose": 0,
    }
    config.update(extra or {})
    return config


def train_in_subprocess(config: dict, config_path: Path, log_path: Path, seed: int) -> None:
    """Write the config, run `python -m citeflow.models.pbg.train` on it, raise with the log tail on failure.

    The trainer and the workers it spawns run under `citeflow.process.run_child`: they die with this
    process, and are killed when it is interrupted.
    """
    from citeflow.process import run_child

    config_path.write_text(json.dumps(config, indent=2))
    log_path.write_bytes(b"")
    # the child's output comes through a pipe and this process writes the log: on a full disk that write fails
    # here, as an OSError the run reports in one line, where the child's own write would cut its traceback short
    code = run_child(
        [sys.executable, "-m", "citeflow.models.pbg.train", str(config_path)],
        log_path=log_path,
        env=pbg_env(seed),
        echo=True,
        relay=lambda _: True,
    )
    if code != 0:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"PBG training failed (exit {code}); log {log_path}:\n{tail}")


def rank_command(config_path: Path, rank: int) -> list[str]:
    """The command line of one distributed PBG rank."""
    return [sys.executable, "-m", "citeflow.models.pbg.train", str(config_path), "--rank", str(rank)]


def rank_log(folder: Path, rank: int) -> Path:
    return folder / f"train-rank{rank}.log"


def pbg_env(seed: int) -> dict[str, str]:
    """The environment of a PBG process: this one's without Airflow's variables, plus the seed, passive
    OpenMP waiting and thread pools sized from the usable cores (`citeflow.threads`; explicit settings win)."""
    from citeflow.threads import child_env

    env = child_env({k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")})
    env["CITEFLOW_PBG_SEED"] = str(seed)
    return env


def describe_exit(code: int) -> str:
    """'exit 3', or 'killed by SIGKILL' for a guard's 128 + signal status (or a negative Popen status)."""
    import signal

    number = -code if code < 0 else code - 128 if code > 128 else 0
    try:
        return f"killed by {signal.Signals(number).name}" if number else f"exit {code}"
    except ValueError:
        return f"exit {code}"


def train_ranks(config: dict, config_path: Path, folder: Path, seed: int, what: str = "PBG") -> None:
    """Write the config and run its `num_machines` ranks on this host as one gang; CiteflowError when one fails.

    Each rank logs to `folder/train-rank{R}.log`. A rank that fails (or is killed) ends every other rank and
    every process under them before this raises, naming the rank, how it ended and its log.
    """
    from citeflow.process import run_together

    machines = int(config["num_machines"])
    config_path.write_text(json.dumps(config, indent=2))
    logs = [rank_log(folder, r) for r in range(machines)]
    for log in logs:
        log.write_bytes(b"")
    failed, code = run_together(
        [rank_command(config_path, r) for r in range(machines)], log_paths=logs, env=pbg_env(seed)
    )
    if failed >= 0:
        raise CiteflowError(
            f"{what}: rank {failed} of {machines} stopped ({describe_exit(code)}); every other rank was stopped "
            f"and nothing was committed; log: {logs[failed]}"
        )


def load_embeddings(checkpoint: Path, entities: Path, num_partitions: int) -> tuple[np.ndarray, np.ndarray]:
    """(corpus ids, float32 embeddings) of the latest checkpoint, partitions concatenated: every vector in memory
    at once (`citeflow.models.pbg.export` writes the table one partition at a time)."""
    from citeflow.models.pbg.export import partitions

    ids, vectors = zip(*partitions(checkpoint, entities, num_partitions), strict=True)
    return np.concatenate(ids), np.concatenate(vectors)


def training_losses(checkpoint: Path) -> list[dict]:
    """Per-epoch training loss (edge-weighted mean over buckets) from PBG's training_stats.json."""
    totals: dict[int, list[float]] = {}
    for line in (checkpoint / "training_stats.json").read_text().splitlines():
        entry = json.loads(line)
        stats = entry.get("stats") or {}
        loss = (stats.get("metrics") or {}).get("loss")
        if "epoch_idx" not in entry or loss is None:
            continue
        count = stats.get("count", 1)
        acc = totals.setdefault(entry["epoch_idx"], [0.0, 0])
        acc[0] += loss * count
        acc[1] += count
    return [{"epoch": e + 1, "loss": s / max(1, n), "edges": n} for e, (s, n) in sorted(totals.items())]


def worker_initializer(seed: int, workers: int, rank: int = 0):
    """PBG's per-worker initialiser: the typing and torch.load fixes, then a distinct, reproducible seed for each
    HOGWILD worker.

    PBG's pool seeds every worker with its pid and then calls this. Each worker takes the next free index
    from a queue filled here (the queue reaches the spawned workers as an initialiser argument) and seeds
    Python, numpy and torch from (seed, index), or (seed, index, rank) on ranks above 0. PBG's distributed
    servers run the same initialiser (PBG passes one to all its processes); they only get the fixes.
    """
    import multiprocessing

    from torchbiggraph.util import SubprocessInitializer

    from citeflow.models.pbg import compat as pbg_compat

    slots = multiprocessing.get_context("spawn").Queue()
    for index in range(workers):
        slots.put(index)
    init = SubprocessInitializer()
    init.register(pbg_compat.apply)
    init.register(functools.partial(_seed_worker, seed, slots, rank))  # PBG types the function as taking none
    return init


def _seed_worker(seed: int, slots, rank: int = 0) -> None:
    import multiprocessing
    import queue
    import random

    import torch

    # PBG names its server processes (LockServer, ParamS-R, ParamC-R, PartS-R); pool workers keep
    # multiprocessing's default names. Only workers draw a slot.
    if not multiprocessing.current_process().name.startswith("SpawnPoolWorker"):
        return
    try:
        index = slots.get(timeout=30)
    except queue.Empty:  # more workers than slots (PBG respawned one): keep PBG's pid seed
        return
    worker_seed = int(np.random.SeedSequence([seed, index] + ([rank] if rank else [])).generate_state(1)[0])
    random.seed(worker_seed)
    np.random.seed(worker_seed)
    torch.manual_seed(worker_seed)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import random

    import torch

    from citeflow.models.pbg import compat as pbg_compat

    pbg_compat.apply()
    from torchbiggraph.config import ConfigSchema
    from torchbiggraph.train import train
    from torchbiggraph.types import Rank
    from torchbiggraph.util import get_num_workers, set_logging_verbosity, setup_logging

    parser = argparse.ArgumentParser(prog="python -m citeflow.models.pbg.train")
    parser.add_argument("config", help="a PBG config as JSON")
    parser.add_argument("--rank", type=int, default=0, help="this rank, for distributed PBG (num_machines > 1)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    seed = int(os.environ.get("CITEFLOW_PBG_SEED", "0"))
    rank_seed = seed if args.rank == 0 else int(np.random.SeedSequence([seed, args.rank]).generate_state(1)[0])
    random.seed(rank_seed)
    np.random.seed(rank_seed)
    torch.manual_seed(rank_seed)
    setup_logging()
    config = ConfigSchema.from_dict(json.loads(Path(args.config).read_text()))
    set_logging_verbosity(config.verbose)
    init = worker_initializer(seed, get_num_workers(config.workers), args.rank)
    train(config, rank=Rank(args.rank), subprocess_init=init)
    return 0


if __name__ == "__main__":
    sys.exit(main())
