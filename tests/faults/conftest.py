"""The fault-injection suite: the attacks that corrupted versions, rerun with exact assertions.

Every test here is marked `faults` (run them alone with `pytest -m faults`) and `slow` (they start stages in
processes of their own). One session-scoped `world` holds a generated 1,500-paper snapshot and a
*reference* artifact root built once, in this process, by uninterrupted single runs of build_graph,
filter_leakage, embed_graph, mine_triplets and train_encoder with the demo profile's small settings
(PBG with one worker and a fixed small encoder folder, so that a rebuild is byte for byte comparable).
Tests work on copies of that root and compare what they get with it: same version ids, same row counts,
same content hashes of every table (rows hashed in a canonical order, so Spark's file names do not matter)
and of the trained model's weights.

A secret (`SECRET`) is in `spark.conf` of every run: no file under any artifact root, no log line, no XCom
value and no Artifacts page may contain it. Runs through the command line get it from a settings file
(`--settings`, mode 0600), so that no process of theirs carries it on its command line (`Watch` records
the command line of every process a run starts).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from citeflow.registry import STAGES
from tests.support.processes import TAG_ENV, tagged  # marks every process of a run started here

REPO = Path(__file__).resolve().parents[2]
SECRET = "cf16-S3CR3T-" + "7d3f9a"  # assembled, so that this file itself is the only place it is written out
PAPERS = 1500
SNAPSHOT = "faults"
# The demo profile's small settings, shrunk further; each is what `citeflow run --set` would take.
SETTINGS = [
    "spark.shuffle_partitions=2",
    "spark.driver_memory=1g",
    "build_graph.output_files=2",
    "filter_leakage.mode=report_only",
    "embed_graph.workers=1",  # one HOGWILD worker: PBG is deterministic, so a rebuild is comparable bytewise
    "embed_graph.link_prediction=false",  # one PBG run per build: the second one adds time, not new faults
    "mine_triplets.num_queries=200",
    "train_encoder.max_length=32",
    "train_encoder.max_steps=12",
    "train_encoder.checkpoint_every=3",
    "store.lease_heartbeat_s=1",
    "store.lease_stale_s=10",
    f"spark.conf=spark.hadoop.fs.s3a.secret.key={SECRET},spark.hadoop.fs.s3a.endpoint.region=eu-west-1",
]
NOT_UTF8 = b'{"paper_id": "77", "title": "Caf\xe9 \xff\xfe'  # Latin-1 and stray bytes, cut short
# The stages the fault world runs: every stage up to train_encoder.
STAGE_ORDER = STAGES[: STAGES.index("train_encoder") + 1]
# Columns that measure time, not content.
TIMING_COLUMNS = {"seconds", "triplets_per_second"}


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)
            item.add_marker(pytest.mark.slow)


@dataclass
class World:
    tmp: Path
    snapshot: Path  # the generated snapshot folder (corpus/, scidocs/, paper-ids/)
    model: Path  # a fixed small encoder folder every train_encoder run starts from
    reference: Path  # the artifact root of the uninterrupted runs
    manifests: dict  # stage -> Manifest of the reference
    digests: dict  # stage -> content digest of the reference version
    logs: str  # everything the reference runs logged
    settings: list[str] = field(default_factory=list)
    settings_file: Path | None = None  # mode 0600: the settings that hold a secret, for runs of the CLI

    def config(self, root: Path, *extra: str):
        from citeflow.config import RunConfig, apply_overrides, profile_overrides

        base = RunConfig(
            snapshot=SNAPSHOT,
            corpus=str(self.snapshot / "corpus"),
            scidocs=str(self.snapshot / "scidocs"),
            paper_ids=str(self.snapshot / "paper-ids"),
            artifacts=str(root),
        )
        return apply_overrides(base, [*profile_overrides("demo"), *self.settings, *extra])

    def copy(self, name: str, *, without: tuple[str, ...] = ()) -> Path:
        """A private copy (real bytes, no hard links) of the reference root, minus the named stages."""
        root = self.tmp / name
        shutil.copytree(self.reference, root)
        for stage in without:
            shutil.rmtree(root / SNAPSHOT / stage, ignore_errors=True)
        return root

    def cli(
        self, root: Path, until: str, *extra: str, env: dict | None = None, tag: str = "", args: tuple[str, ...] = ()
    ) -> subprocess.Popen:
        """`citeflow run` in a process (and session) of its own, output in `<root>.<until>.<n>.log`: the
        settings that hold a secret from `settings_file`, the others and `extra` with `--set`, then `args`."""
        from citeflow.redaction import redact_setting

        assert self.settings_file is not None
        command = [sys.executable, "-m", "citeflow.jobs.cli", "run", "--snapshot", SNAPSHOT]
        command += ["--corpus", str(self.snapshot / "corpus"), "--scidocs", str(self.snapshot / "scidocs")]
        command += ["--paper-ids", str(self.snapshot / "paper-ids"), "--artifacts", str(root), "--until", until]
        command += ["--settings", str(self.settings_file), *args]
        for item in [*(s for s in self.settings if redact_setting(s) == s), *extra]:
            command += ["--set", item]
        log = root.parent / f"{root.name}.{until}.{uuid.uuid4().hex[:6]}.log"
        environment = {**os.environ, "PYTHONPATH": str(REPO), TAG_ENV: tag or uuid.uuid4().hex, **(env or {})}
        out = open(log, "wb")  # noqa: SIM115 - closed by the caller through finish()
        process = subprocess.Popen(
            command, env=environment, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.tmp
        )
        process.log_path = log  # type: ignore[attr-defined]
        process.tag = environment[TAG_ENV]  # type: ignore[attr-defined]
        return process


class Watch:
    """The command line of every process carrying `TAG_ENV=tag`, read from /proc every `every_s` seconds in a
    thread until `stop()`: `seen` maps each pid to its command line (arguments joined by spaces)."""

    def __init__(self, tag: str, every_s: float = 0.02):
        self.tag, self.every_s, self.seen = tag, every_s, {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watch-processes", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            for pid, command in tagged(self.tag):
                self.seen.setdefault(pid, " ".join(command))
            time.sleep(self.every_s)

    def stop(self) -> dict[int, str]:
        self._done.set()
        self._thread.join()
        return self.seen

    def carrying(self, text: str) -> list[str]:
        """`pid: command line` of every process seen with `text` on its command line."""
        return [f"{pid}: {command[:300]}" for pid, command in self.seen.items() if text in command]


def finish(process: subprocess.Popen, timeout_s: float = 300) -> tuple[int, str]:
    code = process.wait(timeout=timeout_s)
    return code, Path(process.log_path).read_text(errors="replace")


def error_lines(log: str) -> list[str]:
    """The `citeflow: error:` lines of a run's output, each without the `; details in LOG` that names the run's
    log (checked to exist: the line points a user at it)."""
    lines = []
    for line in log.splitlines():
        if line.startswith("citeflow: error:"):
            line, _, details = line.partition("; details in ")
            assert details and Path(details).is_file(), line
            lines.append(line)
    return lines


def family(tag: str) -> list[int]:
    """Pids of live processes (not zombies) carrying `TAG_ENV=tag` in their environment."""
    return [pid for pid, _ in tagged(tag)]


def wait_until(predicate, timeout_s: float = 120.0, every_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every_s)
    return False


def kill(process: subprocess.Popen) -> None:
    """SIGKILL the `citeflow run` process itself (not its group: its children must die on their own)."""
    os.kill(process.pid, signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL


def sweep(tag: str) -> None:
    for pid in family(tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# -- content digests: computed here, from the files, never taken from a manifest -------------------------


def _plain(value):
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": bytes(value).hex()}
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def table_digest(folder: Path) -> tuple[int, str]:
    """(rows, SHA-256 of the rows in canonical order) of a Parquet table folder; timing columns left out."""
    import pyarrow.fs as pafs

    from citeflow.tables import read_table

    table = read_table(pafs.LocalFileSystem(), str(folder))
    table = table.drop_columns([c for c in table.column_names if c in TIMING_COLUMNS])
    rows = sorted(json.dumps(_plain(r), sort_keys=True) for r in table.to_pylist())
    return len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest()


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def digest(manifest) -> dict:
    """What a version *is*: its id, each table's rows and row hash, the model weights, non-timing metrics."""
    folder = Path(manifest.path)
    out = {"version": manifest.version, "tables": {t: table_digest(folder / t) for t in manifest.tables}}
    if (folder / "model" / "model.safetensors").is_file():
        out["model"] = file_sha256(folder / "model" / "model.safetensors")
    out["metrics"] = _content_metrics(manifest.metrics)
    return out


