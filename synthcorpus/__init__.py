"""Synthetic corpus snapshots with known truth: `citeflow generate` and `citeflow generate --derive-from`.

There is no real corpus to download here, so citeflow writes realistic S2ORC / S2AG snapshots, a SciDocs set
over them and the exact counts of what it put in (generator.json), which the pipeline's tests compare with.
Same seed and config, same bytes.

Modules, from the bottom up (each imports only modules above it, the standard library, numpy, pyarrow and
citeflow's core: errors, text):

- config: GenerateConfig and the fixed shape of every snapshot
- lexicon, venues: word lists and topics; journals, id formats, S2AG value tables (data)
- arrays: independent random streams and vectorised helpers
- stats: the corpus statistics the generator is calibrated on (lengths, vocabulary, topic share, similarity)
- calibration: the real samples' values of those statistics (TARGETS, BOUNDS) and the script that measures them
- vocabulary: titles, abstracts and citation contexts from a topic vocabulary
- papers: papers (topics, dates, external ids) and authors
- citations: the citation sampler (fresh snapshots and later releases)
- edge_dirt: the dirt on the citations (duplicate, self and external ones; S2AG's citation rows and theirs)
- world: the whole snapshot before serialisation, with its truth counts
- serialise: S2ORC, S2AG and paper-ids lines; malformed lines
- scidocs_ids: how each SciDocs id maps to the corpus (sha, title only, not at all)
- scidocs: the SciDocs set, its files and scidocs_truth.jsonl
- recomm: the SciDocs recommendation task (click logs, propensities, metadata) over the SciDocs papers
- measure: a snapshot measured like the real samples, for generator.json's `calibration`
- outputs: an output folder's checks and clearing, and the file writers generate and derive share
- generate: `run(GenerateConfig)`, the files of a snapshot
- derive_census, derive_plan, derive_rewrite, derive: a later release of a snapshot (`run(DeriveConfig)`)
"""
