"""What the Spark stages wrote, as digests that ignore file layout and row order.

A table's digest is its column names and types plus a SHA-256 over the sorted
SHA-256s of its rows (each row as canonical JSON, bytes as hex), so two runs
that wrote the same rows into different files, partitions or orders agree.
`pinned_contents.json` beside this file holds the digests that build_graph
and filter_leakage wrote on the e2e fixtures' generated snapshots (3,000
papers, seed 7, 3 shards) *before* the Spark stages were optimised (issue 21,
commit 2449bbc); `test_filter_leakage.py::test_contents_are_pinned` holds
every later commit to them, and `test_spark_cluster.py` holds Spark Connect
to the same ones.

Re-pin only when the *input* changes (a new generator version: the pin records
the generator version and each snapshot's fingerprint and says so when they
differ), never to make an optimisation pass:

    PYTHONPATH=$PWD python -m tests.e2e.contents --write

A stage version bump (`STAGE_VERSION`: a table's layout changed, not its
rows) changes the versions alone; `--versions` writes the new versions into
the pin and refuses when any table or metric differs. It was run once: when
the degrees left `papers` for a table of their own (issue 19; build_graph 3,
filter_leakage 2), whose join is digested as the pinned `papers`
(`papers_with_degrees`), and again when filter_leakage wrote its papers'
match keys as a table of their own (filter_leakage 3: `UNPINNED_TABLES`), and when it stored its paper-ids
lines (filter_leakage 4), and when its tables became plain Parquet with a suite per benchmark (filter_leakage 5).

filter_leakage 6 resolves the benchmark ids left in doubt toward exclusion, which changes the rows of the s2orc
snapshot's two ids with a generic title that three papers share: its filter_leakage part was written again
then, after checking that its tables differ from stage 5's by those ids' rows and those papers alone. The third
snapshot, `s2orc-unambiguous` (the same without generic titles: no id in doubt), was pinned by stage 5 and holds
stage 6 to stage 5's tables and metrics where nothing is in doubt (only its version was written again).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from citeflow.tables import read_table

PIN = Path(__file__).with_name("pinned_contents.json")
# Manifest metrics that depend on where a run happened rather than on what it wrote: `paper_keys` names the
# filter_leakage version the keys were carried over from, if the artifact root held one.
VOLATILE_METRICS = {"layouts", "paper_keys", "paper_id_lines"}
# Tables newer than the pin: filter_leakage's `paper_keys` (stage version 3, issue 19), the papers' match keys,
# which the mapping's tests hold (tests/unit/spark/test_leakage.py: the mapping on them is the cascade's;
# tests/e2e/test_incremental.py: carried over from a release's diff, they are the keys of every paper), and its
# `paper_id_lines` (stage version 4), the paper-ids lines the sha lookup reads (the `paper_ids` metric, pinned,
# counts them; tests/e2e/test_incremental.py: with a diff applied, they are the lines of the table parsed).
UNPINNED_TABLES = {"paper_keys", "paper_id_lines"}
# Metrics newer than the pin: the per-suite totals and the SciRepEval tasks not audited (filter_leakage 5), held by
# tests/e2e/test_filter_leakage.py. The suite column of `benchmark_ids`, the suites' rows and the counts of papers
# and edges of `leakage_report` (and `report`) came with them: the pin holds the SciDocs rows in the columns they
# had (`as_pinned`), so every id's mapping and every count of the pin is still compared.
# build_graph's `lossy_text` (papers per field holding U+FFFD) is newer than the pin too, held by
# tests/unit/spark/test_lossy_text.py and tests/faults/test_inputs.py.
# filter_leakage 6's account of the inputs in doubt (`doubts`; `conflicts` in `paper_ids`; the methods that map an id
# to several papers, in `mapped_by` and the report; `too_common` in the report) is newer than the pin too, held by
# tests/e2e/test_filter_leakage.py and tests/unit/test_leakage_doubts.py; where no id is in doubt they are zeros
# and the tables are the pin's (`s2orc-unambiguous`: pinned by the stage before it knew of doubts).
UNPINNED_METRICS = {"suites", "unaudited", "strict", "lossy_text", "doubts"}
METHODS_BEFORE_DOUBTS = ("corpus_id", "sha", "doi", "pubmed", "arxiv", "title")
METRIC_KEYS_AFTER_PIN = {"paper_ids": {"conflicts"}}
REPORT_COLUMNS_AFTER_PIN = {"suite", "removed_papers", "removed_edges", "one_hop_papers", "one_hop_edges", "too_common"}


def _after_pin(column: str) -> bool:
    """A report column newer than the pin: those above, and the count of each method filter_leakage 6 added."""
    if column in REPORT_COLUMNS_AFTER_PIN:
        return True
    return column.startswith("mapped_") and column[len("mapped_") :] not in METHODS_BEFORE_DOUBTS


def metric_as_pinned(key: str, value: Any) -> Any:
    """A manifest metric as the pin holds it: the report's rows (`report_as_pinned`), `mapped_by` without the
    methods added after the pin, `paper_ids` without its `conflicts`."""
    if key == "report":
        return report_as_pinned(value)
    if key == "mapped_by":
        return {m: n for m, n in value.items() if m in METHODS_BEFORE_DOUBTS}
    if key in METRIC_KEYS_AFTER_PIN and isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in METRIC_KEYS_AFTER_PIN[key]}
    return value


def report_as_pinned(rows: list[dict]) -> list[dict]:
    """A `leakage_report`'s rows as the pin holds them: per SciDocs task and split, then `all`/`all`, without the
    columns that came later."""
    if rows and "suite" not in rows[0]:
        return rows
    kept = [r for r in rows if (r["suite"] == "scidocs" and r["task"] != "all") or r["suite"] == "all"]
    plain = [{k: v for k, v in r.items() if not _after_pin(k)} for r in kept]
    return sorted(plain, key=lambda r: (r["task"], r["split"]))


def as_pinned(table_name: str, table):
    """`benchmark_ids` and `leakage_report` (pyarrow tables) in the layout the pin holds: SciDocs' rows only."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "suite" not in table.column_names:
        return table
    if table_name == "benchmark_ids":
        return table.filter(pc.equal(table["suite"], "scidocs")).drop(["suite"])
    if table_name == "leakage_report":
        rows = report_as_pinned(table.to_pylist())
        names = [n for n in table.column_names if not _after_pin(n)]
        return pa.Table.from_pylist(rows, schema=pa.schema([table.schema.field(n) for n in names]))
    return table


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


