"""How Spark and the artifact store run: performance and placement, never part of a version."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from citeflow.config.base import _check_fields, _help
from citeflow.errors import CiteflowError

# The master URLs Spark 4 starts a driver for (SparkSubmit's prefix check, then SparkContext's
# createTaskScheduler: the local forms, a standalone cluster, YARN, Kubernetes); anything else makes the JVM
# exit at its start with a Java stack trace.
_LOCAL_MASTER = re.compile(r"local(\[(?P<threads>[0-9]+|\*)(\s*,\s*[0-9]+)?\])?")
_OTHER_MASTER = re.compile(r"local-cluster\[\s*[0-9]+\s*,\s*[0-9]+\s*,\s*[0-9]+\s*\]|spark://\S+|k8s://\S+|yarn")


def _is_master_url(master: str) -> bool:
    local = _LOCAL_MASTER.fullmatch(master)
    if local:
        return local["threads"] is None or local["threads"] == "*" or int(local["threads"]) > 0
    return _OTHER_MASTER.fullmatch(master) is not None


@dataclass(frozen=True, kw_only=True)
class SparkConfig:
    """How Spark runs. None of these change an artifact, so none is versioned."""

    master: str = field(
        default="local[*]",
        metadata=_help(
            "Spark master URL: local[*], spark://host:7077, yarn, k8s://https://host:443. "
            "A cluster needs the artifact root on storage every executor can reach.",
            versioned=False,
        ),
    )
    remote: str = field(
        default="",
        metadata=_help(
            "Spark Connect server, sc://host:port (optionally /;use_ssl=true;token=...): every Spark stage runs "
            "as a thin client of it and this process starts no JVM; master, driver_memory and local_dir are then "
            "the server's own settings and must stay unset here. The server reads the corpus and writes the "
            "artifact root itself (the same paths must reach it), and its Python workers need citeflow "
            "importable (filter_leakage folds non-ASCII titles in a pandas UDF). Empty: a local driver.",
            versioned=False,
        ),
    )
    driver_memory: str = field(
        default="4g",
        metadata=_help("spark.driver.memory (in local mode the executors live in the driver JVM)", versioned=False),
    )
    shuffle_partitions: int = field(
        default=16,
        metadata=_help(
            "spark.sql.shuffle.partitions (adaptive execution coalesces small ones)", versioned=False, at_least=1
        ),
    )
    shuffle_input_mb: int = field(
        default=64,
        metadata=_help(
            "MiB of a stage's input (corpus files as stored, or the Parquet tables it reads) per shuffle "
            "partition: a stage whose input is more than shuffle_partitions times this raises "
            "spark.sql.shuffle.partitions for its run to one per this many MiB, so that a partition's sorts and "
            "joins stay within a task's memory as the corpus grows; adaptive execution merges partitions that "
            "come out small. 0: shuffle_partitions whatever the input. A spark.sql.shuffle.partitions in "
            "spark.conf is kept as it is",
            versioned=False,
            at_least=0,
        ),
    )
    local_dir: str = field(
        default="",
        metadata=_help("spark.local.dir for shuffle and spill files; empty: Spark's default", versioned=False),
    )
    broadcast_rows: int = field(
        default=5_000_000,
        metadata=_help(
            "largest set of papers (corpus ids, degrees, duplicates) that the Spark stages join as a broadcast "
            "copy instead of shuffling both sides; a broadcast of N ids costs about 24*N bytes on the driver "
            "and on every executor",
            versioned=False,
            at_least=0,
        ),
    )
    class_archive: str = field(
        default="auto",
        metadata=_help(
            "auto: the local driver's JVM maps Spark's classes from a class-data archive (Java's AppCDS), "
            "written by the first JVM of a Java and Spark install as it exits and kept in "
            "$XDG_CACHE_HOME/citeflow/jvm (about 200 MB): each later start takes seconds less. off: none. "
            "A spark.driver.extraJavaOptions in spark.conf replaces citeflow's JVM options, this one included",
            versioned=False,
        ),
    )
    conf: tuple[str, ...] = field(
        default=(),
        metadata=_help("extra Spark settings as 'key=value' strings, e.g. spark.executor.memory=8g", versioned=False),
    )

    def user_settings(self) -> dict[str, str]:
        """The `conf` entries as Spark settings, key to value, both stripped (each checked to hold a `=`)."""
        return dict((key.strip(), value.strip()) for key, value in (item.split("=", 1) for item in self.conf))

    def __post_init__(self) -> None:
        if not self.master:
            raise CiteflowError("spark.master must not be empty")
        if not _is_master_url(self.master):
            raise CiteflowError(
                f"spark.master {self.master!r} is not a Spark master URL: local, local[N], local[*], "
                "local[N,F], local-cluster[W,C,M], spark://host:7077, yarn or k8s://https://host:443"
            )
        if self.remote:
            if not re.fullmatch(r"sc://[^\s/:;]+(:\d{1,5})?(/(;[A-Za-z_]+=[^;\s]*)*)?", self.remote):
                raise CiteflowError(
                    "spark.remote must be a Spark Connect URL such as sc://host:15002 "
                    "(optionally followed by /;name=value parameters)"
                )
            defaults = {f.name: f.default for f in dataclasses.fields(self)}
            unused = [n for n in ("master", "driver_memory", "local_dir") if getattr(self, n) != defaults[n]]
            if unused:
                names = ", ".join(f"spark.{n}" for n in unused)
                raise CiteflowError(
                    f"spark.remote runs Spark on the Spark Connect server, so {names} "
                    "would be ignored: set them on the server, or drop spark.remote to run a local driver"
                )
        if not re.fullmatch(r"\d+[kmgt]?", self.driver_memory.lower()):
            raise CiteflowError(f"spark.driver_memory {self.driver_memory!r} is not a JVM size such as 4g or 2048m")
        _check_fields(self, "spark")
        if self.class_archive not in ("auto", "off"):
            raise CiteflowError(f"spark.class_archive must be auto or off, not {self.class_archive!r}")
        from citeflow.redaction import is_secret_key, redact_setting

        for item in self.conf:
            if "=" not in item or not item.split("=", 1)[0].startswith("spark."):
                raise CiteflowError(f"spark.conf entry {redact_setting(item)!r} must look like spark.some.key=value")
            key, value = (part.strip() for part in item.split("=", 1))
            # JVM options are the one part of the settings that a JVM carries on its command line
            secret = key.endswith("extraJavaOptions") and next(
                (
                    o.split("=", 1)[0]
                    for o in value.split()
                    if o.startswith("-D") and is_secret_key(o[2:].split("=")[0])
                ),
                None,
            )
            if secret:
                raise CiteflowError(
                    f"spark.conf {key} sets {secret}, a secret, which would be on the JVM's command line where every "
                    "local user can read it: give it as a Spark or Hadoop setting (spark.conf) in a settings file "
                    "instead (docs/secrets.md)"
                )


@dataclass(frozen=True, kw_only=True)
class StoreConfig:
    """How a run treats the artifact store: leases on versions and repairs. None of it is versioned."""

    lease_wait_s: float = field(
        default=600.0,
        metadata=_help(
            "when another live run holds the lease on a version this run needs, wait up to this many seconds "
            "for it (then use what it built); 0: stop at once with a message naming the holder",
            versioned=False,
            at_least=0,
        ),
    )
    lease_heartbeat_s: float = field(
        default=10.0,
        metadata=_help("seconds between refreshes of a held lease's heartbeat", versioned=False, above=0),
    )
    lease_stale_s: float = field(
        default=300.0,
        metadata=_help(
            "a lease held from another host whose heartbeat is older than this is stale and may be taken over "
            "(on the holder's own host, the process table decides: a live holder is never taken over)",
            versioned=False,
            above=0,
        ),
    )
    repair: bool = field(
        default=False,
        metadata=_help(
            "verify the content hashes of every version the run reads; move a damaged one aside to "
            "<stage>/.damaged/ and rebuild it (citeflow run --repair)",
            versioned=False,
        ),
    )
    rebase: bool = field(
        default=False,
        metadata=_help(
            "a release that holds a version built one way (in full, or from a diff onto one release) keeps it on "
            "a rerun, though the root now allows another (a diff from a release built since); true builds the "
            "other way, and the new version supersedes the old (citeflow run --rebase; docs/incremental.md)",
            versioned=False,
        ),
    )

    verify_inputs: bool = field(
        default=True,
        metadata=_help(
            "before a stage builds, re-hash every file of each committed version it reads (its manifest holds "
            "their SHA-256; once per version and process) and stop at a damaged one with one line (--repair "
            "rebuilds it); false: only the file set and sizes are checked, as on every read",
            versioned=False,
        ),
    )

    def __post_init__(self) -> None:
        _check_fields(self, "store")
        if self.lease_heartbeat_s <= 0 or self.lease_stale_s <= 2 * self.lease_heartbeat_s:
            raise CiteflowError("store.lease_stale_s must be more than twice store.lease_heartbeat_s, both positive")


@dataclass(frozen=True, kw_only=True)
class InputsConfig:
    """Which files a run may read. Not versioned: it decides whether a run reads its inputs, not what it makes."""

    allow_outside: bool = field(
        default=False,
        metadata=_help(
            "read files under an input folder (corpus, SciDocs, paper-ids, diffs, benchmark, model) that are links "
            "to somewhere outside it; false: such a link stops the run in one line before any work",
            versioned=False,
        ),
    )
