"""mine_triplets end to end: both strategies on a generated snapshot whose paper topics are known."""

import json
import os

import numpy as np
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from citeflow.config import RunConfig, apply_overrides, profile_overrides
from citeflow.jobs import mine_triplets
from citeflow.jobs.filter_leakage.audit import LeakageError
from citeflow.jobs.pipeline import with_strategy
from citeflow.tables import read_table
from tests.conftest import TEST_SPARK_OVERRIDES

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mined(generated_topics, topics_config, spark):
    """Both strategies on the 20k-paper snapshot (whole graph, see topics_config)."""
    snap, _ = generated_topics
    return (
        snap,
        topics_config,
        mine_triplets.run(topics_config),
        mine_triplets.run(with_strategy(topics_config, "specter")),
    )


@pytest.fixture(scope="module")
def excluded(generated_s2orc, tmp_path_factory, spark):
    """SciNCL triplets on the small snapshot with its benchmark papers excluded (the default mode)."""
    snap, _ = generated_s2orc
    base = RunConfig(
        snapshot="mine",
        corpus=str(snap / "corpus"),
        scidocs=str(snap / "scidocs"),
        paper_ids=str(snap / "paper-ids"),
        artifacts=str(tmp_path_factory.mktemp("mine")),
    )
    cfg = apply_overrides(base, [*TEST_SPARK_OVERRIDES, *profile_overrides("demo"), "mine_triplets.num_queries=500"])
    return cfg, mine_triplets.run(cfg), mine_triplets.run(with_strategy(cfg, "specter"))


def communities(snap):
    topics = pq.read_table(snap / "paper_topics.parquet")
    ids, community = topics["corpus_id"].to_numpy(), topics["community"].to_numpy()
    order = np.argsort(ids)
    return ids[order], community[order]


def topic_of(ids_sorted, community, ids):
    at = np.searchsorted(ids_sorted, ids)
    assert (ids_sorted[at] == ids).all()
    return community[at]


def expected_queries(m) -> int:
    """4,000 (the demo profile), or every possible query when there are fewer: on the calibrated snapshot
    only ~16% of papers cite, so SPECTER (whose queries must cite a pool paper) finds fewer than 4,000."""
    limited = [w for w in m.metrics["warnings"] if w.startswith("num_queries 4,000 > ")]
    return int(limited[0].split(" > ")[1].split()[0].replace(",", "")) if limited else 4000


def test_tables_agree_with_the_manifest(mined):
    _, _, scincl, specter = mined
    for m in (scincl, specter):
        t = pq.read_table(m.table_path("triplets"))
        assert t.column_names == [
            "query_id",
            "positive_id",
            "negative_id",
            "negative_kind",
            "strategy",
            "positive_rank",
            "negative_rank",
        ]
        queries = pc.count_distinct(t["query_id"]).as_py()
        assert (
            queries == m.metrics["queries"] == expected_queries(m)
            and t.num_rows == 5 * queries == m.metrics["triplets"]
        )
        kinds = dict(
            zip(*np.unique(t["negative_kind"].to_numpy(zero_copy_only=False), return_counts=True), strict=True)
        )
        assert kinds == {"hard": m.metrics["negatives"]["hard"], "easy": m.metrics["negatives"]["easy"]}
        assert set(t["strategy"].to_pylist()) == {m.metrics["strategy"]}
        # every paper of the triplets has its text, and only those
        used = np.unique(np.concatenate([t[c].to_numpy() for c in ("query_id", "positive_id", "negative_id")]))
        texts = pq.read_table(m.table_path("training_texts"))
        # in corpus-id order, whatever order Spark wrote the papers in (the WordPiece trainer reads them in order)
        assert np.array_equal(texts["corpus_id"].to_numpy(), used)
        has_text = pc.or_(
            pc.fill_null(pc.greater(pc.utf8_length(texts["title"]), 0), False),
            pc.fill_null(pc.greater(pc.utf8_length(texts["abstract"]), 0), False),
        )
        assert pc.all(has_text).as_py()
        # collisions recounted from the table: positives and negatives of a query never meet
        pos = set(zip(t["query_id"].to_pylist(), t["positive_id"].to_pylist(), strict=True))
        neg = set(zip(t["query_id"].to_pylist(), t["negative_id"].to_pylist(), strict=True))
        assert len(pos & neg) == m.metrics["collisions"] == 0
        assert not np.any(t["query_id"].to_numpy() == t["positive_id"].to_numpy())
        assert not np.any(t["query_id"].to_numpy() == t["negative_id"].to_numpy())
        hist = pq.read_table(m.table_path("rank_histogram")).to_pydict()
        assert set(hist["kind"]) == {"positive", "hard", "easy"}
        assert os.path.exists(f"{m.path}/rank_histogram.png")