def _content_metrics(value):
    """Metrics without what measures time (`*seconds*`, `*per_second*`) or how a run went (`resumed_from_step`;
    `threads`, the process's thread settings, which name torch's pool only once torch is loaded: a rebuild in
    a process that had trained the encoder first reported one more entry than the original run)."""
    if isinstance(value, dict):
        return {
            k: _content_metrics(v)
            for k, v in value.items()
            if "second" not in k and k not in ("resumed_from_step", "threads")
        }
    return value


def read(root: Path, stage: str):
    """The committed version of `stage` in `root` (exactly one is expected)."""
    from citeflow.artifacts import ArtifactStore

    (manifest,) = ArtifactStore(str(root)).list_versions(SNAPSHOT, stage)
    return manifest


@pytest.fixture(scope="session")
def world(tmp_path_factory, spark) -> World:
    import pyarrow.parquet as pq

    from citeflow.jobs import filter_leakage, mine_triplets, train_encoder
    from citeflow.jobs.cli import main as cli
    from citeflow.models.encoder.model import build_small, paper_text
    from citeflow.redaction import redact_setting

    tmp = tmp_path_factory.mktemp("faults")
    snapshot = tmp / "snapshot"
    assert cli(["generate", "--papers", str(PAPERS), "--out", str(snapshot), "--seed", "16", "--shards", "2"]) == 0
    # attack 6: a line that is not UTF-8 (nor JSON) in the corpus; rejected.raw must keep it, readably
    shard = sorted((snapshot / "corpus" / "metadata").glob("*.jsonl.gz"))[0]
    shard.write_bytes(gzip.compress(gzip.decompress(shard.read_bytes()) + NOT_UTF8 + b"\n"))
    captured = io.StringIO()
    handler = logging.StreamHandler(captured)
    logging.getLogger().addHandler(handler)
    logging.getLogger("citeflow").setLevel(logging.INFO)
    world = World(
        tmp=tmp,
        snapshot=snapshot,
        model=tmp / "model",
        reference=tmp / "reference",
        manifests={},
        digests={},
        logs="",
        settings=list(SETTINGS),
        settings_file=tmp / "secret.settings",
    )
    fd = os.open(world.settings_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:  # what the command line must not carry (World.cli)
        fh.writelines(f"{item}\n" for item in SETTINGS if redact_setting(item) != item)
    try:
        config = world.config(world.reference)
        filter_leakage.run(config)
        # the secret reached Spark (the redaction is for what is written and shown, not for Spark)
        assert spark.conf.get("spark.hadoop.fs.s3a.secret.key") == SECRET
        mined = mine_triplets.run(config)
        texts = pq.read_table(mined.table_path("training_texts")).to_pylist()
        build_small(
            (paper_text(r["title"], r["abstract"], "") for r in texts),
            world.model,
            vocab_size=2000,
            hidden=32,
            layers=1,
            heads=2,
            intermediate=64,
            max_length=32,
            seed=0,
        )
        world.settings.append(f"train_encoder.model={world.model}")
        train_encoder.run(world.config(world.reference))
    finally:
        logging.getLogger().removeHandler(handler)
    world.logs = captured.getvalue()
    for stage in STAGE_ORDER:
        world.manifests[stage] = read(world.reference, stage)
        world.digests[stage] = digest(world.manifests[stage])
    return world
