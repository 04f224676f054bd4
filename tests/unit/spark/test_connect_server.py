"""spark/engine/connect_server.py: the settings, command line and address checks of `citeflow spark-server`.

The server itself starts in tests/e2e/test_spark_cluster.py, where build_graph and filter_leakage run through it.
"""

import socket

import pytest

from citeflow.config import SparkConfig
from citeflow.errors import CiteflowError
from citeflow.jobs.cli import main
from citeflow.spark.engine import connect_server as CS
from citeflow.spark.engine.session import driver_java_options


def test_the_server_gets_the_local_drivers_settings_and_listens_where_it_was_told():
    config = SparkConfig(
        master="local[3]",
        driver_memory="6g",
        shuffle_partitions=8,
        local_dir="/scratch/spark",
        conf=("spark.executor.cores=2", "spark.connect.grpc.binding.port=1"),
    )
    props = CS.properties(config, "127.0.0.1", 15123)
    assert props["spark.master"] == "local[3]"
    assert props["spark.driver.memory"] == "6g"
    assert props["spark.driver.extraJavaOptions"] == driver_java_options()
    assert "-XX:+UseParallelGC" in props["spark.driver.extraJavaOptions"]
    assert props["spark.sql.shuffle.partitions"] == "8"
    assert props["spark.local.dir"] == "/scratch/spark"
    assert props["spark.executor.cores"] == "2"
    assert props["spark.ui.enabled"] == "false"
    # the address given wins over a spark.conf entry
    assert props["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert props["spark.connect.grpc.binding.port"] == "15123"


def test_a_spark_conf_entry_replaces_citeflows_java_options_as_for_a_local_driver():
    props = CS.properties(SparkConfig(conf=("spark.driver.extraJavaOptions=-Xss4m",)), "127.0.0.1", 15002)
    assert props["spark.driver.extraJavaOptions"] == "-Xss4m"


def test_a_client_setting_is_refused():
    with pytest.raises(CiteflowError, match="leave spark.remote unset"):
        CS.properties(SparkConfig(remote="sc://h:1"), "127.0.0.1", 15002)


def test_settings_travel_in_a_properties_file_not_on_the_command_line():
    secret = "spark.hadoop.fs.s3a.secret.key=do-not-show"
    props = CS.properties(SparkConfig(conf=(secret,)), "127.0.0.1", 15002)
    text = CS.properties_text(props)
    assert "spark.hadoop.fs.s3a.secret.key=do-not-show\n" in text
    cmd = CS.command("/opt/spark", "/private/spark.properties")
    assert cmd[0] == "/opt/spark/bin/spark-submit"
    assert cmd[cmd.index("--class") + 1] == CS.SERVER_CLASS
    assert cmd[cmd.index("--properties-file") + 1] == "/private/spark.properties"
    assert not any("do-not-show" in arg for arg in cmd)


def test_properties_text_escapes_backslashes_and_refuses_line_breaks():
    assert CS.properties_text({"spark.local.dir": r"C:\tmp"}) == "spark.local.dir=C:\\\\tmp\n"
    with pytest.raises(CiteflowError, match="line break"):
        CS.properties_text({"spark.app.name": "a\nspark.master=yarn"})


@pytest.mark.parametrize(
    "host, port, message",
    [
        ("127.0.0.1", 0, "between 1 and 65535"),
        ("127.0.0.1", 65536, "between 1 and 65535"),
        ("a b", 15002, "IP address or a hostname"),
        ("host;rm", 15002, "IP address or a hostname"),
        ("", 15002, "IP address or a hostname"),
    ],
)
def test_bad_addresses_are_one_line_errors(host, port, message):
    with pytest.raises(CiteflowError, match=message):
        CS.check_address(host, port)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "0.0.0.0", "localhost", "spark-1.example.org"])
def test_good_addresses_pass(host):
    CS.check_address(host, 15002)


def test_only_loopback_addresses_count_as_private():
    assert CS.is_loopback("127.0.0.1") and CS.is_loopback("::1") and CS.is_loopback("localhost")
    assert not CS.is_loopback("0.0.0.0") and not CS.is_loopback("10.0.0.5")


def test_a_port_in_use_is_refused_before_any_jvm_starts():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(CiteflowError, match="in use already"):
            CS.start(SparkConfig(), "127.0.0.1", port)


def test_the_command_line_refuses_bad_arguments_in_one_line(capsys):
    assert main(["spark-server", "--port", "70000"]) == 2
    assert main(["spark-server", "--set", "build_graph.output_files=2"]) == 2
    assert main(["spark-server", "--set", "spark.remote=sc://h:1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "citeflow: error: --port must be between 1 and 65535, not 70000",
        "citeflow: error: unknown setting 'build_graph.output_files'; valid here: spark",
        "citeflow: error: spark-server starts a Spark Connect server itself: leave spark.remote unset",
    ]
