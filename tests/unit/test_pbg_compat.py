"""The torchbiggraph typing trap, reproduced, and the compat fix that removes it."""

import subprocess
import sys
import textwrap
from typing import Optional, Union

import pytest

from models.pbg_compat import unpack_optional

# A fresh process: clear typing's caches after PBG's config classes exist, as a
# process full of other typing users (Airflow, pydantic) eventually does.
SCRIPT = textwrap.dedent("""
    import sys, typing
    from torchbiggraph.config import ConfigSchema
    if sys.argv[1] == "fixed":
        from models import pbg_compat
        pbg_compat.apply()
    for clear in typing._cleanups:
        clear()
    config = ConfigSchema.from_dict({
        "entity_path": "e", "edge_paths": ["p"], "checkpoint_path": "c",
        "entities": {"paper": {"num_partitions": 1}},
        "relations": [{"name": "cites", "lhs": "paper", "rhs": "paper", "operator": "none"}],
        "dimension": 8, "margin": 0.15, "max_norm": 1.0,
    })
    print("parsed", config.margin, config.max_norm)
""")


def run(mode):
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=300)


def test_pbg_fails_on_an_evicted_optional_without_the_fix():
    done = run("plain")
    assert done.returncode != 0
    assert "Unknown type: typing.Optional" in done.stderr


def test_pbg_parses_its_config_with_the_fix():
    done = run("fixed")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "parsed 0.15 1.0" in done.stdout


# The old spellings on purpose: PBG's config annotations use typing.Optional and typing.Union.
@pytest.mark.parametrize("tp, inner", [(Optional[float], float), (Union[None, int], int), (str | None, str)])  # noqa: UP007, UP045
def test_unpack_optional(tp, inner):
    assert unpack_optional(tp) is inner


@pytest.mark.parametrize("tp", [float, Union[int, str], Union[int, str, None], list[int]])  # noqa: UP007
def test_non_optionals_are_refused(tp):
    with pytest.raises(TypeError):
        unpack_optional(tp)
