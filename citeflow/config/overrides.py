"""Configs to and from text: `--set` overrides parsed against field types, version dicts, `citeflow settings` rows."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Literal

from citeflow.config.base import range_text
from citeflow.errors import CiteflowError


def versioned_dict(config: Any) -> dict[str, Any]:
    """The fields of a stage config that define what it computes (the version's input)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        if not f.metadata.get("versioned", True):
            continue
        value = getattr(config, f.name)
        if f.metadata.get("versioned_when_set") and value == f.default:
            continue
        out[f.name] = versioned_dict(value) if dataclasses.is_dataclass(value) else _plain(value)
    return out


def to_dict(config: Any) -> dict[str, Any]:
    """Every field, nested, as JSON-ready values (for manifests and logs)."""
    return {f.name: _plain(getattr(config, f.name)) for f in dataclasses.fields(config)}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return to_dict(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def describe(config_cls: type) -> list[tuple[str, str, Any, str]]:
    """(name, type, default, help) per field, for `citeflow settings`; the help ends with the setting's range."""
    rows = []
    hints = typing.get_type_hints(config_cls)
    for f in dataclasses.fields(config_cls):
        default = f.default if f.default is not dataclasses.MISSING else None
        text = f.metadata.get("help", "")
        if f.metadata.get("range"):
            text += f" [{range_text(f.metadata['range'])}]"
        rows.append((f.name, _type_name(hints[f.name]), default, text))
    return rows


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is Literal:
        return "|".join(str(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) in (typing.Union, types.UnionType):  # an optional setting: `none` unsets it
        return "|".join("none" if a is type(None) else _type_name(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))


def _parse_value(raw: str, tp: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    if origin is Literal:
        choices = typing.get_args(tp)
        if raw not in choices:
            raise CiteflowError(f"{key} must be one of {', '.join(map(str, choices))}, not {raw!r}")
        return raw
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if raw.lower() in ("none", "null", ""):
            return None
        return _parse_value(raw, args[0], key)
    if origin is tuple:
        (item_tp, *_rest) = typing.get_args(tp)
        return tuple(_parse_value(part, item_tp, key) for part in raw.split(",") if part)
    if tp is bool:
        lowered = raw.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise CiteflowError(f"{key} expects true or false, not {raw!r}")
    if tp is int:
        try:
            return int(raw)
        except ValueError:
            raise CiteflowError(f"{key} expects an integer, not {raw!r}") from None
    if tp is float:
        try:
            value = float(raw)
        except ValueError:
            raise CiteflowError(f"{key} expects a number, not {raw!r}") from None
        if not math.isfinite(value):
            raise CiteflowError(f"{key} expects a finite number, not {raw!r}")
        return value
    if tp is str:
        return raw
    raise CiteflowError(f"{key} cannot be set from the command line")


class _Section(dict):
    """The overrides of one nested section, by field name (a plain dict value is a setting's own value)."""


def apply_overrides(config: Any, overrides: list[str] | tuple[str, ...]) -> Any:
    """Return a copy of `config` with `section.key=value` (or `key=value`) overrides applied.

    Each value is parsed against the declared type of its field; unknown keys and
    values of the wrong type raise a `CiteflowError` naming the valid choices. All
    overrides are applied before any section is validated, so their order does not
    matter (the last of two for one key wins).
    """
    tree = _Section()
    for item in overrides:
        if "=" not in item:
            raise CiteflowError(f"override {item!r} must look like stage.key=value")
        dotted, raw = item.split("=", 1)
        _place(config, tree, dotted.strip().split("."), raw.strip(), dotted.strip())
    return _apply(config, tree)


def _place(config: Any, tree: _Section, path: list[str], raw: str, key: str) -> None:
    """Parse one override into `tree`, checking its key and value against `config`'s fields."""
    hints = typing.get_type_hints(type(config))
    names = [f.name for f in dataclasses.fields(config)]
    head = path[0]
    if head not in names:
        raise CiteflowError(f"unknown setting {key!r}; valid here: {', '.join(names)}")
    current = getattr(config, head)
    if len(path) > 1:
        if not dataclasses.is_dataclass(current):
            raise CiteflowError(f"{key!r}: {head} has no sub-settings")
        _place(current, tree.setdefault(head, _Section()), path[1:], raw, key)
        return
    if dataclasses.is_dataclass(current):
        raise CiteflowError(
            f"{key!r} is a section; set one of its keys, e.g. {key}.{dataclasses.fields(current)[0].name}=..."
        )
    tree[head] = _parse_value(raw, hints[head], key)


def _apply(config: Any, tree: _Section) -> Any:
    """`config` with `tree`'s values, each section replaced once (and so validated once), innermost first."""
    if not tree:
        return config
    changes = {
        name: _apply(getattr(config, name), value) if isinstance(value, _Section) else value
        for name, value in tree.items()
    }
    return dataclasses.replace(config, **changes)
