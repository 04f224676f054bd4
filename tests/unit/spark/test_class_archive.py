"""The local driver's JVM class archive (spark/engine/class_archive.py): written by a session's JVM as it exits,
checked by Java before any JVM maps it, then used by the next sessions; off where it must be."""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from citeflow.config import SparkConfig
from citeflow.errors import CiteflowError
from citeflow.spark.engine import class_archive as CA
from citeflow.spark.engine import session

ROOT = Path(__file__).resolve().parents[3]

# Starts a session the way a stage does and prints the archive options its JVM got.
SESSION = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from citeflow.config import SparkConfig
    from citeflow.spark.engine.session import get_spark
    spark = get_spark(SparkConfig(driver_memory="1g"), "class-archive-test")
    assert spark.range(5).count() == 5
    jvm = spark.sparkContext._jvm
    args = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    print(json.dumps([str(a) for a in args if "Archive" in str(a) or "Xshare" in str(a)]))
    """
)


def start_session(cache: Path) -> list[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", SESSION, str(ROOT)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def wait_for_exit(note: Path, timeout: float = 120.0) -> None:
    pid = json.loads(note.read_text())["jvm_pid"]
    deadline = time.monotonic() + timeout
    while CA._alive(pid):
        assert time.monotonic() < deadline, "the JVM that writes the archive did not exit"
        time.sleep(0.5)


def dead_pid() -> int:
    pid = 4_000_000
    while CA._alive(pid):
        pid -= 1
    return pid


def test_the_first_session_writes_it_java_checks_it_and_the_next_uses_it(tmp_path):
    folder = tmp_path / "citeflow" / "jvm"
    first = start_session(tmp_path)
    assert len(first) == 1 and first[0].startswith("-XX:ArchiveClassesAtExit=")
    written = Path(first[0].split("=", 1)[1])
    note = written.with_suffix(".json")
    wait_for_exit(note)
    assert written.stat().st_size > 1 << 20

    # Beside it, the same archive cut short, as a JVM killed while writing it leaves it: mapping that file
    # crashes a JVM, so Java's check must refuse it (it is looked at first: ".0." sorts before the pid).
    name = written.name.split(".")[0]
    cut = folder / f"{name}.0.tmp"
    with open(written, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(written.stat().st_size // 2))
    cut.with_suffix(".json").write_text(json.dumps({**json.loads(note.read_text()), "jvm_pid": dead_pid()}))

    second = start_session(tmp_path)
    archive = folder / f"{name}.jsa"
    assert second == [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    assert sorted(p.name for p in folder.iterdir()) == [archive.name]  # the cut one deleted, notes gone
    assert not list(ROOT.glob("hs_err_pid*.log")) and not list(Path.cwd().glob("hs_err_pid*.log"))


def test_an_archive_is_never_promoted_while_its_jvm_runs_or_without_its_note(tmp_path, monkeypatch):
    monkeypatch.setattr(CA, "cache_dir", lambda: tmp_path)
    java = CA.java_binary()
    name = CA.archive_name(java, CA.spark_home(), "-XX:+UseParallelGC", "1g", "")
    running = tmp_path / f"{name}.11.tmp"
    running.write_bytes(b"not yet")
    running.with_suffix(".json").write_text(json.dumps({"jvm_pid": os.getpid()}))  # alive: this process
    orphan = tmp_path / f"{name}.12.tmp"  # no note: nothing to check it with
    orphan.write_bytes(b"junk")
    # and while that JVM runs, no second one is asked to write an archive (each writer starts slower)
    assert CA.plan("-XX:+UseParallelGC", "1g") == CA.Plan("") and not (tmp_path / f"{name}.jsa").exists()
    assert running.exists() and running.with_suffix(".json").exists()
    old = time.time() - 2 * CA.LEFTOVER_S
    os.utime(orphan, (old, old))
    CA.plan("-XX:+UseParallelGC", "1g")
    assert not orphan.exists() and running.exists()


def test_the_name_follows_java_spark_jars_and_driver_settings(tmp_path):
    java = tmp_path / "java"
    java.write_text("#!/bin/sh\n")
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    jar = home / "jars" / "spark-core.jar"
    jar.write_bytes(b"x")
    name = lambda **kw: CA.archive_name(  # noqa: E731
        str(java), str(home), kw.get("options", "-XX:+UseParallelGC"), kw.get("memory", "4g"), kw.get("cp", "")
    )
    base = name()
    assert base == name() and base.startswith("spark-")
    assert name(options="-XX:+UseG1GC") != base
    assert name(memory="64g") != base  # past 32 GB the JVM's pointers change
    assert name(cp="/opt/extra.jar") != base
    jar.write_bytes(b"xy")  # another Spark build
    assert name() != base


def test_off_a_running_jvm_or_the_users_own_options_mean_no_archive(monkeypatch):
    from pyspark import SparkContext

    asked = []
    monkeypatch.setattr(CA, "plan", lambda *args: asked.append(args) or CA.Plan("-XX:SharedArchiveFile=x"))
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    assert not CA.jvm_running()
    auto = SparkConfig()
    assert session.class_archive_plan(auto, "-XX:+UseParallelGC", {}).options == "-XX:SharedArchiveFile=x"
    assert session.class_archive_plan(SparkConfig(class_archive="off"), "", {}).options == ""
    assert session.class_archive_plan(auto, "", {"spark.driver.extraJavaOptions": "-Xss4m"}).options == ""
    monkeypatch.setattr(SparkContext, "_active_spark_context", object())
    assert session.class_archive_plan(auto, "", {}).options == ""
    assert len(asked) == 1


def test_the_setting_is_auto_or_off():
    with pytest.raises(CiteflowError, match="spark.class_archive must be auto or off"):
        SparkConfig(class_archive="/tmp/somewhere")


def test_no_java_means_no_archive(monkeypatch, tmp_path):
    monkeypatch.setattr(CA, "java_binary", lambda: None)
    assert CA.plan("", "4g", folder=tmp_path / "jvm") == CA.Plan("")
    assert not list(tmp_path.iterdir())


def test_after_three_jvms_ended_without_an_archive_none_is_asked_for_a_day(tmp_path, monkeypatch):
    monkeypatch.setattr(CA, "cache_dir", lambda: tmp_path)
    name = CA.archive_name(CA.java_binary(), CA.spark_home(), "", "1g", "")
    for attempt in range(3):
        assert CA.plan("", "1g").options.startswith("-XX:ArchiveClassesAtExit=")
        # that JVM was killed before it could write the archive: its note stays, its file never comes
        (tmp_path / f"{name}.{attempt}.json").write_text(json.dumps({"jvm_pid": dead_pid()}))
    assert CA.plan("", "1g") == CA.Plan("")
    assert len((tmp_path / f"{name}.failed").read_text().splitlines()) == 3
    old = time.time() - 2 * CA.LEFTOVER_S
    os.utime(tmp_path / f"{name}.failed", (old, old))
    assert CA.plan("", "1g").options.startswith("-XX:ArchiveClassesAtExit=")


def test_with_the_archive_in_place_what_other_jvms_wrote_meanwhile_is_deleted(tmp_path, monkeypatch):
    monkeypatch.setattr(CA, "cache_dir", lambda: tmp_path)
    name = CA.archive_name(CA.java_binary(), CA.spark_home(), "", "1g", "")
    (tmp_path / f"{name}.jsa").write_bytes(b"the archive")
    for pid, jvm in ((7, dead_pid()), (8, os.getpid())):  # a finished JVM's file, and a running JVM's note
        (tmp_path / f"{name}.{pid}.json").write_text(json.dumps({"jvm_pid": jvm}))
        (tmp_path / f"{name}.{pid}.tmp").write_bytes(b"written too")
    assert CA.plan("", "1g").options.startswith("-XX:SharedArchiveFile=")
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{name}.8.json", f"{name}.8.tmp", f"{name}.jsa"]


def test_the_folder_keeps_the_archives_used_last(tmp_path, monkeypatch):
    monkeypatch.setattr(CA, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(CA, "MAX_ARCHIVES", 3)
    name = CA.archive_name(CA.java_binary(), CA.spark_home(), "", "1g", "")
    now = time.time()

    def archive(file: str, age_h: float, jvm: int | None = None) -> None:
        (tmp_path / file).write_bytes(b"an archive")
        os.utime(tmp_path / file, (now - age_h * 3600, now - age_h * 3600))
        if jvm is not None:
            (tmp_path / file).with_suffix(".json").write_text(json.dumps({"jvm_pid": jvm}))

    archive(f"{name}.jsa", 10)  # this install's: used now, so kept however old its last use
    archive("spark-other1.jsa", 1)
    archive("spark-other2.jsa", 2)
    archive("spark-other3.jsa", 3)  # the fourth used last: deleted
    archive("spark-gone.11.tmp", 0.5, dead_pid())  # written by a JVM now gone, never checked: counts
    archive("spark-running.12.tmp", 20, os.getpid())  # a running JVM's: left alone
    archive("spark-x.13.tmp", 23, None)  # no note: its writer is gone too
    (tmp_path / "spark-other1.failed").write_text("x\n")  # not an archive

    assert CA.plan("", "1g").options.startswith("-XX:SharedArchiveFile=")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"{name}.jsa",
        "spark-gone.11.json",
        "spark-gone.11.tmp",
        "spark-other1.failed",
        "spark-other1.jsa",
        "spark-running.12.json",
        "spark-running.12.tmp",
    ]

    # a session that will write its own archive prunes the folder too
    (tmp_path / f"{name}.jsa").unlink()
    archive("spark-other4.jsa", 0.1)
    assert CA.plan("", "1g").options.startswith("-XX:ArchiveClassesAtExit=")
    kept = {p.name for p in tmp_path.iterdir() if p.suffix in (".jsa", ".tmp")}
    assert kept == {"spark-other4.jsa", "spark-gone.11.tmp", "spark-other1.jsa", "spark-running.12.tmp"}
