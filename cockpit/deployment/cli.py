"""The command line of the deployment launcher (the package's docstring says what it starts, reads and writes).

python -m citeflow.cockpit.deployment --home DIR                # foreground: Ctrl-C stops every process
python -m citeflow.cockpit.deployment --home DIR --background   # returns once up; the launcher stays
python -m citeflow.cockpit.deployment --home DIR --status       # what runs, where, restarts
python -m citeflow.cockpit.deployment --home DIR --stop         # stops what --background started
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import subprocess
import sys
import time
from pathlib import Path

from citeflow.cockpit.deployment.config import COMPONENT_LOG_DIR, DeploymentConfig, WorkerSpec
from citeflow.cockpit.deployment.supervisor import (
    Deployment,
    DeploymentFailed,
    is_guard,
    pid_alive,
    read_state,
    stop_from_state,
)
from citeflow.errors import CiteflowError

PROG = "python -m citeflow.cockpit.deployment"


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def parser() -> argparse.ArgumentParser:
    helps = {f.name: f.metadata.get("help", "") for f in dataclasses.fields(DeploymentConfig)}
    defaults = DeploymentConfig()
    p = argparse.ArgumentParser(prog=PROG, description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--home", type=Path, default=defaults.home, help=helps["home"])
    p.add_argument("--port", type=int, default=defaults.port, help=helps["port"])
    p.add_argument("--user", default=defaults.user, help=helps["user"])
    p.add_argument("--password", help=helps["password"])
    p.add_argument("--dags", type=Path, default=defaults.dags, help=helps["dags"])
    p.add_argument("--artifacts", type=Path, help=helps["artifacts"])
    p.add_argument("--worker", action="append", dest="workers", metavar="NAME=QUEUE[+QUEUE]:SLOTS", help=(
        helps["workers"] + "; default: " + " ".join(
            f"{w.name}={'+'.join(w.queues)}:{w.concurrency}" for w in defaults.workers)))  # fmt: skip
    p.add_argument("--input-roots", default="", help=helps["input_roots"])
    p.add_argument("--gpu-queue", default=defaults.gpu_queue, help=helps["gpu_queue"])
    p.add_argument("--pbg-queue", default=defaults.pbg_queue, help=helps["pbg_queue"])
    p.add_argument("--pbg-rank-queue", default=defaults.pbg_rank_queue, help=helps["pbg_rank_queue"])
    p.add_argument(
        "--heartbeat-timeout",
        dest="heartbeat_timeout_s",
        type=int,
        default=defaults.heartbeat_timeout_s,
        help=helps["heartbeat_timeout_s"],
    )
    p.add_argument("--timeout", type=float, default=600, help="seconds to wait until every component is up")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--background", action="store_true", help="return once up; the launcher keeps running")
    mode.add_argument("--stop", action="store_true", help="stop the deployment running in --home")
    mode.add_argument("--status", action="store_true", help="print what runs in --home")
    return p


def config_of(args: argparse.Namespace) -> DeploymentConfig:
    """The configuration the options name (each option's destination is the field's name)."""
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(DeploymentConfig) if hasattr(args, f.name)}
    given["workers"] = tuple(WorkerSpec.parse(text) for text in args.workers or ()) or DeploymentConfig().workers
    return DeploymentConfig(**given)


def status(home: Path) -> int:
    state = read_state(home)
    if state is None or not pid_alive(int(state["launcher"])):
        print(f"deployment: nothing running in {home}")
        return 1
    print(f"deployment: {'up' if state['ready'] else 'starting'} at {state['url']} (launcher pid {state['launcher']})")
    for name, component in state["components"].items():
        alive = "running" if is_guard(component["pgid"]) else "gone"
        queues = f" queues {','.join(component['queues'])}" if component["queues"] else ""
        print(f"  {name:<16} {alive:<8} group {component['pgid']}{queues}, restarts {component['restarts']}")
    return 0


def background(argv: list[str], home: Path, timeout_s: float) -> int:
    """This command again without --background, detached, its output in the home; returns once it is up."""
    log = home / COMPONENT_LOG_DIR / "launcher.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "citeflow.cockpit.deployment", *(a for a in argv if a != "--background")]
    with open(log, "ab") as out:
        launcher = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + timeout_s + 60
    while True:
        state = read_state(home)
        if state and state.get("ready") and int(state["launcher"]) == launcher.pid:
            print(f"deployment: up at {state['url']}; launcher pid {launcher.pid}, its log {log}")
            print(f"deployment: stop it with: {PROG} --home {home} --stop")
            return 0
        if launcher.poll() is not None or time.monotonic() > deadline:
            if launcher.poll() is None:
                stop_from_state(home)
            print(f"deployment: did not come up; the end of {log}:\n{log.read_text(errors='replace')[-3000:]}")
            return 1
        time.sleep(1)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    if args.stop:
        stopped = stop_from_state(args.home)
        print(f"deployment: {'stopped' if stopped else 'nothing running'} in {args.home}")
        return 0
    if args.status:
        return status(args.home)
    try:
        cfg = config_of(args)
    except ValueError as exc:
        parser().error(str(exc))
    if args.background:
        return background(argv, args.home, args.timeout)

    signal.signal(signal.SIGTERM, _interrupt)
    deployment = Deployment(cfg)
    try:
        deployment.start(timeout_s=args.timeout)
    except KeyboardInterrupt:
        return 130
    except CiteflowError as exc:
        print(f"deployment: {exc}", file=sys.stderr, flush=True)
        return 1
    workers = ", ".join(f"{w.name} ({'+'.join(w.queues)} x{w.concurrency})" for w in cfg.workers)
    print(f"deployment: Airflow is up at {cfg.url}/  login: {cfg.user} / {deployment.password}", flush=True)
    print(f"deployment: Celery workers {workers}; state in {cfg.home / 'deployment.json'}", flush=True)
    print("deployment: Ctrl-C stops every process it started", flush=True)
    status_code = 0
    try:
        while True:
            deployment.watch()
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    except DeploymentFailed as exc:
        print(f"deployment: {exc}; stopping", file=sys.stderr, flush=True)
        status_code = 1
    print("deployment: stopping", flush=True)
    deployment.stop()
    return status_code
