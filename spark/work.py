"""`VersionWork`: the one way a Spark stage reads and writes the tables of the version it builds.

A version folder's tables are written at `uri(table)`; the tables of the committed versions it builds on are read
with `read(manifest, table)`, their scans sized to the cores (`scans.read_stored`); intermediate results go to
the version's `_staging` folder, which `citeflow.stage.execute` never commits and `clear_staging` removes:

- `stage(frame, name)`: a Spark frame written as staging files and read back, so that the plans that read it
  read those files instead of computing it again (`output.stage`);
- `stage_files(frame, name)`: the same, for a result read next by pyarrow (`read_staged`);
- `stage_arrow(name, table)`: rows made in this process with pyarrow, written for Spark to read (a local
  relation of a few hundred thousand rows would go through pandas and the driver's serializer).

Every path goes through the store (`ArtifactStore.engine_uri`), so the same code writes a local folder, an
object store or HDFS, from a local driver or a Spark Connect client. Each staging write first checks that this
run still holds the version's lease (`citeflow.lease.fence`), and a lease taken over cancels the session's jobs.
"""

from __future__ import annotations

import dataclasses
import posixpath
from typing import Any

from citeflow.artifacts import ArtifactStore, Manifest
from citeflow.lease import fence, holding

STAGING = "_staging"


@dataclasses.dataclass(frozen=True)
class VersionWork:
    spark: Any
    store: ArtifactStore
    path: str  # the version folder being built, a path in the store

    def __post_init__(self) -> None:
        lease = holding(self.path)
        if lease is not None:  # jobs still writing into a folder that is no longer this run's are cancelled
            from citeflow.spark.engine.session import cancel_all

            lease.on_lost(lambda: cancel_all(self.spark))

    def uri(self, table: str) -> str:
        """Where Spark writes (or reads) `table` of this version."""
        return self.store.engine_uri(posixpath.join(self.path, table))

    def read(self, manifest: Manifest, table: str, *, with_position: bool = False):
        """`table` of a committed version; `with_position`: with each row's place in its data file, by which a
        version written over it (`output.write_over`) names the rows that go."""
        from citeflow.spark.scans import read_stored

        return read_stored(self.spark, self.store, manifest.table_path(table), with_position=with_position)

    def read_own(self, table: str):
        """`table` as this version wrote it already."""
        from citeflow.spark.scans import read_stored

        return read_stored(self.spark, self.store, posixpath.join(self.path, table))

    def staging(self, name: str) -> str:
        """The store path of the staging folder `name`."""
        return posixpath.join(self.path, STAGING, name)

    def stage(self, frame, name: str):
        """`frame` written as staging files and read back (`output.stage`)."""
        from citeflow.spark.output import stage

        fence(self.path)
        return stage(self.spark, frame, self.uri(f"{STAGING}/{name}"))

    def stage_files(self, frame, name: str) -> None:
        """`frame` written as staging files, for `read_staged`."""
        from citeflow.spark.output import write_staging

        fence(self.path)
        write_staging(frame, self.uri(f"{STAGING}/{name}"))

    def write_arrow(self, table_name: str, table) -> None:
        """`table` (pyarrow, made in this process) written as the table `table_name` of this version, in one
        data file: for tables bounded by the benchmark, not the corpus."""
        import pyarrow.parquet as pq

        fence(self.path)
        folder = posixpath.join(self.path, table_name)
        self.store.fs.create_dir(folder)
        pq.write_table(table, posixpath.join(folder, "part-00000.parquet"), filesystem=self.store.fs)

    def stage_arrow(self, name: str, table):
        """`table` (pyarrow) written into the staging folder `name`, read by Spark."""
        self.write_arrow(f"{STAGING}/{name}", table)
        return self.spark.read.parquet(self.uri(f"{STAGING}/{name}"))

    def read_staged(self, name: str):
        """The staging folder `name`, read whole by pyarrow (results bounded by the benchmark, not the corpus)."""
        import pyarrow.parquet as pq

        return pq.read_table(self.staging(name), filesystem=self.store.fs)

    def clear_staging(self) -> None:
        self.store.fs.delete_dir(posixpath.join(self.path, STAGING))