def test_scincl_ranks_are_the_windows(mined):
    _, _, scincl, _ = mined
    t = pq.read_table(scincl.table_path("triplets")).to_pydict()
    windows = scincl.metrics["windows"]
    assert set(t["positive_rank"]) == set(range(windows["positive_ranks"][0], windows["positive_ranks"][1] + 1))
    hard = [r for r, k in zip(t["negative_rank"], t["negative_kind"], strict=True) if k == "hard"]
    assert set(hard) == set(range(windows["hard_ranks"][0], windows["hard_ranks"][1] + 1))
    assert all(r is None for r, k in zip(t["negative_rank"], t["negative_kind"], strict=True) if k == "easy")
    # the exact re-ranking of a sample puts them where the search did, and easy ones beyond k_max
    ranks = scincl.metrics["rank_summary"]
    assert windows["positive_ranks"][0] <= ranks["positive"]["min"] <= ranks["positive"]["max"] <= windows["k_pos"]
    assert ranks["easy"]["min"] > windows["k_max"]


def test_specter_follows_the_citations(mined):
    _, cfg, _, specter = mined
    t = pq.read_table(specter.table_path("triplets")).to_pydict()
    leak = next(i for i in specter.inputs if i["stage"] == "filter_leakage")
    cites = pq.read_table(leak["path"] + "/citations").to_pydict()
    cited = set(zip(cites["citing"], cites["cited"], strict=True))
    papers = read_table(
        pafs.LocalFileSystem(), leak["path"] + "/papers", ["corpus_id", "title", "abstract"]
    ).to_pydict()
    pool = {  # the whole pool (pool_size=0): papers with a title or an abstract
        c
        for c, t, a in zip(papers["corpus_id"], papers["title"], papers["abstract"], strict=True)
        if (t or "").strip() or (a or "").strip()
    }
    cited_by = {}
    for a, b in cited:
        if a in pool and b in pool:
            cited_by.setdefault(a, set()).add(b)
    assert all((q, p) in cited for q, p in zip(t["query_id"], t["positive_id"], strict=True))
    assert not any((q, n) in cited for q, n in zip(t["query_id"], t["negative_id"], strict=True))
    for q, n, kind in zip(t["query_id"], t["negative_id"], t["negative_kind"], strict=True):
        second = set().union(*(cited_by.get(p, set()) for p in cited_by[q]))
        # hard: cited by a paper the query cites (SPECTER's count 1); easy: not even that
        assert (n in second) == (kind == "hard"), (q, n, kind)
    assert specter.metrics["negatives"]["hard"] + specter.metrics["hard_negative_shortfall"] == 2 * len(
        set(t["query_id"])
    )
    assert specter.metrics["queries_without_citation_of_citation"] > 0


def test_scincl_positives_are_more_topical_than_citations_and_easy_negatives_are_random(mined):
    snap, _, scincl, specter = mined
    ids, community = communities(snap)
    shares = {}
    for m in (scincl, specter):
        t = pq.read_table(m.table_path("triplets"))
        q = topic_of(ids, community, t["query_id"].to_numpy())
        shares[m.metrics["strategy"], "positive"] = np.mean(q == topic_of(ids, community, t["positive_id"].to_numpy()))
        easy = pc.equal(t["negative_kind"], "easy").to_numpy(zero_copy_only=False)
        neg = topic_of(ids, community, t["negative_id"].to_numpy())
        shares[m.metrics["strategy"], "easy"] = np.mean(q[easy] == neg[easy])
    pool = topic_of(ids, community, pq.read_table(scincl.table_path("training_texts"))["corpus_id"].to_numpy())
    _, counts = np.unique(pool, return_counts=True)
    chance = float(np.sum((counts / counts.sum()) ** 2))
    # On the calibrated snapshot citations already stay mostly in the citing paper's niche (= subtopic at
    # 20k papers): graph neighbours still beat them, by less than on the easy generator of before.
    assert shares["scincl", "positive"] > shares["specter", "positive"] + 0.02, shares
    for strategy in ("scincl", "specter"):
        assert abs(shares[strategy, "easy"] - chance) < 0.02, (shares, chance)


