"""The suite's worker groups (`tests/conftest.py` FIXTURE_GROUPS) name every file that uses a shared fixture."""

import re
from pathlib import Path

from tests.conftest import FIXTURE_GROUPS, REPO

# group -> the session fixtures whose users must run in one worker
SHARED = {
    "topics": ("topics_config", "generated_topics"),
    "world": ("world",),
    "airflow": ("airflow_rebuild", "seeded_artifacts"),
}


def users_of(names: tuple[str, ...]) -> set[str]:
    """Test files with a function (a test or a fixture) taking one of `names` as a parameter."""
    pattern = re.compile(r"def \w+\([^)]*\b(" + "|".join(names) + r")\b[^)]*\)")
    return {
        str(path.relative_to(REPO))
        for path in (REPO / "tests").rglob("test_*.py")
        if pattern.search(path.read_text()) and path.name != Path(__file__).name
    }


def test_every_user_of_a_shared_fixture_is_in_its_group():
    for group, names in SHARED.items():
        listed = {path for path, g in FIXTURE_GROUPS.items() if g == group}
        assert users_of(names) == listed, group


def test_every_listed_file_exists():
    assert all((REPO / path).is_file() for path in FIXTURE_GROUPS)


def test_every_timed_scope_exists():
    from tests.conftest import SCOPE_SECONDS

    groups = set(FIXTURE_GROUPS.values())
    assert all(scope in groups or (REPO / scope).is_file() for scope in SCOPE_SECONDS)
