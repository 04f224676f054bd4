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


def _help(text: str, *, versioned: bool = True, versioned_when_set: bool = False) -> dict[str, Any]:
    """Field metadata. `versioned_when_set`: the field enters the version only at a value other than its default,
    so that adding an option leaves the ids of the versions built before it the same."""
    return {"help": text, "versioned": versioned, "versioned_when_set": versioned_when_set}


def _check_finite(config: Any, section: str) -> None:
    """nan and inf are not settings: every float field of a config must be a finite number."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise CiteflowError(f"{section}.{f.name} must be a finite number, not {value!r}")