def test_no_benchmark_paper_among_triplets_and_texts(excluded):
    _, scincl, specter = excluded
    for m in (scincl, specter):
        leak = next(i for i in m.inputs if i["stage"] == "filter_leakage")
        benchmark = set(pq.read_table(leak["path"] + "/benchmark_ids")["corpus_id"].drop_null().to_pylist())
        assert len(benchmark) > 100
        t = pq.read_table(m.table_path("triplets"))
        used = set(np.concatenate([t[c].to_numpy() for c in ("query_id", "positive_id", "negative_id")]).tolist())
        # the calibrated 3,000-paper snapshot without its benchmark papers: SPECTER's triplets use ~190 papers
        assert len(used) > 150 and not used & benchmark
        assert [a["benchmark_hits"] for a in m.metrics["leakage_audit"]] == [0, 0]
        assert m.metrics["leakage_mode"] == "exclude" and m.config["leakage_mode"] == "exclude"


def test_report_only_counts_the_benchmark_papers_it_lets_through(mined):
    _, _, scincl, _ = mined
    assert scincl.metrics["leakage_mode"] == "report_only"
    assert all(a["benchmark_hits"] > 0 and a["mode"] == "report_only" for a in scincl.metrics["leakage_audit"])


def test_a_leaked_paper_fails_the_stage_and_leaves_no_version(excluded, monkeypatch):
    import pyarrow as pa

    from citeflow.jobs.filter_leakage import audit

    cfg, scincl, specter = excluded
    some_pool_paper = pq.read_table(scincl.table_path("training_texts"))["corpus_id"][0].as_py()
    monkeypatch.setattr(audit, "benchmark_corpus_ids", lambda manifest: pa.array([some_pool_paper]))
    tampered = apply_overrides(cfg, ["mine_triplets.seed=99"])
    with pytest.raises(LeakageError, match="training triplets"):
        mine_triplets.run(tampered)
    store_root = f"{cfg.artifacts}/{cfg.snapshot}/mine_triplets"
    finished = [d for d in os.listdir(store_root) if os.path.exists(f"{store_root}/{d}/_manifest.json")]
    assert sorted(finished) == sorted([scincl.version, specter.version])


def test_rerun_is_skipped_and_batch_size_does_not_change_the_version(excluded):
    cfg, scincl, _ = excluded
    again = mine_triplets.run(apply_overrides(cfg, ["mine_triplets.batch_size=7"]))
    assert again.skipped and again.version == scincl.version


def test_batch_size_does_not_change_the_triplets(excluded, tmp_path):
    cfg, scincl, _ = excluded
    # a fresh root with the upstream versions linked in: only mine_triplets is rebuilt
    root = tmp_path / "artifacts"
    (root / cfg.snapshot).mkdir(parents=True)
    for stage in ("build_graph", "filter_leakage", "embed_graph"):
        os.symlink(f"{cfg.artifacts}/{cfg.snapshot}/{stage}", root / cfg.snapshot / stage)
    other = mine_triplets.run(apply_overrides(cfg, [f"artifacts={root}", "mine_triplets.batch_size=33"]))
    assert not other.skipped and other.version == scincl.version
    a = pq.read_table(scincl.table_path("triplets"))
    b = pq.read_table(other.table_path("triplets"))
    assert a.equals(b)
    assert json.loads(json.dumps(other.metrics["rank_summary"])) == scincl.metrics["rank_summary"]


