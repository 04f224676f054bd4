import hashlib
import json
import os
import shutil
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from citeflow.artifacts import ArtifactStore
from citeflow.config import StoreConfig
from citeflow.errors import CiteflowError
from citeflow.manifest import MANIFEST, DamagedVersion, compute_version
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


def test_a_version_built_from_a_diff_names_the_rules_the_diff_was_applied_by():
    """citeflow.diffs.APPLY_RULES is in every diff's lineage (citeflow/diffs.py `fingerprint`): a version
    built under other rules is another version, never reused."""
    diff = {"kind": "diff", "path": "/r2/diffs/r1/to/r2", "fingerprint": "f", "rules": 2}
    assert compute_version("s", 1, {}, [diff]) != compute_version("s", 1, {}, [{**diff, "rules": 1}])
    assert compute_version("s", 1, {}, [diff]) == compute_version("s", 1, {}, [{**diff, "path": "/elsewhere"}])


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
    # 16 hex characters of SHA-256 over the canonical JSON of stage, stage version, config and the inputs'
    # identities (the path left out), written out by hand: a change here would orphan every stored version
    canonical = '{"config":{"k":1},"inputs":[{"stage":"build_graph","version":"v1"}],"stage":"s","stage_version":1}'
    assert v == hashlib.sha256(canonical.encode()).hexdigest()[:16] == "430eb81906ff599e"


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
    assert store.incomplete_versions("s1", "demo") == []  # an interrupted build removes what it wrote
    # a killed one (kill -9: no cleanup) leaves its files: what it wrote, no manifest
    version = compute_version("demo", 1, {"k": 1}, [{"kind": "corpus", "fingerprint": "abc"}])
    _build_two_rows(store.version_path("s1", "demo", version))
    assert store.incomplete_versions("s1", "demo") == [version]
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


# -- verification on read (manifest format 2) ---------------------------------------------------------


def _sha256(path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_manifest_lists_every_file_with_size_and_sha256(tmp_path):
    store = ArtifactStore(str(tmp_path))

    def build(path):
        _build_two_rows(path)
        with open(os.path.join(path, "plot.png"), "wb") as fh:
            fh.write(b"\x89PNG not really")
        return {}

    done = _execute(store, {"k": 1}, build=build)
    folder = tmp_path / "s1" / "demo" / done.version
    data = json.loads((folder / MANIFEST).read_text())
    assert data["manifest_format"] == 2
    on_disk = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)
    assert sorted(data["contents"]) == on_disk == ["plot.png", "t/part-0.parquet"]
    for rel in on_disk:
        assert data["contents"][rel] == {"bytes": (folder / rel).stat().st_size, "sha256": _sha256(folder / rel)}


@pytest.fixture
def committed(tmp_path):
    store = ArtifactStore(str(tmp_path))
    done = _execute(store, {"k": 1})
    return store, done, tmp_path / "s1" / "demo" / done.version


def test_an_edited_manifest_is_damage(committed):
    store, done, folder = committed
    data = json.loads((folder / MANIFEST).read_text())
    data["tables"]["t"]["rows"] = 3
    (folder / MANIFEST).write_text(json.dumps(data))
    with pytest.raises(DamagedVersion, match="checksum does not match its content: the manifest was edited"):
        store.read_manifest("s1", "demo", done.version)


@pytest.mark.parametrize(
    "tamper, message",
    [
        (lambda f: (f / "t" / "part-0.parquet").unlink(), r"t/part-0.parquet is missing \(the manifest lists"),
        (
            lambda f: os.truncate(f / "t" / "part-0.parquet", 10),
            r"t/part-0.parquet has 10 bytes, the manifest says",
        ),
        (lambda f: (f / "t" / "part-1.parquet").write_bytes(b"x"), r"t/part-1.parquet is not in the manifest"),
    ],
)
def test_the_cheap_check_on_every_read_names_the_damaged_file(committed, tamper, message):
    store, done, folder = committed
    tamper(folder)
    with pytest.raises(DamagedVersion, match=message) as caught:
        store.read_manifest("s1", "demo", done.version)
    assert f"demo version {done.version} of snapshot s1 is damaged" in str(caught.value)
    # the stage does not trust it: a rerun stops with the same one line instead of skipping
    with pytest.raises(DamagedVersion, match=message):
        _execute(store, {"k": 1}, build=lambda path: pytest.fail("rebuilt without --repair"))
    assert store.list_versions("s1", "demo") == []


