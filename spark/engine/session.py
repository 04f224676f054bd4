"""The SparkSession every Spark stage uses, built from `SparkConfig`.

`local[*]` by default with memory sized for a small machine; any cluster
(`spark://host:7077`, `yarn`, `k8s://...`) by setting `spark.master`, with no
code change. Java is checked first so a missing or old JVM is one clear
message instead of a Py4J traceback.

With `spark.remote=sc://host:port` the session is a Spark Connect client:
no JVM starts here, the server plans and runs every query, and only the
session's SQL settings are sent (the server's own static settings stay
its own). Stage code therefore uses the DataFrame API alone: no RDDs and no
SparkContext, which Spark Connect does not have.

The local driver's JVM is started with its settings in a properties file only this user can read
(`citeflow.spark.engine.driver.launch_driver`), never as `--conf key=value` arguments: a JVM's command line is readable
by every local user, and `spark.conf` may hold a secret (an object store's key).
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from citeflow.config import SparkConfig
from citeflow.errors import CiteflowError
from citeflow.spark.engine.driver import driver_running, launch_driver, stop_driver

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
MIN_JAVA = 17  # Spark 4 runs on Java 17 or 21


def java_version() -> int | None:
    """Major version of the java that Spark will launch, or None when there is none."""
    from citeflow.spark.engine.class_archive import java_binary

    java = java_binary()
    if java is None:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major  # "1.8" is Java 8


def check_java() -> None:
    version = java_version()
    if version is None:
        raise CiteflowError(
            f"Spark needs Java {MIN_JAVA} or newer and none was found. Install one "
            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME."
        )
    if version < MIN_JAVA:
        raise CiteflowError(
            f"Spark needs Java {MIN_JAVA} or newer; found Java {version}. Install openjdk-17 and point JAVA_HOME at it."
        )


# SQL settings every citeflow session runs with, local driver or Spark Connect.
SESSION_SQL = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    # Parquet written by Spark must be readable by pyarrow readers downstream.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


# HotSpot's optimising compiler (C2) takes a method after 4-7x the invocations and loop iterations of its
# defaults (30,000 / 4,000 / 60,000 / 240,000; JDK 17's: 5,000 / 600 / 15,000 / 40,000): with the defaults a
# stage spends a third of the JVM's CPU in C2, much of it on code that runs a few thousand times (Spark
# generates new classes for every query), while the first tier's code runs only a little longer meanwhile. A
# long run's hot code is compiled as before, only later. Twice these thresholds gain no more; fewer compiles
# on every tier (`-XX:CompileThresholdScaling=3`), no tiers (`-XX:-TieredCompilation`), shallower inlining and
# no escape analysis were slower or within noise.
LATER_C2 = (
    "-XX:Tier4InvocationThreshold=30000 -XX:Tier4MinInvocationThreshold=4000 "
    "-XX:Tier4CompileThreshold=60000 -XX:Tier4BackEdgeThreshold=240000"
)


def driver_java_options() -> str:
    """The JVM options of a driver citeflow starts: its own (`get_spark`) or a Spark Connect server's
    (`citeflow.spark.engine.connect_server`): citeflow's log4j settings, the throughput collector and `LATER_C2`.

    The throughput collector: the stages are batch jobs, and on a small machine G1's concurrent work competes
    with the tasks for the cores (build_graph ran a few percent slower with G1). Executors of a cluster keep
    their own settings."""
    log4j = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
    return f"-Dlog4j2.configurationFile=file:{log4j} -XX:+UseParallelGC {LATER_C2}"


def get_spark(config: SparkConfig, app_name: str = "citeflow"):
    """Start (or reuse) the SparkSession for `config`: a local driver, or a Spark Connect client."""
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    if config.remote:
        return _connect(config, app_name)
    check_java()
    from pyspark.sql import SparkSession

    from citeflow.spark.engine import class_archive as CA

    # Executors on a cluster must run the same Python as this driver.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = {
        "spark.app.name": app_name,
        "spark.master": config.master,
        "spark.driver.memory": config.driver_memory,
        "spark.sql.shuffle.partitions": str(config.shuffle_partitions),
        # Spark's own progress bar, where someone is watching a terminal.
        "spark.ui.showConsoleProgress": str(sys.stderr.isatty()).lower(),
        **SESSION_SQL,
    }
    java_options = driver_java_options()
    user = config.user_settings()
    archive = class_archive_plan(config, java_options, user)
    settings["spark.driver.extraJavaOptions"] = f"{java_options} {archive.options}".strip()
    if config.local_dir:
        settings["spark.local.dir"] = config.local_dir
    settings.update(user)
    try:
        launch_driver(settings)
        builder = SparkSession.builder  # the settings again, through Py4J: a JVM started before has its own
        for key, value in settings.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.conf.get("spark.sql.shuffle.partitions")  # the SQL settings are checked when first read
    except CiteflowError:
        raise
    except Exception as exc:
        logging.getLogger("citeflow").debug("Spark's driver did not start", exc_info=exc)
        raise CiteflowError(f"Spark's driver did not start: {start_failure(exc)}") from exc
    CA.note_written(archive, spark, java_options, config.driver_memory)
    return spark


def size_shuffle(spark, config: SparkConfig, input_bytes: int, stage: str) -> int:
    """Set the session's shuffle partitions for one stage's run and return them: `config.shuffle_partitions`, or one
    per `config.shuffle_input_mb` of `input_bytes` where that is more, unless `config.conf` sets
    `spark.sql.shuffle.partitions` itself (then left as it is).

    A fixed count makes each partition grow with the corpus: at 10M generated papers, 16 partitions held 400 MB of
    abstracts each, and the sort that ranks them spilled to disk as much as it shuffled. Every stage that shuffles
    the corpus calls this before its first query, so a stage after another in one session never runs with the
    other's count."""
    import math

    if "spark.sql.shuffle.partitions" in config.user_settings():
        return int(spark.conf.get("spark.sql.shuffle.partitions"))
    partitions = config.shuffle_partitions
    if config.shuffle_input_mb:
        partitions = max(partitions, math.ceil(input_bytes / (config.shuffle_input_mb << 20)))
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    if partitions != config.shuffle_partitions:
        logging.getLogger("citeflow").info(
            "%s: %d shuffle partitions for %.1f GiB of input (spark.shuffle_input_mb=%d)",
            stage,
            partitions,
            input_bytes / 2**30,
            config.shuffle_input_mb,
        )
    return partitions