REFERENCE_CODE_OPTIONS = [  # docs/parity-samplers.md: mine as the reference codes do
    "mine_triplets.easy_negatives_sampling=window",
    "mine_triplets.distinct_easy_negatives=false",
    "mine_triplets.specter_query_rule=parallel",
]


def test_scincl_window_negatives_are_another_version_of_the_same_windows_and_batch_free(excluded, tmp_path):
    cfg, scincl, _ = excluded
    window = mine_triplets.run(apply_overrides(cfg, REFERENCE_CODE_OPTIONS))
    assert not window.skipped and window.version != scincl.version
    assert window.metrics["easy_negatives_window"]["width"] == 6
    ours, default = (pq.read_table(m.table_path("triplets")).to_pydict() for m in (window, scincl))
    hard = [i for i, kind in enumerate(ours["negative_kind"]) if kind == "hard"]
    assert ours["positive_id"] == default["positive_id"] and ours["query_id"] == default["query_id"]
    assert [ours["negative_id"][i] for i in hard] == [default["negative_id"][i] for i in hard]
    queries = set(ours["query_id"])

    def never_easy(t):
        easy = {n for n, kind in zip(t["negative_id"], t["negative_kind"], strict=True) if kind == "easy"}
        assert easy <= queries  # SciNCL's list is made of the queries, in either mode
        return 1 - len(easy) / len(queries)

    # SciNCL's windows leave about a third of the queries out; uniform draws of 3 x 500 leave about e^-3
    assert never_easy(ours) > 0.2 > 0.1 > never_easy(default)
    root = tmp_path / "artifacts"
    (root / cfg.snapshot).mkdir(parents=True)
    for stage in ("build_graph", "filter_leakage", "embed_graph"):
        os.symlink(f"{cfg.artifacts}/{cfg.snapshot}/{stage}", root / cfg.snapshot / stage)
    other = mine_triplets.run(
        apply_overrides(cfg, [*REFERENCE_CODE_OPTIONS, f"artifacts={root}", "mine_triplets.batch_size=33"])
    )
    assert not other.skipped and other.version == window.version
    assert pq.read_table(window.table_path("triplets")).equals(pq.read_table(other.table_path("triplets")))


def test_specter_parallel_rule_leaves_out_the_queries_with_two_candidates(excluded):
    cfg, _, specter = excluded
    parallel = mine_triplets.run(with_strategy(apply_overrides(cfg, REFERENCE_CODE_OPTIONS), "specter"))
    assert parallel.version != specter.version and parallel.metrics["specter_query_rule"] == "parallel"
    # one citation with one citation of a citation is the only way to fewer than two hard negatives
    assert specter.metrics["hard_negative_shortfall"] > 0 and parallel.metrics["hard_negative_shortfall"] == 0
    assert parallel.metrics["queries_with_too_few_candidates"] > 0
    assert "queries_with_too_few_candidates" not in specter.metrics


def test_the_triplets_export_loads_every_table_whole_and_its_card_runs(excluded, tmp_path, monkeypatch):
    """`citeflow export-dataset` of mine_triplets: `training_texts`, whose name `datasets` would read as the
    train split, is one configuration among three; every configuration gives its table whole, `triplets` is
    the default, and the card's code runs as printed."""
    import datasets

    from citeflow.jobs.cli import main
    from tests.cards import run_code_blocks

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    cfg, scincl, _ = excluded
    out = tmp_path / "triplets-export"
    args = ["export-dataset", "--snapshot", cfg.snapshot, "--stage", "mine_triplets", "--version", scincl.version]
    assert main([*args, "--artifacts", cfg.artifacts, "--out", str(out)]) == 0
    cache = str(tmp_path / "cache")
    for table, stats in scincl.tables.items():
        assert datasets.load_dataset(str(out), table, split="train", cache_dir=cache).num_rows == stats["rows"]
    assert datasets.load_dataset(str(out), split="train", cache_dir=cache).num_rows == scincl.tables["triplets"]["rows"]
    outputs = run_code_blocks((out / "README.md").read_text(), tmp_path)
    assert f"num_rows: {scincl.tables['triplets']['rows']}" in outputs[0]
    assert f"{scincl.tables['training_texts']['rows']}\n" in outputs[0]
