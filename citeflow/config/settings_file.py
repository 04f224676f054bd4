"""Settings files: `--set` overrides kept in a file only their owner can read, so that secrets (an object
store's key in `spark.conf`, a Spark Connect token in `spark.remote`) are never typed on a command line.

    # ~/.config/citeflow/secrets.settings, mode 0600
    spark.conf=spark.hadoop.fs.s3a.access.key=AKIA...,spark.hadoop.fs.s3a.secret.key=...

One `STAGE.KEY=VALUE` per line, exactly as `--set` takes it (the value is the rest of the line, spaces around
it dropped); blank lines and lines starting with `#` are skipped. A file that its group or others may read or
write, or that belongs to another user, is refused with one line, as ssh refuses such a private key. The
file named by the environment variable `CITEFLOW_SETTINGS` applies first, then each `--settings FILE`, then
`--set`; a later value of a key replaces an earlier one (all of `spark.conf`: keep its entries on one line).
Errors never quote a line: it may hold a secret.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence

from citeflow.errors import CiteflowError

SETTINGS_ENV = "CITEFLOW_SETTINGS"


def read_settings_file(path: str) -> list[str]:
    """The overrides in the settings file at `path`, in order; a one-line `CiteflowError` when it is missing,
    not a regular file, not this user's, open to group or others, not UTF-8 text, or has a line that is not
    `STAGE.KEY=VALUE`."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not hang the run
    except FileNotFoundError:
        raise CiteflowError(f"settings file {path} does not exist") from None
    except OSError as exc:
        raise CiteflowError(f"settings file {path} cannot be read: {exc.strerror}") from None
    info = os.fstat(fd)  # the file opened, not whatever the name points at by now
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise CiteflowError(f"settings file {path} is not a regular file")
    with os.fdopen(fd, "rb") as fh:
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise CiteflowError(
                f"settings file {path} belongs to user id {info.st_uid}, not to this user: it may hold secrets, so "
                "only a file of your own is read"
            )
        if info.st_mode & 0o077:
            mode = stat.S_IMODE(info.st_mode)
            raise CiteflowError(
                f"settings file {path} is open to group or others (mode {mode:04o}); it may hold secrets, so it is "
                f"read only when no one else can read it: chmod 600 {path}"
            )
        data = fh.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CiteflowError(f"settings file {path} is not UTF-8 text (byte {exc.start})") from None
    overrides = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key = line.split("=", 1)[0].strip()
        if "=" not in line or not key or " " in key:
            raise CiteflowError(f"settings file {path} line {number} is not STAGE.KEY=VALUE")
        overrides.append(line)
    return overrides


def settings_overrides(files: Sequence[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The overrides of the file named by `CITEFLOW_SETTINGS` (when set), then of each of `files`."""
    environ = os.environ if environ is None else environ
    named = [environ[SETTINGS_ENV]] if environ.get(SETTINGS_ENV) else []
    return [item for path in [*named, *files] for item in read_settings_file(path)]
