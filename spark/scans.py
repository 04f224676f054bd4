"""Reading a version's Parquet tables with Spark: each scan's tasks sized to the cores, and each row's place in
the table it was read from (`POSITION`).

The task size is the session's `maxPartitionBytes`, which citeflow sets only where the user has not
(`task_size_is_ours`): here for Parquet tables (`read_parquet`), and in spark/readers.py for gzip shards
(`read_lines`). Stage code reads a committed table through `read_stored`.
"""

from __future__ import annotations

import re

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from citeflow.spark.engine.session import is_connect
from citeflow.threads import usable_cores

# Spark's setting for the bytes of one file-scan task, and where citeflow notes the value it set itself.
MAX_TASK_BYTES = "spark.sql.files.maxPartitionBytes"
SET_BY_CITEFLOW = "spark.citeflow.maxPartitionBytes"


def task_size_is_ours(spark) -> bool:
    """Whether the session's `maxPartitionBytes` is Spark's default or a value citeflow set (not the user's)."""
    current = spark.conf.get(MAX_TASK_BYTES, None)
    return current is None or current == spark.conf.get(SET_BY_CITEFLOW, None)


def set_task_size(spark, value: int) -> None:
    """Set the session's `maxPartitionBytes`, noting that citeflow set it."""
    spark.conf.set(MAX_TASK_BYTES, str(value))
    spark.conf.set(SET_BY_CITEFLOW, str(value))


SPARK_TASK_BYTES = 128 << 20  # Spark's own default `maxPartitionBytes`
OPEN_COST = "spark.sql.files.openCostInBytes"
ONE_WAVE_MAX = 2  # a table of up to this many default tasks per core is read in one wave
# the units of Spark's byte-size settings (`JavaUtils.byteStringAs`), lower-cased
_UNITS = {"": 1, "b": 1} | {u + b: 1 << (10 * (i + 1)) for i, u in enumerate("kmgtp") for b in ("", "b")}


def read_parquet(spark, uri: str, sizes: list[int]) -> DataFrame:
    """The Parquet table at `uri` (whose data files have `sizes` bytes), read in one wave of tasks when it
    is at most `ONE_WAVE_MAX` times Spark's task size per core.

    Spark packs a table's files into tasks of a core's share of the bytes, but at most `maxPartitionBytes`
    (128 MB; `FilePartition.maxSplitBytes`). A table a little over 128 MB a core becomes one task more than
    the cores, which runs alone after the others: filter_leakage's upstream `papers` at 1M papers (six
    files of 29-58 MB, 290 MB) became tasks of 116, 101 and 72 MB on two cores, in its key scan and again
    in its write. So the session's `maxPartitionBytes` is set to the core's share, which Spark's packing then
    uses as the task size (tasks of 116, 144 and 29 MB, the two cores finishing together). A larger table is
    read in tasks of Spark's own size, whose last wave is a smaller share of the scan.

    The setting is the session's and is read when a scan runs, so it is only ever raised here: a larger
    value leaves the tasks of every smaller table as they were (Spark takes their core's share), and a
    table read later in the same stage cannot undo it. `readers.read_lines` lowers it again for gzip shards (one
    file a task), so a stage reads its Parquet tables this way after its shards. A `maxPartitionBytes` the
    user set is left as it is, and so is a session whose cores are not known here (`_scan_cores`: a cluster,
    Spark Connect).
    """
    cores = _scan_cores(spark)
    if cores and task_size_is_ours(spark):
        share = -(-(sum(sizes) + len(sizes) * _byte_size(spark.conf.get(OPEN_COST))) // cores)
        in_force = _byte_size(spark.conf.get(MAX_TASK_BYTES))  # Spark's default where unset
        if SPARK_TASK_BYTES < share <= ONE_WAVE_MAX * SPARK_TASK_BYTES and share > in_force:
            set_task_size(spark, share)
    return spark.read.parquet(uri)


# A row's place in the table it was read from: its data file's name and its index in that file, as Spark's
# file metadata gives them. A table built over another (spark/output.py `write_over`) names the rows that go
# by these, and writes again only the files that hold one.
POSITION = ["_file_name", "_row_index"]
POSITION_TYPES = {"_file_name": "string", "_row_index": "long"}


def positions(df: DataFrame) -> list[str]:
    """The `POSITION` columns `df` has (all or none)."""
    return [c for c in POSITION if c in df.columns]


def with_positions(df: DataFrame) -> DataFrame:
    """`df` (a Parquet scan) with each row's `POSITION`, from Spark's own file metadata (`_metadata.file_name`,
    `_metadata.row_index`)."""
    return df.select(
        "*", F.col("_metadata.file_name").alias(POSITION[0]), F.col("_metadata.row_index").alias(POSITION[1])
    )


def read_table(spark, uri: str, sizes: list[int], *, with_position: bool = False) -> DataFrame:
    """The table at `uri` (`read_parquet`); `with_position` adds each row's `POSITION`."""
    df = read_parquet(spark, uri, sizes)
    return with_positions(df) if with_position else df


def read_stored(spark, store, folder: str, *, with_position: bool = False) -> DataFrame:
    """`read_table` of the table folder `folder` of an `ArtifactStore` (citeflow/artifacts.py)."""
    return read_table(spark, store.engine_uri(folder), store.data_file_sizes(folder), with_position=with_position)


def _scan_cores(spark) -> int | None:
    """The number of tasks Spark shares a scan's bytes among: `minPartitionNum` or
    `leafNodeDefaultParallelism` where set, else a local driver's threads (`local_threads`), or None where
    this process cannot know it (a cluster's executors; a Spark Connect server, whose master is not this
    process's). Read from the settings only: stage code keeps to what a Spark Connect client has."""
    for key in ("spark.sql.files.minPartitionNum", "spark.sql.leafNodeDefaultParallelism"):
        value = spark.conf.get(key, None)
        if value:
            return int(value)
    if is_connect(spark):
        return None
    return local_threads(spark.conf.get("spark.master", ""))


def local_threads(master: str) -> int | None:
    """The task threads of a local master (`local`: 1, `local[N]` or `local[N,F]`: N, `local[*]`: the cores
    this process may use, as Spark counts the JVM's); None for any other master."""
    match = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if not match:
        return None
    threads = match.group(1)
    if threads is None:
        return 1
    return usable_cores() if threads == "*" else int(threads)


def _byte_size(text: str) -> int:
    """A Spark byte-size setting ("4194304b", "4m", "1g") in bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if not match or match.group(2) not in _UNITS:
        raise ValueError(f"not a byte size: {text!r}")
    return int(match.group(1)) * _UNITS[match.group(2)]
