"""The `citeflow` command line: a thin layer over the stage entry points.

    citeflow generate --papers 20000 --out demo/snapshot [--seed 0] [--format s2orc|s2ag]
    citeflow generate --derive-from demo/snapshot --out demo/snapshot-2 [--added N] [--removed N] [--changed N]
    citeflow run --snapshot demo --corpus demo/snapshot/corpus [--until build_graph]
                 [--scidocs DIR] [--paper-ids DIR] [--artifacts ROOT] [--set stage.key=value ...]
    citeflow artifacts --snapshot demo [--artifacts ROOT] [--json]
    citeflow verify [--snapshot demo] [--stage build_graph] [--artifacts ROOT]
    citeflow settings          # every setting `--set` accepts, with its default and help
    citeflow benchmark --embeddings E.parquet --scidocs DIR [--scirepeval scirepeval_tasks.jsonl] --out DIR
    citeflow benchmark --embeddings E.parquet --beir DIR (--query-embeddings Q.parquet | --model DIR) --out DIR
    citeflow export-model --snapshot demo --strategy scincl --out DIR [--artifacts ROOT]
    citeflow report --snapshot demo --benchmark V1 --benchmark V2 --out DIR [--artifacts ROOT]
    citeflow spark-server [--host 127.0.0.1] [--port 15002] [--set spark.key=value ...]   # until Ctrl-C

User mistakes (bad ids, missing paths, unknown settings) print one line and
exit with status 2; a traceback means a bug.

Modules: `parser` (the arguments), `commands` (generate, run, artifacts, verify, settings), `results`
(benchmark, report, export-model).
"""

from __future__ import annotations

import logging
import os
import sys

from citeflow.errors import CiteflowError, environment_cause
from citeflow.jobs.cli.commands import cmd_artifacts, cmd_generate, cmd_run, cmd_settings, cmd_spark_server, cmd_verify
from citeflow.jobs.cli.parser import build_parser
from citeflow.jobs.cli.results import cmd_benchmark, cmd_compare, cmd_export_dataset, cmd_export_model, cmd_report

log = logging.getLogger("citeflow")

