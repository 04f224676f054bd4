"""The deployment launcher's pieces that need no server: its configuration, the environment of its components,
its secrets and the services' files (the running deployment: tests/e2e/test_deployment.py)."""

from __future__ import annotations

import json
import stat

import pytest

from citeflow.cockpit.deployment import DeploymentConfig, WorkerSpec, deployment_env
from citeflow.cockpit.deployment.config import known_secrets
from citeflow.cockpit.deployment.services import redis_command, redis_ready


def test_a_worker_is_named_on_the_command_line_with_its_queues_and_slots():
    assert WorkerSpec.parse("gpu=gpu+pbg_rank:3") == WorkerSpec(name="gpu", queues=("gpu", "pbg_rank"), concurrency=3)
    assert WorkerSpec.parse("spark=default").concurrency == 1
    for bad in ("gpu", "gpu=", "gpu=q:x", "g u=q", "gpu=q:0"):
        with pytest.raises(ValueError):
            WorkerSpec.parse(bad)


def test_every_queue_the_dags_use_needs_a_worker():
    only_default = (WorkerSpec(name="all", queues=("default",), concurrency=2),)
    with pytest.raises(ValueError, match="no worker serves the queue 'gpu'"):
        DeploymentConfig(workers=only_default)
    assert DeploymentConfig(workers=only_default, gpu_queue="default", pbg_rank_queue="default").slots == 2
    twice = (*DeploymentConfig().workers, WorkerSpec(name="gpu", queues=("gpu",)))
    with pytest.raises(ValueError, match="worker names must differ"):
        DeploymentConfig(workers=twice)


def test_components_run_celery_on_postgres_and_redis_with_late_acks_and_citeflow_queues(tmp_path):
    cfg = DeploymentConfig(home=tmp_path, port=18080, gpu_queue="gpu", pbg_rank_queue="ranks",
                           workers=(WorkerSpec(name="a", queues=("default", "gpu", "ranks")),))  # fmt: skip
    env = deployment_env(cfg, database="postgresql+psycopg://u:p@127.0.0.1:5/airflow", broker="redis://:p@h:6/0")
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == "postgresql+psycopg://u:p@127.0.0.1:5/airflow"
    assert env["AIRFLOW__CELERY__RESULT_BACKEND"] == "db+postgresql+psycopg://u:p@127.0.0.1:5/airflow"
    assert env["AIRFLOW__CELERY__BROKER_URL"] == "redis://:p@h:6/0"
    assert env["AIRFLOW__CELERY__TASK_ACKS_LATE"] == "True"
    assert env["AIRFLOW__CELERY__WORKER_PREFETCH_MULTIPLIER"] == "1"
    assert json.loads(env["AIRFLOW__CELERY__EXTRA_CELERY_CONFIG"]) == {"result_extended": True}
    assert (env["CITEFLOW_GPU_QUEUE"], env["CITEFLOW_PBG_RANK_QUEUE"]) == ("gpu", "ranks")
    assert env["AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT"] == "120"
    assert env["AIRFLOW__CORE__PARALLELISM"] == "1"  # the workers' slots
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:18080/execution/"


def test_secrets_are_made_once_and_kept_private(tmp_path):
    first = known_secrets(tmp_path)
    assert set(first) == {"postgres", "redis"} and all(len(v) >= 20 for v in first.values())
    assert known_secrets(tmp_path) == first
    assert stat.S_IMODE((tmp_path / "deployment-secrets.json").stat().st_mode) == 0o600


def test_redis_gets_its_password_from_a_private_file_and_keeps_no_data(tmp_path):
    command = redis_command(tmp_path / "redis", 6390, "s3cret")
    conf = tmp_path / "redis" / "redis.conf"
    assert command[-1] == str(conf) and "s3cret" not in " ".join(command)
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600
    text = conf.read_text()
    assert 'requirepass "s3cret"' in text and "bind 127.0.0.1" in text and 'save ""' in text
    assert not redis_ready(1, "s3cret")  # nothing listens on port 1


def test_the_command_line_names_every_setting(tmp_path):
    from citeflow.cockpit.deployment.cli import config_of, parser

    args = ["--home", str(tmp_path), "--port", "18081", "--heartbeat-timeout", "60", "--input-roots", "/data"]
    args += ["--worker", "all=default+gpu+pbg_rank:2"]
    cfg = config_of(parser().parse_args(args))
    assert (cfg.home, cfg.port, cfg.heartbeat_timeout_s, cfg.input_roots) == (tmp_path, 18081, 60, "/data")
    assert cfg.workers == (WorkerSpec(name="all", queues=("default", "gpu", "pbg_rank"), concurrency=2),)
    assert config_of(parser().parse_args([])).workers == DeploymentConfig().workers