def start_failure(exc: BaseException) -> str:
    """One line saying why the local driver did not start, for a user who set a Spark setting Spark refuses
    (an event log folder that does not exist, a value of the wrong type): the Java exception's first line,
    without Py4J's traceback, URIs' passwords hidden (`get_spark` logs the whole traceback at DEBUG, `citeflow
    -v`)."""
    from citeflow.redaction import redact_uri

    java = getattr(exc, "java_exception", None)  # py4j's Py4JJavaError
    text = str(java) if java is not None else str(exc)
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    if "JAVA_GATEWAY_EXITED" in line:  # the JVM exited before the session existed; it printed why on stderr
        line = "the Java process exited as it started (its own message is above)"
    return (
        f"{redact_uri(line)[:400]}. Check spark.master and the spark.conf entries "
        "(`citeflow settings` lists every setting)"
    )


def class_archive_plan(config: SparkConfig, java_options: str, user: dict[str, str]):
    """The JVM class archive's part in the local driver's start (spark/engine/class_archive.py): none when it is
    off, when this process has its JVM already (the builder returns its session) or when the user's own
    `spark.driver.extraJavaOptions` replaces citeflow's."""
    from citeflow.spark.engine import class_archive as CA

    if config.class_archive != "auto" or CA.jvm_running() or "spark.driver.extraJavaOptions" in user:
        return CA.Plan("")
    return CA.plan(java_options, config.driver_memory, user.get("spark.driver.extraClassPath", ""))


class Pending(Protocol[T_co]):
    """Work started elsewhere (another process): `result()` waits for it, `cancel()` stops it."""

    def result(self) -> T_co: ...

    def cancel(self) -> None: ...


class Done(Generic[T_co]):
    """Work already done: `result()` gives its value."""

    def __init__(self, value: T_co):
        self._value = value

    def result(self) -> T_co:
        return self._value

    def cancel(self) -> None:
        pass


class Later(Generic[T_co]):
    """Work not started: `result()` runs it here (once) and gives its value."""

    def __init__(self, work: Callable[[], T_co]):
        self._work: Callable[[], T_co] | None = work
        self._value: Any = None

    def result(self) -> T_co:
        if self._work is not None:
            self._value, self._work = self._work(), None
        return self._value

    def cancel(self) -> None:
        self._work = None