COMMANDS = {
    "generate": cmd_generate,
    "run": cmd_run,
    "artifacts": cmd_artifacts,
    "verify": cmd_verify,
    "settings": cmd_settings,
    "report": cmd_report,
    "benchmark": cmd_benchmark,
    "export-model": cmd_export_model,
    "export-dataset": cmd_export_dataset,
    "compare": cmd_compare,
    "spark-server": cmd_spark_server,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    for noisy in ("py4j", "matplotlib", "faiss"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.verbose:  # Spark's JVM logs its errors on the terminal too (spark/engine/log4j2.properties)
        os.environ.setdefault("CITEFLOW_JVM_CONSOLE", "error")
    try:
        run_log = start_run_log(args) if args.command == "run" else None
    except CiteflowError as exc:
        print(f"citeflow: error: {exc}", file=sys.stderr)
        return 2
    details = f"; details in {run_log}" if run_log else ""
    try:
        return COMMANDS[args.command](args)
    except CiteflowError as exc:
        log.debug("the run stopped", exc_info=True)
        to_run_log(run_log, f"citeflow: error: {exc}")
        print(f"citeflow: error: {exc}{details}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the output went to a pipe that closed early (`citeflow settings | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        quiet_after_interrupt()
        print(
            f"citeflow: interrupted; the version being built was removed (a rerun builds it){details}", file=sys.stderr
        )
        return 130
    except Exception as exc:
        cause = environment_cause(exc, where=getattr(args, "artifacts", None))
        if cause is None:
            raise
        log.debug("the run stopped", exc_info=True)
        to_run_log(run_log, f"citeflow: error: {cause}")
        print(f"citeflow: error: {cause}{details}", file=sys.stderr)
        return 2


def to_run_log(path: str | None, message: str) -> None:
    """`message` and the exception being handled, written to the run log whatever the log level: the one line
    a failed run ends with names the log, which must then hold the error and its traceback (a run refused
    before any work logs nothing else)."""
    for handler in logging.getLogger().handlers:
        if path and isinstance(handler, logging.FileHandler) and handler.baseFilename == path:
            handler.handle(logging.LogRecord("citeflow", logging.ERROR, __file__, 0, message, None, sys.exc_info()))


# Run logs kept in the log folder when a run starts: the newest `CITEFLOW_LOG_KEEP`, none older than
# `CITEFLOW_LOG_KEEP_DAYS` (docs/guarantees.md).
KEEP_RUN_LOGS = 100
KEEP_RUN_LOG_DAYS = 30.0


def log_retention() -> tuple[int, float]:
    """(how many run logs to keep, for how many days): `CITEFLOW_LOG_KEEP` and `CITEFLOW_LOG_KEEP_DAYS`, else the
    defaults; one line for a value that is not a number of logs or days."""
    values = []
    for name, default, cast in (
        ("CITEFLOW_LOG_KEEP", KEEP_RUN_LOGS, int),
        ("CITEFLOW_LOG_KEEP_DAYS", KEEP_RUN_LOG_DAYS, float),
    ):
        raw = os.environ.get(name, "").strip()
        try:
            value = cast(raw) if raw else default
        except ValueError:
            value = -1
        if value < 1:
            raise CiteflowError(f"{name}={raw!r}: give a number of {'logs' if cast is int else 'days'}, 1 or more")
        values.append(value)
    return values[0], values[1]


def prune_run_logs(folder: str, keep: int, days: float) -> list[str]:
    """Remove the run logs of `folder` beyond the newest `keep - 1` (room for the run starting) and those older
    than `days`; their paths."""
    import time

    old = sorted((e for e in os.scandir(folder) if e.name.startswith("run-")), key=lambda e: e.stat().st_mtime)
    cutoff = time.time() - days * 86400
    gone = [e.path for i, e in enumerate(old) if i < len(old) - keep + 1 or e.stat().st_mtime < cutoff]
    for path in gone:
        os.remove(path)
    return gone


def log_folder() -> str:
    """Where runs log: `CITEFLOW_LOG_DIR`, else the user's state folder (`XDG_STATE_HOME`, `~/.local/state`)."""
    if os.environ.get("CITEFLOW_LOG_DIR"):
        return os.environ["CITEFLOW_LOG_DIR"]
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "citeflow", "logs")


def start_run_log(args) -> str | None:
    """The run's log file: everything citeflow and py4j log (py4j to it only: its errors after a failure or an
    interruption are noise on the terminal), named in the one line a failed run ends with. In `log_folder()`,
    not the artifact root, so a run refused before any work writes nothing there. None when it cannot be
    written."""
    import datetime as dt

    folder = log_folder()
    keep, days = log_retention()
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.abspath(os.path.join(folder, f"run-{args.snapshot}-{stamp}-{os.getpid()}.log"))
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        prune_run_logs(folder, keep, days)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600))  # the user's only
        handler = logging.FileHandler(path, encoding="utf-8")
    except OSError:
        return None
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    py4j = logging.getLogger("py4j")
    py4j.propagate = bool(args.verbose)
    py4j.addHandler(handler)
    if not args.verbose:  # py4j also logs some errors on the root logger itself (`logging.exception`)
        for terminal in logging.getLogger().handlers:
            if terminal is not handler:
                terminal.addFilter(lambda record: f"{os.sep}py4j{os.sep}" not in record.pathname)
    os.environ["CITEFLOW_RUN_LOG"] = path  # for the processes the run starts (the Spark driver's JVM)
    return path


def quiet_after_interrupt() -> None:
    """After Ctrl-C, the threads still talking to Spark's JVM fail on their own (py4j's reentrant call, a
    closed connection): their tracebacks go to the log, not the terminal."""
    import threading

    threading.excepthook = lambda hook: log.debug("after the interruption", exc_info=hook.exc_value)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            handler.setLevel(logging.CRITICAL)


__all__ = ["build_parser", "main"]
