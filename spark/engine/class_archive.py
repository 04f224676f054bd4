"""A class-data archive for the local Spark driver's JVM (`spark.class_archive`): Spark's classes mapped
from one file at start instead of found, read and verified one by one by every new JVM.

A JVM started with `-XX:ArchiveClassesAtExit=FILE` (JDK 13 or newer, HotSpot: Java's dynamic AppCDS
archive) writes the classes it loaded into FILE as it exits; a JVM started with
`-XX:SharedArchiveFile=FILE` maps them. One roughly halves a session's start (the builder's `getOrCreate`)
and its first query.

The life of an archive, one per Java and Spark install and driver settings (`archive_name`), in
`$XDG_CACHE_HOME/citeflow/jvm` (`~/.cache/citeflow/jvm` by default):

1. With none there and no other JVM writing one, the session's JVM is started to write one when it exits,
   into a file of its own (`NAME.PID.tmp`), and the session notes beside it (`NAME.PID.json`) the JVM's
   pid, class path and options. Sessions that start meanwhile start as before, without any.
2. A later session start, once that JVM has exited, has Java check the file it wrote
   (`java -Xshare:on -XX:+VerifySharedSpaces ... -version` on the noted class path): a file the JVM cut
   short (killed while writing it) is refused there, where a JVM mapping it would crash. A sound one
   becomes `NAME.jsa` (an atomic rename), any other is deleted, as are leftovers a day old and, once
   `NAME.jsa` is in place, what other JVMs (first sessions at the same time) wrote. After three
   JVMs in a day ended without a sound one (a JVM writing at exit starts seconds slower), none is asked for
   until the day is over.
3. Sessions start with `-XX:SharedArchiveFile=NAME.jsa -Xshare:auto`: an archive that does not fit the
   JVM (a Java update in place, another class path) is left unused by the JVM itself, without a word
   (`-Xlog:cds=off`).

4. The folder keeps the `MAX_ARCHIVES` archives used last (`NAME.jsa`, and files written by JVMs now gone that
   wait for their check); every session start deletes the others. Each is about 200 MB, and every Spark
   install has its own (a fresh virtual environment or checkout: the test suite's fresh clones): kept 30 days
   each, 47 (20 checked, 27 written and never checked), 7.5 GiB, had gathered on a build machine in 16 hours.

Nothing here changes what a stage computes; `spark.class_archive=off` starts the JVM as before, and a
`spark.driver.extraJavaOptions` of the user's own (which replaces citeflow's options) turns it off too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("citeflow")

SUFFIX = ".jsa"
# Quiet about the archive: classes it skips while writing (signed jars), or an archive it cannot use.
QUIET = "-Xlog:cds=off,cds+dynamic=off"
LEFTOVER_S = 86_400.0  # unpromoted files of this age are removed
CHECK_TIMEOUT_S = 60.0
# archives kept, those used last (each about 200 MB): one checkout's runs use up to three (the CLI's default 4g
# driver, the test suite's 2g and 1g drivers), and one more leaves room for a second checkout's
MAX_ARCHIVES = 4
MAX_FAILURES = 3  # JVMs in a day that ended without a sound archive, after which none is written for a day


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "citeflow" / "jvm"


def java_binary() -> str | None:
    """The java that Spark's launcher runs: `$JAVA_HOME/bin/java`, else the first on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def spark_home() -> str:
    if os.environ.get("SPARK_HOME"):
        return os.environ["SPARK_HOME"]
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def archive_name(java: str, home: str, options: str, memory: str, class_path: str) -> str:
    """`spark-<hash>`: what an archive depends on, hashed: the java binary (path, size, time), Spark's jars
    (names, sizes, times), the driver's JVM options and heap size, and any extra class path."""
    digest = hashlib.sha256()

    def add(*parts: object) -> None:
        digest.update(json.dumps(parts).encode())

    stat = os.stat(java)
    add("java", java, stat.st_size, stat.st_mtime_ns)
    jars = Path(home) / "jars"
    for jar in sorted(jars.glob("*.jar")) if jars.is_dir() else []:
        stat = jar.stat()
        add(jar.name, stat.st_size, stat.st_mtime_ns)
    add("options", options, memory, class_path)
    return "spark-" + digest.hexdigest()[:16]


@dataclass(frozen=True)
class Plan:
    """What a session's JVM does with the archive: `options` to add to its command line; `note` (a path)
    when it writes one, where `note_written` records its class path once it runs."""

    options: str
    note: Path | None = None


def plan(options: str, memory: str, class_path: str = "", folder: Path | None = None) -> Plan:
    """The archive options for a local driver started with `options` (its other JVM options) and heap
    `memory`: use the archive, or write one at exit. An empty plan when there is no java to key it on or
    the cache folder cannot be written (the JVM then starts as it always did)."""
    java = java_binary()
    if java is None:
        return Plan("")
    folder = folder or cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        name = archive_name(java, spark_home(), options, memory, class_path)
        archive = folder / (name + SUFFIX)
        writing = not archive.exists() and _promote_written(folder, name)
        if archive.exists():
            os.utime(archive)  # the time of last use: what `_remove_leftovers` and `_keep_recent` keep
            _discard_written(folder, name)
            _keep_recent(folder)
            return Plan(f"-XX:SharedArchiveFile={archive} -Xshare:auto {QUIET}")
        _keep_recent(folder)
        if writing:
            return Plan("")  # a running JVM writes it as it exits: one writer at a time (each starts slower)
        if _failures(folder / f"{name}.failed", now=time.time()) >= MAX_FAILURES:
            return Plan("")  # this install's JVMs end before they can write it (killed): not for a day
        written = folder / f"{name}.{os.getpid()}.tmp"
        written.unlink(missing_ok=True)
        return Plan(f"-XX:ArchiveClassesAtExit={written} {QUIET}", note=written.with_suffix(".json"))
    except OSError as exc:
        log.debug("no JVM class archive: %s", exc)
        return Plan("")


