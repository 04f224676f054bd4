"""citeflow/diffs.py: a diff's manifests are checked before any file is read (ids, paths, step order)."""

import json
from pathlib import Path

import pytest

from citeflow import diffs as D
from citeflow.errors import CiteflowError


def layout(root, start="r1", end="r2", steps=(("r1", "r2"),), files=None, datasets=D.DATASETS):
    folder = D.diff_folder(root, start, end)
    for dataset in datasets:
        entries = []
        for a, b in steps:
            names = files or {
                "update_files": [f"{a}__{b}/{dataset}/updates_0.jsonl.gz"],
                "delete_files": [f"{a}__{b}/{dataset}/deletes_0.jsonl.gz"],
            }
            listed = [n for k in ("update_files", "delete_files") if isinstance(names[k], list) for n in names[k]]
            for name in listed:
                target = folder / name
                if target.resolve().is_relative_to(folder.resolve()):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(b"")
            entries.append({"from_release": a, "to_release": b, **names})
        D.write_manifest(folder, dataset, start, end, entries)
    return folder


def test_a_chain_reads_back_in_order(tmp_path):
    layout(tmp_path, "r0", "r2", steps=(("r0", "r1"), ("r1", "r2")))
    diff = D.read_diff(tmp_path, "r0", "r2")
    assert [(s.from_release, s.to_release) for s in diff.steps] == [("r0", "r1"), ("r1", "r2")]
    assert diff.steps[1].update_files["citations"] == [
        str((tmp_path / "r0" / "to" / "r2" / "r1__r2" / "citations" / "updates_0.jsonl.gz").resolve())
    ]
    assert D.starts(tmp_path, "r2") == ["r0"]
    assert D.starts(tmp_path, "r9") == []


@pytest.mark.parametrize(
    "files, message",
    [
        ({"update_files": ["../../../../etc/passwd"], "delete_files": []}, "outside the diff's folder"),
        ({"update_files": ["/etc/passwd"], "delete_files": []}, "relative to its folder"),
        ({"update_files": ["r1__r2/missing.jsonl.gz"], "delete_files": []}, "is missing"),
        ({"update_files": "papers.jsonl.gz", "delete_files": []}, "must be a list"),
    ],
)
def test_file_names_must_stay_inside_the_diff_folder(tmp_path, files, message):
    folder = layout(tmp_path, files=files)
    if "missing" in str(files["update_files"]):
        (folder / "r1__r2" / "missing.jsonl.gz").unlink(missing_ok=True)
    with pytest.raises(CiteflowError, match=message):
        D.read_diff(tmp_path, "r1", "r2")


def test_steps_must_chain_from_start_to_end_and_ids_must_be_release_ids(tmp_path):
    layout(tmp_path, "r0", "r2", steps=(("r0", "r1"), ("r5", "r2")))
    with pytest.raises(CiteflowError, match="does not follow 'r1'"):
        D.read_diff(tmp_path, "r0", "r2")
    layout(tmp_path / "b", "r1", "r2", steps=(("r1", "r3"),))
    with pytest.raises(CiteflowError, match="end at 'r3'"):
        D.read_diff(tmp_path / "b", "r1", "r2")
    layout(tmp_path / "c", "r1", "r2", steps=(("r1", "../x"),))
    with pytest.raises(CiteflowError, match="not a release id"):
        D.read_diff(tmp_path / "c", "r1", "r2")


def test_a_manifest_must_name_its_own_place_and_every_dataset_the_same_steps(tmp_path):
    folder = layout(tmp_path)
    doc = json.loads((folder / "papers.json").read_text())
    (folder / "papers.json").write_text(json.dumps({**doc, "end_release": "r3"}))
    with pytest.raises(CiteflowError, match="its place says"):
        D.read_diff(tmp_path, "r1", "r2")
    folder = layout(tmp_path / "b", "r0", "r2", steps=(("r0", "r1"), ("r1", "r2")))
    D.write_manifest(folder, "abstracts", "r0", "r2", json.loads((folder / "abstracts.json").read_text())["diffs"][:1])
    with pytest.raises(CiteflowError):
        D.read_diff(tmp_path / "b", "r0", "r2")
    (tmp_path / "c" / "r1" / "to" / "r2").mkdir(parents=True)
    with pytest.raises(CiteflowError, match="no papers.json"):
        D.read_diff(tmp_path / "c", "r1", "r2")


def test_a_missing_paper_ids_folder_is_one_line_even_beside_a_diffs_folder(tmp_path):
    """filter_leakage's paper-ids diff finder reads no paper-ids line on a diff, but the folder the user named
    must exist (jobs/filter_leakage/paper_ids_diff.py `find`); the diffs folder beside it is the release's."""
    from citeflow.artifacts import ArtifactStore
    from citeflow.config import RunConfig
    from citeflow.jobs.filter_leakage import paper_ids_diff as P

    (tmp_path / "r2" / "diffs").mkdir(parents=True)
    config = RunConfig(
        snapshot="r2",
        corpus=str(tmp_path / "r2" / "corpus"),
        paper_ids=str(tmp_path / "r2" / "paper-ids"),
        artifacts=str(tmp_path / "a"),
    )
    with pytest.raises(CiteflowError, match=r"paper_ids path .*paper-ids' does not exist"):
        P.find(config, ArtifactStore(str(tmp_path / "a")), "filter_leakage", 4)
    (tmp_path / "r2" / "paper-ids").mkdir()
    assert P.find(config, ArtifactStore(str(tmp_path / "a")), "filter_leakage", 4) is None  # no diff to r2
    assert D.release_diffs("auto", str(tmp_path / "r2" / "paper-ids"), "build_graph.diffs") == tmp_path / "r2" / "diffs"
    assert D.release_diffs("off", str(tmp_path / "r2" / "paper-ids"), "build_graph.diffs") is None


