"""Spark settings and the Spark Connect client side: what a user sets, what reaches Spark, what is kept
out of manifests; the in-Spark title fold against citeflow.text.fold_title, the fold's definition."""

import gzip
import json
import os
import random
import re
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from citeflow.config import RunConfig, SparkConfig, apply_overrides
from citeflow.errors import CiteflowError
from citeflow.jobs.filter_leakage import transforms as L
from citeflow.redaction import redact
from citeflow.spark import readers as R
from citeflow.spark import scans as S
from citeflow.spark.engine import class_archive as CA
from citeflow.text import fold_title
from tests.support.titles import TRICKY


@pytest.mark.parametrize(
    "remote", ["sc://localhost:15002", "sc://spark-connect.example.org", "sc://10.0.0.7:443/;use_ssl=true;token=abc"]
)
def test_a_spark_connect_url_is_accepted(remote):
    assert SparkConfig(remote=remote).remote == remote


@pytest.mark.parametrize("remote", ["localhost:15002", "spark://h:7077", "sc://", "sc://h:15002/x", "sc://h h:1"])
def test_anything_else_is_one_clear_error(remote):
    with pytest.raises(CiteflowError, match="must be a Spark Connect URL"):
        SparkConfig(remote=remote)


@pytest.mark.parametrize(
    "master",
    ["local", "local[*]", "local[2]", "local[*, 3]", "local-cluster[2,1,1024]", "spark://a:7077,b:7077", "yarn"],
)
def test_a_master_url_spark_starts_a_driver_for_is_accepted(master):
    assert SparkConfig(master=master).master == master
    assert SparkConfig(master="k8s://https://host:443").master == "k8s://https://host:443"


@pytest.mark.parametrize("master", ["bogus://x", "localx", "local[]", "local[0]", "Local", "spark://", "yarn-client"])
def test_any_other_master_is_one_clear_error_before_a_jvm_starts(master):
    with pytest.raises(CiteflowError, match=f"spark.master '{re.escape(master)}' is not a Spark master URL"):
        SparkConfig(master=master)


def test_a_driver_that_does_not_start_is_its_java_exceptions_first_line():
    from pyspark.errors import PySparkRuntimeError

    from citeflow.spark.engine.session import start_failure

    class JavaFailure(Exception):  # py4j's Py4JJavaError carries the Java exception
        java_exception = "java.io.FileNotFoundException: File file:/x does not exist\n\tat org.apache.hadoop.fs.Raw"

    assert start_failure(JavaFailure("An error occurred while calling None.JavaSparkContext.\n: ...")).startswith(
        "java.io.FileNotFoundException: File file:/x does not exist. Check spark.master and the spark.conf entries"
    )
    exited = PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})
    assert start_failure(exited).startswith("the Java process exited as it started (its own message is above)")
    # a URI's password never reaches the message
    line = start_failure(RuntimeError("\n cannot open s3a://user:hunter2@bucket/logs\nmore"))
    assert "hunter2" not in line and line.startswith("cannot open s3a://user:")


@pytest.mark.parametrize(
    "override, named",
    [
        ("spark.master=spark://h:7077", "spark.master"),
        ("spark.driver_memory=8g", "spark.driver_memory"),
        ("spark.local_dir=/scratch", "spark.local_dir"),
    ],
)
def test_settings_the_server_owns_conflict_with_remote(override, named):
    base = RunConfig(snapshot="s", corpus="c", artifacts="a")
    with pytest.raises(CiteflowError, match=f"so {named} would be ignored"):
        apply_overrides(base, ["spark.remote=sc://h:15002", override])
    sized = apply_overrides(base, ["spark.remote=sc://h:15002", "spark.shuffle_partitions=7"])  # a session setting
    assert sized.spark.remote == "sc://h:15002" and sized.spark.shuffle_partitions == 7


def test_a_connect_token_never_reaches_a_manifest():
    config = apply_overrides(
        RunConfig(snapshot="s", corpus="c", artifacts="a"), ["spark.remote=sc://h:15002/;token=S3CR3T;use_ssl=true"]
    )
    recorded = json.dumps(redact({"spark": {"remote": config.spark.remote}}))
    assert "S3CR3T" not in recorded and "sc://h:15002" in recorded
    assert config.spark.remote.endswith("token=S3CR3T;use_ssl=true")  # Spark itself gets the real value


