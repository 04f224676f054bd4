"""A small artifact root whose pages are as wide as real ones: one version of every stage, each with what widened
the real Artifacts pages (a 20-column report, long unbroken ids and paths, a 1,600 px plot, long JSON lines), and a
benchmark version of a trained model and its base scored on a generated SciDocs set (`score_rows`: known numbers).

Used by tests/unit/test_artifact_view.py and tests/e2e/test_report_width.py; builds in well under a second.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

from citeflow.evaluation.scidocs import HEADLINE

SNAPSHOT = "pages"
TRAINED = "scincl trained (train_encoder e51bb208)"
BASE = "scincl base (untrained init of e51bb208)"

# SciDocs' 12 test numbers of the trained model and its base, × 100, as a benchmark writes them. Their averages
# by hand: trained 60 + 70 + 50.126 + 70 + 40 + 60 + 45 + 65 + 50 + 70 + 55 + 15 = 650.126, / 12 = 54.1771...;
# base = trained - 4 on every number but mesh (72.5, above the trained 70): 650.126 - 44 - 70 + 72.5 = 608.626,
# / 12 = 50.7188... Printed: 54.18 and 50.72, +3.46.
TRAINED_VALUES = dict(
    zip(HEADLINE, [60.0, 70.0, 50.126, 70.0, 40.0, 60.0, 45.0, 65.0, 50.0, 70.0, 55.0, 15.0], strict=True)
)
BASE_VALUES = {k: (72.5 if k == ("mesh", "f1") else v - 4) for k, v in TRAINED_VALUES.items()}
N = {"mag": 200, "mesh": 200, "recomm": 1500}  # test papers, clicks; 100 queries for the other tasks
# Each number's three per-query values (the units its interval is drawn from) are its value / 100, so its change
# is the same on every query and its interval the change itself; but the trained coview MAP's spread around its
# mean (-30, +15, +15 points against a base flat at 46.126): +4.00 on average, an interval that holds 0.
SPREAD = {("coview", "map"): (-0.3, 0.15, 0.15)}
# The average's interval by hand: every change is a point but coview MAP's, whose three queries change by -26,
# +19 and +19 (a draw's mean runs from -26, all three the first, to +19); the other 11 sum to 10 x 4 - 2.5 = 37.5,
# so the average of 12 runs from (37.5 - 26) / 12 = 0.958 to (37.5 + 19) / 12 = 4.708.
SENTENCE = (
    "The trained model scores 54.18 against 50.72 for its untrained base, +3.46 (95% interval +0.96 to +4.71), "
    "on SciDocs' average of 12 (test split, a generated snapshot, not the published SciDocs)."
)


def score_rows() -> list[dict[str, Any]]:
    """A benchmark version's score rows: the trained model's, then its base's (12 numbers and the average each)."""
    rows = []
    for model, label, values in (("trained", TRAINED, TRAINED_VALUES), ("base", BASE, BASE_VALUES)):
        version = "train_encoder:e51bb2085f2e3b08" if model == "trained" else "base_model_of:e51bb2085f2e3b08"
        common = {"model": model, "label": label, "model_version": version, "strategy": "scincl"}
        common |= {"leakage_mode": "exclude", "suite": "scidocs", "split": "test", "status": "ok", "missing": 0}
        for (task, metric), value in values.items():
            reason = "0 candidate lines without embedding dropped; 0 of 100 queries left out"
            rows.append(
                {**common, "task": task, "metric": metric, "value": value, "n": N.get(task, 100), "reason": reason}
                | {"average_label": "", "details": json.dumps({"per_query": per_query(model, task, metric, value)})}
            )
        average = sum(values.values()) / len(values)
        rows.append(
            {**common, "task": "average", "metric": "avg", "value": average, "n": 12, "reason": "average of 12"}
            | {"average_label": "average of 12", "details": "{}"}
        )
    return rows


def per_query(model: str, task: str, metric: str, value: float) -> dict[str, float]:
    spread = SPREAD.get((task, metric), (0.0, 0.0, 0.0)) if model == "trained" else (0.0, 0.0, 0.0)
    return {f"q{i:040d}": value / 100 + spread[i] for i in range(3)}


def generated_scidocs(root: Path) -> str:
    """A SciDocs folder as `citeflow generate` leaves one: its truth file generator.json beside it."""
    snapshot = Path(root) / "snapshot"
    (snapshot / "scidocs" / "cite").mkdir(parents=True, exist_ok=True)
    (snapshot / "scidocs" / "cite" / "test.qrel").write_text("q 0 p 1\n")
    meta = {"generator_version": 1, "paths": {"scidocs": "scidocs", "corpus": "corpus"}, "counts": {}}
    (snapshot / "generator.json").write_text(json.dumps(meta))
    return str(snapshot / "scidocs")


def wide_png(width: int = 1600, height: int = 80) -> bytes:
    """A real PNG, `width` px wide (grey): a browser lays it out at that size unless the page limits it."""
    raw = b"".join(b"\x00" + b"\x80" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def _write(path: str, name: str, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(os.path.join(path, name))
    pq.write_table(pa.Table.from_pylist(rows), os.path.join(path, name, "part-0.parquet"))


def _wide_rows(count: int, columns: int) -> list[dict[str, Any]]:
    # long column names without spaces and a long unbroken id: what made the leakage report and papers tables wide
    return [
        {"paper_sha": "f" * 160 + str(i), "title": "A title of a paper " * 6}
        | {f"mapped_by_some_long_column_name_{c}": i * c for c in range(columns)}
        for i in range(count)
    ]


def build_root(root: Path) -> tuple[Any, dict[str, str]]:
    """(store, {stage: version}): one version of every stage in `root`/artifacts, the benchmark's with its report."""
    from citeflow.artifacts import ArtifactStore
    from citeflow.evaluation.report import write_report
    from citeflow.registry import STAGES
    from citeflow.snapshot import fingerprint_path
    from citeflow.stage import execute

    root = Path(root)
    store = ArtifactStore(str(root / "artifacts"))
    scidocs = generated_scidocs(root)
    long_path = "/" + "/".join(f"a-rather-long-folder-name-{i}" for i in range(12))
    versions: dict[str, str] = {}
    for stage in STAGES:
        table = "scores" if stage == "benchmark" else "wide"

        def build(path: str, stage: str = stage, table: str = table) -> dict[str, Any]:
            if stage == "benchmark":
                _write(path, table, score_rows())
                write_report(score_rows(), Path(path), f"citeflow benchmark — {SNAPSHOT}", scidocs=scidocs)
            else:
                _write(path, table, _wide_rows(30, 20))
                with open(os.path.join(path, "plot.png"), "wb") as fh:
                    fh.write(wide_png())
            return {"ids": ["x" * 40] * 30, "unbroken": "y" * 400, "path": long_path}

        inputs = [{"stage": s, "version": v, "path": store.version_path(SNAPSHOT, s, v)} for s, v in versions.items()][
            -1:
        ]  # the stage before, as a lineage
        inputs += [fingerprint_path("scidocs", scidocs)] if stage == "benchmark" else []
        manifest = execute(
            store=store,
            snapshot=SNAPSHOT,
            stage=stage,
            stage_version=1,
            config={"where": long_path},
            resolved_config={"where": long_path, "conf": ["spark.some.very.long.setting=" + "z" * 300]},
            inputs=inputs,
            tables=[table],
            build=build,
        )
        versions[stage] = manifest.version
    return store, versions