@pytest.mark.parametrize(
    "name, message",
    [
        ("r1__r2/papers/updates_*.jsonl.gz", "rename the file"),  # Spark would glob it
        ("r1__r2/papers/updates[0].jsonl.gz", "rename the file"),
        ("r1__r2/papers/updates_{0,1}.jsonl.gz", "rename the file"),
        ("r1__r2/papers/a:b.jsonl.gz", "rename the file"),
        ("r1__r2/papers/updates\u0000.jsonl.gz", "rename the file"),
        ("r1__r2/papers/\ud800.jsonl.gz", "cannot be used"),  # a lone surrogate, as JSON's \\ud800 reads
    ],
)
def test_a_file_name_spark_would_read_as_a_pattern_or_cannot_take_is_one_line(tmp_path, name, message):
    folder = D.diff_folder(tmp_path, "r1", "r2")
    for dataset in D.DATASETS:
        D.write_manifest(
            folder, dataset, "r1", "r2", [{"from_release": "r1", "to_release": "r2", "update_files": [name]}]
        )
    with pytest.raises(CiteflowError, match=message):
        D.read_diff(tmp_path, "r1", "r2")


def test_a_diff_without_every_corpus_manifest_is_not_applied(tmp_path, caplog):
    """A dataset without its manifest would keep the start release's records: build_graph warns and builds
    from the shards (jobs/build_graph.py `find_diff`), and `read_diff` refuses it."""
    from citeflow.artifacts import ArtifactStore
    from citeflow.config import RunConfig
    from citeflow.jobs import build_graph
    from citeflow.snapshot import Snapshot

    diffs = tmp_path / "r2" / "diffs"
    layout(diffs, "r1", "r2", datasets=("papers", "citations"))  # no abstracts.json
    assert D.missing_manifests(diffs, "r1", "r2") == ["abstracts"]
    with pytest.raises(CiteflowError, match="has no abstracts.json manifest"):
        D.read_diff(diffs, "r1", "r2")
    config = RunConfig(snapshot="r2", corpus=str(tmp_path / "r2" / "corpus"), artifacts=str(tmp_path / "a"))
    snapshot = Snapshot(format="s2ag", root=str(tmp_path / "r2" / "corpus"), datasets={}, sizes={})
    with caplog.at_level("INFO", logger="citeflow"):
        assert build_graph.find_diff(config, snapshot, ArtifactStore(str(tmp_path / "a")), {}) is None
    assert "the diff r1 -> r2 has no abstracts.json manifest" in caplog.text
    assert "holds no whole diff to r2; building from the shards" in caplog.text


def test_a_version_made_without_paper_ids_is_no_base_for_the_paper_ids_diff(tmp_path, caplog):
    """filter_leakage without --paper-ids stores an empty `paper_id_lines` with no source: applying the next
    release's paper-ids diff onto it would lose every line the diff does not name (filter_leakage/paper_ids_diff.py)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from citeflow.artifacts import ArtifactStore
    from citeflow.config import RunConfig
    from citeflow.jobs.filter_leakage import paper_ids_diff as P
    from citeflow.stage import execute

    def build(path: str):
        (Path(path) / P.TABLE).mkdir(parents=True)
        pq.write_table(pa.table({"key": pa.array([], pa.string())}), Path(path) / P.TABLE / "part-0.parquet")
        return {"mode": "exclude"}  # no paper_id_lines entry: made without a paper-ids table

    store = ArtifactStore(str(tmp_path / "a"))
    execute(
        store=store,
        snapshot="r1",
        stage="filter_leakage",
        stage_version=4,
        config={},
        resolved_config={"stage_version": 4},
        inputs=[{"kind": "corpus", "fingerprint": "abc"}],
        tables=[P.TABLE],
        build=build,
    )
    layout(tmp_path / "r2" / "diffs", "r1", "r2", datasets=(D.PAPER_IDS,))
    (tmp_path / "r2" / "paper-ids").mkdir()
    config = RunConfig(
        snapshot="r2",
        corpus=str(tmp_path / "r2" / "corpus"),
        paper_ids=str(tmp_path / "r2" / "paper-ids"),
        artifacts=str(tmp_path / "a"),
    )
    with caplog.at_level("INFO", logger="citeflow"):
        assert P.find(config, store, "filter_leakage", 4) is None
    assert "holds no filter_leakage version with its paper-ids lines; parsing the paper-ids table" in caplog.text