def test_same_size_tampering_escapes_the_cheap_check_and_verify_finds_it(committed):
    store, done, folder = committed
    part = folder / "t" / "part-0.parquet"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    part.write_bytes(bytes(data))
    manifest = store.read_manifest("s1", "demo", done.version)  # sizes match: the cheap check passes
    assert (
        store.verify(manifest)[0] == "t/part-0.parquet: content hash differs from the manifest (same size, other bytes)"
    )


def test_repair_moves_the_damaged_version_aside_and_rebuilds_it(committed):
    store, done, folder = committed
    (folder / "t" / "part-0.parquet").unlink()
    repairing = ArtifactStore(store.root, StoreConfig(repair=True))
    rebuilt = _execute(repairing, {"k": 1})
    assert rebuilt.version == done.version and not rebuilt.skipped
    assert pq.read_table(rebuilt.table_path("t")).column("a").to_pylist() == [1, 2]
    (aside,) = (folder.parent / ".damaged").iterdir()
    assert aside.name.startswith(done.version + "-") and (aside / MANIFEST).is_file()
    assert not (aside / "t" / "part-0.parquet").exists()  # the evidence, as it was
    assert store.verify(store.read_manifest("s1", "demo", done.version)) == []


def test_repair_rehashes_and_catches_same_size_tampering(committed):
    store, done, folder = committed
    part = folder / "t" / "part-0.parquet"
    data = bytearray(part.read_bytes())
    data[-20] ^= 0xFF
    part.write_bytes(bytes(data))
    assert _execute(store, {"k": 1}).skipped  # without --repair only the cheap check runs
    rebuilt = _execute(ArtifactStore(store.root, StoreConfig(repair=True)), {"k": 1})
    assert not rebuilt.skipped and _sha256(part) != _sha256(
        next((folder.parent / ".damaged").iterdir()) / "t" / "part-0.parquet"
    )


def test_a_format_1_manifest_is_read_with_a_warning_and_rebuilt_by_repair(committed, caplog):
    store, done, folder = committed
    data = json.loads((folder / MANIFEST).read_text())
    for key in ("contents", "checksum"):
        data.pop(key)
    data["manifest_format"] = 1
    (folder / MANIFEST).write_text(json.dumps(data))
    assert _execute(store, {"k": 1}).skipped
    assert "manifest format 1 lists no files" in caplog.text
    rebuilt = _execute(ArtifactStore(store.root, StoreConfig(repair=True)), {"k": 1})
    assert not rebuilt.skipped and rebuilt.manifest_format == 2


@pytest.mark.parametrize("garbage", [b"{not json", b"[1, 2]", b'{"manifest_format": 7}', b"\xff\xfe"])
def test_a_corrupt_manifest_is_one_clear_error(committed, garbage):
    store, done, folder = committed
    (folder / MANIFEST).write_bytes(garbage)
    with pytest.raises(DamagedVersion, match=r"_manifest.json is corrupt"):
        store.read_manifest("s1", "demo", done.version)


def test_a_corrupt_manifest_of_another_snapshot_is_skipped_with_a_warning(committed, caplog):
    store, done, folder = committed
    (folder / MANIFEST).write_text("{truncated")
    other = _execute(store, {"k": 1}, snapshot="s2")
    assert other.version == done.version and other.reused_from is None and not other.skipped
    assert "not reusing demo" in caplog.text and "s1" in caplog.text


def test_an_artifact_root_that_is_a_file_is_a_clear_error(tmp_path):
    (tmp_path / "root").write_text("x")
    with pytest.raises(CiteflowError, match="artifact root .* is a file, not a folder"):
        ArtifactStore(str(tmp_path / "root"))


def test_secrets_are_redacted_in_the_manifest(tmp_path):
    store = ArtifactStore(str(tmp_path))
    config = {"spark": {"conf": ["spark.hadoop.fs.s3a.secret.key=s3cr3t-value", "spark.executor.memory=2g"]}}
    done = execute(
        store=store,
        snapshot="s1",
        stage="demo",
        stage_version=1,
        config={},
        resolved_config=config,
        inputs=[],
        tables=["t"],
        build=lambda path: {**_build_two_rows(path), "api_token": "s3cr3t-value"},
    )
    text = (tmp_path / "s1" / "demo" / done.version / MANIFEST).read_text()
    assert "s3cr3t-value" not in text
    assert done.config["spark"]["conf"] == ["spark.hadoop.fs.s3a.secret.key=***", "spark.executor.memory=2g"]
    assert done.metrics["api_token"] == "***"