def jvm_running() -> bool:
    """Whether this process has its local Spark JVM already (a session's builder then returns it)."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def note_written(plan_: Plan, spark, options: str, memory: str) -> None:
    """Record, beside the archive this session's JVM writes at exit, what checking it needs."""
    if plan_.note is None:
        return
    jvm = spark.sparkContext._jvm
    system = jvm.System
    note = {
        "jvm_pid": int(jvm.java.lang.ProcessHandle.current().pid()),
        "java": os.path.join(system.getProperty("java.home"), "bin", "java"),
        "class_path": system.getProperty("java.class.path"),
        # the VM's own settings (collector, sizes), not the system properties
        "flags": [o for o in shlex.split(options) if o.startswith("-XX:")],
        "memory": memory,
    }
    try:
        tmp = plan_.note.with_suffix(".json.part")
        tmp.write_text(json.dumps(note))
        os.replace(tmp, plan_.note)
        log.info("spark: this JVM writes a class archive as it exits, for faster Spark starts: %s", plan_.note.parent)
    except OSError as exc:
        log.debug("no JVM class archive note: %s", exc)


def _promote_written(folder: Path, name: str) -> bool:
    """Make an archive that an earlier session's JVM wrote as it exited (its JVM gone) `NAME.jsa` when
    Java finds it sound; delete unsound ones and leftovers. Whether a running JVM will write one."""
    archive = folder / (name + SUFFIX)
    now = time.time()
    writing = False
    for note_path in sorted(folder.glob(f"{name}.*.json")):
        written = note_path.with_suffix(".tmp")
        try:
            note = json.loads(note_path.read_text())
            if _alive(note["jvm_pid"]) and now - note_path.stat().st_mtime < LEFTOVER_S:
                writing = True  # still running: it writes the archive as it exits
                continue
        except (OSError, ValueError, KeyError, TypeError):
            note = None
        if note is not None and written.exists() and check(written, note):
            os.replace(written, archive)
            (folder / f"{name}.failed").unlink(missing_ok=True)
            log.info("spark: JVM class archive ready: %s", archive)
        else:
            if written.exists():
                log.info("spark: deleting an unusable JVM class archive %s", written)
            with open(folder / f"{name}.failed", "a") as failures:  # killed before or while writing it
                failures.write(f"{note_path.name}\n")
        written.unlink(missing_ok=True)
        note_path.unlink(missing_ok=True)
        if archive.exists():
            break
    _remove_leftovers(folder, now)
    return writing


def _failures(path: Path, now: float) -> int:
    """How many JVMs of the last day ended without a sound archive (a day-old count starts again)."""
    try:
        if now - path.stat().st_mtime > LEFTOVER_S:
            path.unlink()
            return 0
        return len(path.read_text().splitlines())
    except OSError:
        return 0


def _discard_written(folder: Path, name: str) -> None:
    """With `NAME.jsa` in place, the archives other JVMs wrote meanwhile (several first sessions at once) are
    of no use: delete those whose JVM is gone."""
    for note_path in folder.glob(f"{name}.*.json"):
        try:
            if _alive(json.loads(note_path.read_text())["jvm_pid"]):
                continue
        except (OSError, ValueError, KeyError, TypeError):
            pass
        note_path.with_suffix(".tmp").unlink(missing_ok=True)
        note_path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process under a reused pid
        return True
    return True


def check(archive: Path, note: dict) -> bool:
    """Whether Java maps `archive` whole on the class path it was written for (checksums verified)."""
    with tempfile.TemporaryDirectory(prefix="citeflow-cds-") as scratch:  # where a crash report would go
        cmd = [note["java"], "-Xshare:on", "-XX:+VerifySharedSpaces", f"-XX:SharedArchiveFile={archive}"]
        cmd += [f"-XX:ErrorFile={scratch}/hs_err.log", f"-Xmx{note['memory']}", *note["flags"], QUIET]
        cmd += ["-cp", note["class_path"], "-version"]
        try:
            done = subprocess.run(cmd, cwd=scratch, capture_output=True, timeout=CHECK_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError):
            return False
    return done.returncode == 0


def _keep_recent(folder: Path) -> None:
    """Delete every archive but the `MAX_ARCHIVES` used last: `NAME.jsa` files by their time of last use, and
    files that JVMs now gone wrote (awaiting their check) by the time they were written, with their notes. A
    file a running JVM writes is left alone; a JVM that has mapped a deleted archive keeps its mapping, and one
    told to map it starts without it (`-Xshare:auto`)."""
    archives = []
    for path in folder.iterdir():
        try:
            if path.suffix == ".tmp":
                note = path.with_suffix(".json")
                if note.exists() and _alive(json.loads(note.read_text())["jvm_pid"]):
                    continue
            elif path.suffix != SUFFIX:
                continue
            archives.append((path.stat().st_mtime, path))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    for _, path in sorted(archives, reverse=True)[MAX_ARCHIVES:]:
        try:
            path.unlink()
            if path.suffix == ".tmp":
                path.with_suffix(".json").unlink(missing_ok=True)
        except OSError:
            continue


def _remove_leftovers(folder: Path, now: float) -> None:
    """Delete notes and written files a day old (their JVM never finished one), and archives unused for
    30 days (another Java or Spark install's)."""
    for path in folder.iterdir():
        try:
            age = now - path.stat().st_mtime
            if (path.suffix in (".tmp", ".json", ".part") and age > LEFTOVER_S) or (
                path.suffix == SUFFIX and age > 30 * LEFTOVER_S
            ):
                path.unlink()
        except OSError:
            continue