@pytest.fixture
def spark_connection(monkeypatch):
    pytest.importorskip("airflow.sdk")
    from airflow.sdk import Connection

    def use(**fields):
        conn = Connection(conn_id="spark_default", conn_type="spark", **fields)
        monkeypatch.setattr(Connection, "get", classmethod(lambda cls, conn_id: conn))

    return use


@pytest.mark.parametrize(
    "host, port, want",
    [
        ("sc://connect.example.org", 15002, "spark.remote=sc://connect.example.org:15002"),
        ("sc://connect.example.org:443/;use_ssl=true", None, "spark.remote=sc://connect.example.org:443/;use_ssl=true"),
        ("sc://h/;use_ssl=true", 443, "spark.remote=sc://h:443/;use_ssl=true"),
        ("spark://master", 7077, "spark.master=spark://master:7077"),
        ("yarn", None, "spark.master=yarn"),
    ],
)
def test_the_airflow_connection_picks_a_master_or_a_connect_server(spark_connection, host, port, want):
    from citeflow.cockpit import run_settings

    spark_connection(host=host, port=port, extra=json.dumps({"spark.sql.shuffle.partitions": "8"}))
    overrides = run_settings.spark_master_from_connection()
    assert overrides[0] == want
    assert overrides[1:] == ["spark.conf=spark.sql.shuffle.partitions=8"]
    config = apply_overrides(RunConfig(snapshot="s", corpus="c", artifacts="a"), overrides)
    assert (config.spark.remote or config.spark.master) == want.split("=", 1)[1]


def test_the_trigger_form_cannot_point_spark_elsewhere(spark_connection, tmp_path):
    from citeflow.cockpit import run_settings

    spark_connection(host="sc://connect", port=15002)
    settings = {"snapshot": "s1", "corpus": "", "scidocs": "", "paper_ids": "", "artifacts": str(tmp_path)}
    settings.update(profile="demo", corpus_format="auto", model="small", overrides=["spark.remote=sc://evil:1"])
    with pytest.raises(CiteflowError, match="spark.remote cannot be set from the trigger form"):
        run_settings.run_config(settings)


def test_shuffle_partitions_grow_with_the_input_above_the_set_count(spark):
    """`size_shuffle`: the set count while the input is within shuffle_partitions x shuffle_input_mb, one partition
    per shuffle_input_mb above it; 0 turns the sizing off; a count the user put in spark.conf stays."""
    from citeflow.spark.engine.session import size_shuffle

    before = spark.conf.get("spark.sql.shuffle.partitions")
    mib = 2**20
    try:
        cfg = SparkConfig(shuffle_partitions=16, shuffle_input_mb=64)
        assert size_shuffle(spark, cfg, 16 * 64 * mib, "test") == 16
        assert size_shuffle(spark, cfg, 16 * 64 * mib + 1, "test") == 17
        assert size_shuffle(spark, cfg, 10 * 2**30, "test") == 160
        assert spark.conf.get("spark.sql.shuffle.partitions") == "160"
        # a later stage with a small input goes back to the set count, not the earlier stage's
        assert size_shuffle(spark, cfg, 0, "test") == 16
        assert size_shuffle(spark, SparkConfig(shuffle_partitions=16, shuffle_input_mb=0), 10 * 2**30, "test") == 16
        spark.conf.set("spark.sql.shuffle.partitions", "7")
        users = SparkConfig(shuffle_partitions=16, conf=("spark.sql.shuffle.partitions=7",))
        assert size_shuffle(spark, users, 10 * 2**30, "test") == 7
        assert spark.conf.get("spark.sql.shuffle.partitions") == "7"
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


