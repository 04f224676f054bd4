"""The folder an export writes (`citeflow export-model`, `citeflow export-dataset`): its own bytes, and a user's
files never touched.

    with ExportFolder(out, overwrite=args.overwrite) as folder:
        folder.copy(committed_file, "papers/papers-00000-of-00001.parquet")
        folder.write_text("README.md", card)
    # on leaving the block without an error: staged, then renamed into place at `out`

- **Own bytes.** Files are copied (a reflink where the filesystem can, which shares no mutable bytes either),
  never hard-linked: editing an export cannot change a committed version.
- **A narrow `--overwrite`.** `out` must be absent or empty, or, with `overwrite`, a folder a citeflow export
  wrote: its `MARKER` lists every file it wrote, and the folder holds nothing else. Any other folder is refused
  in one line, before any work; so is an `out` that is a file.
- **No half folder.** The export is staged in a fresh hidden folder beside `out` (made by `tempfile.mkdtemp`, so
  it is never a folder of the user's) and renamed into place; the staging folder is removed on every exit path.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import tempfile
from pathlib import Path

from citeflow.errors import CiteflowError

# written into every export: what wrote it and each file it wrote
MARKER = ".citeflow-export.json"
# Linux's FICLONE ioctl: the target file shares the source's blocks copy-on-write (btrfs, XFS, ...)
_FICLONE = 0x40049409


class ExportFolder:
    """An export being written to `out` (see the module's docstring)."""

    def __init__(self, out: str, *, overwrite: bool, kind: str) -> None:
        self.out, self.kind = out, kind
        self.target = Path(out).expanduser().resolve()
        self.replaces = check_target(out, self.target, overwrite)
        self.staging: Path | None = None

    def __enter__(self) -> ExportFolder:
        parent = self.target.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            self.staging = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.citeflow-", dir=parent))
        except OSError as exc:
            raise CiteflowError(f"cannot write an export beside {self.out!r}: {exc.strerror or exc}") from None
        return self

    def __exit__(self, kind, value, traceback) -> None:
        assert self.staging is not None
        try:
            if kind is None:
                self._commit()
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)

    def path(self, relative: str) -> Path:
        """Where `relative` is staged (its folder made)."""
        assert self.staging is not None
        inside = (self.staging / relative).resolve()
        if self.staging.resolve() not in inside.parents:
            raise CiteflowError(f"export file {relative!r} would leave the export folder")
        inside.parent.mkdir(parents=True, exist_ok=True)
        return inside

    def copy(self, source: str | Path, relative: str) -> None:
        """`source`'s bytes as the export's file `relative`: a reflink where the filesystem can, else a copy."""
        copy_bytes(Path(source), self.path(relative))

    def copy_tree(self, source: str | Path) -> None:
        """Every file under the folder `source`, at the same relative paths."""
        source = Path(source)
        for file in sorted(p for p in source.rglob("*") if p.is_file()):
            self.copy(file, file.relative_to(source).as_posix())

    def write_text(self, relative: str, text: str) -> None:
        self.path(relative).write_text(text, encoding="utf-8")

    def _commit(self) -> None:
        assert self.staging is not None
        files = sorted(set(_files_under(self.staging)) - {MARKER})  # every file staged is one the export wrote
        (self.staging / MARKER).write_text(
            json.dumps({"written_by": f"citeflow {self.kind}", "files": files}, indent=1) + "\n", encoding="utf-8"
        )
        aside = None
        if self.target.exists():
            # checked again: the folder may have changed since the export began
            check_target(self.out, self.target, overwrite=self.replaces)
            aside = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.citeflow-old-", dir=self.target.parent))
            os.replace(self.target, aside / "export")
        try:
            os.replace(self.staging, self.target)
        except OSError:
            if aside is not None:
                os.replace(aside / "export", self.target)
            raise
        finally:
            if aside is not None:
                shutil.rmtree(aside, ignore_errors=True)


def check_target(out: str, target: Path, overwrite: bool) -> bool:
    """Whether writing to `target` replaces a previous export (True) or fills an absent or empty folder
    (False); one line for a file, a non-empty folder without `overwrite`, or one citeflow did not write."""
    if not target.exists():
        return False
    if not target.is_dir():
        raise CiteflowError(f"--out {out!r} is a file: give a folder that is absent or empty")
    present = sorted(_files_under(target, folders=True))
    if not present:
        return False
    if not overwrite:
        raise CiteflowError(f"--out {out!r} is not empty: choose another folder, or --overwrite a previous export")
    marker = target / MARKER
    try:
        listed = set(json.loads(marker.read_text(encoding="utf-8"))["files"])
    except (OSError, ValueError, KeyError, TypeError):
        raise CiteflowError(
            f"--out {out!r} was not written by a citeflow export (no {MARKER}): --overwrite replaces only a "
            "previous export; choose another folder"
        ) from None
    foreign = [p for p in present if p != MARKER and p not in listed and not any(f.startswith(p + "/") for f in listed)]
    if foreign:
        raise CiteflowError(
            f"--out {out!r} holds {len(foreign)} file(s) the export did not write (e.g. {foreign[0]!r}): "
            "--overwrite would delete them; move them or choose another folder"
        )
    return True


def _files_under(root: Path, folders: bool = False) -> list[str]:
    """Relative paths of the files (and, with `folders`, the folders) under `root`; links are not followed."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath).relative_to(root)
        names = filenames + (dirnames if folders else [])
        found += [(here / name).as_posix() for name in names]
    return found


def copy_bytes(source: Path, target: Path) -> None:
    """`target` becomes a file of its own with `source`'s bytes: a reflink (FICLONE) where the filesystem
    shares blocks copy-on-write, else a plain copy. Never a hard link."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        with contextlib.suppress(OSError):
            fcntl.ioctl(dst.fileno(), _FICLONE, src.fileno())
            return
        try:
            shutil.copyfileobj(src, dst, 1 << 20)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise CiteflowError(f"no space left for the export at {target.parent}") from None
            raise