def test_a_version_being_built_by_a_live_run_is_neither_built_again_nor_deleted(tmp_path):
    from citeflow.lease import Lease

    store = ArtifactStore(str(tmp_path), StoreConfig(lease_wait_s=0))
    version = compute_version("demo", 1, {"k": 1}, [{"kind": "corpus", "fingerprint": "abc"}])
    path = store.version_path("s1", "demo", version)
    with Lease(path, what="the other run") as other:
        assert other.acquire(0)
        os.makedirs(os.path.join(path, "t"))
        (tmp_path / "s1" / "demo" / version / "t" / "half-written").write_bytes(b"x")
        with pytest.raises(CiteflowError, match=f"demo version {version} of snapshot s1 is being built by pid"):
            _execute(store, {"k": 1}, build=lambda p: pytest.fail("built while another run holds the lease"))
        assert store.clean_incomplete("s1", "demo") == []
        assert (tmp_path / "s1" / "demo" / version / "t" / "half-written").exists()
    assert store.clean_incomplete("s1", "demo") == [version]


def test_a_committed_table_holds_data_files_only(tmp_path):
    """The committers' side files (`_SUCCESS`, `.crc`) are gone before the manifest is written, so DuckDB's
    `read_parquet('<table>/*')`, which reads every file of a folder, reads the table whole."""
    import duckdb

    def build(path: str) -> dict:
        _build_two_rows(path)
        for name in ("_SUCCESS", ".part-0.parquet.crc"):
            with open(os.path.join(path, "t", name), "wb") as fh:
                fh.write(b"not parquet")
        return {}

    m = _execute(ArtifactStore(str(tmp_path)), {"k": 1}, build=build)
    assert sorted(os.listdir(m.table_path("t"))) == ["part-0.parquet"]
    assert sorted(m.contents) == ["t/part-0.parquet"]
    rows = duckdb.sql(f"select count(*) from read_parquet('{m.table_path('t')}/*')").fetchall()[0][0]
    assert rows == m.tables["t"]["rows"] == 2


def test_a_version_with_an_old_deletion_folder_is_refused_with_one_line_saying_how_to_fix_it(tmp_path):
    """A version written before every table was plain Parquet (a `_deleted/` folder that only citeflow's own
    readers applied) is refused by every read and listed by `citeflow verify`, with the fix."""
    from citeflow.manifest import sha256_of

    store = ArtifactStore(str(tmp_path))
    m = _execute(store, {"k": 1})
    deleted = os.path.join(m.table_path("t"), "_deleted")
    os.makedirs(deleted)
    pq.write_table(pa.table({"file_name": ["part-0.parquet"], "row_index": [0]}), os.path.join(deleted, "p.parquet"))
    data = json.loads(open(os.path.join(m.path, MANIFEST)).read())
    data["contents"]["t/_deleted/p.parquet"] = {
        "bytes": os.path.getsize(os.path.join(deleted, "p.parquet")),
        "sha256": hashlib.sha256(open(os.path.join(deleted, "p.parquet"), "rb").read()).hexdigest(),
    }
    data.pop("checksum")
    data["checksum"] = sha256_of(data)  # as the older citeflow committed it: the folder listed, its checksum its own
    with open(os.path.join(m.path, MANIFEST), "w") as fh:
        json.dump(data, fh)
    with pytest.raises(DamagedVersion) as err:
        store.read_manifest("s1", "demo", m.version)
    message = str(err.value)
    assert "table t holds a `_deleted/` deletion folder from an older citeflow" in message
    assert f"delete the version ({m.path}) and run again" in message
    assert "\n" not in message
    # what `citeflow verify` lists for the version (it reads the stages' versions by `scan`)
    ((version, manifest, damage),) = store.scan("s1", "demo")
    assert (version, manifest) == (m.version, None)
    assert damage.problems[-1].startswith("table t holds a `_deleted/` deletion folder")


# -- inputs re-hashed before a stage builds on them (store.verify_inputs) ----------------------------------


