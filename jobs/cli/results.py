"""`citeflow benchmark`, `report` and `export-model`: scoring embeddings and shipping what was scored."""

from __future__ import annotations

import argparse

from citeflow.errors import CiteflowError


def cmd_benchmark(args: argparse.Namespace) -> int:
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    from citeflow.evaluation.embeddings import load_embeddings
    from citeflow.evaluation.report import write_report
    from citeflow.jobs.benchmark import score, score_beir, scores_schema, table_rows

    if not args.scidocs and not args.scirepeval and not args.beir:
        raise CiteflowError("nothing to score: give --scidocs DIR, --scirepeval PATH and/or --beir DIR")
    if args.scidocs and not Path(args.scidocs).is_dir():
        raise CiteflowError(f"SciDocs folder {args.scidocs!r} does not exist")
    for path in args.scirepeval:
        if not Path(path).exists():
            raise CiteflowError(f"SciRepEval path {path!r} does not exist")
    if args.model and not Path(args.model).is_dir():
        raise CiteflowError(f"model folder {args.model!r} does not exist")
    if args.label and len(args.label) != len(args.embeddings):
        raise CiteflowError("give one --label per --embeddings, or none")
    labels = args.label or [Path(p).stem for p in args.embeddings]
    beir = _beir_folder(args)
    rows = []
    for number, (label, path) in enumerate(zip(labels, args.embeddings, strict=True)):
        vectors = load_embeddings(path)
        scored = []
        if args.scidocs or args.scirepeval:
            scored = score(
                vectors,
                Path(args.scidocs) if args.scidocs else None,
                tuple(args.scirepeval),
                args.model or None,
                splits=tuple(dict.fromkeys(args.split or ["test"])),
            )
        if beir is not None:
            scored += score_beir(
                vectors,
                beir,
                query_vectors=load_embeddings(args.query_embeddings[number]) if args.query_embeddings else None,
                model_dir=args.model or None,
                task=args.mteb_task,
                similarity=args.similarity,
                ignore_identical_ids=args.ignore_identical_ids,
            )
        for row in scored:
            row.update(model=label, label=label, model_version=path, strategy="", leakage_mode="")
        rows += scored
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(table_rows(rows), schema=scores_schema()), out / "scores.parquet")
    report = write_report(rows, out, "citeflow benchmark", scidocs=args.scidocs or None)
    for row in rows:
        if row["suite"] == "mteb":
            continue
        if row["value"] is not None:
            print(
                f"{row['label']:<20} {row['split']:<5} {row['task']:<40} {row['metric']:<10} {row['value']:7.2f}"
                f"  (n={row['n']}{', ' + row['average_label'] if row['average_label'] else ''})"
            )
        elif row["task"] == "average":
            print(f"{row['label']:<20} {row['split']:<5} average: {row['average_label']}; no average of 12")
    _print_mteb(rows)
    print(f"report: {report['html']}")
    return 0


def _beir_folder(args: argparse.Namespace):
    """The BEIR folder of --beir (the task's split), read once for every --embeddings, after the arguments that go
    with it are checked; None without --beir."""
    from pathlib import Path

    from citeflow.evaluation.beir import read_beir
    from citeflow.evaluation.mteb_retrieval import TASKS

    if not args.beir:
        given = [
            name
            for name, value in (
                ("--query-embeddings", args.query_embeddings),
                ("--similarity", args.similarity),
                ("--ignore-identical-ids", args.ignore_identical_ids),
            )
            if value
        ]
        if given:
            raise CiteflowError(f"{', '.join(given)} only apply with --beir DIR")
        return None
    if args.mteb_task not in TASKS:
        raise CiteflowError(f"unknown MTEB task {args.mteb_task!r}; known: {', '.join(TASKS)}")
    if args.query_embeddings and len(args.query_embeddings) != len(args.embeddings):
        raise CiteflowError("give one --query-embeddings per --embeddings, in the same order")
    if not args.query_embeddings and not args.model:
        raise CiteflowError(
            f"MTEB's {args.mteb_task} scores queries with their own vectors: give --query-embeddings PARQUET "
            "(one per --embeddings) or --model DIR to embed them"
        )
    if not args.query_embeddings and len(args.embeddings) > 1:
        raise CiteflowError("--model embeds the queries of one model: give one --embeddings, or --query-embeddings")
    for path in args.query_embeddings:
        if not Path(path).exists():
            raise CiteflowError(f"query embeddings {path!r} do not exist")
    return read_beir(Path(args.beir), (TASKS[args.mteb_task].split,))


def _print_mteb(rows: list[dict]) -> None:
    """MTEB's scores apart from SciDocs', labelled with the task's MTEB name: main score first, then the @10 ones."""
    mteb = [r for r in rows if r["suite"] == "mteb"]
    if not mteb:
        return
    print("MTEB retrieval (not SciDocs: the whole corpus searched with each title; not in SciDocs' average):")
    for row in mteb:
        main = row["details"].get("main_score", False)
        if main or row["metric"].endswith("_at_10"):
            value = row["details"]["mteb_value"]
            scale = f"  (main score; {100 * value:.2f} on MTEB's leaderboard scale)" if main else ""
            print(
                f"{row['label']:<20} {row['split']:<5} MTEB {row['task']:<10} {row['metric']:<16} {value:.5f}"
                f"  (n={row['n']} queries){scale}"
            )


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from citeflow.artifacts import ArtifactStore
    from citeflow.jobs.benchmark import compare_report

    report = compare_report(ArtifactStore(args.artifacts), args.snapshot, args.benchmark, Path(args.out))
    print(f"report: {report['html']}")
    return 0


def cmd_export_dataset(args: argparse.Namespace) -> int:
    from citeflow.jobs.cli.export_dataset import export_dataset

    tables = tuple(t.strip() for t in args.tables.split(",") if t.strip()) if args.tables else ()
    target = export_dataset(
        snapshot=args.snapshot,
        stage=args.stage,
        out=args.out,
        artifacts=args.artifacts,
        version=args.version,
        tables=tables,
        overwrite=args.overwrite,
    )
    print(f"exported {args.stage} of snapshot {args.snapshot} with its dataset card to {target}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from citeflow.artifacts import ArtifactStore
    from citeflow.errors import CiteflowError
    from citeflow.jobs import drift

    if len(args.snapshot) != 2:
        raise CiteflowError("compare takes two snapshots: --snapshot EARLIER --snapshot LATER")
    manifest = drift.run(ArtifactStore(args.artifacts), *args.snapshot, strategy=args.strategy)
    print(drift.table_text(manifest))
    print(f"drift report {manifest.version}: {manifest.path} (plot: {manifest.path}/{drift.PLOT})")
    return 0


def cmd_export_model(args: argparse.Namespace) -> int:
    from citeflow.jobs.cli.export_model import export_model

    target = export_model(
        snapshot=args.snapshot,
        strategy=args.strategy,
        out=args.out,
        artifacts=args.artifacts,
        overwrite=args.overwrite,
        benchmark=args.benchmark,
    )
    print(f"exported the {args.strategy} model of snapshot {args.snapshot} with its model card to {target}")
    return 0
