"""Distributed PBG across hosts: rank 0 and the other ranks meet through the run's shared folder.

When the stage's ranks are started by something else than the stage (Airflow's mapped `embed_graph_rank`
tasks, one per rank, on any worker), nobody holds all of them as children, so a rank that dies cannot be
seen as a child's exit. They watch each other through small files in the PBG run folder
(`ARTIFACTS/<snapshot>/embed_graph/<version>/pbg/<run>/`), which every rank reaches anyway, since PBG
itself needs that folder shared (its checkpoint is written there by every rank):

- `launch.json`, written by rank 0 once its config is there: `{"token", "machines", "seed", "config"}`.
  The token is rank 0's lease token (`citeflow.lease`): it names one attempt of the stage, so a rank
  never joins a launch left by an attempt that died.
- `rank-<R>.json`, written by rank R > 0: `{"token", "rank", "host", "pid", "state", ...}` with state
  `running`, `done` or `failed`; while running, R touches it every `heartbeat_s` (its mtime is the
  heartbeat).

Rank 0 (`lead`) runs its PBG rank and fails, stopping it, when a rank reports `failed`, when a running
rank's heartbeat is older than `stale_s`, or when a rank has not reported within `wait_s`; after its own
rank finished it waits for every other rank to report `done` (they write nothing into the version after
that, so the manifest's file hashes hold). A rank R (`follow`) waits for the launch of the attempt whose
lease is live, runs its PBG rank, and stops it and fails when that attempt's lease goes (rank 0 died or
was stopped) or changes hands. PBG's own ranks would wait forever in either case
(`torchbiggraph/train.py`: the lock server keeps a dead trainer's buckets; the timeout is a year).

Reads and writes only those files, plus the rank's log; runs the rank under a guard
(`citeflow.process.run_together`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from citeflow.errors import CiteflowError

LAUNCH = "launch.json"
POLL_S = 0.5


def report_path(folder: Path, rank: int) -> Path:
    return folder / f"rank-{rank}.json"


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically (temp file, rename): a reader on another host never sees half a file."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def publish_launch(folder: Path, *, token: str, machines: int, seed: int, config: str = "config.json") -> None:
    """Rank 0: tell the other ranks that this attempt's config is ready."""
    _write_json(folder / LAUNCH, {"token": token, "machines": machines, "seed": seed, "config": config})


def read_launch(folder: Path) -> dict[str, Any] | None:
    return _read_json(folder / LAUNCH)


