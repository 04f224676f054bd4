"""`citeflow generate` keeps its bytes: small snapshots (both formats) and releases derived from them, made
through the command line, hashed file by file and compared with recorded hashes (GENERATOR_VERSION 2,
DERIVE_VERSION 4: the calibrated generator of issue 22, derived S2AG releases with their diffs, paper-ids
included (issue 19);
version 1's were recorded from commit 98fa7f7).

Two hashes per file:
- `content`: of what the generator decides: the lines of a .jsonl.gz shard (decompressed), the columns and
  rows of a .parquet file, the bytes of anything else. Checked everywhere.
- `file`: of the file's bytes as written. Compressed bytes also depend on the zlib and pyarrow builds, which
  the generator does not control, so these are checked only under the builds they were recorded with
  (RECORDED_WITH), and the test says it skipped otherwise.

Paths of the temporary folder, which generator.json names (config.out, derived_from.path), are replaced by
`<root>` before hashing. If a change is meant to alter the output, bump GENERATOR_VERSION (or DERIVE_VERSION)
and record new hashes in a commit of their own that says why: `python -m tests.unit.synth.test_generate_bytes`
prints this table for the current code.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import sys
import tempfile
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from citeflow.jobs.cli import main

# Output folder -> the `citeflow generate` arguments that make it (in this order: derived ones need theirs).
# 12,000 papers cross the 10,000-paper text block inside a shard; small counts keep every kind of dirt.
COMMANDS = {
    "s2orc": ["--papers", "12000", "--format", "s2orc", "--shards", "3", "--seed", "5"],
    "s2ag": ["--papers", "1000", "--format", "s2ag", "--shards", "2", "--seed", "5"],
    "s2orc-r2": ["--derive-from", "s2orc", "--seed", "2", "--added", "400", "--removed", "90", "--changed", "150"],
    "s2ag-r2": ["--derive-from", "s2ag", "--seed", "2"],
    "s2ag-r3": ["--derive-from", "s2ag-r2", "--seed", "0", "--added", "30", "--removed", "5", "--changed", "8"],
}

RECORDED_WITH = {"zlib": "1.2.13", "pyarrow": "26.0.1"}
HASHES: dict[str, tuple[str, str]] = {
    "s2orc/corpus/metadata/metadata_0.jsonl.gz": ("4a8dc70b9ac5dbd5", "6be412af173d9d1d"),
    "s2orc/corpus/metadata/metadata_1.jsonl.gz": ("17590f6f0db43088", "b87365acf85edde1"),
    "s2orc/corpus/metadata/metadata_2.jsonl.gz": ("5e248ff73d50f274", "b0f8e06240e1153e"),
    "s2orc/generator.json": ("fcd25cbccf8a3b4a", "fcd25cbccf8a3b4a"),
    "s2orc/paper-ids/paper-ids_0.jsonl.gz": ("18c688c0de2f9f82", "7c75b5abbc189087"),
    "s2orc/paper_topics.parquet": ("babeddb297daddca", "ef689cb20bcf6753"),
    "s2orc/scidocs/cite/test.qrel": ("f3543262805cad87", "f3543262805cad87"),
    "s2orc/scidocs/cite/val.qrel": ("e14e930feec4d493", "e14e930feec4d493"),
    "s2orc/scidocs/cocite/test.qrel": ("2f5a36661158f97e", "2f5a36661158f97e"),
    "s2orc/scidocs/cocite/val.qrel": ("05bec2ba4c68f384", "05bec2ba4c68f384"),
    "s2orc/scidocs/coread/test.qrel": ("a4b3a6333c27cb6f", "a4b3a6333c27cb6f"),
    "s2orc/scidocs/coread/val.qrel": ("9bfdf12a01e8b7af", "9bfdf12a01e8b7af"),
    "s2orc/scidocs/coview/test.qrel": ("6f2928d2e217a794", "6f2928d2e217a794"),
    "s2orc/scidocs/coview/val.qrel": ("2cda58b3067c1194", "2cda58b3067c1194"),
    "s2orc/scidocs/mag/test.csv": ("4d057d22b6030fe3", "4d057d22b6030fe3"),
    "s2orc/scidocs/mag/train.csv": ("5eb0aadbcf6b0581", "5eb0aadbcf6b0581"),
    "s2orc/scidocs/mag/val.csv": ("ebf6ef5ac208d416", "ebf6ef5ac208d416"),
    "s2orc/scidocs/mesh/test.csv": ("129518e34c317f47", "129518e34c317f47"),
    "s2orc/scidocs/mesh/train.csv": ("504f32abd0a88edb", "504f32abd0a88edb"),
    "s2orc/scidocs/mesh/val.csv": ("a374eb412701c0c7", "a374eb412701c0c7"),
    "s2orc/scidocs/paper_metadata_mag_mesh.json": ("13ca70f01f7871c4", "13ca70f01f7871c4"),
    "s2orc/scidocs/paper_metadata_recomm.json": ("5755bc2a19573f6b", "5755bc2a19573f6b"),
    "s2orc/scidocs/paper_metadata_view_cite_read.json": ("bc3f5c2e28bc1f33", "bc3f5c2e28bc1f33"),
    "s2orc/scidocs/recomm/propensity_scores.json": ("2cd88fe41fb4642d", "2cd88fe41fb4642d"),
    "s2orc/scidocs/recomm/test.csv": ("3209924981f95263", "3209924981f95263"),
    "s2orc/scidocs/recomm/train.csv": ("53d18aad875ea7fe", "53d18aad875ea7fe"),
    "s2orc/scidocs/recomm/val.csv": ("2a4ace31ac9d1784", "2a4ace31ac9d1784"),
    "s2orc/scidocs_truth.jsonl": ("de1c80cb074a1a0f", "de1c80cb074a1a0f"),
    "s2ag/corpus/abstracts/abstracts_0.jsonl.gz": ("0e37bacfd81da71f", "45ee2e8845ab4413"),
    "s2ag/corpus/abstracts/abstracts_1.jsonl.gz": ("00a532c1414d42ba", "4431793e73435208"),
    "s2ag/corpus/citations/citations_0.jsonl.gz": ("3d81f0d5aa5a9ea7", "8804b466daa553cc"),
    "s2ag/corpus/citations/citations_1.jsonl.gz": ("3cd0978750a17e14", "f1db05e31b9a58e6"),
    "s2ag/corpus/papers/papers_0.jsonl.gz": ("993ecf07ac8a4d1f", "7c54a1dea39f94ca"),
    "s2ag/corpus/papers/papers_1.jsonl.gz": ("b696a98bd129cbbf", "3af0ce07548d0829"),
    "s2ag/generator.json": ("f5c5ea07987f2a75", "f5c5ea07987f2a75"),
    "s2ag/paper-ids/paper-ids_0.jsonl.gz": ("b700360664b30f69", "30c6b56c074ef953"),
    "s2ag/paper_topics.parquet": ("6ae534268b6d3049", "e6ad58fcb1a871c5"),
    "s2ag/scidocs/cite/test.qrel": ("3552befd3041b58d", "3552befd3041b58d"),
    "s2ag/scidocs/cite/val.qrel": ("29f0ab41b87edabd", "29f0ab41b87edabd"),
    "s2ag/scidocs/cocite/test.qrel": ("1fb9cc832f147dfd", "1fb9cc832f147dfd"),
    "s2ag/scidocs/cocite/val.qrel": ("b6ebda60db98571f", "b6ebda60db98571f"),
    "s2ag/scidocs/coread/test.qrel": ("4e01f4c3be08dcaf", "4e01f4c3be08dcaf"),
    "s2ag/scidocs/coread/val.qrel": ("702b53fba582725c", "702b53fba582725c"),
    "s2ag/scidocs/coview/test.qrel": ("6dfa75ab203745f5", "6dfa75ab203745f5"),
    "s2ag/scidocs/coview/val.qrel": ("276e0d06e53089c2", "276e0d06e53089c2"),
    "s2ag/scidocs/mag/test.csv": ("39778014f081b707", "39778014f081b707"),
    "s2ag/scidocs/mag/train.csv": ("711982babdca38d5", "711982babdca38d5"),
    "s2ag/scidocs/mag/val.csv": ("47efd13333ab4dcb", "47efd13333ab4dcb"),
    "s2ag/scidocs/mesh/test.csv": ("3479526fa2f2edc2", "3479526fa2f2edc2"),
    "s2ag/scidocs/mesh/train.csv": ("00db7977413b5914", "00db7977413b5914"),
    "s2ag/scidocs/mesh/val.csv": ("37e9b3207c3293b3", "37e9b3207c3293b3"),
    "s2ag/scidocs/paper_metadata_mag_mesh.json": ("0ee55d02a37916da", "0ee55d02a37916da"),
    "s2ag/scidocs/paper_metadata_recomm.json": ("7adea8d2395de944", "7adea8d2395de944"),
    "s2ag/scidocs/paper_metadata_view_cite_read.json": ("79624d7b144978e3", "79624d7b144978e3"),
    "s2ag/scidocs/recomm/propensity_scores.json": ("2cd88fe41fb4642d", "2cd88fe41fb4642d"),
    "s2ag/scidocs/recomm/test.csv": ("50c8fdaa5577d6e9", "50c8fdaa5577d6e9"),
    "s2ag/scidocs/recomm/train.csv": ("15ea9ad4d09217ec", "15ea9ad4d09217ec"),
    "s2ag/scidocs/recomm/val.csv": ("7fb00cfcb6ee04ba", "7fb00cfcb6ee04ba"),
    "s2ag/scidocs_truth.jsonl": ("26ae02dfbc85d508", "26ae02dfbc85d508"),
    "s2orc-r2/corpus/metadata/metadata_0.jsonl.gz": ("c5bc53af02a0ce36", "024a1370b75fc5a7"),
    "s2orc-r2/corpus/metadata/metadata_1.jsonl.gz": ("d7d619d984788fe3", "f2298ac899d96590"),
    "s2orc-r2/corpus/metadata/metadata_2.jsonl.gz": ("9c84acc0e6ba2e12", "f3ea93ba7bd830bc"),
    "s2orc-r2/generator.json": ("8a23775539ae0bda", "8a23775539ae0bda"),
    "s2orc-r2/paper-ids/paper-ids_0.jsonl.gz": ("f64263e65f3e4270", "ecbe0d8f2e178982"),
    "s2orc-r2/paper_topics.parquet": ("d97bd754e27e1d74", "e6920179feb08f0a"),
    "s2orc-r2/release_diff.parquet": ("5183d6e53d3f569f", "35eb60e667eef12d"),
    "s2orc-r2/scidocs/cite/test.qrel": ("f3543262805cad87", "f3543262805cad87"),
    "s2orc-r2/scidocs/cite/val.qrel": ("e14e930feec4d493", "e14e930feec4d493"),
    "s2orc-r2/scidocs/cocite/test.qrel": ("2f5a36661158f97e", "2f5a36661158f97e"),
    "s2orc-r2/scidocs/cocite/val.qrel": ("05bec2ba4c68f384", "05bec2ba4c68f384"),
    "s2orc-r2/scidocs/coread/test.qrel": ("a4b3a6333c27cb6f", "a4b3a6333c27cb6f"),
    "s2orc-r2/scidocs/coread/val.qrel": ("9bfdf12a01e8b7af", "9bfdf12a01e8b7af"),
    "s2orc-r2/scidocs/coview/test.qrel": ("6f2928d2e217a794", "6f2928d2e217a794"),
    "s2orc-r2/scidocs/coview/val.qrel": ("2cda58b3067c1194", "2cda58b3067c1194"),
    "s2orc-r2/scidocs/mag/test.csv": ("4d057d22b6030fe3", "4d057d22b6030fe3"),
    "s2orc-r2/scidocs/mag/train.csv": ("5eb0aadbcf6b0581", "5eb0aadbcf6b0581"),
    "s2orc-r2/scidocs/mag/val.csv": ("ebf6ef5ac208d416", "ebf6ef5ac208d416"),
    "s2orc-r2/scidocs/mesh/test.csv": ("129518e34c317f47", "129518e34c317f47"),
    "s2orc-r2/scidocs/mesh/train.csv": ("504f32abd0a88edb", "504f32abd0a88edb"),
    "s2orc-r2/scidocs/mesh/val.csv": ("a374eb412701c0c7", "a374eb412701c0c7"),
    "s2orc-r2/scidocs/paper_metadata_mag_mesh.json": ("13ca70f01f7871c4", "13ca70f01f7871c4"),
    "s2orc-r2/scidocs/paper_metadata_recomm.json": ("5755bc2a19573f6b", "5755bc2a19573f6b"),
    "s2orc-r2/scidocs/paper_metadata_view_cite_read.json": ("bc3f5c2e28bc1f33", "bc3f5c2e28bc1f33"),
    "s2orc-r2/scidocs/recomm/propensity_scores.json": ("2cd88fe41fb4642d", "2cd88fe41fb4642d"),
    "s2orc-r2/scidocs/recomm/test.csv": ("3209924981f95263", "3209924981f95263"),
    "s2orc-r2/scidocs/recomm/train.csv": ("53d18aad875ea7fe", "53d18aad875ea7fe"),
    "s2orc-r2/scidocs/recomm/val.csv": ("2a4ace31ac9d1784", "2a4ace31ac9d1784"),
    "s2orc-r2/scidocs_truth.jsonl": ("de1c80cb074a1a0f", "de1c80cb074a1a0f"),
    "s2ag-r2/corpus/abstracts/abstracts_0.jsonl.gz": ("d3ad0e552eb82cbf", "cbd7682a0630bebf"),
    "s2ag-r2/corpus/abstracts/abstracts_1.jsonl.gz": ("f441fb9f1bf8763c", "876cc500cdd1f8b1"),
    "s2ag-r2/corpus/citations/citations_0.jsonl.gz": ("b0b4957da99ccad4", "2ff377f61674aaf6"),
    "s2ag-r2/corpus/citations/citations_1.jsonl.gz": ("051728b8b6a4e76d", "c9e93e67ea124dae"),
    "s2ag-r2/corpus/papers/papers_0.jsonl.gz": ("69f4c846eeff7281", "edcda2bc1a741e7d"),
    "s2ag-r2/corpus/papers/papers_1.jsonl.gz": ("eb7b7ab4b3160e1c", "343eb4a8f6ed0977"),
    "s2ag-r2/diffs/s2ag/to/s2ag-r2/abstracts.json": ("8dee2f3566b1e72e", "8dee2f3566b1e72e"),
    "s2ag-r2/diffs/s2ag/to/s2ag-r2/citations.json": ("3a59332632c139fe", "3a59332632c139fe"),
    "s2ag-r2/diffs/s2ag/to/s2ag-r2/paper-ids.json": ("77b5c95846ae1cc5", "77b5c95846ae1cc5"),
    "s2ag-r2/diffs/s2ag/to/s2ag-r2/papers.json": ("442185611cc3096d", "442185611cc3096d"),
    "s2ag-r2/diffs/s2ag/to/s2ag-r2/s2ag__s2ag-r2/abstracts/deletes_0.jsonl.gz": (
        "5fddc64183c16fe5",
        "ed088d9f5dc887ba",
    ),  # noqa: E501
    "s2ag-r2/diffs/s2ag/to/s2ag-r2/s2ag__s2ag-r2/abstracts/updates_0.jsonl.gz": (
        "b47714f8b8ae2071",
        "96e2a480ca826e72",
    ),  # noqa: E501
    "s2ag-r2/diffs/s2ag/to/s2ag-r2/s2ag__s2ag-r2/citations/deletes_0.jsonl.gz": (
        "51b0e3025c1b5496",
        "366d6ab18e519ebf",
    ),  # noqa: E501
    "s2ag-r2/diffs/s2ag/to/s2ag-r2/s2ag__s2ag-r2/citations/updates_0.jsonl.gz": (
        "928a8c2796904e63",
        "62729972e9f66cf6",
    ),  # noqa: E501
    "s2ag-r2/diffs/s2ag/to/s2ag-r2/s2ag__s2ag-r2/paper-ids/deletes_0.jsonl.gz": (
        "edab00303a3936cf",
        "259cf7bd8767ff8d",
    ),  # noqa: E501
    "s2ag-r2/diffs/s2ag/to/s2ag-r2/s2ag__s2ag-r2/paper-ids/updates_0.jsonl.gz": (
        "a134c84cd0a7bc50",
        "6f96ac3ed838ad7e",
    ),  # noqa: E501
    "s2ag-r2/diffs/s2ag/to/s2ag-r2/s2ag__s2ag-r2/papers/deletes_0.jsonl.gz": ("264c242fe54275de", "29c4333753525ef9"),
    "s2ag-r2/diffs/s2ag/to/s2ag-r2/s2ag__s2ag-r2/papers/updates_0.jsonl.gz": ("ce352bbad61867b0", "c233f33841627b62"),
    "s2ag-r2/generator.json": ("c8fa4357f616f0bf", "c8fa4357f616f0bf"),
    "s2ag-r2/paper-ids/paper-ids_0.jsonl.gz": ("2f64a502701f05f6", "23460e04dd9f657a"),
    "s2ag-r2/paper_topics.parquet": ("a953f40d828d8b9b", "06ece29214b1293a"),
    "s2ag-r2/release_diff.parquet": ("a00368cc34e39676", "d38e045b956f0699"),
    "s2ag-r2/scidocs/cite/test.qrel": ("3552befd3041b58d", "3552befd3041b58d"),
    "s2ag-r2/scidocs/cite/val.qrel": ("29f0ab41b87edabd", "29f0ab41b87edabd"),
    "s2ag-r2/scidocs/cocite/test.qrel": ("1fb9cc832f147dfd", "1fb9cc832f147dfd"),
    "s2ag-r2/scidocs/cocite/val.qrel": ("b6ebda60db98571f", "b6ebda60db98571f"),
    "s2ag-r2/scidocs/coread/test.qrel": ("4e01f4c3be08dcaf", "4e01f4c3be08dcaf"),
    "s2ag-r2/scidocs/coread/val.qrel": ("702b53fba582725c", "702b53fba582725c"),
    "s2ag-r2/scidocs/coview/test.qrel": ("6dfa75ab203745f5", "6dfa75ab203745f5"),
    "s2ag-r2/scidocs/coview/val.qrel": ("276e0d06e53089c2", "276e0d06e53089c2"),
    "s2ag-r2/scidocs/mag/test.csv": ("39778014f081b707", "39778014f081b707"),
    "s2ag-r2/scidocs/mag/train.csv": ("711982babdca38d5", "711982babdca38d5"),
    "s2ag-r2/scidocs/mag/val.csv": ("47efd13333ab4dcb", "47efd13333ab4dcb"),
    "s2ag-r2/scidocs/mesh/test.csv": ("3479526fa2f2edc2", "3479526fa2f2edc2"),
    "s2ag-r2/scidocs/mesh/train.csv": ("00db7977413b5914", "00db7977413b5914"),
    "s2ag-r2/scidocs/mesh/val.csv": ("37e9b3207c3293b3", "37e9b3207c3293b3"),
    "s2ag-r2/scidocs/paper_metadata_mag_mesh.json": ("0ee55d02a37916da", "0ee55d02a37916da"),
    "s2ag-r2/scidocs/paper_metadata_recomm.json": ("7adea8d2395de944", "7adea8d2395de944"),
    "s2ag-r2/scidocs/paper_metadata_view_cite_read.json": ("79624d7b144978e3", "79624d7b144978e3"),
    "s2ag-r2/scidocs/recomm/propensity_scores.json": ("2cd88fe41fb4642d", "2cd88fe41fb4642d"),
    "s2ag-r2/scidocs/recomm/test.csv": ("50c8fdaa5577d6e9", "50c8fdaa5577d6e9"),
    "s2ag-r2/scidocs/recomm/train.csv": ("15ea9ad4d09217ec", "15ea9ad4d09217ec"),
    "s2ag-r2/scidocs/recomm/val.csv": ("7fb00cfcb6ee04ba", "7fb00cfcb6ee04ba"),
    "s2ag-r2/scidocs_truth.jsonl": ("26ae02dfbc85d508", "26ae02dfbc85d508"),
    "s2ag-r3/corpus/abstracts/abstracts_0.jsonl.gz": ("a1b22634df7a0d0f", "cd54902f854e8e41"),
    "s2ag-r3/corpus/abstracts/abstracts_1.jsonl.gz": ("fa3fac8752ee882b", "f795a3017675a3a9"),
    "s2ag-r3/corpus/citations/citations_0.jsonl.gz": ("0bbe6a97e681b499", "f4946c72a893c9bc"),
    "s2ag-r3/corpus/citations/citations_1.jsonl.gz": ("72fcd41bcfb9b0b1", "6e344f0baa73428c"),
    "s2ag-r3/corpus/papers/papers_0.jsonl.gz": ("4f9edff336ddd772", "c3c2688ce5705e03"),
    "s2ag-r3/corpus/papers/papers_1.jsonl.gz": ("adb51529c0f00bb1", "6eef3606d1cdc044"),
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/abstracts.json": ("f7d91c9bccb5268c", "f7d91c9bccb5268c"),
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/citations.json": ("51f5db95c693334a", "51f5db95c693334a"),
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/paper-ids.json": ("ae0f74b2e9118838", "ae0f74b2e9118838"),
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/papers.json": ("90eff4167715d20b", "90eff4167715d20b"),
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag-r2__s2ag-r3/abstracts/deletes_0.jsonl.gz": (
        "c243a58962548900",
        "4e0f7257910134ae",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag-r2__s2ag-r3/abstracts/updates_0.jsonl.gz": (
        "dc87fc120be93834",
        "fa00cc6a9ed0022c",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag-r2__s2ag-r3/citations/deletes_0.jsonl.gz": (
        "f5a3468fdd07077b",
        "e2950036595a7ce4",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag-r2__s2ag-r3/citations/updates_0.jsonl.gz": (
        "dd0cfcb4ecb62001",
        "1abe3500f3520dbe",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag-r2__s2ag-r3/paper-ids/deletes_0.jsonl.gz": (
        "dc7f695288800df8",
        "53d8dfd22dd4d5e9",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag-r2__s2ag-r3/paper-ids/updates_0.jsonl.gz": (
        "5fc790c90f58f24f",
        "357ea81a205e5bef",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag-r2__s2ag-r3/papers/deletes_0.jsonl.gz": (
        "66239faddf5cae2b",
        "2782c152cbebbde7",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag-r2__s2ag-r3/papers/updates_0.jsonl.gz": (
        "aa6d2e214da7eeb6",
        "66ffaddcda689ff0",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag__s2ag-r2/abstracts/deletes_0.jsonl.gz": (
        "5fddc64183c16fe5",
        "ed088d9f5dc887ba",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag__s2ag-r2/abstracts/updates_0.jsonl.gz": (
        "b47714f8b8ae2071",
        "96e2a480ca826e72",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag__s2ag-r2/citations/deletes_0.jsonl.gz": (
        "51b0e3025c1b5496",
        "366d6ab18e519ebf",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag__s2ag-r2/citations/updates_0.jsonl.gz": (
        "928a8c2796904e63",
        "62729972e9f66cf6",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag__s2ag-r2/paper-ids/deletes_0.jsonl.gz": (
        "edab00303a3936cf",
        "259cf7bd8767ff8d",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag__s2ag-r2/paper-ids/updates_0.jsonl.gz": (
        "a134c84cd0a7bc50",
        "6f96ac3ed838ad7e",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag__s2ag-r2/papers/deletes_0.jsonl.gz": ("264c242fe54275de", "29c4333753525ef9"),
    "s2ag-r3/diffs/s2ag/to/s2ag-r3/s2ag__s2ag-r2/papers/updates_0.jsonl.gz": ("ce352bbad61867b0", "c233f33841627b62"),
    "s2ag-r3/diffs/s2ag-r2/to/s2ag-r3/abstracts.json": ("b207361b7659ce22", "b207361b7659ce22"),
    "s2ag-r3/diffs/s2ag-r2/to/s2ag-r3/citations.json": ("f3c703eda778e868", "f3c703eda778e868"),
    "s2ag-r3/diffs/s2ag-r2/to/s2ag-r3/paper-ids.json": ("a762e38dde2bc321", "a762e38dde2bc321"),
    "s2ag-r3/diffs/s2ag-r2/to/s2ag-r3/papers.json": ("5d41dfe39889e029", "5d41dfe39889e029"),
    "s2ag-r3/diffs/s2ag-r2/to/s2ag-r3/s2ag-r2__s2ag-r3/abstracts/deletes_0.jsonl.gz": (
        "c243a58962548900",
        "4e0f7257910134ae",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag-r2/to/s2ag-r3/s2ag-r2__s2ag-r3/abstracts/updates_0.jsonl.gz": (
        "dc87fc120be93834",
        "fa00cc6a9ed0022c",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag-r2/to/s2ag-r3/s2ag-r2__s2ag-r3/citations/deletes_0.jsonl.gz": (
        "f5a3468fdd07077b",
        "e2950036595a7ce4",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag-r2/to/s2ag-r3/s2ag-r2__s2ag-r3/citations/updates_0.jsonl.gz": (
        "dd0cfcb4ecb62001",
        "1abe3500f3520dbe",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag-r2/to/s2ag-r3/s2ag-r2__s2ag-r3/paper-ids/deletes_0.jsonl.gz": (
        "dc7f695288800df8",
        "53d8dfd22dd4d5e9",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag-r2/to/s2ag-r3/s2ag-r2__s2ag-r3/paper-ids/updates_0.jsonl.gz": (
        "5fc790c90f58f24f",
        "357ea81a205e5bef",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag-r2/to/s2ag-r3/s2ag-r2__s2ag-r3/papers/deletes_0.jsonl.gz": (
        "66239faddf5cae2b",
        "2782c152cbebbde7",
    ),  # noqa: E501
    "s2ag-r3/diffs/s2ag-r2/to/s2ag-r3/s2ag-r2__s2ag-r3/papers/updates_0.jsonl.gz": (
        "aa6d2e214da7eeb6",
        "66ffaddcda689ff0",
    ),  # noqa: E501
    "s2ag-r3/generator.json": ("c897f9d968472cc2", "c897f9d968472cc2"),
    "s2ag-r3/paper-ids/paper-ids_0.jsonl.gz": ("10def76f0d5efe89", "1bd6b99e6ea95113"),
    "s2ag-r3/paper_topics.parquet": ("e8a640d8ebee7d18", "44dac2ad3c5e9ed0"),
    "s2ag-r3/release_diff.parquet": ("9715d46414dd6600", "e08266bd6018d98b"),
    "s2ag-r3/scidocs/cite/test.qrel": ("3552befd3041b58d", "3552befd3041b58d"),
    "s2ag-r3/scidocs/cite/val.qrel": ("29f0ab41b87edabd", "29f0ab41b87edabd"),
    "s2ag-r3/scidocs/cocite/test.qrel": ("1fb9cc832f147dfd", "1fb9cc832f147dfd"),
    "s2ag-r3/scidocs/cocite/val.qrel": ("b6ebda60db98571f", "b6ebda60db98571f"),
    "s2ag-r3/scidocs/coread/test.qrel": ("4e01f4c3be08dcaf", "4e01f4c3be08dcaf"),
    "s2ag-r3/scidocs/coread/val.qrel": ("702b53fba582725c", "702b53fba582725c"),
    "s2ag-r3/scidocs/coview/test.qrel": ("6dfa75ab203745f5", "6dfa75ab203745f5"),
    "s2ag-r3/scidocs/coview/val.qrel": ("276e0d06e53089c2", "276e0d06e53089c2"),
    "s2ag-r3/scidocs/mag/test.csv": ("39778014f081b707", "39778014f081b707"),
    "s2ag-r3/scidocs/mag/train.csv": ("711982babdca38d5", "711982babdca38d5"),
    "s2ag-r3/scidocs/mag/val.csv": ("47efd13333ab4dcb", "47efd13333ab4dcb"),
    "s2ag-r3/scidocs/mesh/test.csv": ("3479526fa2f2edc2", "3479526fa2f2edc2"),
    "s2ag-r3/scidocs/mesh/train.csv": ("00db7977413b5914", "00db7977413b5914"),
    "s2ag-r3/scidocs/mesh/val.csv": ("37e9b3207c3293b3", "37e9b3207c3293b3"),
    "s2ag-r3/scidocs/paper_metadata_mag_mesh.json": ("0ee55d02a37916da", "0ee55d02a37916da"),
    "s2ag-r3/scidocs/paper_metadata_recomm.json": ("7adea8d2395de944", "7adea8d2395de944"),
    "s2ag-r3/scidocs/paper_metadata_view_cite_read.json": ("79624d7b144978e3", "79624d7b144978e3"),
    "s2ag-r3/scidocs/recomm/propensity_scores.json": ("2cd88fe41fb4642d", "2cd88fe41fb4642d"),
    "s2ag-r3/scidocs/recomm/test.csv": ("50c8fdaa5577d6e9", "50c8fdaa5577d6e9"),
    "s2ag-r3/scidocs/recomm/train.csv": ("15ea9ad4d09217ec", "15ea9ad4d09217ec"),
    "s2ag-r3/scidocs/recomm/val.csv": ("7fb00cfcb6ee04ba", "7fb00cfcb6ee04ba"),
    "s2ag-r3/scidocs_truth.jsonl": ("26ae02dfbc85d508", "26ae02dfbc85d508"),
}


def _generate(root: Path) -> None:
    for name, args in COMMANDS.items():
        argv = ["generate", "--out", str(root / name)]
        for i, arg in enumerate(args):
            argv.append(str(root / arg) if i and args[i - 1] == "--derive-from" else arg)
        assert main(argv) == 0, name


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _content(path: Path, raw: bytes) -> bytes:
    if path.name.endswith(".gz"):
        return gzip.decompress(raw)
    if path.suffix == ".parquet":
        table = pq.read_table(path)
        columns = [(f.name, str(f.type)) for f in table.schema]
        return json.dumps({"columns": columns, "rows": table.to_pylist()}).encode()
    return raw


def digests(root: Path) -> dict[str, tuple[str, str]]:
    """(content hash, file hash) of every file under the folders COMMANDS made in `root`."""
    out = {}
    marker = str(root.resolve()).encode()
    for name in COMMANDS:
        for path in sorted((root / name).rglob("*")):
            if path.is_file():
                raw = path.read_bytes().replace(marker, b"<root>")
                out[f"{name}/{path.relative_to(root / name).as_posix()}"] = (_sha(_content(path, raw)), _sha(raw))
    return out


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, tuple[str, str]]:
    root = tmp_path_factory.mktemp("bytes")
    _generate(root)
    return digests(root)


def test_every_file_has_the_recorded_content(made):
    assert sorted(made) == sorted(HASHES)
    changed = [name for name in HASHES if made[name][0] != HASHES[name][0]]
    assert changed == []


def test_every_file_has_the_recorded_bytes(made):
    here = {"zlib": zlib.ZLIB_RUNTIME_VERSION, "pyarrow": pa.__version__}
    if here != RECORDED_WITH:
        pytest.skip(f"file bytes were recorded with {RECORDED_WITH}, this is {here}; contents are checked")
    assert sorted(made) == sorted(HASHES)
    changed = [name for name in HASHES if made[name][1] != HASHES[name][1]]
    assert changed == []


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(sys.stderr):
        _generate(Path(tmp))
        table = digests(Path(tmp))
    sys.stdout.write(f"RECORDED_WITH = {json.dumps({'zlib': zlib.ZLIB_RUNTIME_VERSION, 'pyarrow': pa.__version__})}\n")
    sys.stdout.write("HASHES: dict[str, tuple[str, str]] = {\n")
    for name, (content, file) in table.items():
        line = f'    "{name}": ("{content}", "{file}"),'
        sys.stdout.write(line + ("  # noqa: E501" if len(line) > 120 else "") + "\n")
    sys.stdout.write("}\n")
