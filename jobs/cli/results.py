"""`citeflow benchmark`, `report` and `export-model`: scoring embeddings and shipping what was scored."""

from __future__ import annotations

import argparse

from citeflow.errors import CiteflowError


def cmd_benchmark(args: argparse.Namespace) -> int:
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    from evaluation.report import write_report
    from jobs.benchmark import load_embeddings, score, scores_schema, table_rows

    if not args.scidocs and not args.scirepeval:
        raise CiteflowError("nothing to score: give --scidocs DIR and/or --scirepeval PATH")
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
    rows = []
    for label, path in zip(labels, args.embeddings, strict=True):
        scored = score(
            load_embeddings(path),
            Path(args.scidocs) if args.scidocs else None,
            tuple(args.scirepeval),
            args.model or None,
            splits=tuple(dict.fromkeys(args.split or ["test"])),
        )
        for row in scored:
            row.update(model=label, label=label, model_version=path, strategy="", leakage_mode="")
        rows += scored
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(table_rows(rows), schema=scores_schema()), out / "scores.parquet")
    report = write_report(rows, out, "citeflow benchmark")
    for row in rows:
        if row["value"] is not None:
            print(
                f"{row['label']:<20} {row['split']:<5} {row['task']:<40} {row['metric']:<10} {row['value']:7.2f}"
                f"  (n={row['n']}{', ' + row['average_label'] if row['average_label'] else ''})"
            )
        elif row["task"] == "average":
            print(f"{row['label']:<20} {row['split']:<5} average: {row['average_label']}; no average of 12")
    print(f"report: {report['html']}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from citeflow.artifacts import ArtifactStore
    from jobs.benchmark import compare_report

    report = compare_report(ArtifactStore(args.artifacts), args.snapshot, args.benchmark, Path(args.out))
    print(f"report: {report['html']}")
    return 0


def cmd_export_dataset(args: argparse.Namespace) -> int:
    from jobs.cli.export_dataset import export_dataset

    tables = tuple(t.strip() for t in args.tables.split(",") if t.strip()) if args.tables else ()
    target = export_dataset(
        snapshot=args.snapshot,
        stage=args.stage,
        out=args.out,
        artifacts=args.artifacts,
        version=args.version,
        tables=tables,
    )
    print(f"exported {args.stage} of snapshot {args.snapshot} with its dataset card to {target}")
    return 0


def cmd_export_model(args: argparse.Namespace) -> int:
    from jobs.cli.export_model import export_model

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