def test_titles_fold_in_spark_as_fold_title_defines_it(spark):
    rng = random.Random(5)
    alphabet = [chr(c) for c in range(128)] + list("aeiou AEIOU") * 6 + list("éßİﬁ²Σ—")
    titles = [t for t, _ in TRICKY if t is not None] + [chr(c) for c in range(1, 128)]
    titles += ["".join(rng.choices(alphabet, k=rng.randint(1, 24))) for _ in range(3000)]
    df = spark.createDataFrame(list(enumerate(titles)), "i long, title string")
    got = {r["i"]: r["_folded"] for r in L.with_folded_title(df).collect()}
    assert len(got) == len(titles)
    assert [got[i] for i in range(len(titles))] == [fold_title(t) for t in titles]


def test_each_gzip_shard_is_its_own_task(spark, tmp_path):
    files, sizes = [], []
    for n in range(5):
        path = tmp_path / f"shard_{n}.jsonl.gz"
        with gzip.open(path, "wt") as fh:
            fh.writelines(f'{{"paper_id": "{n}{i}"}}\n' for i in range(200 + 50 * n))
        files.append(f"file://{path}")
        sizes.append(path.stat().st_size)
    spark.conf.unset(S.MAX_TASK_BYTES)
    # shards of 20 MB, as Spark weighs them (a file counts at least openCostInBytes): Spark's 128 MB tasks
    # would hold them in 2 tasks on the 2 cores of the test session
    spark.conf.set("spark.sql.files.openCostInBytes", str(20 << 20))
    try:
        lines = R.read_lines(spark, files, [20 << 20] * 5)
        per_task = lines.groupBy(F.spark_partition_id().alias("task"), "source").count().collect()
    finally:
        spark.conf.unset("spark.sql.files.openCostInBytes")
        spark.conf.unset(S.MAX_TASK_BYTES)
    assert sorted((r["source"], r["count"]) for r in per_task) == [
        (f"shard_{n}.jsonl.gz", 200 + 50 * n) for n in range(5)
    ]
    assert len({r["task"] for r in per_task}) == 5


def test_a_diffs_small_files_leave_parquet_tables_in_tasks_of_16_mb_or_more(spark, tmp_path):
    path = tmp_path / "updates_0.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.write('{"corpusid": 1}\n')
    spark.conf.unset(S.MAX_TASK_BYTES)
    try:
        R.read_lines(spark, [f"file://{path}"], [path.stat().st_size]).collect()
        assert int(spark.conf.get(S.MAX_TASK_BYTES)) == 16 << 20
    finally:
        spark.conf.unset(S.MAX_TASK_BYTES)


def test_a_users_own_task_size_is_left_as_it_is(spark, tmp_path):
    path = tmp_path / "shard.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.write('{"corpusid": 1}\n')
    spark.conf.unset(S.SET_BY_CITEFLOW)
    spark.conf.set(S.MAX_TASK_BYTES, "64m")
    try:
        R.read_lines(spark, [f"file://{path}"], [30 << 20]).collect()
        assert spark.conf.get(S.MAX_TASK_BYTES) == "64m"
    finally:
        spark.conf.unset(S.MAX_TASK_BYTES)


def _uneven_table(folder, kib: list[int]) -> list[int]:
    """One uncompressed Parquet file (one row group of incompressible bytes, no statistics) of about each size
    in KiB."""
    folder.mkdir()
    for i, k in enumerate(kib):
        rows = pa.table({"blob": pa.array([os.urandom(1024) for _ in range(k)], pa.binary())})
        pq.write_table(rows, folder / f"part-{i:05d}.parquet", compression="none", write_statistics=False)
    return [(folder / f"part-{i:05d}.parquet").stat().st_size for i in range(len(kib))]


def _tasks(frame) -> list[list[str]]:
    """The files each scan task of `frame` reads, task by task."""
    rows = frame.select(F.spark_partition_id().alias("task"), F.col("_metadata.file_name").alias("file"))
    by_task: dict[int, set[str]] = {}
    for r in rows.distinct().collect():
        by_task.setdefault(r["task"], set()).add(r["file"])
    return [sorted(by_task[t]) for t in sorted(by_task)]


def _span(tasks: list[list[str]], size: dict[str, int], cores: int) -> int:
    """When the last of `tasks` ends, each taking its bytes in time, started in order on the first free core."""
    free = [0] * cores
    for files in tasks:
        free.sort()
        free[0] += sum(size[f] for f in files)
    return max(free)


