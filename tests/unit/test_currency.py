"""A release's current versions: a version its inputs still give is pinned, a rebase supersedes it, and what
was built on a superseded version is superseded too (citeflow/currency.py, on tiny versions of the store)."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from citeflow.artifacts import ArtifactStore
from citeflow.currency import Way, choose, status_of, statuses
from citeflow.errors import CiteflowError
from citeflow.stage import execute


def commit(store, way: Way, extra=None, snapshot="b"):
    def build(path):
        os.makedirs(os.path.join(path, "t"))
        pq.write_table(pa.table({"x": [1]}), os.path.join(path, "t", "part-0.parquet"))
        return dict(extra or {})

    return execute(
        store=store,
        snapshot=snapshot,
        stage=way.stage,
        stage_version=way.stage_version,
        config=way.config,
        resolved_config={},
        inputs=way.inputs,
        tables=["t"],
        build=build,
    )


def ways():
    full = Way("in full", {"k": 1}, [{"kind": "corpus", "fingerprint": "f"}], "build_graph", 3)
    diff = Way(
        "from the diff a -> b", {"k": 1, "from_diff": True}, [{"kind": "diff", "fingerprint": "d"}], "build_graph", 3
    )
    return full, diff


def test_a_version_the_release_holds_is_kept_until_a_rebase_supersedes_it(tmp_path, caplog):
    store = ArtifactStore(str(tmp_path))
    full, diff = ways()
    assert choose(store, "b", diff, [full], rebase=False) == (diff, {})  # nothing held: the way the root allows
    first = commit(store, full)
    with caplog.at_level("INFO", logger="citeflow"):
        assert choose(store, "b", diff, [full], rebase=False) == (full, {})
    assert f"build_graph: release b keeps version {full.version}, built in full; from the diff a -> b" in caplog.text
    way, extra = choose(store, "b", diff, [full], rebase=True)
    assert way == diff and extra == {
        "supersedes": {"versions": [full.version], "why": "rebased from the diff a -> b (store.rebase)"}
    }
    second = commit(store, diff, extra)
    assert statuses(store, "b", "build_graph") == {
        first.version: status_of(store, first),
        second.version: status_of(store, second),
    }
    assert not status_of(store, first).current and status_of(store, second).current
    assert status_of(store, first).why == f"superseded by {second.version}: rebased from the diff a -> b (store.rebase)"
    assert choose(store, "b", diff, [full], rebase=False) == (diff, {})  # the rebased one is the release's now
    # every version built on the superseded one is superseded too, naming it; another release's are not
    later = Way("x", {}, [first.lineage()], "filter_leakage", 6)
    on_old = commit(store, later)
    assert status_of(store, on_old).why == f"built on build_graph {first.version}, which is superseded"
    on_new = commit(store, Way("x", {}, [second.lineage()], "filter_leakage", 6))
    assert status_of(store, on_new).current
    other = commit(store, full, snapshot="c")
    assert status_of(store, other).current


def test_two_ways_built_with_neither_superseding_is_never_chosen_by_age(tmp_path):
    store = ArtifactStore(str(tmp_path))
    full, diff = ways()
    third = Way(
        "from the diff z -> b", {"k": 1, "from_diff": True}, [{"kind": "diff", "fingerprint": "z"}], "build_graph", 3
    )
    commit(store, full)
    commit(store, third)
    with pytest.raises(
        CiteflowError, match="none supersedes the others: a version is never chosen by age. Run with --rebase"
    ):
        choose(store, "b", diff, [full, third], rebase=False)
    way, extra = choose(store, "b", diff, [full, third], rebase=True)
    assert way == diff and sorted(extra["supersedes"]["versions"]) == sorted([full.version, third.version])
