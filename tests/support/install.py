"""The development install as the tests meet it: the folders setup.py installs under `citeflow`, and the package
files that the strict editable install (`make install`: a tree of links under build/) has no link for yet."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def installed_folders() -> tuple[str, ...]:
    """The folders setup.py installs as `citeflow.<folder>`: its `FOLDERS`, read from its source (running it
    would build)."""
    for node in ast.parse((REPO / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "FOLDERS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError("setup.py states no FOLDERS")


def unlinked_files() -> list[str]:
    """This checkout's package files that the link tree the installed packages are imported from lacks: added
    since the last `make install` (which every make target runs first). Empty for any other kind of install."""
    import citeflow.jobs

    tree = Path(str(citeflow.jobs.__file__)).parents[1]  # the `citeflow` folder citeflow.jobs was found in
    if not (tree / "jobs" / "__init__.py").is_symlink():
        return []
    missing = []
    for folder in ("citeflow", *installed_folders()):
        source = REPO / folder
        linked = tree if folder == "citeflow" else tree / folder
        missing += [
            str(path.relative_to(REPO))
            for path in sorted(source.rglob("*.py"))
            if not (linked / path.relative_to(source)).exists()
        ]
    return missing
