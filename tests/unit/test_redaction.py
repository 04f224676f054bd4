"""Secret-named settings are redacted wherever citeflow writes or shows settings; Spark still gets them."""

import pytest

from citeflow.redaction import REDACTED, is_secret_key, redact, redact_setting


@pytest.mark.parametrize(
    "key",
    [
        "spark.hadoop.fs.s3a.secret.key",
        "spark.hadoop.fs.s3a.access.key",
        "spark.hadoop.fs.s3a.session.token",
        "fs.azure.sas.token",
        "fs.azure.account.key.acct.blob.core.windows.net",
        "spark.ssl.keyStorePassword",
        "spark.authenticate.secret",
        "aws_access_key_id",
        "AWS_SECRET_ACCESS_KEY",
        "apiKey",
        "api_key",
        "privateKey",
        "private_key_id",
        "db.passwd",
        "credentials",
        "Authorization",
        "client_secret",
        "auth",
    ],
)
def test_keys_that_name_a_secret(key):
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "spark.sql.session.timeZone",
        "spark.executor.memory",
        "spark.authenticate",
        "tokenizer",
        "max_length",
        "authors",
        "keyword",
        "spark.master",
    ],
)
def test_keys_that_do_not(key):
    assert not is_secret_key(key)


def test_settings_strings_and_nested_values_are_redacted():
    line = "spark.conf=spark.hadoop.fs.s3a.secret.key=S3CR3T,spark.executor.memory=8g"
    assert redact_setting(line) == "spark.conf=spark.hadoop.fs.s3a.secret.key=***,spark.executor.memory=8g"
    value = {
        "spark": {"conf": ["spark.hadoop.fs.s3a.access.key=AK", "spark.x=1"], "master": "yarn"},
        "api_token": "T",
        "empty_password": "",
        "root": "s3://user:pw@bucket/x",
        "rows": 3,
    }
    assert redact(value) == {
        "spark": {"conf": [f"spark.hadoop.fs.s3a.access.key={REDACTED}", "spark.x=1"], "master": "yarn"},
        "api_token": REDACTED,
        "empty_password": "",
        "root": f"s3://user:{REDACTED}@bucket/x",
        "rows": 3,
    }


def test_spark_still_receives_the_secret(spark):
    """Redaction is for what is written and shown: get_spark gives Spark the real value."""
    from citeflow.config import SparkConfig
    from citeflow.spark.engine.session import get_spark

    session = get_spark(
        SparkConfig(shuffle_partitions=4, driver_memory="2g", conf=("spark.hadoop.fs.s3a.secret.key=S3CR3T-1",))
    )
    assert session.conf.get("spark.hadoop.fs.s3a.secret.key") == "S3CR3T-1"
