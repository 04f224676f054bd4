"""Spark Connect has DataFrames only: no stage code may reach for an RDD or the SparkContext."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CONNECT_LESS = {"rdd", "sparkContext", "SparkContext", "_jsc", "_jvm", "_jdf", "_sc"}


def classic_only_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in CONNECT_LESS}
    found |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in CONNECT_LESS}
    found |= {
        a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names if a.name in CONNECT_LESS
    }
    return found


def test_spark_stage_code_uses_the_dataframe_api_only():
    # engine/class_archive.py and engine/driver.py are the local driver's JVM start alone (no Spark Connect session
    # reaches it)
    local_only = {REPO / "spark" / "engine" / name for name in ("class_archive.py", "driver.py")}
    spark = [f for f in sorted((REPO / "spark").rglob("*.py")) if f not in local_only]
    files = spark + sorted((REPO / "jobs").rglob("*.py"))
    leakage = REPO / "jobs" / "filter_leakage"
    assert REPO / "jobs" / "build_graph_diff.py" in files and leakage / "paper_ids_diff.py" in files
    assert leakage / "transforms.py" in files
    engine = REPO / "spark" / "engine"
    assert engine / "session.py" in files and engine / "connect_server.py" in files
    assert {str(f.relative_to(REPO)): classic_only_names(f) for f in files if classic_only_names(f)} == {}


def test_the_check_sees_rdd_and_spark_context(tmp_path):
    (tmp_path / "m.py").write_text(
        "df.rdd.map(f)\nspark.sparkContext.setLogLevel('ERROR')\nfrom pyspark import SparkContext\n"
    )
    assert classic_only_names(tmp_path / "m.py") == {"rdd", "sparkContext", "SparkContext"}
