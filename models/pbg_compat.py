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


def apply() -> None:
    """Install the fixes into the imported torchbiggraph modules (idempotent)."""
    from torchbiggraph import schema

    schema.unpack_optional = unpack_optional
