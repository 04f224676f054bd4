"""Run Airflow 3 locally with citeflow's DAGs and plugins, sized for a small machine (2 cores).

    python -m citeflow.cockpit.local_airflow                    # foreground: Ctrl-C stops every component
    python -m citeflow.cockpit.local_airflow --background       # returns once healthy; pid file in the home
    python -m citeflow.cockpit.local_airflow --stop             # stops what --background started
    python -m citeflow.cockpit.local_airflow --pools            # only creates the pools in $AIRFLOW_HOME's Airflow
    python -m citeflow.cockpit.local_airflow --dags-test DAG    # one run of DAG with `airflow dags test`: no server

The command line of the local launcher (the package's docstring says what it reads and writes).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import time
from pathlib import Path

from citeflow.cockpit.local_airflow.config import PID_FILE, REPO, LocalAirflowConfig
from citeflow.cockpit.local_airflow.log_filing import dags_test
from citeflow.cockpit.local_airflow.processes import create_pools, start, stop_from_pid_file


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m citeflow.cockpit.local_airflow",
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    helps = {f.name: f.metadata.get("help", "") for f in dataclasses.fields(LocalAirflowConfig)}
    parser.add_argument("--home", type=Path, default=REPO / ".airflow", help=helps["home"])
    parser.add_argument("--port", type=int, default=8080, help=helps["port"])
    parser.add_argument("--user", default="admin", help=helps["user"])
    parser.add_argument("--password", help=helps["password"])
    parser.add_argument("--dags", type=Path, default=REPO / "dags", help=helps["dags"])
    parser.add_argument("--plugins", type=Path, help=helps["plugins"])
    parser.add_argument("--artifacts", type=Path, help=helps["artifacts"])
    parser.add_argument("--parallelism", type=int, default=2, help=helps["parallelism"])
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for a healthy Airflow")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--background", action="store_true", help="write the pid file and return once healthy")
    mode.add_argument("--stop", action="store_true", help="stop the Airflow started with --background")
    mode.add_argument(
        "--pools", action="store_true", help="only create citeflow's pools in the Airflow of $AIRFLOW_HOME (migrated)"
    )
    mode.add_argument(
        "--dags-test",
        metavar="DAG_ID",
        help="one run of the DAG with `airflow dags test` in this home (no server), its task logs filed for the UI",
    )
    args = parser.parse_args(argv)

    if args.pools:
        create_pools(dict(os.environ))
        return 0

    if args.stop:
        stopped = stop_from_pid_file(args.home)
        print(f"local_airflow: {'stopped' if stopped else 'nothing running'} in {args.home}")
        return 0
    try:
        cfg = LocalAirflowConfig(
            home=args.home,
            port=args.port,
            user=args.user,
            password=args.password,
            dags=args.dags,
            plugins=args.plugins,
            artifacts=args.artifacts,
            parallelism=args.parallelism,
        )
    except ValueError as exc:
        parser.error(str(exc))
    if args.dags_test:
        return dags_test(cfg, args.dags_test)
    handle = start(cfg, timeout=args.timeout)
    print(f"local_airflow: Airflow is up at {handle.url}/  login: {cfg.user} / {handle.password}", flush=True)
    if args.background:
        (cfg.home / PID_FILE).write_text(f"{handle.pgid} {cfg.port}\n")
        print(
            f"local_airflow: running in the background; stop it with: "
            f"{Path(sys.executable).name} -m citeflow.cockpit.local_airflow --stop --home {cfg.home}"
        )
        return 0

    # Foreground: stay until Ctrl-C (or SIGTERM), or until a component dies; then stop the whole group.
    signal.signal(signal.SIGTERM, _interrupt)
    print("local_airflow: Ctrl-C stops it", flush=True)
    try:
        while not handle.exited():
            time.sleep(1)
        print(f"local_airflow: a component exited {handle.exited()}; stopping\n{handle.log_tail(1500)}", flush=True)
        status = 1
    except KeyboardInterrupt:
        status = 0
    print("local_airflow: stopping", flush=True)
    handle.stop()
    return status
