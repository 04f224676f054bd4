"""Every committed table reads whole with the readers users bring (pyarrow, pandas, DuckDB), and no training
table holds a benchmark paper, checked against the generator's own truth rather than citeflow's mapping.

The whole pipeline with both triplet strategies is `airflow_rebuild`'s run (tests/e2e/conftest.py); builds from
a release diff are read the same way in tests/e2e/test_incremental.py.
"""

import pytest

from tests.support.readers import assert_tables_read_whole, training_ids, truth_benchmark_ids

pytestmark = pytest.mark.slow


def test_every_table_of_a_full_rebuild_reads_whole_with_any_reader(airflow_rebuild):
    read = assert_tables_read_whole(airflow_rebuild.artifacts)
    # 5 + 7 + 3 tables of the graph stages, then 3 + 1 + 1 + 1 per strategy (mine, train, embed, benchmark;
    # the benchmark embeds the base model inside its task)
    assert read >= 15 + 2 * 6, read


def test_no_training_table_holds_a_benchmark_paper(airflow_rebuild, generated_s2orc):
    snap, _ = generated_s2orc
    benchmark = truth_benchmark_ids(snap)
    assert len(benchmark) > 800  # the generated SciDocs set: every mappable id of 904
    found = training_ids(airflow_rebuild.artifacts)
    kinds = {key.split("/")[0] + "/" + key.split("/")[-1] for key in found}
    assert kinds >= {
        "filter_leakage/papers",
        "filter_leakage/citations",
        "embed_graph/paper_embeddings",
        "mine_triplets/triplets",
        "mine_triplets/training_texts",
    }, kinds
    assert any(key.endswith(".json") for key in found), sorted(found)  # PBG's entity files were read too
    for key, ids in found.items():
        assert ids, key
        assert not ids & benchmark, (key, sorted(ids & benchmark)[:5])
