"""Inputs stay where the user pointed: no file under an input folder may resolve outside it.

A corpus, SciDocs, paper-ids, diffs, benchmark or model folder is read as a whole, so a link inside it that
resolves elsewhere (`metadata_1.jsonl -> /etc/passwd`) would bring that file into the run, and into a committed
table (`rejected.raw`) that anyone who can open the artifacts reads. `check_input_folders` refuses such a link
in one line before any work, unless `inputs.allow_outside` says the user means it. A folder that is itself a
link is followed: the user named it. Where Airflow runs citeflow, `check_under_roots` also keeps every input
under the folders an administrator allowed (the `citeflow_input_roots` Variable), so a trigger form cannot be
used to read arbitrary files into an artifact.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from citeflow.errors import CiteflowError


def _local(path: str) -> bool:
    """A path on this machine's filesystem (not an object-store or HDFS URI, whose stores have no links)."""
    return bool(path) and ("://" not in path or path.startswith("file://"))


def _plain(path: str) -> str:
    return path.removeprefix("file://")


def _inside(resolved: str, root: str) -> bool:
    return resolved == root or resolved.startswith(root.rstrip(os.sep) + os.sep)


# Entries walked under one input folder before the run stops: real inputs hold hundreds (S2ORC's 100 shards, an
# S2AG release's datasets and diffs); far more means the folder named is not an input folder (`--scidocs ~`).
MAX_ENTRIES = 200_000


def links_outside(folder: str, what: str = "input") -> Iterator[tuple[str, str]]:
    """(path, where it resolves) of every entry under `folder` that resolves outside it, links to folders
    included (they are not walked into)."""
    root = os.path.realpath(folder)
    if not os.path.isdir(root):
        return
    seen = 0
    for parent, dirs, files in os.walk(root, onerror=None):
        seen += len(dirs) + len(files)
        if seen > MAX_ENTRIES:
            raise CiteflowError(
                f"the {what} folder {folder} holds more than {MAX_ENTRIES:,} files and folders: name the {what} "
                "folder itself, not a folder above it"
            )
        for name in [*dirs, *files]:
            path = os.path.join(parent, name)
            if os.path.islink(path):
                resolved = os.path.realpath(path)
                if not _inside(resolved, root):
                    yield path, resolved


def input_folders(config) -> list[tuple[str, str]]:
    """(what, path) of every local input of a run: corpus, SciDocs, paper-ids, diffs, benchmark and model
    folders, and the papers to embed."""
    from citeflow.diffs import release_diffs

    items = [("corpus", config.corpus), ("SciDocs", config.scidocs), ("paper-ids", config.paper_ids)]
    diffs = release_diffs(config.build_graph.diffs, config.corpus, "build_graph.diffs")
    items.append(("diffs", str(diffs) if diffs else ""))
    items += [("SciRepEval", p) for p in (*config.filter_leakage.scirepeval, *config.benchmark.scirepeval)]
    items += [("BEIR", p) for p in config.filter_leakage.beir]
    items += [("benchmark id list", p) for p in config.filter_leakage.extra_ids]
    items.append(("papers to embed", config.embed_papers.papers))
    if config.train_encoder.model != "small":
        items.append(("model", config.train_encoder.model))
    return [(what, _plain(path)) for what, path in items if _local(path)]


def check_input_folders(config) -> None:
    """One line for the first file under an input folder that resolves outside it (unless
    `inputs.allow_outside`)."""
    if config.inputs.allow_outside:
        return
    for what, path in input_folders(config):
        for link, resolved in links_outside(path, what):
            raise CiteflowError(
                f"{what} file {link} is a link to {resolved}, outside the {what} folder {path}: copy the file "
                "into the folder, or set inputs.allow_outside=true if the link is meant"
            )


def parse_roots(text: str | None) -> list[str]:
    """The allowed input roots of a setting's text: paths separated by commas, colons or line breaks."""
    if not text:
        return []
    parts = text.replace("\n", ",").replace(os.pathsep, ",").split(",")
    return [os.path.realpath(os.path.expanduser(p.strip())) for p in parts if p.strip()]


def check_under_roots(paths: Iterable[tuple[str, str]], roots: list[str], setting: str) -> None:
    """One line for the first input (resolved) that lies under none of `roots`; `setting` names where the
    roots come from, for the fix."""
    for what, path in paths:
        resolved = os.path.realpath(path)
        if not any(_inside(resolved, root) for root in roots):
            allowed = ", ".join(roots) or "none"
            raise CiteflowError(
                f"{what} folder {path} is outside the input folders this Airflow allows ({allowed}): move it "
                f"under one of them, or add its folder to {setting}"
            )
