"""Finding the processes a test started, whatever they started in turn: each run is tagged through an
environment variable its children inherit, and /proc is searched for it (zombies left out)."""

from __future__ import annotations

import os

TAG_ENV = "CITEFLOW_TEST_TAG"


def tagged(tag: str) -> list[tuple[int, list[str]]]:
    """(pid, command line) of every live process carrying `TAG_ENV=tag` in its environment."""
    needle = f"{TAG_ENV}={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                found.append((int(entry), fh.read().decode(errors="replace").split("\0")))
        except OSError:
            continue
    return found


def describe(found: list[tuple[int, list[str]]]) -> list[str]:
    """For an assertion message: each process's pid, state, parent, group, session and command line."""
    lines = []
    for pid, cmd in found:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            where = f"state {fields[0]} ppid {fields[1]} pgid {fields[2]} sid {fields[3]}"
        except OSError:
            where = "gone"
        lines.append(f"{pid} ({where}): {' '.join(cmd)[:300]}")
    return lines
