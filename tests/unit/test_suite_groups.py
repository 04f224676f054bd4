"""The suite's worker groups (`tests/conftest.py` FIXTURE_GROUPS) name every file that uses a shared fixture;
the long tier's scopes exist and are the tests marked `long`."""

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


def is_scope(name: str) -> bool:
    """A FIXTURE_GROUPS group or a test file: what `tests/conftest.py` schedules as one scope."""
    return name in set(FIXTURE_GROUPS.values()) or (REPO / name).is_file()


def test_every_timed_scope_exists():
    from tests.conftest import SCOPE_SECONDS

    assert all(is_scope(scope) for scope in SCOPE_SECONDS)


def test_every_long_scope_exists():
    from tests.conftest import LONG_SCOPES

    assert all(is_scope(scope) for scope in LONG_SCOPES)


def test_long_marks_exactly_the_tests_of_the_long_scopes():
    from tests.conftest import LONG_SCOPES, pytest_itemcollected, scope_of

    class Item:  # what pytest_itemcollected reads of a collected test
        def __init__(self, nodeid):
            self.nodeid, self.fixturenames, self.marks = nodeid, (), []

        def add_marker(self, mark):
            self.marks.append(mark.name)

    for nodeid in ("tests/faults/test_kill.py::t", "tests/e2e/test_incremental.py::t", "tests/unit/test_cli.py::t"):
        item = Item(nodeid)
        pytest_itemcollected(item)
        assert ("long" in item.marks) == (scope_of(nodeid) in LONG_SCOPES)
    assert scope_of("tests/faults/test_kill.py::t") in LONG_SCOPES
    assert scope_of("tests/unit/test_cli.py::t") not in LONG_SCOPES
