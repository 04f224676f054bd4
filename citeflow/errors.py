"""User-facing errors.

A `CiteflowError` is a mistake the user can fix (bad id, missing path, wrong
format, missing Java). The CLI prints its message and exits with status 2 and
no traceback; anything else is a bug and keeps its traceback, except the
failures the machine's state causes (`environment_cause`: a full disk, a
read-only or unwritable folder), which are the user's to fix too.
"""

from __future__ import annotations

import errno


class CiteflowError(Exception):
    """An error caused by input or configuration, reported without a traceback."""


# errno -> (what happened, how to fix it)
ENVIRONMENT_CAUSES = {
    errno.ENOSPC: ("no space left on the device", "free space there or give an --artifacts folder on another disk"),
    errno.EDQUOT: ("the disk quota is exceeded", "free space there or give an --artifacts folder on another disk"),
    errno.EROFS: ("the filesystem is read-only", "give a writable --artifacts folder"),
    errno.EACCES: ("permission denied", "change its permissions or give another folder"),
    errno.EPERM: ("permission denied", "change its permissions or give another folder"),
}
# How Java (Hadoop's and the JDK's file systems, through Spark) words the same causes.
JAVA_MESSAGES = {
    "No space left on device": errno.ENOSPC,
    "Disk quota exceeded": errno.EDQUOT,
    "Read-only file system": errno.EROFS,
    "Permission denied": errno.EACCES,
}


def _chain(exc: BaseException | None):
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def environment_cause(exc: BaseException, where: str | None = None) -> str | None:
    """One line for a failure the machine's state caused, from an `OSError` anywhere in `exc`'s chain (its file
    named) or the text of a Java exception that Spark raised (`where`, the folder being written, named); None
    for any other failure."""
    for item in _chain(exc):
        if isinstance(item, OSError) and item.errno in ENVIRONMENT_CAUSES:
            what, fix = ENVIRONMENT_CAUSES[item.errno]
            place = item.filename or where
            return f"{what} ({place}): {fix}" if place else f"{what}: {fix}"
    text = " ".join(str(item) for item in _chain(exc))
    for message, code in JAVA_MESSAGES.items():
        if message in text:
            what, fix = ENVIRONMENT_CAUSES[code]
            return f"{what} ({where}): {fix}" if where else f"{what}: {fix}"
    return None