class RankReport:
    """Rank R's state file, with a heartbeat thread while it runs."""

    def __init__(self, folder: Path, rank: int, token: str, heartbeat_s: float):
        self.path = report_path(folder, rank)
        self.base = {"token": token, "rank": rank, "host": socket.gethostname(), "pid": os.getpid()}
        self.heartbeat_s = heartbeat_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def set(self, state: str, **extra: Any) -> None:
        if state != "running":
            self._stop.set()  # the last write: no heartbeat after it (the version's hashes must hold)
            if self._thread is not None:
                self._thread.join(timeout=5)
        _write_json(self.path, {**self.base, "state": state, **extra})
        if state == "running" and self._thread is None:
            self._thread = threading.Thread(target=self._beat, name=f"rank report {self.path}", daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            with contextlib.suppress(OSError):
                os.utime(self.path)


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return float("inf")


def check_ranks(
    folder: Path, *, token: str, machines: int, started: float, wait_s: float, stale_s: float
) -> dict[int, str]:
    """Rank 0's view of ranks 1..machines-1: {rank: state}; CiteflowError for a failed, silent or missing rank."""
    states = {}
    for rank in range(1, machines):
        path = report_path(folder, rank)
        report = _read_json(path)
        if report is None or report.get("token") != token:
            if time.monotonic() - started > wait_s:
                raise CiteflowError(
                    f"PBG rank {rank} of {machines} did not join within {wait_s:.0f} s (is its embed_graph_rank "
                    "task running, on the same shared artifact root? embed_graph.rank_wait_s sets the wait)"
                )
            states[rank] = "waiting"
            continue
        where = f"on {report.get('host')} (pid {report.get('pid')})"
        if report.get("state") == "failed":
            raise CiteflowError(f"PBG rank {rank} of {machines} {where} failed: {report.get('reason', '?')}")
        if report.get("state") == "running" and _age(path) > stale_s:
            raise CiteflowError(
                f"PBG rank {rank} of {machines} {where} stopped reporting {_age(path):.0f} s ago (host down?)"
            )
        states[rank] = str(report.get("state"))
    return states


def lead(
    folder: Path,
    *,
    command: Sequence[str],
    log_path: Path,
    env: dict[str, str],
    token: str,
    machines: int,
    wait_s: float,
    stale_s: float,
    poll_s: float = POLL_S,
    describe_exit: Callable[[int], str] = lambda code: f"exit {code}",
) -> None:
    """Rank 0: run `command` (PBG's rank 0) while the other ranks report; return when all of them are done."""
    from citeflow.process import run_together

    started = time.monotonic()

    def watch() -> None:
        check_ranks(folder, token=token, machines=machines, started=started, wait_s=wait_s, stale_s=stale_s)

    failed, code = run_together([command], log_paths=[log_path], env=env, watch=watch, poll_s=poll_s)
    if failed >= 0:
        # a rank that died takes PBG's rank 0 with it: name that rank rather than rank 0 when it said so
        time.sleep(poll_s)
        watch()
        raise CiteflowError(f"PBG rank 0 of {machines} stopped ({describe_exit(code)}); log: {log_path}")
    while True:
        states = check_ranks(folder, token=token, machines=machines, started=started, wait_s=wait_s, stale_s=stale_s)
        if all(state == "done" for state in states.values()):
            return
        time.sleep(poll_s)


def follow(
    folder: Path,
    *,
    rank: int,
    command: Callable[[dict[str, Any]], Sequence[str]],
    log_path: Path,
    env: Callable[[dict[str, Any]], dict[str, str]],
    leader: Callable[[], str | None],
    finished: Callable[[], bool],
    wait_s: float,
    heartbeat_s: float,
    token: str | None = None,
    poll_s: float = POLL_S,
    describe_exit: Callable[[int], str] = lambda code: f"exit {code}",
) -> str | None:
    """Rank R > 0: join rank 0's launch in `folder`, run `command(launch)`, report; returns the attempt's token.

    `leader()` is the token of the live attempt (None while there is none), `finished()` whether the version
    is complete (then there is nothing to do: returns None). With `token`, only that attempt is joined (a
    rank that trained the first run of an attempt cannot join a later attempt's second run).
    """
    from citeflow.process import run_together

    deadline = time.monotonic() + wait_s
    while True:
        if finished():
            return None
        live = leader()
        launch = read_launch(folder)
        if live is not None and launch is not None and launch.get("token") == live:
            break
        if token is not None and live is not None and live != token:
            raise CiteflowError(
                f"PBG rank {rank}: rank 0 started a new attempt; start every rank again (clear the "
                "embed_graph_rank tasks with embed_graph)"
            )
        if time.monotonic() > deadline:
            raise CiteflowError(
                f"PBG rank {rank}: rank 0 did not launch {folder.name} within {wait_s:.0f} s (embed_graph must run "
                "on the same shared artifact root; embed_graph.rank_wait_s sets the wait)"
            )
        time.sleep(poll_s)
    attempt = launch["token"]
    if token is not None and attempt != token:
        raise CiteflowError(f"PBG rank {rank}: rank 0 started a new attempt; start every rank again")
    report = RankReport(folder, rank, attempt, heartbeat_s)
    report.set("running")

    def watch() -> None:
        if leader() != attempt:
            raise CiteflowError(f"PBG rank {rank}: rank 0 is gone (its lease ended); this rank was stopped")

    try:
        failed, code = run_together(
            [command(launch)], log_paths=[log_path], env=env(launch), watch=watch, poll_s=poll_s
        )
    except BaseException as exc:
        report.set("failed", reason=str(exc) or type(exc).__name__)
        raise
    if failed >= 0:
        reason = f"its PBG process stopped ({describe_exit(code)}); log: {log_path}"
        report.set("failed", reason=reason)
        raise CiteflowError(f"PBG rank {rank}: {reason}")
    report.set("done")
    return attempt
