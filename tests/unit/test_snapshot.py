import gzip
import os

import pytest

from citeflow.errors import CiteflowError
from citeflow.snapshot import discover, fingerprint


def touch(path, text='{"a": 1}\n', gz=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


def test_s2orc_layouts(tmp_path):
    touch(tmp_path / "a" / "metadata" / "metadata_1.jsonl.gz", gz=True)
    touch(tmp_path / "a" / "metadata" / "metadata_0.jsonl.gz", gz=True)
    touch(tmp_path / "a" / "metadata" / "_SUCCESS")
    snap = discover(str(tmp_path / "a"))
    assert snap.format == "s2orc"
    assert [os.path.basename(f) for f in snap.files("metadata")] == ["metadata_0.jsonl.gz", "metadata_1.jsonl.gz"]
    single = touch(tmp_path / "metadata_sample.jsonl")
    assert discover(str(single)).files("metadata") == [str(single)]
    assert discover(str(single)).engine_paths("metadata") == [f"file://{single}"]


def test_s2ag_layouts_and_sample_style_names(tmp_path):
    for name in ("papers", "abstracts", "citations"):
        touch(tmp_path / "release" / name / f"{name}_0.jsonl.gz", gz=True)
    snap = discover(str(tmp_path / "release"))
    assert snap.format == "s2ag" and sorted(snap.datasets) == ["abstracts", "citations", "papers"]
    for name in ("papers", "abstracts", "citations", "paper-ids"):
        touch(tmp_path / "sample" / f"{name}-sample.jsonl")
    snap = discover(str(tmp_path / "sample"))
    assert [os.path.basename(f) for f in snap.files("papers")] == ["papers-sample.jsonl"]  # not paper-ids


def test_ambiguous_missing_and_unknown_layouts_are_explained(tmp_path):
    with pytest.raises(CiteflowError, match="does not exist"):
        discover(str(tmp_path / "nope"))
    touch(tmp_path / "both" / "metadata" / "m.jsonl")
    touch(tmp_path / "both" / "papers" / "p.jsonl")
    with pytest.raises(CiteflowError, match="both S2ORC metadata and S2AG papers"):
        discover(str(tmp_path / "both"))
    assert discover(str(tmp_path / "both"), "s2ag").format == "s2ag"
    touch(tmp_path / "neither" / "notes.txt")
    with pytest.raises(CiteflowError, match="cannot tell the format"):
        discover(str(tmp_path / "neither"))
    with pytest.raises(CiteflowError, match="has no s2ag files"):
        discover(str(tmp_path / "neither"), "s2ag")


def test_fingerprint_follows_content_not_location(tmp_path):
    a = touch(tmp_path / "one" / "metadata" / "metadata_0.jsonl", "x" * 200_000)
    touch(tmp_path / "two" / "metadata" / "metadata_0.jsonl", "x" * 200_000)
    fp1 = fingerprint(discover(str(tmp_path / "one")))
    assert fp1["fingerprint"] == fingerprint(discover(str(tmp_path / "two")))["fingerprint"]
    assert fp1["files"] == 1 and fp1["bytes"] == 200_000
    a.write_text("x" * 199_999 + "y")  # same size, last byte changed
    assert fingerprint(discover(str(tmp_path / "one")))["fingerprint"] != fp1["fingerprint"]
    touch(tmp_path / "one" / "metadata" / "metadata_1.jsonl")
    assert fingerprint(discover(str(tmp_path / "one")))["files"] == 2
