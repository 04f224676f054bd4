"""Failures a user causes end in one line: mistakes (`CiteflowError`), the machine's state (`environment_cause`: a full
disk, a read-only or unwritable folder) and Ctrl-C; a model folder whose weights are pickles of anything but tensors
is refused before any stage runs, without running them."""

import errno
import json
import os

import pytest

from citeflow.errors import CiteflowError, environment_cause


def test_the_machines_state_is_named_with_its_file_and_fix():
    full = OSError(errno.ENOSPC, "No space left on device", "/data/artifacts/s/build_graph/v/papers")
    assert environment_cause(full) == (
        "no space left on the device (/data/artifacts/s/build_graph/v/papers): free space there or give an "
        "--artifacts folder on another disk"
    )
    wrapped = RuntimeError("writing failed")
    wrapped.__cause__ = OSError(errno.EROFS, "Read-only file system", "/ro")
    assert environment_cause(wrapped).startswith("the filesystem is read-only (/ro): give a writable --artifacts")
    # Spark's failures arrive as Java text: the folder being written is named instead of a file
    java = Exception("Py4JJavaError: An error occurred ... java.io.IOException: No space left on device\n\tat ...")
    assert environment_cause(java, where="/data/artifacts").startswith("no space left on the device (/data/artifacts)")
    assert environment_cause(ValueError("a bug")) is None
    assert environment_cause(OSError(errno.ENOENT, "gone", "/x")) is None  # not the machine's state


def test_the_command_line_ends_such_a_failure_and_an_interruption_in_one_line(monkeypatch, capsys):
    import citeflow.jobs.cli as cli

    def full(_args):
        raise OSError(errno.ENOSPC, "No space left on device", "/full/root/x")

    monkeypatch.setitem(cli.COMMANDS, "verify", full)
    assert cli.main(["verify", "--artifacts", "/full/root"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "citeflow: error: no space left on the device (/full/root/x): free space there or give an "
        "--artifacts folder on another disk"
    ]

    def interrupted(_args):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "verify", interrupted)
    assert cli.main(["verify", "--artifacts", "/x"]) == 130
    assert len(capsys.readouterr().err.strip().splitlines()) == 1

    def bug(_args):
        raise ValueError("a bug keeps its traceback")

    monkeypatch.setitem(cli.COMMANDS, "verify", bug)
    with pytest.raises(ValueError):
        cli.main(["verify", "--artifacts", "/x"])


def test_a_model_folder_of_pickled_objects_is_refused_without_running_them(tmp_path):
    import torch

    from citeflow.models.encoder.model import check_model_dir

    witness = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {witness}",))

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"model_type": "bert"}))
    torch.save({"weight": Payload()}, bad / "pytorch_model.bin")
    with pytest.raises(CiteflowError) as err:
        check_model_dir(str(bad))
    assert "pytorch_model.bin is refused: it holds objects other than tensors" in str(err.value)
    assert "\n" not in str(err.value) and not witness.exists()
    good = tmp_path / "good"
    good.mkdir()
    (good / "config.json").write_text(json.dumps({"model_type": "bert"}))
    torch.save({"weight": torch.zeros(2)}, good / "pytorch_model.bin")
    torch.save({"weight": torch.zeros(2)}, good / "old.bin", _use_new_zipfile_serialization=False)
    assert check_model_dir(str(good)) == good
