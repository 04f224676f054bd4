"""synthcorpus imports only the standard library, numpy, pyarrow and citeflow's core leaves (errors, text, diffs),
and its own modules only downwards: nothing from jobs/, spark/, models/, evaluation/ or the orchestration."""

import ast
import sys
from pathlib import Path

import pytest

SYNTH = Path(__file__).resolve().parents[3] / "synthcorpus"
ALLOWED_CORE = {"citeflow.errors", "citeflow.text", "citeflow.diffs"}
# Bottom-up order of synthcorpus/__init__.py: a module may import only modules listed before it.
ORDER = [
    "config",
    "lexicon",
    "venues",
    "arrays",
    "stats",
    "calibration",
    "vocabulary",
    "papers",
    "citations",
    "edge_dirt",
    "world",
    "serialise",
    "scidocs_ids",
    "scidocs",
    "recomm",
    "measure",
    "outputs",
    "generate",
    "derive_census",
    "derive_diffs",
    "derive_plan",
    "derive_rewrite",
    "derive",
]


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_every_module_is_in_the_order():
    assert sorted(p.stem for p in SYNTH.glob("*.py") if p.stem != "__init__") == sorted(ORDER)


@pytest.mark.parametrize("module", ORDER)
def test_imports_only_allowed_modules(module):
    earlier = {f"citeflow.synthcorpus.{m}" for m in ORDER[: ORDER.index(module)]}
    bad = []
    for name in imported(SYNTH / f"{module}.py"):
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top in ("numpy", "pyarrow", "__future__"):
            continue
        if name in ALLOWED_CORE or name in earlier:
            continue
        bad.append(name)
    assert bad == []
