"""One place for the fixes torchbiggraph 1.0.0 (its only PyPI release) needs.

`torchbiggraph.schema.unpack_optional` recognises `Optional[X]` by identity:
`type_ is Optional[type_.__args__[0]]`. That holds only while typing's
internal LRU cache still returns the object built when PBG's config classes
were defined. In a process that creates many typing subscriptions (Airflow,
pydantic, transformers) the entry is evicted, a fresh `Optional[float]` is a
different object, and PBG fails to parse its own config with
`NotImplementedError: Unknown type: typing.Optional[float]`.

`apply()` replaces that function with one that asks typing what the type is
(`get_origin` / `get_args`) instead of comparing identities. Call it before
building a PBG `ConfigSchema` (the embed_graph stage does).

Distributed PBG sends Python objects between its processes with `torch.save`
/ `torch.load` (`torchbiggraph/rpc.py`: the lock server's buckets and bucket
statistics). Since torch 2.6 `torch.load` defaults to `weights_only=True`,
which refuses every class it does not know, so the first bucket a trainer
asks the lock server for fails with `UnpicklingError: Weights only load
failed`. `apply()` also allowlists exactly those plain data types
(`PBG_RPC_TYPES`) for the weights-only unpickler, which stays on: nothing
else becomes loadable. Every PBG process must call it: the trainer does, and
its spawned servers and workers through the `SubprocessInitializer` of
`citeflow.models.pbg.train.worker_initializer`.
"""

from __future__ import annotations

import typing
from types import UnionType


def unpack_optional(type_):
    """X for Optional[X] (also written X | None); TypeError for anything else."""
    if typing.get_origin(type_) in (typing.Union, UnionType):
        args = typing.get_args(type_)
        if len(args) == 2 and type(None) in args:
            return args[0] if args[1] is type(None) else args[1]
    raise TypeError("Not an optional type")


def pbg_rpc_types() -> list[type]:
    """The classes PBG's lock server and trainers exchange through `torch.load` (torchbiggraph 1.0.0)."""
    from torchbiggraph import bucket_scheduling, stats, types

    return [types.Bucket, types.Side, bucket_scheduling.BucketStats, stats.Stats]


def apply() -> None:
    """Install the fixes into the imported torchbiggraph modules (idempotent)."""
    import torch
    from torchbiggraph import schema

    schema.unpack_optional = unpack_optional
    torch.serialization.add_safe_globals([*pbg_rpc_types()])  # a list of torch's own element type