@pytest.fixture
def scaled_task_size(spark, monkeypatch):
    """Spark's 128 MB tasks and 4 MB open cost scaled down 1024 times, on 2 cores, as citeflow left them."""
    monkeypatch.setattr(S, "SPARK_TASK_BYTES", 128 << 10)
    settings = {
        "spark.sql.files.openCostInBytes": str(4 << 10),
        "spark.sql.leafNodeDefaultParallelism": "2",
        S.MAX_TASK_BYTES: str(128 << 10),
        S.SET_BY_CITEFLOW: str(128 << 10),
    }
    for key, value in settings.items():
        spark.conf.set(key, value)
    yield
    for key in settings:
        spark.conf.unset(key)


def test_a_table_of_a_little_over_a_task_a_core_is_read_in_one_wave(spark, tmp_path, scaled_task_size):
    # filter_leakage's upstream papers at 1M papers, 1024 times smaller: six files of 29-58 MB, 290 MB
    sizes = _uneven_table(tmp_path / "papers", [58, 58, 58, 43, 43, 29])
    size = {f"part-{i:05d}.parquet": n for i, n in enumerate(sizes)}
    uri = f"file://{tmp_path / 'papers'}"
    before = _tasks(spark.read.parquet(uri))
    frame = S.read_parquet(spark, uri, sizes)
    share = -(-(sum(sizes) + 6 * (4 << 10)) // 2)
    assert int(spark.conf.get(S.MAX_TASK_BYTES)) == share
    after = _tasks(frame)
    # Spark's tasks of 128 (KiB): two of the 58s; a 58 and a 43; the other 43 and the 29, alone on a core
    kib = dict(zip(size, [58, 58, 58, 43, 43, 29], strict=True))
    assert [sorted(kib[f] for f in t) for t in before] == [[58, 58], [43, 58], [29, 43]]
    # a core's share: two 58s; a 58 and both 43s; the 29, beside the 58s
    assert [sorted(kib[f] for f in t) for t in after] == [[58, 58], [43, 43, 58], [29]]
    assert _span(after, size, 2) < _span(before, size, 2)
    assert _span(after, size, 2) <= share
    # the same rows either way
    assert sorted(frame.collect()) == sorted(spark.read.parquet(uri).collect())


def test_one_wave_is_only_ever_raised_and_leaves_other_tables_as_spark_makes_them(spark, tmp_path, scaled_task_size):
    big = _uneven_table(tmp_path / "big", [58, 58, 58, 43, 43, 29])
    S.read_parquet(spark, f"file://{tmp_path / 'big'}", big)
    raised = spark.conf.get(S.MAX_TASK_BYTES)
    # a small table (under a task a core) and a large one (over two) leave the setting where it is
    small = _uneven_table(tmp_path / "small", [20, 20, 10])
    assert len(_tasks(S.read_parquet(spark, f"file://{tmp_path / 'small'}", small))) == 3
    S.read_parquet(spark, f"file://{tmp_path / 'small'}", [200 << 10] * 3)  # as if its files were 200 KiB
    assert spark.conf.get(S.MAX_TASK_BYTES) == raised


def test_one_wave_leaves_a_users_task_size_and_an_unknown_core_count_alone(
    spark, tmp_path, scaled_task_size, monkeypatch
):
    sizes = _uneven_table(tmp_path / "papers", [58, 58, 58, 43, 43, 29])
    uri = f"file://{tmp_path / 'papers'}"
    spark.conf.set(S.MAX_TASK_BYTES, "128k")  # the user's: citeflow noted another value
    S.read_parquet(spark, uri, sizes)
    assert spark.conf.get(S.MAX_TASK_BYTES) == "128k"
    spark.conf.set(S.MAX_TASK_BYTES, str(128 << 10))
    monkeypatch.setattr(S, "_scan_cores", lambda spark: None)  # a Spark Connect client
    S.read_parquet(spark, uri, sizes)
    assert spark.conf.get(S.MAX_TASK_BYTES) == str(128 << 10)


@pytest.mark.parametrize(
    ("master", "threads"),
    [
        ("local", 1),
        ("local[3]", 3),
        ("local[4, 2]", 4),
        ("spark://h:7077", None),
        ("yarn", None),
        ("local-cluster[2,1,1024]", None),
    ],
)
def test_a_local_masters_threads_are_read_from_its_url(master, threads):
    assert S.local_threads(master) == threads


def test_local_star_counts_the_cores_this_process_may_use(spark):
    from citeflow.threads import usable_cores

    assert S.local_threads("local[*]") == usable_cores()
    assert spark.conf.get("spark.master") == "local[*]"
    assert S._scan_cores(spark) == spark.sparkContext.defaultParallelism  # what Spark itself shares among


@pytest.mark.parametrize(
    ("text", "value"),
    [("4194304b", 4 << 20), ("4m", 4 << 20), ("1g", 1 << 30), ("128KB", 128 << 10), ("77", 77), ("2t", 2 << 40)],
)
def test_spark_byte_sizes_are_read(text, value):
    assert S._byte_size(text) == value


def test_the_jvm_starts_while_the_stage_reads_its_inputs(monkeypatch):
    from citeflow.spark.engine import session

    events = []

    def slow_start(config, app_name):
        time.sleep(0.3)
        events.append("spark")
        return "session"

    monkeypatch.setattr(session, "get_spark", slow_start)
    monkeypatch.setattr(CA, "jvm_running", lambda: False)
    spark, pending = session.get_spark_meanwhile(SparkConfig(), "app", lambda: events.append("work") or 42)
    assert (spark, pending.result()) == ("session", 42)
    assert events == ["work", "spark"]  # the work ended while the session was still starting

    def bad_input():
        raise CiteflowError("no benchmark here")

    # raised once the JVM is up, as one line
    events.clear()
    with pytest.raises(CiteflowError, match="no benchmark here"):
        session.get_spark_meanwhile(SparkConfig(), "app", bad_input)
    assert events == ["spark"]

    # a Spark Connect client tags its session in the calling thread: it connects first, in this thread, and
    # the work runs here when the stage asks for its result, once
    events.clear()
    remote = SparkConfig(remote="sc://localhost:15002")
    spark, pending = session.get_spark_meanwhile(remote, "app", lambda: events.append("work") or 1)
    assert events == ["spark"]
    assert (pending.result(), pending.result()) == (1, 1)
    assert events == ["spark", "work"]
    spark, pending = session.get_spark_meanwhile(remote, "app", bad_input)
    with pytest.raises(CiteflowError, match="no benchmark here"):
        pending.result()
    # cancelled before it ran: it never runs
    events.clear()
    spark, pending = session.get_spark_meanwhile(remote, "app", lambda: events.append("work") or 1)
    pending.cancel()
    assert events == ["spark"]


class FakePending:
    def __init__(self, events, value):
        self.events, self.value = events, value
        events.append("apart started")

    def result(self):
        self.events.append("apart result")
        if isinstance(self.value, Exception):
            raise self.value
        return self.value

    def cancel(self):
        self.events.append("apart cancelled")


def test_work_apart_starts_before_the_session_and_is_stopped_when_the_jvm_fails(monkeypatch):
    from citeflow.spark.engine import session

    events = []

    def start(config, app_name):
        events.append("spark")
        return "session"

    monkeypatch.setattr(session, "get_spark", start)
    monkeypatch.setattr(CA, "jvm_running", lambda: False)
    here = lambda: events.append("here") or 0  # noqa: E731
    apart = lambda: FakePending(events, 7)  # noqa: E731
    spark, pending = session.get_spark_meanwhile(SparkConfig(), "app", here, apart=apart)
    assert events == ["apart started", "spark"]  # the stage goes on while the work runs apart
    assert (spark, pending.result()) == ("session", 7)
    assert events == ["apart started", "spark", "apart result"]

    # the user's mistake, found apart, is raised when the stage asks for the result, as it would be here
    events.clear()
    bad = lambda: FakePending(events, CiteflowError("no benchmark here"))  # noqa: E731
    _, pending = session.get_spark_meanwhile(SparkConfig(), "app", here, apart=bad)
    with pytest.raises(CiteflowError, match="no benchmark here"):
        pending.result()

    # the JVM does not start: the child is stopped, the start's error raised
    events.clear()

    def no_jvm(config, app_name):
        raise CiteflowError("Spark's driver did not start: x")

    monkeypatch.setattr(session, "get_spark", no_jvm)
    with pytest.raises(CiteflowError, match="did not start"):
        session.get_spark_meanwhile(SparkConfig(), "app", here, apart=apart)
    assert events == ["apart started", "apart cancelled"]

    # no child process can start here: the work runs in this process, the JVM starting in a thread
    events.clear()
    monkeypatch.setattr(session, "get_spark", start)

    def no_process():
        raise OSError("no fork here")

    spark, pending = session.get_spark_meanwhile(SparkConfig(), "app", here, apart=no_process)
    assert (spark, pending.result()) == ("session", 0)
    assert sorted(events) == ["here", "spark"]

    # a session this process holds already (a stage after the first of `citeflow run`), or a Spark Connect
    # client: no JVM to start, and the work still runs apart, beside the stage's first jobs
    for jvm, config in ((True, SparkConfig()), (False, SparkConfig(remote="sc://localhost:15002"))):
        events.clear()
        monkeypatch.setattr(CA, "jvm_running", lambda jvm=jvm: jvm)
        spark, pending = session.get_spark_meanwhile(config, "app", here, apart=apart)
        assert events == ["apart started", "spark"]
        assert pending.result() == 7


def test_the_local_driver_runs_the_throughput_collector(spark):
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = {beans.get(i).getName() for i in range(beans.size())}
    assert names == {"PS Scavenge", "PS MarkSweep"}, names


def test_the_local_drivers_c2_compiles_later_than_the_jvms_defaults(spark):
    from citeflow.spark.engine.session import LATER_C2

    jvm = spark.sparkContext._jvm
    bean_class = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(bean_class)
    wanted = dict(option.removeprefix("-XX:").split("=") for option in LATER_C2.split())
    assert len(wanted) == 4
    for name, value in wanted.items():
        option = bean.getVMOption(name)
        assert (option.getValue(), str(option.getOrigin())) == (value, "VM_CREATION"), name


def test_concurrent_jobs_return_in_order_and_wait_for_each_other(spark):
    from citeflow.spark.engine import session

    big, small = spark.range(200_000), spark.range(10)
    results = session.concurrently(
        spark, lambda: big.agg(F.sum("id")).first()[0], lambda: small.count(), lambda: "no job"
    )
    assert results == [sum(range(200_000)), 10, "no job"]
    assert session.concurrently(spark, lambda: 1) == [1]

    finished = []

    def slow_then_done():
        time.sleep(0.5)
        finished.append("second")
        return small.count()

    def fails():
        raise CiteflowError("first failed")

    # the first call's error comes after every other call has ended: no job outlives the stage's call
    with pytest.raises(CiteflowError, match="first failed"):
        session.concurrently(spark, fails, slow_then_done)
    assert finished == ["second"]

    def fails_later():
        raise CiteflowError("second failed")

    with pytest.raises(CiteflowError, match="second failed"):
        session.concurrently(spark, lambda: finished.append("first"), fails_later)
    assert finished == ["second", "first"]


def test_concurrent_jobs_carry_a_connect_sessions_tags():
    import threading

    from citeflow.spark.engine import session

    class ConnectLike:  # a Spark Connect session's tags live in the thread that added them
        __module__ = "pyspark.sql.connect.session"

        def __init__(self):
            self.local = threading.local()

        def addTag(self, tag):
            self.local.tags = {*self.getTags(), tag}

        def getTags(self):
            return getattr(self.local, "tags", set())

    spark = ConnectLike()
    spark.addTag("citeflow-build_graph-s1")
    seen = session.concurrently(spark, spark.getTags, spark.getTags, spark.getTags)
    assert seen == [{"citeflow-build_graph-s1"}] * 3


def test_a_connect_session_is_released_once_and_a_hung_server_never_holds_the_exit_up(monkeypatch):
    import atexit
    import threading

    from citeflow.spark.engine import session

    class Hangs:
        def __init__(self):
            self.asked, self.go = threading.Event(), threading.Event()

        def stop(self):
            self.asked.set()
            self.go.wait(30)

    hung = Hangs()
    started = time.monotonic()
    session._release(hung, wait_s=0.2)
    assert hung.asked.is_set() and time.monotonic() - started < 5
    hung.go.set()

    class Fails:
        def stop(self):
            raise RuntimeError("server gone")

    session._release(Fails(), wait_s=5)  # logged, not raised: the process is exiting

    registered = []
    monkeypatch.setattr(atexit, "register", lambda *args: registered.append(args))
    monkeypatch.setattr(session, "_releasing", set())
    spark = object()
    session._release_at_exit(spark)
    session._release_at_exit(spark)  # a second stage of the same process: the same session
    assert registered == [(session._release, spark)]


# A process that starts its own local driver with a secret in spark.conf (given in its environment, which
# other users cannot read), checks that Spark has it, says "ready" and waits for its standard input to close.
SECRET_DRIVER = r"""
import os
import sys
from citeflow.config import SparkConfig
from citeflow.spark.engine.session import get_spark

secret = os.environ.pop("PLANTED_SECRET")
config = SparkConfig(
    master="local[1]", driver_memory="1g", class_archive="off", conf=(f"spark.hadoop.fs.s3a.secret.key={secret}",)
)
spark = get_spark(config, "secret-test")
assert spark.conf.get("spark.hadoop.fs.s3a.secret.key") == secret
assert spark.sparkContext._jsc.hadoopConfiguration().get("fs.s3a.secret.key") == secret
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.slow
def test_the_local_drivers_jvm_gets_its_settings_in_a_private_file_not_on_its_command_line(tmp_path):
    """pyspark passes a session's settings to spark-submit as `--conf key=value`, and Spark's launcher copies
    them onto the JVM's command line, which every local user can read (`citeflow.spark.engine.driver.launch_driver`)."""
    import subprocess
    import sys

    from citeflow.process import child_env, descendants

    secret = "cf-drv-" + "S3CR3T-41c9"
    env = {**child_env(), "TMPDIR": str(tmp_path), "PLANTED_SECRET": secret}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    child = subprocess.Popen(
        [sys.executable, "-c", SECRET_DRIVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()[-3000:]
        lines = {}
        for pid in [child.pid, *descendants(child.pid)]:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    lines[pid] = fh.read().decode(errors="replace").split("\0")
            except OSError:
                continue
        java = [line for line in lines.values() if "org.apache.spark.deploy.SparkSubmit" in line]
        assert len(java) == 1, lines
        assert "-Xmx1g" in java[0]  # spark.driver.memory, read from the file before the JVM was started
        assert "--properties-file" in java[0] and "--conf" not in java[0]
        assert [pid for pid, line in lines.items() if any(secret in arg for arg in line)] == []
        # the file is gone once the JVM is up: nothing under the temporary folder holds the secret
        assert [p for p in tmp_path.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()] == []
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("citeflow-private-")] == []
    finally:
        child.stdin.close()
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def test_stop_spark_ends_the_session_and_the_jvm_this_process_started():
    """In a process of its own (this one shares the test session's JVM): a local session started, used, stopped;
    its JVM, a child of that process, has exited by the time `stop_spark` returns."""
    import subprocess
    import sys

    script = """
import os
from pyspark import SparkContext
from citeflow.config import SparkConfig
from citeflow.spark.engine.session import get_spark, spark_held, stop_spark
spark = get_spark(SparkConfig(driver_memory="512m", shuffle_partitions=1, class_archive="off"), "stop-test")
assert spark.range(3).count() == 3 and spark_held()
jvm = SparkContext._gateway.proc.pid
assert os.path.exists(f"/proc/{jvm}")
assert stop_spark() and not spark_held() and not stop_spark()
print("jvm", jvm, "alive" if os.path.exists(f"/proc/{jvm}") else "gone")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "gone", done.stdout