def get_spark_meanwhile(
    config: SparkConfig, app_name: str, work: Callable[[], T], apart: Callable[[], Pending[T]] | None = None
) -> tuple[Any, Pending[T]]:
    """(`get_spark(config, app_name)`, `work` under way): the stage takes the result when it needs it.

    `apart` starts the work in another process before the session is asked for, so it runs while a local JVM
    starts and then beside the stage's first Spark jobs, until the stage calls `result()`. That holds with no
    JVM to start too: a Spark Connect client, or a session this process holds already (`citeflow run`'s stages
    after the first). filter_leakage reads its benchmark ids this way; on a graph merged from a diff, Spark
    carries its paper keys and paper-ids lines over meanwhile. In a thread of this process, Python work would
    hold the GIL that the JVM's start waits for, so the two would end later than one after the other.
    Without `apart` (or when it cannot start a process), `work` runs here while a thread starts the JVM, or,
    with no JVM to start, when the stage asks for its result (a Spark Connect client tags its session in the
    calling thread, so it comes first). If the session does not start, the work apart is stopped. An error of
    `work` is raised by `result()` (a user mistake stays one line); a caller that does not get that far calls
    `cancel()`.
    """
    from citeflow.spark.engine import class_archive as CA

    pending = None
    if apart is not None:
        try:
            pending = apart()
        except OSError as exc:  # no child process here (a sandbox without fork, no Python executable)
            logging.getLogger("citeflow").debug("work apart did not start, so it runs here", exc_info=exc)
    if pending is not None:
        try:
            spark = get_spark(config, app_name)
        except BaseException:
            pending.cancel()
            raise
        return spark, pending
    if config.remote or CA.jvm_running():
        return get_spark(config, app_name), Later(work)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="spark-start") as pool:
        starting = pool.submit(get_spark, config, app_name)
        result = work()  # an error of the work is raised once the start has ended (leaving the pool waits)
        return starting.result(), Done(result)


def concurrently(spark, *calls: Callable[[], Any]) -> list[Any]:
    """The results of `calls` (each runs Spark jobs), run at once from threads, in the order given.

    Spark's FIFO scheduler offers the cores to the tasks of the job submitted first; the other jobs' tasks
    take the cores it leaves idle (a stage's last tasks, a broadcast being built, the driver planning the
    next job), so independent jobs end sooner together than one after another. A session's operation tags are
    per thread: each thread carries the caller's (its step, `step`, among them). Every call runs to its end;
    then the first error, in the order given, is raised.
    """
    from concurrent.futures import ThreadPoolExecutor

    if len(calls) < 2:
        return [call() for call in calls]
    tags = tuple(spark.getTags())

    def tagged(call: Callable[[], Any]) -> Any:
        for tag in tags:
            spark.addTag(tag)
        return call()

    # leaving the pool waits for every call, also when the first one raises: no job outlives the stage's call
    with ThreadPoolExecutor(len(calls) - 1, thread_name_prefix="spark-jobs") as pool:
        futures = [pool.submit(tagged, call) for call in calls[1:]]
        first = calls[0]()
    return [first, *(future.result() for future in futures)]


# The operation tag that names a thread's current step (`step`): in the event log, a job's `spark.job.tags`.
STEP_TAG = "citeflow-step "


def step(spark, stage: str, text: str) -> None:
    """A step of a Spark stage: logged, and the tag of the Spark jobs this thread runs next, until its next step
    (`STEP_TAG` + "<stage>: <text>", an operation tag: a local driver's and a Spark Connect session's alike; in
    the event log's `spark.job.tags`, from which `bench/spark_breakdown.py` tells where a run's time goes)."""
    logging.getLogger("citeflow").info("%s: %s", stage, text)
    for tag in list(spark.getTags()):  # a Spark Connect session hands its live set
        if tag.startswith(STEP_TAG):
            spark.removeTag(tag)
    spark.addTag(f"{STEP_TAG}{stage}: {text}".replace(",", ";"))  # a tag holds no comma


def as_step(spark, stage: str, text: str, call: Callable[[], Any]) -> Callable[[], Any]:
    """`call` as a step of its own (`step`), for `concurrently`: a thread's jobs carry its own step's tag."""

    def run() -> Any:
        step(spark, stage, text)
        return call()

    return run


