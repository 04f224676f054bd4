"""`pip install citeflow` adds one importable name, `citeflow`: the folders jobs/, spark/, models/, evaluation/,
cockpit/ and synthcorpus/ install as citeflow.jobs, citeflow.spark, ... (setup.py). Checked on the installed
distribution's metadata and on a wheel built from this checkout, file by file."""

import importlib.metadata
import shutil
import subprocess
import sys
import zipfile

import pytest

from tests.unit.test_layers import FOLDERS, REPO


def test_the_installed_distribution_names_one_top_level_package():
    dist = importlib.metadata.distribution("citeflow")
    assert (dist.read_text("top_level.txt") or "").split() == ["citeflow"]
    for entry in dist.entry_points:
        assert entry.value.startswith("citeflow."), entry  # the console script and the Airflow plugin


@pytest.mark.slow
def test_a_wheel_holds_every_module_under_citeflow_and_nothing_else(tmp_path):
    # built from a copy of the checkout's files, so that no build/ folder is left in it (or read from it)
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    source = tmp_path / "source"
    for name in files:
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), "."],
        cwd=source,
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("citeflow-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {n.split("/")[0] for n in names} == {"citeflow", wheel.name.split("-py")[0] + ".dist-info"}
    expected = {f"citeflow/{p.relative_to(REPO).as_posix()}" for f in FOLDERS for p in (REPO / f).rglob("*.py")}
    expected |= {p.relative_to(REPO).as_posix() for p in (REPO / "citeflow").rglob("*.py")}
    assert expected <= names, sorted(expected - names)[:10]
    assert "citeflow/spark/engine/log4j2.properties" in names
