import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from citeflow.artifacts import MANIFEST, ArtifactStore, compute_version
from citeflow.errors import CiteflowError
from citeflow.stage import execute


def _build_two_rows(path: str) -> dict:
    os.makedirs(os.path.join(path, "t"))
    pq.write_table(pa.table({"a": [1, 2]}), os.path.join(path, "t", "part-0.parquet"))
    return {"rows_written": 2}


def _execute(store, config, build=_build_two_rows, inputs=None, snapshot="s1"):
    return execute(
        store=store,
        snapshot=snapshot,
        stage="demo",
        stage_version=1,
        config=config,
        resolved_config=config,
        inputs=inputs or [{"kind": "corpus", "fingerprint": "abc"}],
        tables=["t"],
        build=build,
    )


def test_version_depends_on_config_inputs_and_stage_version_only():
    inputs = [{"stage": "build_graph", "version": "v1", "path": "/x"}]
    v = compute_version("s", 1, {"k": 1}, inputs)
    assert v == compute_version("s", 1, {"k": 1}, [{"stage": "build_graph", "version": "v1", "path": "/elsewhere"}])
    assert (
        len(
            {
                v,
                compute_version("s", 2, {"k": 1}, inputs),
                compute_version("s", 1, {"k": 2}, inputs),
                compute_version("s", 1, {"k": 1}, [{"stage": "build_graph", "version": "v2"}]),
                compute_version("t", 1, {"k": 1}, inputs),
            }
        )
        == 5
    )
    assert len(v) == 16 and int(v, 16) >= 0


def test_manifest_written_last_and_rerun_is_skipped(tmp_path):
    store = ArtifactStore(str(tmp_path))
    first = _execute(store, {"k": 1})
    assert not first.skipped
    data = json.loads((tmp_path / "s1" / "demo" / first.version / MANIFEST).read_text())
    assert data["tables"]["t"]["rows"] == 2
    assert data["tables"]["t"]["schema"] == [{"name": "a", "type": "int64"}]
    assert data["metrics"] == {"rows_written": 2}
    assert data["inputs"] == [{"kind": "corpus", "fingerprint": "abc"}]

    def must_not_run(path):
        raise AssertionError("an up-to-date stage was rebuilt")

    second = _execute(store, {"k": 1}, build=must_not_run)
    assert second.skipped and second.version == first.version

    third = _execute(store, {"k": 2})
    assert third.version != first.version
    assert [m.version for m in store.list_versions("s1", "demo")] == [first.version, third.version]


def test_a_killed_build_leaves_nothing_trusted_and_is_rebuilt(tmp_path):
    store = ArtifactStore(str(tmp_path))

    def dies_after_writing_data(path):
        _build_two_rows(path)
        raise KeyboardInterrupt  # killed before the manifest

    with pytest.raises(KeyboardInterrupt):
        _execute(store, {"k": 1}, build=dies_after_writing_data)
    assert store.list_versions("s1", "demo") == []
    (version,) = store.incomplete_versions("s1", "demo")
    assert store.read_manifest("s1", "demo", version) is None

    rebuilt = _execute(store, {"k": 1})
    assert rebuilt.version == version and not rebuilt.skipped
    assert store.incomplete_versions("s1", "demo") == []


def test_complete_versions_are_never_overwritten(tmp_path):
    store = ArtifactStore(str(tmp_path))
    done = _execute(store, {"k": 1})
    with pytest.raises(CiteflowError, match="refusing to overwrite"):
        store.prepare("s1", "demo", done.version)


def test_missing_table_is_a_bug_not_an_artifact(tmp_path):
    store = ArtifactStore(str(tmp_path))
    with pytest.raises(RuntimeError, match="did not write tables"):
        _execute(store, {"k": 1}, build=lambda path: {})
    assert store.list_versions("s1", "demo") == []


def test_clean_incomplete_removes_only_versions_without_manifest(tmp_path):
    store = ArtifactStore(str(tmp_path))
    done = _execute(store, {"k": 1})
    (tmp_path / "s1" / "demo" / "deadbeef").mkdir()
    assert store.clean_incomplete("s1", "demo") == ["deadbeef"]
    assert [m.version for m in store.list_versions("s1", "demo")] == [done.version]


def test_store_rejects_path_like_snapshot_ids(tmp_path):
    with pytest.raises(CiteflowError, match="invalid snapshot id"):
        ArtifactStore(str(tmp_path)).stage_path("../../etc", "demo")


def test_store_accepts_filesystem_uris(tmp_path):
    store = ArtifactStore(f"file://{tmp_path}")
    done = execute(
        store=store,
        snapshot="s1",
        stage="demo",
        stage_version=1,
        config={},
        resolved_config={},
        inputs=[],
        tables=["t"],
        build=_build_two_rows,
    )
    assert store.engine_uri(done.path).startswith("file://")
    assert ArtifactStore(str(tmp_path)).read_manifest("s1", "demo", done.version).tables["t"]["rows"] == 2


def test_a_version_built_for_another_snapshot_is_reused_not_rebuilt(tmp_path):
    store = ArtifactStore(str(tmp_path))

    def build_with_a_path(path):
        return {**_build_two_rows(path), "model_folder": f"{path}/model", "elsewhere": "/data/x"}

    first = _execute(store, {"k": 1}, build=build_with_a_path)
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "s1").rglob("*")}
    (tmp_path / "not a snapshot id").mkdir()  # stray folders under the root are passed over

    def must_not_run(path):
        raise AssertionError("a version another snapshot holds was rebuilt")

    reused = _execute(
        store,
        {"k": 1},
        build=must_not_run,
        snapshot="s2",
        inputs=[{"kind": "corpus", "fingerprint": "abc", "path": "/releases/s2"}],
    )
    assert reused.version == first.version and not reused.skipped
    assert reused.snapshot == "s2" and reused.path == str(tmp_path / "s2" / "demo" / first.version)
    assert reused.reused_from["snapshot"] == "s1" and reused.reused_from["bytes"] > 0
    assert reused.metrics["model_folder"] == f"{reused.path}/model"
    assert reused.metrics["elsewhere"] == "/data/x"
    assert reused.inputs[0]["path"] == "/releases/s2"
    on_disk = store.read_manifest("s2", "demo", first.version)
    assert on_disk.reused_from == reused.reused_from and on_disk.tables["t"]["rows"] == 2
    assert pq.read_table(reused.table_path("t")).column("a").to_pylist() == [1, 2]
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "s1").rglob("*")} == before

    # the copy is the snapshot's own: the donor can go, and the copy stays whole and cached
    shutil.rmtree(tmp_path / "s1")
    assert _execute(store, {"k": 1}, build=must_not_run, snapshot="s2").skipped
    assert pq.read_table(reused.table_path("t")).num_rows == 2
    # another config is another version: built, not reused
    assert _execute(store, {"k": 2}, snapshot="s2").reused_from is None