def cancel_all(spark) -> None:
    """Cancel every Spark job this session runs: `interruptAll` is one call for classic Spark (4.0+) and Spark
    Connect alike (on Connect, its operations on the server)."""
    spark.interruptAll()


def is_connect(spark) -> bool:
    """Whether `spark` is a Spark Connect client session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _connect(config: SparkConfig, app_name: str):
    """A Spark Connect session on `config.remote` with citeflow's SQL settings and `spark.conf`."""
    from pyspark.sql import SparkSession

    settings = {**SESSION_SQL, "spark.sql.shuffle.partitions": str(config.shuffle_partitions)}
    settings.update(config.user_settings())
    builder = SparkSession.builder.remote(config.remote)
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        # the server runs many clients' sessions: the tag names this stage's operations there (interruptTag)
        spark = builder.getOrCreate()
        spark.addTag(re.sub(r"[^A-Za-z0-9_.-]", "_", app_name))
        spark.range(1).collect()  # reach the server now: an unreachable one is one line, not a later traceback
    except Exception as exc:
        from citeflow.redaction import redact_uri

        raise CiteflowError(
            f"cannot reach the Spark Connect server {redact_uri(config.remote).split('/;')[0]}: "
            f"{str(exc).strip().splitlines()[0][:300]}"
        ) from None
    _release_at_exit(spark)
    if all(held is not spark for held in _connect_sessions):  # each stage of a run is handed the same session
        _connect_sessions.append(spark)
    return spark


# How long a Spark Connect client that exits waits for the server to release its session (`_release_at_exit`).
RELEASE_WAIT_S = 10.0
_releasing: set[int] = set()  # the sessions `_release_at_exit` will release, by id()
_connect_sessions: list[Any] = []  # the Spark Connect sessions `_connect` opened and `stop_spark` has not released


def spark_held() -> bool:
    """Whether this process holds a Spark session: a local driver's (`driver.driver_running`), or a Spark Connect
    session it opened. Never imports pyspark itself."""
    return bool(_connect_sessions) or driver_running()


def stop_spark() -> bool:
    """Stop this process's Spark session and the local driver's JVM that pyspark started for it
    (`driver.stop_driver`); True when there was one. A Spark Connect session is released on its server instead
    (`_release`). A later `get_spark` starts afresh.

    `citeflow run` calls it once the last stage that needs Spark is done (jobs/pipeline.py): the driver's JVM keeps
    its heap (`spark.driver_memory`) until it exits, so it would otherwise hold gigabytes idle through embedding,
    mining and training."""
    stopped = False
    while _connect_sessions:
        _release(_connect_sessions.pop())
        stopped = True
    return stop_driver() or stopped


def _release_at_exit(spark) -> None:
    """Release `spark`'s session on the Spark Connect server when this process exits.

    pyspark's client leaves its session on the server when its process ends (it releases it only on `stop()`,
    or at exit with `SPARK_CONNECT_RELEASE_SESSION_ON_EXIT`), and the server keeps an idle session with what it
    holds (its cached plans and relations, its settings) until `spark.connect.session.manager.defaultSessionTimeout`,
    an hour by default: every `citeflow run` and every Airflow task left one behind on a shared server. Stages of
    one process share the session, so it is released once, at the end: `stop()` (the server's ReleaseSession),
    waited on for at most `RELEASE_WAIT_S`, so that a server gone meanwhile never holds the exit up. Registered
    after the client's own exit hook, so it runs first (atexit is last in, first out) and that one finds the
    client closed."""
    import atexit

    if id(spark) in _releasing:
        return
    _releasing.add(id(spark))
    atexit.register(_release, spark)


def _release(spark, wait_s: float | None = None) -> None:
    """`spark.stop()`, given at most `wait_s` (`RELEASE_WAIT_S`); a failure is logged at DEBUG only: the server
    drops the session at its idle timeout anyway."""
    import threading

    def stop() -> None:
        try:
            spark.stop()
        except Exception as exc:  # a server gone or restarted: nothing is left to release
            logging.getLogger("citeflow").debug("Spark Connect session not released", exc_info=exc)

    worker = threading.Thread(target=stop, name="spark-connect-release", daemon=True)
    try:
        worker.start()
    except RuntimeError:  # no new thread during the interpreter's shutdown (Python 3.12+)
        stop()
        return
    worker.join(RELEASE_WAIT_S if wait_s is None else wait_s)
