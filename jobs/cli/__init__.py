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

from citeflow.errors import CiteflowError
from jobs.cli.commands import cmd_artifacts, cmd_generate, cmd_run, cmd_settings, cmd_spark_server, cmd_verify
from jobs.cli.parser import build_parser
from jobs.cli.results import cmd_benchmark, cmd_export_dataset, cmd_export_model, cmd_report

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
    try:
        return COMMANDS[args.command](args)
    except CiteflowError as exc:
        print(f"citeflow: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the output went to a pipe that closed early (`citeflow settings | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("citeflow: interrupted; incomplete artifacts are cleaned up on the next run", file=sys.stderr)
        return 130


__all__ = ["build_parser", "main"]
