"""DuckDB is the bench's yardstick (bench/duckdb_stages.py), never a pipeline dependency."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PIPELINE = ("citeflow", "jobs", "spark", "models", "evaluation", "dags")


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
            "import_module",
            "__import__",
        ):
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            found |= {name.split(".")[0] for name in names}
    return found


def test_no_pipeline_module_imports_duckdb():
    files = [f for package in PIPELINE for f in sorted((REPO / package).rglob("*.py"))]
    assert len(files) > 50  # the packages were found
    assert [str(f.relative_to(REPO)) for f in files if "duckdb" in imported_modules(f)] == []


def test_the_check_sees_an_import_of_duckdb(tmp_path):
    for source in ("import duckdb\n", "from duckdb import connect\n", "importlib.import_module('duckdb')\n"):
        (tmp_path / "m.py").write_text(source)
        assert "duckdb" in imported_modules(tmp_path / "m.py")
    assert "duckdb" in imported_modules(REPO / "bench" / "duckdb_stages.py")
