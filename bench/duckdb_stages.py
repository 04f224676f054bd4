"""build_graph's and filter_leakage's core work in DuckDB: the single-node yardstick of bench/bench_stages.py.

    python bench/duckdb_stages.py build_graph --corpus SNAP/corpus --out DIR [--threads N]
    python bench/duckdb_stages.py filter_leakage --graph ARTIFACTS/<snap>/build_graph/<version> \
        --scidocs SNAP/scidocs --paper-ids SNAP/paper-ids --out DIR [--threads N]

What a user would write by hand on one box, in SQL, with the same results as
citeflow's tables (the bench compares the counts):

- build_graph (S2ORC layout; an S2AG release's three datasets likewise: `build_graph_s2ag`): parse the
  metadata lines with `read_json`
  (malformed lines skipped, not classified), keep valid corpus ids, one record
  per id (the most complete, as `spark/graph.py` ranks them), SciNCL's edges
  from `outbound_citations` (both ends in the corpus, no self-loops, no
  duplicates), in- and out-degrees, write `papers` and `citations` as Parquet
  (zstd). Not done here, and done by citeflow: every rejected line and edge
  kept with its reason, the degree summary, histogram and plot, the manifest.
- filter_leakage, as citeflow's stage runs with its default settings (mode exclude, not strict, titles
  matched): the benchmark ids read by citeflow's own reader (`citeflow.jobs.filter_leakage.benchmark_ids.collect`)
  and taken to one row per id by its own `mapping.distinct_ids` (the stage does both in pyarrow, in its
  driver, too), the mapping cascade of `jobs/filter_leakage/id_mapping.py` (corpus id, sha through
  paper-ids, DOI / PubMed / arXiv, folded title through `citeflow.text.fold_titles` as an Arrow UDF; an id in
  doubt mapped to every paper named, up to `max_shared_matches` per key, as `mapping.later_steps` says), the
  benchmark papers removed from papers and citations, degrees recomputed, `benchmark_ids` (one row per
  suite, id, task and split), `papers`, `citations` written. Not done here: the leakage report table, the
  paper_keys and paper_id_lines tables kept for the next release, the stop on too many unmapped ids.
  tests/unit/test_bench_stages.py checks that the tables equal citeflow's.

DuckDB is a bench-only dependency (`pip install -e .[bench]`); nothing under
citeflow/, jobs/, spark/, models/, evaluation/ or dags/ imports it (a test
holds that). Prints one JSON line of counts.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

PAPER_COLUMNS = (
    "paper_id",
    "title",
    "abstract",
    "year",
    "venue",
    "journal",
    "doi",
    "pubmed_id",
    "pmc_id",
    "arxiv_id",
    "acl_id",
    "mag_id",
)


def _connect(threads: int, out: str):
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {int(threads)}")
    con.execute(f"SET temp_directory = '{os.path.join(out, '.tmp')}'")
    con.execute("SET preserve_insertion_order = false")
    return con


def _nonblank(col: str) -> str:
    return f"nullif(trim({col}), '')"


def build_graph(corpus: str, out: str, threads: int) -> dict[str, int]:
    """Papers and SciNCL's citation edges from an S2ORC or S2AG snapshot (S2AG where `corpus` holds `papers/`
    and `citations/` folders, as `citeflow.snapshot` tells them apart), written as Parquet."""
    if all(os.path.isdir(os.path.join(corpus, d)) for d in ("papers", "citations")):
        return build_graph_s2ag(corpus, out, threads)
    files = sorted(glob.glob(os.path.join(corpus, "**", "*.jsonl*"), recursive=True))
    if not files:
        raise SystemExit(f"no .jsonl[.gz] files under {corpus}")
    con = _connect(threads, out)
    columns = {c: "VARCHAR" for c in PAPER_COLUMNS} | {
        "mag_field_of_study": "VARCHAR[]",
        "outbound_citations": "VARCHAR[]",
    }
    con.execute(
        f"""
        CREATE TEMP TABLE raw AS
        SELECT * FROM read_json({files!r}, format = 'newline_delimited', ignore_errors = true,
                                columns = {columns!r}, maximum_object_size = 1073741824)
        WHERE regexp_full_match(trim(paper_id), '[0-9]{{1,18}}')
        """
    )
    filled = " + ".join(
        f"({_nonblank(c)} IS NOT NULL)::INT" for c in ("title", "abstract", "doi", "pubmed_id", "arxiv_id", "mag_id")
    )
    con.execute(
        f"""
        CREATE TEMP TABLE papers AS
        SELECT trim(paper_id)::BIGINT AS corpus_id,
               {_nonblank("title")} AS title, {_nonblank("abstract")} AS abstract,
               TRY_CAST(TRY_CAST(year AS DOUBLE) AS INTEGER) AS year,
               coalesce({_nonblank("venue")}, {_nonblank("journal")}) AS venue,
               coalesce(mag_field_of_study, []::VARCHAR[]) AS fields_of_study,
               {_nonblank("doi")} AS doi, {_nonblank("pubmed_id")} AS pubmed_id, {_nonblank("pmc_id")} AS pmc_id,
               {_nonblank("arxiv_id")} AS arxiv_id, {_nonblank("acl_id")} AS acl_id,
               {_nonblank("mag_id")} AS mag_id, NULL::VARCHAR AS dblp_id,
               coalesce(outbound_citations, []::VARCHAR[]) AS refs
        FROM raw
        QUALIFY row_number() OVER (
            PARTITION BY trim(paper_id)::BIGINT
            ORDER BY {filled} + (TRY_CAST(TRY_CAST(year AS DOUBLE) AS INTEGER) IS NOT NULL)::INT
                     + (coalesce({_nonblank("venue")}, {_nonblank("journal")}) IS NOT NULL)::INT
                     + (len(coalesce(mag_field_of_study, [])) > 0)::INT
                     + (len(coalesce(outbound_citations, [])) > 0)::INT DESC,
                     len(coalesce(outbound_citations, [])) DESC) = 1
        """
    )
    con.execute("DROP TABLE raw")
    con.execute(
        """
        CREATE TEMP TABLE citations AS
        SELECT DISTINCT e.citing, e.cited FROM (
            SELECT corpus_id AS citing, TRY_CAST(trim(ref) AS BIGINT) AS cited
            FROM (SELECT corpus_id, unnest(refs) AS ref FROM papers)
            WHERE regexp_full_match(trim(ref), '[0-9]{1,18}')
        ) e SEMI JOIN papers p ON e.cited = p.corpus_id
        WHERE e.citing <> e.cited
        """
    )
    return _write_graph(con, "papers", "citations", out)


def _completeness(fields_of_study: str, refs: str) -> str:
    """The rank `spark/graph.py` `completeness` gives a record: one point per filled field, plus citations."""
    filled = [f"({c} IS NOT NULL)::INT" for c in ("title", "abstract", "year", "venue", "doi", "pubmed_id")]
    filled += [f"({c} IS NOT NULL)::INT" for c in ("arxiv_id", "mag_id")]
    return " + ".join(filled) + f" + (len({fields_of_study}) > 0)::INT + (len({refs}) > 0)::INT"


def build_graph_s2ag(corpus: str, out: str, threads: int) -> dict[str, int]:
    """build_graph's core work on an S2AG release's papers, abstracts and citations datasets: one record per
    corpus id (the most complete, as for S2ORC; a release's papers carry no abstract and no citation list when
    ranked), each id's longest abstract (`spark/graph.py` `abstract_order`; between abstracts of one length the
    twin's pick may differ from citeflow's hash order), SciNCL's edges from the citations dataset (both ends valid
    corpus ids of kept papers, no self-loops, no duplicates)."""
    con = _connect(threads, out)
    ids = "'[0-9]{1,18}'"
    ext = ("ACL", "DBLP", "ArXiv", "MAG", "PubMed", "DOI", "PubMedCentral")
    columns = {
        "corpusid": "VARCHAR",
        "externalids": "STRUCT(" + ", ".join(f"{k} VARCHAR" for k in ext) + ")",
        "title": "VARCHAR",
        "venue": "VARCHAR",
        "year": "VARCHAR",
        "s2fieldsofstudy": "STRUCT(category VARCHAR, source VARCHAR)[]",
        "journal": "STRUCT(name VARCHAR)",
    }

    def lines(dataset: str, cols: dict[str, str]) -> str:
        files = _jsonl_files(os.path.join(corpus, dataset))
        if not files:
            raise SystemExit(f"no .jsonl[.gz] files under {corpus}/{dataset}")
        return (
            f"read_json({files!r}, format = 'newline_delimited', ignore_errors = true, columns = {cols!r}, "
            "maximum_object_size = 1073741824)"
        )

    fields = "list_sort(list_distinct(list_transform(coalesce(s2fieldsofstudy, []), lambda x: x.category)))"
    normalised = f"""
        SELECT trim(corpusid)::BIGINT AS corpus_id, {_nonblank("title")} AS title, NULL::VARCHAR AS abstract,
               TRY_CAST(TRY_CAST(year AS DOUBLE) AS INTEGER) AS year,
               coalesce({_nonblank("venue")}, {_nonblank("journal.name")}) AS venue,
               {fields} AS fields_of_study,
               {_nonblank("externalids.DOI")} AS doi, {_nonblank("externalids.PubMed")} AS pubmed_id,
               {_nonblank("externalids.PubMedCentral")} AS pmc_id, {_nonblank("externalids.ArXiv")} AS arxiv_id,
               {_nonblank("externalids.ACL")} AS acl_id, {_nonblank("externalids.MAG")} AS mag_id,
               {_nonblank("externalids.DBLP")} AS dblp_id
        FROM {lines("papers", columns)}
        WHERE regexp_full_match(trim(corpusid), {ids})"""
    con.execute(
        f"""
        CREATE TEMP TABLE ranked AS
        SELECT * FROM ({normalised})
        QUALIFY row_number() OVER (PARTITION BY corpus_id
                                   ORDER BY {_completeness("fields_of_study", "[]")} DESC) = 1
        """
    )
    abstracts = lines("abstracts", {"corpusid": "VARCHAR", "abstract": "VARCHAR"})
    con.execute(
        f"""
        CREATE TEMP TABLE papers AS
        SELECT p.* REPLACE (a.abstract AS abstract) FROM ranked p LEFT JOIN (
            SELECT corpus_id, arg_max(a, length(a)) AS abstract FROM (
                SELECT trim(corpusid)::BIGINT AS corpus_id, {_nonblank("abstract")} AS a
                FROM {abstracts} WHERE regexp_full_match(trim(corpusid), {ids})
            ) GROUP BY 1
        ) a USING (corpus_id)
        """
    )
    con.execute("DROP TABLE ranked")
    pairs = lines("citations", {"citingcorpusid": "VARCHAR", "citedcorpusid": "VARCHAR"})
    con.execute(
        f"""
        CREATE TEMP TABLE citations AS
        SELECT DISTINCT trim(citingcorpusid)::BIGINT AS citing, trim(citedcorpusid)::BIGINT AS cited FROM {pairs}
        WHERE regexp_full_match(trim(citingcorpusid), {ids}) AND regexp_full_match(trim(citedcorpusid), {ids})
          AND trim(citingcorpusid)::BIGINT <> trim(citedcorpusid)::BIGINT
          AND trim(citingcorpusid)::BIGINT IN (SELECT corpus_id FROM papers)
          AND trim(citedcorpusid)::BIGINT IN (SELECT corpus_id FROM papers)
        """
    )
    return _write_graph(con, "papers", "citations", out)


def _jsonl_files(folder: str) -> list[str]:
    """The `.jsonl[.gz]` / `.json[.gz]` files under `folder`, as `citeflow.snapshot.discover_jsonl` finds them
    (names starting with `.` or `_` skipped)."""
    from citeflow.snapshot import JSONL

    found = glob.glob(os.path.join(folder, "**", "*"), recursive=True)
    names = ((f, os.path.basename(f)) for f in found if os.path.isfile(f))
    return sorted(f for f, name in names if JSONL.search(name) and not name.startswith((".", "_")))


def _write_graph(con, papers: str, citations: str, out: str) -> dict[str, int]:
    """papers, citations and degrees (every paper's out- and in-degree) as Parquet under `out`, the tables
    build_graph and filter_leakage write; their row counts."""
    columns = "corpus_id, title, abstract, year, venue, fields_of_study, doi, pubmed_id, pmc_id, arxiv_id, acl_id, "
    columns += "mag_id, dblp_id"
    con.execute(f"COPY {citations} TO '{out}/citations' (FORMAT parquet, COMPRESSION zstd, PER_THREAD_OUTPUT true)")
    con.execute(
        f"COPY (SELECT {columns} FROM {papers}) TO '{out}/papers' "
        "(FORMAT parquet, COMPRESSION zstd, PER_THREAD_OUTPUT true)"
    )
    con.execute(
        f"""
        COPY (
            SELECT p.corpus_id, coalesce(o.n, 0)::INT AS out_degree, coalesce(i.n, 0)::INT AS in_degree
            FROM {papers} p
            LEFT JOIN (SELECT citing, count(*) AS n FROM {citations} GROUP BY citing) o ON o.citing = p.corpus_id
            LEFT JOIN (SELECT cited, count(*) AS n FROM {citations} GROUP BY cited) i ON i.cited = p.corpus_id
        ) TO '{out}/degrees' (FORMAT parquet, COMPRESSION zstd, PER_THREAD_OUTPUT true)
        """
    )
    (papers_n,) = con.execute(f"SELECT count(*) FROM {papers}").fetchone()
    (citations_n,) = con.execute(f"SELECT count(*) FROM {citations}").fetchone()
    return {"papers": papers_n, "citations": citations_n}


def filter_leakage(graph: str, scidocs: str, paper_ids: str, out: str, threads: int) -> dict[str, int]:
    """Map the benchmark ids to corpus ids and take the mapped papers out of a build_graph version."""
    from citeflow.config import FilterLeakageConfig
    from citeflow.jobs.filter_leakage.benchmark_ids import collect
    from citeflow.jobs.filter_leakage.mapping import METHODS, STEP_OF, distinct_ids, title_conflicts
    from citeflow.text import fold_titles

    most = FilterLeakageConfig().max_shared_matches  # the default setting, as the stage runs with it
    con = _connect(threads, out)
    # (rows, layouts read, SciRepEval tasks not audited): the last two only feed the stage's report
    bench, _, _ = collect(scidocs)
    con.register("bench", bench)
    # An id's title and external ids are the first its rows state, in their order: DuckDB's `first` over a
    # parallel scan may pick another row's, and so another title to fold and match. The ids with several titles
    # are matched on every one (`title_conflict`).
    con.register("ids", distinct_ids(bench))
    con.register("conflicts", title_conflicts(bench))
    con.create_function(
        "fold", lambda titles: fold_titles(titles), [str], str, type="arrow", null_handling="special"
    )  # the pipeline's own fold, vectorised
    con.execute(f"CREATE TEMP TABLE papers AS SELECT * FROM read_parquet('{graph}/papers/*.parquet')")
    con.execute(f"CREATE TEMP VIEW citations AS SELECT * FROM read_parquet('{graph}/citations/*.parquet')")
    # The corpus-id rule of `mapping.first_steps`: spaces trimmed (DuckDB's `trim`, like Spark's, trims spaces
    # only), 1 to 18 digits, and one final line break allowed, as Spark's `$` and cast allow it.
    digits = r"nullif(regexp_extract(trim(id), '^([0-9]{1,18})(\n|\r\n|\r)?$', 1), '')::BIGINT"
    steps = [f"SELECT id, {digits} AS corpus_id, 'corpus_id' AS method FROM ids WHERE {digits} IS NOT NULL"]
    common = []  # (id, reason) of the ids whose key more than `most` papers share
    id_files = _jsonl_files(paper_ids) if paper_ids else []
    if id_files:
        # every corpus id a sha is given: several are a conflict, each named
        con.execute(
            f"""
            CREATE TEMP TABLE by_sha AS
            SELECT DISTINCT lower(trim(sha)) AS sha, TRY_CAST(trim(corpusid) AS BIGINT) AS corpus_id
            FROM read_json({id_files!r}, format = 'newline_delimited', ignore_errors = true,
                           columns = {{sha: 'VARCHAR', corpusid: 'VARCHAR'}})
            WHERE regexp_full_match(lower(trim(sha)), '[0-9a-f]{{40}}')
              AND TRY_CAST(trim(corpusid) AS BIGINT) IS NOT NULL
            """
        )
        steps.append(
            """SELECT i.id, s.corpus_id, CASE WHEN s.n > 1 THEN 'sha_conflict' ELSE 'sha' END AS method
               FROM ids i JOIN (SELECT *, count(*) OVER (PARTITION BY sha) AS n FROM by_sha) s
               ON lower(trim(i.id)) = s.sha"""
        )
    # each key step: the papers that have the id's key, all of them up to `most`
    keyed = [
        (
            step,
            f"lower(trim(i.{col}))",
            f"SELECT lower(trim({col})) AS k, corpus_id FROM papers WHERE {col} IS NOT NULL",
        )
        for step, col in (("doi", "doi"), ("pubmed", "pubmed_id"), ("arxiv", "arxiv_id"))
    ]
    con.execute(
        "CREATE TEMP TABLE titles AS SELECT f AS k, corpus_id FROM "
        "(SELECT fold(title) AS f, corpus_id FROM papers WHERE title IS NOT NULL) WHERE f IS NOT NULL"
    )
    # `folded_title`: `distinct_ids` folded the benchmark's titles with the same `fold_titles`
    keyed.append(("title", "i.folded_title", "SELECT k, corpus_id FROM titles"))
    for step, key, keys in keyed:
        single = " AND i.id NOT IN (SELECT id FROM conflicts)" if step == "title" else ""
        # n: how many papers have the key (counted over the papers, before any id is joined)
        found = f"""SELECT i.id, p.corpus_id, p.n FROM ids i
                    JOIN (SELECT *, count(*) OVER (PARTITION BY k) AS n FROM ({keys})) p
                    ON {key} = p.k WHERE {key} IS NOT NULL{single}"""
        steps.append(
            f"SELECT id, corpus_id, CASE WHEN n = 1 THEN '{step}' ELSE '{step}_shared' END AS method "
            f"FROM ({found}) WHERE n <= {most}"
        )
        common.append(
            f"SELECT DISTINCT id, '{step}_too_common' AS reason, {STEP_OF[step]} AS o FROM ({found}) WHERE n > {most}"
        )
    conflict = """SELECT c.id, t.corpus_id, t.n FROM conflicts c
                  JOIN (SELECT *, count(*) OVER (PARTITION BY k) AS n FROM titles) t ON c.folded_title = t.k"""
    common.append(
        f"SELECT DISTINCT id, 'title_too_common' AS reason, {STEP_OF['title']} AS o FROM ({conflict}) WHERE n > {most}"
    )
    methods = "[" + ", ".join(f"'{m}'" for m in METHODS) + "]"
    step_of = "MAP {" + ", ".join(f"'{m}': {STEP_OF[m]}" for m in METHODS) + "}"
    con.execute(
        f"""
        CREATE TEMP TABLE chosen AS
        WITH c AS (SELECT *, {step_of}[method] AS step FROM ({" UNION ALL ".join(steps)})),
             firsts AS (SELECT * FROM c QUALIFY step = min(step) OVER (PARTITION BY id)),
             every AS (SELECT id, corpus_id, method FROM firsts
                       UNION ALL SELECT id, corpus_id, 'title_conflict' FROM ({conflict}) WHERE n <= {most})
        SELECT id, corpus_id, method FROM every
        QUALIFY row_number() OVER (PARTITION BY id, corpus_id ORDER BY list_position({methods}, method)) = 1
        """
    )
    con.execute(
        f"""
        CREATE TEMP TABLE mapped AS
        SELECT b.suite, b.id, b.task, b.split, c.corpus_id, c.method,
               coalesce(c.corpus_id IN (SELECT corpus_id FROM papers), false) AS in_snapshot,
               CASE WHEN c.method IS NOT NULL THEN NULL ELSE coalesce(r.reason, 'no_match') END AS unmapped_reason
        FROM (SELECT DISTINCT suite, id, task, split FROM bench) b
        LEFT JOIN chosen c ON b.id = c.id
        LEFT JOIN (SELECT id, reason FROM ({" UNION ALL ".join(common)})
                   QUALIFY row_number() OVER (PARTITION BY id ORDER BY o) = 1) r ON b.id = r.id
        """
    )
    con.execute(f"COPY mapped TO '{out}/benchmark_ids.parquet' (FORMAT parquet, COMPRESSION zstd)")
    con.execute(
        """
        CREATE TEMP TABLE excluded AS SELECT DISTINCT corpus_id FROM mapped WHERE in_snapshot;
        CREATE TEMP TABLE kept_papers AS SELECT * FROM papers ANTI JOIN excluded USING (corpus_id);
        CREATE TEMP TABLE kept_citations AS
            SELECT citing, cited FROM citations
            WHERE citing NOT IN (SELECT corpus_id FROM excluded) AND cited NOT IN (SELECT corpus_id FROM excluded);
        """
    )
    counts = _write_graph(con, "kept_papers", "kept_citations", out)
    (ids_n, mapped_n) = con.execute(
        "SELECT count(DISTINCT id), count(DISTINCT id) FILTER (method IS NOT NULL) FROM mapped"
    ).fetchone()
    return {"benchmark_ids": ids_n, "mapped": mapped_n, **counts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=["build_graph", "filter_leakage"])
    parser.add_argument("--corpus", help="build_graph: the snapshot's corpus folder (S2ORC or S2AG layout)")
    parser.add_argument("--graph", help="filter_leakage: a build_graph version folder (papers/, citations/)")
    parser.add_argument("--scidocs", help="filter_leakage: the SciDocs folder")
    parser.add_argument("--paper-ids", default="", help="filter_leakage: the S2AG paper-ids folder")
    parser.add_argument("--out", required=True, help="output folder (created; must not exist)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    os.makedirs(args.out)
    if args.stage == "build_graph":
        counts = build_graph(args.corpus, args.out, args.threads)
    else:
        counts = filter_leakage(args.graph, args.scidocs, args.paper_ids, args.out, args.threads)
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
