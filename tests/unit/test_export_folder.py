"""The folder an export writes (`citeflow/export_folder.py`): its own bytes, a narrow --overwrite, no leftovers."""

import json
import os

import pytest

from citeflow.errors import CiteflowError
from citeflow.export_folder import MARKER, ExportFolder


@pytest.fixture
def committed(tmp_path):
    """A file of a committed version: read-only, as the store leaves it."""
    path = tmp_path / "artifacts" / "part-0.parquet"
    path.parent.mkdir()
    path.write_bytes(b"PAR1 committed bytes PAR1")
    path.chmod(0o444)
    return path


def export(out, source, overwrite=False, name="papers/papers-00000-of-00001.parquet"):
    with ExportFolder(str(out), overwrite=overwrite, kind="export-dataset") as folder:
        folder.copy(source, name)
        folder.write_text("README.md", "# card\n")
    return folder.target


def test_an_export_owns_its_bytes_editing_it_leaves_the_committed_file_whole(tmp_path, committed):
    out = export(tmp_path / "out", committed)
    exported = out / "papers" / "papers-00000-of-00001.parquet"
    assert exported.read_bytes() == committed.read_bytes()
    assert os.stat(exported).st_nlink == 1 and os.stat(committed).st_nlink == 1  # no hard link either way
    assert not os.path.samefile(exported, committed)
    exported.chmod(0o644)
    with open(exported, "ab") as fh:
        fh.write(b"x")
    assert committed.read_bytes() == b"PAR1 committed bytes PAR1"
    marker = json.loads((out / MARKER).read_text())
    assert marker == {
        "written_by": "citeflow export-dataset",
        "files": ["README.md", "papers/papers-00000-of-00001.parquet"],
    }


def test_overwrite_replaces_a_previous_export_and_nothing_else(tmp_path, committed):
    out = export(tmp_path / "out", committed)
    assert export(out, committed, overwrite=True, name="citations/c.parquet") == out
    assert (out / "citations" / "c.parquet").is_file() and not (out / "papers").exists()  # replaced whole

    with pytest.raises(CiteflowError, match="is not empty: choose another folder, or --overwrite"):
        export(out, committed)

    (out / "notes.md").write_text("mine")
    with pytest.raises(CiteflowError, match=r"holds 1 file\(s\) the export did not write \(e.g. 'notes.md'\)"):
        export(out, committed, overwrite=True)
    assert (out / "notes.md").read_text() == "mine" and (out / "citations" / "c.parquet").is_file()


def test_overwrite_refuses_a_folder_citeflow_did_not_write(tmp_path, committed):
    mine = tmp_path / "mine"
    (mine / "sub").mkdir(parents=True)
    (mine / "keep.txt").write_text("keep")
    (mine / "sub" / "notes.md").write_text("notes")
    with pytest.raises(CiteflowError, match="was not written by a citeflow export"):
        export(mine, committed, overwrite=True)
    assert (mine / "keep.txt").read_text() == "keep" and (mine / "sub" / "notes.md").read_text() == "notes"


def test_an_out_that_is_a_file_is_one_line_and_stays(tmp_path, committed):
    file = tmp_path / "file.txt"
    file.write_text("data")
    for overwrite in (False, True):
        with pytest.raises(CiteflowError, match="is a file"):
            export(file, committed, overwrite=overwrite)
    assert file.read_text() == "data"


def test_staging_is_a_fresh_folder_removed_on_failure_and_a_users_partial_folder_is_left_alone(tmp_path, committed):
    users = tmp_path / ".out.partial"  # the name earlier exports staged in
    users.mkdir()
    (users / "precious.txt").write_text("mine")
    with pytest.raises(RuntimeError), ExportFolder(str(tmp_path / "out"), overwrite=False, kind="export-model") as f:
        f.copy(committed, "model.safetensors")
        raise RuntimeError("killed mid-export")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.partial", "artifacts"]  # nothing at out, no staging
    assert (users / "precious.txt").read_text() == "mine"
    export(tmp_path / "out", committed)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.partial", "artifacts", "out"]


def test_an_empty_out_folder_is_filled(tmp_path, committed):
    (tmp_path / "out").mkdir()
    out = export(tmp_path / "out", committed)
    assert (out / "README.md").read_text() == "# card\n"


def test_a_file_name_cannot_leave_the_export(tmp_path, committed):
    with pytest.raises(CiteflowError, match="would leave the export folder"):
        export(tmp_path / "out", committed, name="../escape.parquet")
    assert not (tmp_path / "escape.parquet").exists() and not (tmp_path / "out").exists()
