"""citeflow/config/settings_file.py and the CLI's `--settings`: secrets kept in a file only its owner reads."""

import os
from pathlib import Path

import pytest

from citeflow.config import SparkConfig
from citeflow.config.settings_file import SETTINGS_ENV, read_settings_file, settings_overrides
from citeflow.errors import CiteflowError
from citeflow.jobs.cli.commands import overrides_from_args, run_config_from_args
from citeflow.jobs.cli.parser import build_parser

SECRET = "wJalr-" + "planted-7Q"


def private(path, text, mode=0o600):
    path.write_text(text)
    os.chmod(path, mode)
    return str(path)


def test_lines_are_overrides_in_order_and_comments_and_blank_lines_are_skipped(tmp_path):
    path = private(
        tmp_path / "s",
        f"# object store\n\n  spark.conf = spark.hadoop.fs.s3a.secret.key={SECRET}  \nstore.lease_wait_s=5\n",
    )
    assert read_settings_file(path) == [f"spark.conf = spark.hadoop.fs.s3a.secret.key={SECRET}", "store.lease_wait_s=5"]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o602, 0o660])
def test_a_file_group_or_others_may_read_or_write_is_refused_with_the_fix(tmp_path, mode):
    path = private(tmp_path / "s", f"spark.conf=spark.hadoop.fs.s3a.secret.key={SECRET}\n", mode)
    with pytest.raises(CiteflowError) as caught:
        read_settings_file(path)
    assert str(caught.value) == (
        f"settings file {path} is open to group or others (mode {mode:04o}); it may hold secrets, so it is read "
        f"only when no one else can read it: chmod 600 {path}"
    )


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="only root can give a file away")
def test_a_file_of_another_user_is_refused(tmp_path):
    path = private(tmp_path / "s", "store.lease_wait_s=5\n")
    os.chown(path, 4242, 4242)
    with pytest.raises(CiteflowError, match="belongs to user id 4242, not to this user"):
        read_settings_file(path)


def test_missing_folders_odd_bytes_and_bad_lines_are_one_line_that_never_quotes_the_file(tmp_path):
    with pytest.raises(CiteflowError, match=r"settings file .*/nothing does not exist$"):
        read_settings_file(str(tmp_path / "nothing"))
    folder = tmp_path / "folder"
    folder.mkdir(mode=0o700)
    with pytest.raises(CiteflowError, match="is not a regular file"):
        read_settings_file(str(folder))
    path = tmp_path / "latin1"
    path.write_bytes(b"spark.conf=spark.x=caf\xe9\n")
    os.chmod(path, 0o600)
    with pytest.raises(CiteflowError, match="is not UTF-8 text"):
        read_settings_file(str(path))
    for bad in (SECRET, f"={SECRET}", f"spark conf={SECRET}"):  # a pasted key alone, no key, a space in the key
        path = private(tmp_path / "bad", f"store.lease_wait_s=5\n{bad}\n")
        with pytest.raises(CiteflowError) as caught:
            read_settings_file(path)
        assert str(caught.value) == f"settings file {path} line 2 is not STAGE.KEY=VALUE"


def _args(*argv):
    return build_parser().parse_args(["run", "--snapshot", "s", "--corpus", "c", *argv])


def test_the_environment_file_then_settings_files_then_set_each_later_value_winning(tmp_path, monkeypatch, capsys):
    env_file = private(tmp_path / "env", "store.lease_wait_s=1\nstore.lease_heartbeat_s=2\nspark.driver_memory=1g\n")
    given = private(tmp_path / "given", f"store.lease_wait_s=3\nspark.conf=spark.hadoop.fs.s3a.secret.key={SECRET}\n")
    monkeypatch.setenv(SETTINGS_ENV, env_file)
    config = run_config_from_args(_args("--settings", given, "--set", "spark.driver_memory=2g"))
    assert config.store.lease_wait_s == 3.0 and config.store.lease_heartbeat_s == 2.0
    assert config.spark.driver_memory == "2g"
    assert config.spark.conf == (f"spark.hadoop.fs.s3a.secret.key={SECRET}",)
    assert capsys.readouterr().err == ""  # nothing secret was typed: no warning
    monkeypatch.delenv(SETTINGS_ENV)
    assert settings_overrides([given]) == read_settings_file(given)
    assert settings_overrides([], {SETTINGS_ENV: ""}) == []


def test_a_secret_typed_with_set_still_works_and_is_warned_about_without_its_value(capsys):
    config = run_config_from_args(_args("--set", f"spark.conf=spark.hadoop.fs.s3a.secret.key={SECRET}"))
    assert config.spark.conf == (f"spark.hadoop.fs.s3a.secret.key={SECRET}",)
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "citeflow: warning: --set spark.conf=spark.hadoop.fs.s3a.secret.key=*** holds a secret, which every local "
        "user can read on this command line; put it in a settings file instead (--settings FILE, docs/secrets.md)"
    ]
    assert SECRET not in err


def test_spark_server_takes_the_spark_section_of_a_shared_file(tmp_path):
    shared = private(tmp_path / "s", "store.lease_wait_s=3\nspark.driver_memory=3g\n")
    args = build_parser().parse_args(["spark-server", "--settings", shared, "--set", "spark.master=local[2]"])
    assert overrides_from_args(args, "spark") == ["spark.driver_memory=3g", "spark.master=local[2]"]


def test_a_refused_file_stops_the_cli_with_one_line(tmp_path, capsys):
    from citeflow.jobs.cli import main

    path = private(tmp_path / "s", f"spark.conf=spark.hadoop.fs.s3a.secret.key={SECRET}\n", 0o644)
    assert main(["run", "--snapshot", "s", "--corpus", str(tmp_path), "--settings", path]) == 2
    err = capsys.readouterr().err
    (line,) = err.splitlines()
    assert line.startswith(
        f"citeflow: error: settings file {path} is open to group or others (mode 0644); "
        f"it may hold secrets, so it is read only when no one else can read it: chmod 600 {path}; details in "
    )
    assert line.endswith(".log") and SECRET not in Path(line.rsplit(" ", 1)[1]).read_text()
    assert SECRET not in err


@pytest.mark.parametrize(
    "options",
    [
        f"-Xss4m -Dfs.s3a.secret.key={SECRET}",
        f"-Djavax.net.ssl.trustStorePassword={SECRET}",
        f"-Dapi_key={SECRET} -XX:+UseG1GC",
    ],
)
def test_a_secret_in_jvm_options_is_refused_as_it_would_be_on_the_jvms_command_line(options):
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        with pytest.raises(CiteflowError) as caught:
            SparkConfig(conf=(f"{key}={options}",))
        assert f"spark.conf {key} sets -D" in str(caught.value) and SECRET not in str(caught.value)
        assert "docs/secrets.md" in str(caught.value)
    # JVM options without a secret, and a secret as a Spark setting, are fine
    SparkConfig(conf=("spark.driver.extraJavaOptions=-Xss4m -Dlog4j2.debug=true",))
    SparkConfig(conf=(f"spark.hadoop.fs.s3a.secret.key={SECRET}",))
