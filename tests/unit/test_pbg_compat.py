"""The torchbiggraph typing trap, reproduced, and the compat fix that removes it."""

import subprocess
import sys
import textwrap
from typing import Optional, Union

import pytest

from citeflow.models.pbg.compat import unpack_optional

# A fresh process: clear typing's caches after PBG's config classes exist, as a
# process full of other typing users (Airflow, pydantic) eventually does.
SCRIPT = textwrap.dedent("""
    import sys, typing
    from torchbiggraph.config import ConfigSchema
    if sys.argv[1] == "fixed":
        from citeflow.models.pbg import compat as pbg_compat
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


# PBG's RPC round trip as its lock server and trainers do it (torchbiggraph/rpc.py), in a fresh process.
RPC_SCRIPT = textwrap.dedent("""
    import pickle, sys
    from torchbiggraph import rpc
    from torchbiggraph.bucket_scheduling import BucketStats
    from torchbiggraph.stats import Stats
    from torchbiggraph.types import Bucket, Side
    if sys.argv[1] == "fixed":
        from citeflow.models.pbg import compat as pbg_compat
        pbg_compat.apply()
    stats = BucketStats(lhs_partition=1, rhs_partition=2, index=7, train=Stats(loss=0.5, count=10))
    message = ("release_bucket", [Bucket(1, 2), stats], {"side": Side.RHS})
    back = rpc._deserialize(rpc._serialize(message))
    assert back == message, back
    print("round trip ok", back[1][1].train.count)
    try:  # the weights-only unpickler is still on: any other class is refused
        rpc._deserialize(rpc._serialize(pickle.PicklingError("not allowlisted")))
    except Exception as exc:
        print("refused:", type(exc).__name__)
""")


def rpc_round_trip(mode):
    return subprocess.run([sys.executable, "-c", RPC_SCRIPT, mode], capture_output=True, text=True, timeout=300)


def test_distributed_pbgs_rpc_fails_under_weights_only_torch_load_without_the_fix():
    done = rpc_round_trip("plain")
    assert done.returncode != 0
    assert "Weights only load failed" in done.stderr


def test_the_fix_allowlists_pbgs_rpc_types_and_nothing_else():
    done = rpc_round_trip("fixed")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "round trip ok 10" in done.stdout
    assert "refused: UnpicklingError" in done.stdout
