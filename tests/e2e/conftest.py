"""Generated snapshots shared by the end-to-end tests (made once per session)."""

import json

import pytest

GENERATED_PAPERS = 3000


def _generate(tmp_path_factory, fmt: str):
    from jobs.generate_snapshot import GenerateConfig, run

    out = tmp_path_factory.mktemp(f"gen-{fmt}") / "snapshot"
    run(GenerateConfig(papers=GENERATED_PAPERS, out=str(out), seed=7, format=fmt, shards=3))
    return out, json.loads((out / "generator.json").read_text())


@pytest.fixture(scope="session")
def generated_s2orc(tmp_path_factory):
    return _generate(tmp_path_factory, "s2orc")


@pytest.fixture(scope="session")
def generated_s2ag(tmp_path_factory):
    return _generate(tmp_path_factory, "s2ag")
