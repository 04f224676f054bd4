"""Names, ids and field helpers that every config module uses."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from citeflow.diffs import RELEASE_ID_RE
from citeflow.errors import CiteflowError

SNAPSHOT_ID_RE = RELEASE_ID_RE  # a snapshot is named by its release id (diffs name releases the same way)
URI_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@]*:[^/@]*@")


def validate_snapshot_id(snapshot: str) -> str:
    """Return `snapshot` if it is a safe id; a snapshot id is never a path."""
    if not isinstance(snapshot, str) or not SNAPSHOT_ID_RE.fullmatch(snapshot) or len(snapshot) > 128:
        raise CiteflowError(
            f"invalid snapshot id {snapshot!r}: use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit (at most 128 characters), e.g. 20200705v1 or 2023-08-29"
        )
    return snapshot


def _help(
    text: str,
    *,
    versioned: bool = True,
    versioned_when_set: bool = False,
    at_least: float | None = None,
    above: float | None = None,
    at_most: float | None = None,
    below: float | None = None,
) -> dict[str, Any]:
    """Field metadata. `versioned_when_set`: the field enters the version only at a value other than its default,
    so that adding an option leaves the ids of the versions built before it the same. `at_least`, `above`,
    `at_most`, `below`: the numeric setting's range, in this one place: checked when the config is built
    (`_check_fields`) and shown by `citeflow settings`."""
    meta: dict[str, Any] = {"help": text, "versioned": versioned, "versioned_when_set": versioned_when_set}
    bounds = {"at_least": at_least, "above": above, "at_most": at_most, "below": below}
    if any(v is not None for v in bounds.values()):
        meta["range"] = {k: v for k, v in bounds.items() if v is not None}
    return meta


_BOUND_WORDS = {"at_least": "at least", "above": "above", "at_most": "at most", "below": "below"}
_BOUND_HOLDS = {
    "at_least": lambda v, b: v >= b,
    "above": lambda v, b: v > b,
    "at_most": lambda v, b: v <= b,
    "below": lambda v, b: v < b,
}


def range_text(bounds: dict[str, float]) -> str:
    """'above 0 and at most 1'."""
    return " and ".join(f"{_BOUND_WORDS[k]} {bounds[k]:g}" for k in _BOUND_WORDS if k in bounds)


def _check_fields(config: Any, section: str) -> None:
    """nan and inf are not settings: every float field of a config must be a finite number, and every numeric
    field with a range (`_help`'s bounds) must lie in it."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise CiteflowError(f"{section}.{f.name} must be a finite number, not {value!r}")
        bounds = f.metadata.get("range")
        if bounds and isinstance(value, int | float) and not isinstance(value, bool):
            if not all(_BOUND_HOLDS[k](value, b) for k, b in bounds.items()):
                raise CiteflowError(f"{section}.{f.name} must be {range_text(bounds)}, not {value!r}")
