"""No secret on any command line: a `citeflow run` that starts every kind of process citeflow starts, with
the secret in a settings file, and the command line of each of those processes read from /proc."""

from __future__ import annotations

import stat

from tests.faults.conftest import SECRET, STAGE_ORDER, Watch, digest, finish, read, sweep


def test_no_process_of_a_run_carries_the_secret_on_its_command_line(world):
    assert stat.S_IMODE(world.settings_file.stat().st_mode) == 0o600 and SECRET in world.settings_file.read_text()
    rebuilt = STAGE_ORDER[STAGE_ORDER.index("filter_leakage") :]
    root = world.copy("secrets", without=tuple(rebuilt))
    process = world.cli(root, "train_encoder")
    watch = Watch(process.tag)
    try:
        code, log = finish(process, timeout_s=1200)
    finally:
        watch.stop()
        sweep(process.tag)
    assert code == 0, log[-4000:]
    assert SECRET not in log
    seen = list(watch.seen.values())
    # every kind of process: the run itself, the local Spark driver's JVM (filter_leakage, mine_triplets),
    # the guards of child processes, PBG's trainer (embed_graph) and the encoder's trainer (train_encoder)
    for kind in (
        "-m citeflow.jobs.cli run",
        "org.apache.spark.deploy.SparkSubmit",
        "-m citeflow.process",
        "-m citeflow.models.pbg.train",
        "-m citeflow.models.training.train",
    ):
        assert any(kind in command for command in seen), (kind, seen)
    assert watch.carrying(SECRET) == []
    # the secret reached Spark all the same: the versions are the reference's, built with it in spark.conf
    for stage in rebuilt:
        assert digest(read(root, stage)) == world.digests[stage], stage
