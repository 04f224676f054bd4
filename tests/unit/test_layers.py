"""Layers import one way: dags -> cockpit -> jobs -> spark, models, evaluation, synthcorpus -> citeflow (the core).

The folders jobs/, spark/, models/, evaluation/, cockpit/ and synthcorpus/ are installed as `citeflow.<folder>`
(setup.py), so an import of `citeflow.jobs.pipeline` is an import of the jobs layer, and `citeflow.config` one of
the core.

Every `import` in the project's packages, also the ones inside functions, is read with `ast` and its target
placed in a layer; a module may import its own package and the layers below it, never one above it nor a
sibling of the same layer (spark, models and evaluation share what they need through the core).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support.install import REPO, installed_folders

LAYER = {
    "dags": 4,
    "cockpit": 3,
    "jobs": 2,
    "spark": 1,
    "models": 1,
    "evaluation": 1,
    "synthcorpus": 1,
    "citeflow": 0,
}


FOLDERS = installed_folders()


def test_every_package_folder_of_the_repository_is_installed_and_placed_in_a_layer():
    """A new package folder at the top of the repository is either installed under citeflow (setup.py's
    FOLDERS) or one of the folders that are not installed; and every installed one has a layer."""
    packages = {p.parent.name for p in REPO.glob("*/__init__.py")}
    assert packages - set(FOLDERS) <= {"citeflow", "tests", "dags", "bench"}  # the core is citeflow itself
    assert set(FOLDERS) <= packages and set(FOLDERS) <= set(LAYER)


def layer_of(module: str) -> str | None:
    """The layer (a key of LAYER) of a dotted module name, None outside the project."""
    parts = module.split(".")
    if parts[0] == "citeflow":
        return parts[1] if len(parts) > 1 and parts[1] in FOLDERS else "citeflow"
    return parts[0] if parts[0] in LAYER else None


def module_name(path: Path, root: Path) -> str:
    """The dotted name `path` (under `root`) is imported by: `citeflow.jobs.pipeline` for jobs/pipeline.py."""
    parts = path.relative_to(root).with_suffix("").parts
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return ".".join(("citeflow", *parts) if parts[0] in FOLDERS else parts)


def imported_packages(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, layer) of every import in `path` that names one of the project's packages."""
    package = path.relative_to(root).parts[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            layers = [layer_of(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            layers = [package] if node.level else [layer_of(node.module or "")]
        else:
            continue
        found += [(node.lineno, layer) for layer in layers if layer is not None]
    return found


def test_no_module_imports_a_folder_by_its_bare_name():
    """`import jobs` / `from models...` would find the folder only from the repository's root: the installed
    names are citeflow.<folder>, and a user's own `models/` must never shadow them."""
    bare = []
    for package in LAYER:
        for path in sorted((REPO / package).rglob("*.py")):
            bare += [f"{path.relative_to(REPO)}:{line}" for line, name in bare_imports(path) if name in FOLDERS]
    for path in sorted((REPO / "tests").rglob("*.py")) + sorted((REPO / "bench").rglob("*.py")):
        bare += [f"{path.relative_to(REPO)}:{line}" for line, name in bare_imports(path) if name in FOLDERS]
    assert bare == []


def bare_imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def violations(root: Path = REPO) -> list[str]:
    problems = []
    for package, layer in LAYER.items():
        for path in sorted((root / package).rglob("*.py")):
            for line, target in imported_packages(path, root):
                if target == package:
                    continue
                if LAYER[target] >= layer:
                    where = "above" if LAYER[target] > layer else "beside"
                    problems.append(f"{path.relative_to(root)}:{line} imports {target} ({where} {package})")
    return problems


def test_no_import_runs_upward_or_sideways():
    assert violations() == []


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        (
            "citeflow/bad.py",
            "def f():\n    from citeflow.jobs import pipeline\n",
            "citeflow/bad.py:2 imports jobs (above citeflow)",
        ),
        (
            "spark/bad.py",
            "from citeflow.evaluation.metrics import x\n",
            "spark/bad.py:1 imports evaluation (beside spark)",
        ),
        ("jobs/bad.py", "import citeflow.cockpit.orchestration\n", "jobs/bad.py:1 imports cockpit (above jobs)"),
    ],
)
def test_an_upward_import_is_found(tmp_path, module, source, expected):
    for package in LAYER:
        (tmp_path / package).mkdir()
    (tmp_path / module).write_text(source)
    (tmp_path / "dags" / "ok.py").write_text(
        "from citeflow.cockpit import orchestration\nfrom citeflow import config\n"
    )

    assert violations(tmp_path) == [expected]


# the last of a listing, or the folder above a version (where the unversioned snapshot report used to be)
BY_AGE = re.compile(r"versions\[-1\]|dirname\(os\.path\.dirname\(manifest")


def test_nothing_reads_the_newest_version():
    """Versions are named by content, never chosen by age: only export-model, export-dataset and the drift
    report (which refuse to choose between several), the Artifacts tab's drift section (every drift report whose
    later side is the benchmark version shown, by lineage), build_graph's diff finder, the encoder's warm start (which
    matches by strategy, base model and lineage and refuses to choose between several) and
    embed_graph's warm start (which match by settings and lineage and refuse to choose between several),
    filter_leakage's carried paper keys (which match by lineage: every version on one graph holds the same
    keys, and a carried table must hold one row per paper), its paper-ids diff (which matches by the lines'
    source and refuses to choose between several) and the store itself (its listing for `citeflow
    artifacts` and `verify`) list versions, and nothing indexes a listing from its end or walks up from a
    version folder to a file outside versions."""
    listing, by_age = set(), []
    for package in LAYER:
        for path in sorted((REPO / package).rglob("*.py")):
            text = path.read_text()
            name = str(path.relative_to(REPO))
            if "list_versions(" in text:
                listing.add(name)
            by_age += [f"{name}: {m.group(0)}" for m in re.finditer(BY_AGE, text)]
    assert listing == {
        "citeflow/artifacts.py",
        "cockpit/artifact_view.py",
        "jobs/build_graph.py",
        "jobs/cli/export_dataset.py",
        "jobs/drift.py",
        "jobs/cli/export_model.py",
        "jobs/filter_leakage/paper_keys.py",
        "jobs/filter_leakage/paper_ids_diff.py",
        "models/training/warm.py",
        "models/pbg/warm.py",
    }
    assert by_age == []


def stage_order_written(root: Path = REPO) -> list[str]:
    """Where, outside `citeflow/registry.py`, two or more stage names are written side by side (a tuple, list or
    set of them, or `a >> b` between tasks named after stages), or a stage is called by name (`<stage>.run(`,
    `<stage>.run_on(`): the stage order and edges are the registry's alone."""
    from citeflow.registry import STAGES

    found = []
    for package in LAYER:
        for path in sorted((root / package).rglob("*.py")):
            name = str(path.relative_to(root))
            if name == "citeflow/registry.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                    names = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in STAGES]
                    if len(names) >= 2:
                        found.append(f"{name}:{node.lineno} lists stages {', '.join(names)}")
                elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.RShift):
                    sides = [ast.unparse(side) for side in (node.left, node.right)]
                    if all(any(stage in side for stage in STAGES) for side in sides):
                        found.append(f"{name}:{node.lineno} chains {sides[0]} >> {sides[1]}")
                elif (
                    isinstance(node, ast.Attribute)
                    and node.attr in ("run", "run_on")
                    and isinstance(node.value, ast.Name)
                    and node.value.id in STAGES
                ):
                    found.append(f"{name}:{node.lineno} calls {node.value.id}.{node.attr}")
    return found