DIGEST_BATCH_ROWS = 65_536


def table_digest(path: str) -> dict[str, Any]:
    """Rows, column types and an order-free digest of the Parquet table at `path`, read as any Parquet reader
    reads the folder (pyarrow's own `read_table`)."""
    import pyarrow.parquet as pq

    return digest(pq.read_table(path))


def digest(table) -> dict[str, Any]:
    """Rows, column types and an order-free digest of a pyarrow table. Its rows become Python objects a batch at a
    time: a 3M-paper run of bench/bench_incremental.py, all its rows at once, held 7.5 GB for one release's digests and
    died without a word in the next."""
    rows = sorted(
        hashlib.sha256(json.dumps(_plain(row), sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        for batch in table.to_batches(max_chunksize=DIGEST_BATCH_ROWS)
        for row in batch.to_pylist()
    )
    return {
        "rows": table.num_rows,
        "columns": [f"{f.name}: {f.type}" for f in table.schema],
        "sha256": hashlib.sha256("\n".join(rows).encode()).hexdigest(),
    }


def papers_with_degrees(manifest) -> dict[str, Any]:
    """The digest of `papers` as the pin holds it: until the degrees went into a table of their own (issue 19),
    `papers` carried `out_degree` and `in_degree` as its last columns. Every paper must have exactly one
    `degrees` row, and `degrees` no other."""
    fs = pafs.LocalFileSystem()
    papers, degrees = (read_table(fs, manifest.table_path(t)).sort_by("corpus_id") for t in ("papers", "degrees"))
    ids = papers["corpus_id"].to_pylist()
    if degrees["corpus_id"].to_pylist() != ids or len(set(ids)) != len(ids):
        raise AssertionError(f"{manifest.stage} {manifest.version}: degrees and papers hold different ids")
    # both sorted by the same unique ids: row i of one is row i of the other (Arrow's join takes no list column)
    return digest(
        papers.append_column("out_degree", degrees["out_degree"]).append_column("in_degree", degrees["in_degree"])
    )


def stage_contents(manifest) -> dict[str, Any]:
    """Version, table digests and metrics of one stage version (a `Manifest`); `papers` and `degrees` as one
    table, as the pin holds them (`papers_with_degrees`)."""
    import pyarrow.parquet as pq

    split = "degrees" in manifest.tables
    tables = {
        t: papers_with_degrees(manifest)
        if split and t == "papers"
        else digest(as_pinned(t, pq.read_table(manifest.table_path(t))))
        for t in sorted(manifest.tables)
        if t != "degrees" and t not in UNPINNED_TABLES
    }
    metrics = {
        k: metric_as_pinned(k, v)
        for k, v in sorted(manifest.metrics.items())
        if k not in VOLATILE_METRICS | UNPINNED_METRICS
    }
    return {"version": manifest.version, "tables": tables, "metrics": metrics}


def snapshot_identity(snap: Path) -> dict[str, Any]:
    """The generator version and the corpus fingerprint of a generated snapshot."""
    from citeflow.snapshot import discover, fingerprint

    truth = json.loads((snap / "generator.json").read_text())
    found = fingerprint(discover(str(snap / "corpus"), "auto"))
    return {"generator": truth.get("generator_version"), "corpus_fingerprint": found["fingerprint"]}


def load_pin() -> dict[str, Any]:
    return json.loads(PIN.read_text())


def check_input(name: str, snap: Path) -> dict[str, Any]:
    """The pinned entry for snapshot `name`, after checking the snapshot is the one pinned."""
    pinned = load_pin()[name]
    here = snapshot_identity(snap)
    if here != pinned["input"]:
        raise AssertionError(
            f"the generated {name} snapshot is not the pinned one ({here} != {pinned['input']}): the generator "
            "changed. Re-pin on a commit whose Spark stages are trusted: python -m tests.e2e.contents --write"
        )
    return pinned


def compare(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """Differences between two `stage_contents`, one line each (empty when equal)."""
    problems = []
    if got["version"] != want["version"]:
        problems.append(f"version {got['version']} != pinned {want['version']}")
    for table in sorted(set(got["tables"]) | set(want["tables"])):
        if got["tables"].get(table) != want["tables"].get(table):
            problems.append(f"table {table}: {got['tables'].get(table)} != pinned {want['tables'].get(table)}")
    for key in sorted(set(got["metrics"]) | set(want["metrics"])):
        if got["metrics"].get(key) != want["metrics"].get(key):
            problems.append(f"metric {key}: {got['metrics'].get(key)!r} != pinned {want['metrics'].get(key)!r}")
    return problems


# The pinned snapshots: the e2e fixtures' (tests/e2e/conftest.py), and the s2orc one without generic titles, on
# which no benchmark id is in doubt.
PINNED_SNAPSHOTS = {
    "s2orc": {"format": "s2orc"},
    "s2ag": {"format": "s2ag"},
    "s2orc-unambiguous": {"format": "s2orc", "generic_title_rate": 0.0},
}


def generate(name: str, out: Path) -> Path:
    """The pinned snapshot `name` (`PINNED_SNAPSHOTS`), generated into `out`."""
    from citeflow.synthcorpus.config import GenerateConfig
    from citeflow.synthcorpus.generate import run
    from tests.e2e.conftest import GENERATED_PAPERS

    run(GenerateConfig(papers=GENERATED_PAPERS, out=str(out), seed=7, shards=3, **PINNED_SNAPSHOTS[name]))
    return out


def run_all(snaps: dict[str, Path], artifacts: Path, overrides: list[str]) -> dict[str, dict[str, Any]]:
    """build_graph on each snapshot, filter_leakage on the s2orc ones; their `stage_contents`."""
    from citeflow.config import RunConfig, apply_overrides
    from citeflow.jobs import build_graph, filter_leakage

    results: dict[str, dict[str, Any]] = {}
    for name, snap in snaps.items():
        base = RunConfig(
            snapshot=f"pin-{name}",
            corpus=str(snap / "corpus"),
            scidocs=str(snap / "scidocs"),
            paper_ids=str(snap / "paper-ids"),
            artifacts=str(artifacts),
        )
        config = apply_overrides(base, overrides)
        entry = {"input": snapshot_identity(snap), "build_graph": stage_contents(build_graph.run(config))}
        if PINNED_SNAPSHOTS[name]["format"] == "s2orc":
            entry["filter_leakage"] = stage_contents(filter_leakage.run(config))
        results[name] = entry
    return results


def main() -> int:
    from tests.conftest import TEST_SPARK_OVERRIDES

    parser = argparse.ArgumentParser(description="Write (or check) pinned_contents.json")
    parser.add_argument("--write", action="store_true", help="overwrite the pin with this checkout's output")
    parser.add_argument(
        "--versions", action="store_true", help="write this checkout's versions into the pin, if nothing else differs"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="citeflow-pin-") as tmp:
        snaps = {name: generate(name, Path(tmp) / name) for name in PINNED_SNAPSHOTS}
        results = run_all(snaps, Path(tmp) / "artifacts", TEST_SPARK_OVERRIDES)
    if args.write:
        PIN.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
        print(f"wrote {PIN}")
        return 0
    pinned = load_pin()
    problems = [
        f"{name}/{stage}: {p}"
        for name, entry in results.items()
        for stage in ("build_graph", "filter_leakage")
        if stage in entry
        for p in compare(entry[stage], pinned[name][stage])
    ]
    print("\n".join(problems) or "same contents as pinned")
    if args.versions:
        if not all(p.split(": ", 1)[1].startswith("version ") for p in problems):
            print("not re-pinned: more than the versions differ")
            return 1
        for name, entry in results.items():
            for stage in ("build_graph", "filter_leakage"):
                if stage in entry:
                    pinned[name][stage]["version"] = entry[stage]["version"]
        PIN.write_text(json.dumps(pinned, indent=1, sort_keys=True) + "\n")
        print(f"wrote the versions into {PIN}")
        return 0
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
