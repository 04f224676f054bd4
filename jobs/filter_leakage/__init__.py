"""Stage filter_leakage: find the benchmark's papers in the graph and take them out (Spark).

Reads: the build_graph version of the same run (papers, citations), the benchmarks' papers, each source
its own suite (jobs/filter_leakage/benchmark_ids.py): the SciDocs folder (`--scidocs`, original or BEIR layout),
SciRepEval tasks (`filter_leakage.scirepeval` and every `benchmark.scirepeval` task the run scores), BEIR /
MTEB-layout folders (`filter_leakage.beir`) and `filter_leakage.extra_ids` lists; the S2AG paper-ids table
(`--paper-ids`).
Writes `ARTIFACTS/<snapshot>/filter_leakage/<version>/`:
- `benchmark_ids`: suite, id, task, split, corpus_id (null when unmapped), method,
  in_snapshot, unmapped_reason: one row per (suite, id, task, split).
- `leakage_report`: per suite, task and split, per suite and overall (`all`) the total ids, how many each
  method mapped, how many stayed unmapped, how many are in the snapshot, the papers and edges removed and,
  with `filter_leakage.strict`, the papers one citation away that go too and their edges
  (`mapping.leakage_report`).
- `papers`, `citations`, `degrees`: the graph without benchmark papers (mode exclude) or unchanged (mode
  report_only); the degrees those of the kept citations (in mode exclude the graph's less the edges that go,
  `transforms.filtered_degrees`). `papers` is written over the graph's (spark/output.py `write_over`): the
  graph's data files that hold no benchmark paper are linked, the others written again without those papers,
  so every reader reads the kept papers only and few papers' text is written again.
- `paper_keys`: corpus_id and the keys the mapping compares (`_key_doi`, `_key_pubmed_id`, `_key_arxiv_id`:
  lower-cased and trimmed; `_folded`: the title's fold) of every paper of the graph, so that the next
  release's filter_leakage, on a graph built from a diff, keys only the papers the diff wrote (its table
  written over this one's).
- `paper_id_lines`: every line of the paper-ids table (`key`: its sha as written; `corpus_id` where it gives a
  (sha, corpus id) pair; `reason` where it gives none), on which the benchmark's shas are looked up; the next
  release applies its paper-ids diff to it instead of parsing its whole table (`paper_ids_diff.py`). Empty
  without `--paper-ids`.
- `_manifest.json`: mode, counts of removed papers and edges, the report, `paper_ids`: every line of
  the paper-ids table counted (those that gave a sha -> corpus id pair, the others by reason);
  `paper_id_lines`: `source` (what its lines were made from) and `from_diff` (the base version and diff
  applied; null: the table parsed); and
  `paper_keys`: `carried_from`, the version its keys were carried over from (null: every paper keyed), and
  with it `papers_keyed`, the papers keyed in this version.

The stage fails when more than `filter_leakage.max_unmapped_share` of the
benchmark ids map to nothing: SciNCL's public code let those through silently.

Run: `citeflow run --snapshot ID --corpus DIR --scidocs DIR --paper-ids DIR --until filter_leakage`.

The package holds all of the leakage logic:
- `stage.py`: the stage's steps (`run_on`, `build`): read both sides, map, write the graph without the benchmark.
- `report.py`: `benchmark_ids` and `leakage_report` written, the version's metrics, the stop on too many unmapped ids.
- `benchmark_ids.py`: the benchmark's paper ids, read from each suite's files (plain Python).
- `mapping.py`: the mapping cascade's and the report's table side (pyarrow, in the driver).
- `id_mapping.py`: the Spark side of the mapping (DataFrame transforms): parse and look up paper-ids lines, the
  cascade over the graph's papers.
- `transforms.py`: the Spark side of the keys and the removal: key the graph's papers and find those that share a
  key with the benchmark, remove them, their reach and the degrees left.
- `paper_ids_diff.py`: the paper-ids lines of a new release from the previous one's and an S2AG diff.
- `paper_keys.py`: the graph's papers keyed for the mapping, or the previous release's keys carried over.
- `audit.py`: the check every later stage runs on the corpus ids it uses.
"""

from citeflow.jobs.filter_leakage.stage import STAGE, STAGE_VERSION, TABLES, build, check, run, run_on, scirepeval_of

__all__ = ["STAGE", "STAGE_VERSION", "TABLES", "build", "check", "run", "run_on", "scirepeval_of"]
