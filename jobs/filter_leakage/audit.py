"""The leakage audit every stage after filter_leakage runs on what it uses.

    from citeflow.jobs.filter_leakage.audit import audit_no_benchmark_papers
    audit_no_benchmark_papers(triplet_paper_ids, leakage_manifest, what="training triplets")

It reads the `benchmark_ids` table of a filter_leakage version and checks a
set of corpus ids against every mapped benchmark paper. In `exclude` mode a
hit is an error that names the count and a few examples; in `report_only`
mode (replicating "with leakage" numbers on purpose) hits are counted and
returned, and the mode travels in every downstream manifest.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from citeflow.artifacts import Manifest
from citeflow.errors import CiteflowError

log = logging.getLogger("citeflow")


class LeakageError(CiteflowError):
    """Benchmark papers were found where none may be."""


def benchmark_corpus_ids(manifest: Manifest) -> pa.Array:
    """Distinct corpus ids of every mapped benchmark paper of a filter_leakage version."""
    table = pq.read_table(manifest.table_path("benchmark_ids"), columns=["corpus_id"])
    return pc.unique(table.column("corpus_id").combine_chunks().drop_null())


def audit_no_benchmark_papers(
    ids: Iterable[int] | np.ndarray | pa.Array | pa.ChunkedArray, manifest: Manifest, *, what: str
) -> dict[str, Any]:
    """Check `ids` (corpus ids) against the benchmark papers; raise on a hit in exclude mode."""
    mode = manifest.metrics.get("mode", "exclude")
    if isinstance(ids, (pa.Array, pa.ChunkedArray)):
        values = pc.cast(ids, pa.int64())
    else:
        values = pa.array(np.fromiter(ids, dtype=np.int64) if not isinstance(ids, np.ndarray) else ids.astype(np.int64))
    hits = pc.unique(values.filter(pc.is_in(values, value_set=benchmark_corpus_ids(manifest))))
    result = {
        "what": what,
        "checked": len(values),
        "benchmark_hits": len(hits),
        "mode": mode,
        "filter_leakage_version": manifest.version,
    }
    if len(hits) and mode == "exclude":
        examples = ", ".join(str(x) for x in hits[:5].to_pylist())
        raise LeakageError(
            f"leakage: {len(hits)} benchmark paper(s) found in {what} (e.g. corpus ids {examples}); "
            f"filter_leakage version {manifest.version} excluded them, so an input of this stage bypassed it"
        )
    if len(hits):
        log.warning("%s contain %d benchmark papers (filter_leakage mode report_only)", what, len(hits))
    return result