def test_the_registry_is_the_only_place_the_stage_order_is_written():
    assert stage_order_written() == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('ORDER = ("build_graph", "filter_leakage")\n', "jobs/bad.py:1 lists stages build_graph, filter_leakage"),
        ("def f(c):\n    return build_graph.run(c)\n", "jobs/bad.py:2 calls build_graph.run"),
        ("def f(a, b):\n    build_graph(a) >> filter_leakage(b)\n", "jobs/bad.py:2 chains build_graph(a) >> "),
    ],
)
def test_a_stage_order_written_twice_is_found(tmp_path, source, expected):
    for package in LAYER:
        (tmp_path / package).mkdir()
    (tmp_path / "jobs" / "bad.py").write_text(source)

    (found,) = stage_order_written(tmp_path)
    assert found.startswith(expected)


def strategy_branches(root: Path = REPO) -> list[str]:
    """Where a value is compared with a strategy's name (`x == "scincl"`, `x in ("specter", ...)`): a stage picks
    its strategy's code by name from the registry's table (jobs/triplet_strategies.py `STRATEGY_MINERS`)."""
    from citeflow.registry import STRATEGIES

    found = []
    for package in LAYER:
        for path in sorted((root / package).rglob("*.py")):
            name = str(path.relative_to(root))
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if not isinstance(node, ast.Compare):
                    continue
                for side in (node.left, *node.comparators):
                    values = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                    names = [v.value for v in values if isinstance(v, ast.Constant) and v.value in STRATEGIES]
                    if names:
                        found.append(f"{name}:{node.lineno} compares with {', '.join(names)}")
    return found


def test_no_code_branches_on_a_strategy_name():
    assert strategy_branches() == []


def test_a_branch_on_a_strategy_name_is_found(tmp_path):
    for package in LAYER:
        (tmp_path / package).mkdir()
    (tmp_path / "jobs" / "bad.py").write_text('def f(cfg):\n    return cfg.strategy == "specter"\n')

    assert strategy_branches(tmp_path) == ["jobs/bad.py:2 compares with specter"]


def import_circles(root: Path = REPO) -> list[list[str]]:
    """The circles among the project's modules, every import counted (also those inside functions): each a
    list of modules that import one another round, directly or through others."""
    modules = {}
    for package in LAYER:
        for path in sorted((root / package).rglob("*.py")):
            modules[module_name(path, root)] = path
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            edges[name] |= {t for t in targets if t in modules and t != name}
    # Tarjan's strongly connected components, iteratively
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                work.append((child, iter(sorted(edges[child]))))
            elif child in stack:
                low[node] = min(low[node], index[child])
    return circles


def test_no_import_circle():
    assert import_circles() == []


def test_an_import_circle_is_found(tmp_path):
    for package in LAYER:
        (tmp_path / package).mkdir()
    (tmp_path / "jobs" / "a.py").write_text("def f():\n    from citeflow.jobs import b\n")
    (tmp_path / "jobs" / "b.py").write_text("from citeflow.jobs.c import x\n")
    (tmp_path / "jobs" / "c.py").write_text("from . import a\n")

    assert import_circles(tmp_path) == [["citeflow.jobs.a", "citeflow.jobs.b", "citeflow.jobs.c"]]