def _downstream(store, upstream, config=None, build=_build_two_rows):
    return execute(
        store=store,
        snapshot=upstream.snapshot,
        stage="after",
        stage_version=1,
        config=config or {"k": 1},
        resolved_config={},
        inputs=[upstream.lineage(), {"kind": "corpus", "fingerprint": "abc"}],
        tables=["t"],
        build=build,
    )


def _flip_a_byte(part):
    data = bytearray(part.read_bytes())
    data[8] ^= 0x01  # in the first page, before the footer: the row counts still read
    part.write_bytes(bytes(data))


def test_an_input_with_bytes_changed_in_place_stops_the_build_with_one_line_naming_the_file(committed):
    store, done, folder = committed
    part = folder / "t" / "part-0.parquet"
    _flip_a_byte(part)  # same size: the cheap check of every read passes
    with pytest.raises(DamagedVersion) as caught:
        _downstream(store, done, build=lambda path: pytest.fail("built on a damaged input"))
    assert str(caught.value) == (
        f"after cannot build on demo version {done.version} of snapshot s1, which is damaged: {part}: content hash "
        "differs from the manifest (same size, other bytes). `citeflow run ... --repair` moves it aside and rebuilds "
        "it (`citeflow verify --snapshot s1 --stage demo` lists every problem)"
    )
    assert [p.name for p in (folder.parent.parent / "after").iterdir()] == []  # no staging, no lease, no lock file
    # with the check off, only the cheap check runs: the build goes ahead
    unchecked = ArtifactStore(store.root, StoreConfig(verify_inputs=False))
    assert not _downstream(unchecked, done).skipped


def test_repair_rebuilds_the_damaged_input_and_the_stage_then_builds_on_it(committed):
    store, done, folder = committed
    _flip_a_byte(folder / "t" / "part-0.parquet")
    repairing = ArtifactStore(store.root, StoreConfig(repair=True))
    rebuilt = _execute(repairing, {"k": 1})  # the upstream stage's own run, as `citeflow run --repair` does first
    assert not rebuilt.skipped and len(list((folder.parent / ".damaged").iterdir())) == 1
    after = _downstream(repairing, rebuilt)
    assert not after.skipped and after.inputs[0] == rebuilt.lineage()


def test_each_input_version_is_re_hashed_once_per_process(committed, monkeypatch):
    store, done, _ = committed
    hashed = []
    real = ArtifactStore.contents_of
    monkeypatch.setattr(ArtifactStore, "contents_of", lambda self, path: hashed.append(path) or real(self, path))
    _downstream(store, done, {"k": 1})
    _downstream(store, done, {"k": 2})  # another version built on the same input
    assert hashed.count(done.path) == 1
    assert len([p for p in hashed if p != done.path]) == 2  # each version built, hashed for its manifest


def test_a_damaged_copy_in_another_snapshot_is_built_anew_not_reused(tmp_path, caplog):
    store = ArtifactStore(str(tmp_path))
    first = _execute(store, {"k": 1})
    _flip_a_byte(tmp_path / "s1" / "demo" / first.version / "t" / "part-0.parquet")
    built = _execute(store, {"k": 1}, snapshot="s2")
    assert built.reused_from is None and built.version == first.version
    assert f"demo version {first.version} of snapshot s1 is damaged" in caplog.text
    assert "building instead of reusing it" in caplog.text
    assert pq.read_table(built.table_path("t")).column("a").to_pylist() == [1, 2]


def test_an_input_of_another_store_is_passed_over_and_a_vanished_one_is_one_line(tmp_path):
    store = ArtifactStore(str(tmp_path))
    elsewhere = {"stage": "demo", "version": "0" * 16, "path": "/another/root/s1/demo/" + "0" * 16}
    assert not _downstream(store, SimpleNamespace(snapshot="s1", lineage=lambda: elsewhere)).skipped
    gone = {"stage": "demo", "version": "1" * 16, "path": str(tmp_path / "s1" / "demo" / ("1" * 16))}
    with pytest.raises(CiteflowError) as caught:
        _downstream(store, SimpleNamespace(snapshot="s1", lineage=lambda: gone), {"k": 2})
    assert str(caught.value) == (
        f"after builds on demo version {'1' * 16} of snapshot s1, which is gone from {tmp_path}: run again to "
        "rebuild it"
    )
