"""`citeflow generate` keeps its bytes: small snapshots (both formats) and releases derived from them, made
through the command line, hashed file by file and compared with hashes recorded from commit 98fa7f7 (before
the generator moved out of jobs/).

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

from jobs.cli import main

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

# folder/file -> (content hash, file hash), sha256 hex truncated to 16 characters.
HASHES: dict[str, tuple[str, str]] = {
    "s2orc/corpus/metadata/metadata_0.jsonl.gz": ("89651ff9914b50c0", "a5995dead90ee286"),
    "s2orc/corpus/metadata/metadata_1.jsonl.gz": ("a62bda6b6b8002a7", "78eff19503823077"),
    "s2orc/corpus/metadata/metadata_2.jsonl.gz": ("d9d13d5b6d3301d0", "23665ddc0be82476"),
    "s2orc/generator.json": ("852c5601ec5fbbcf", "852c5601ec5fbbcf"),
    "s2orc/paper-ids/paper-ids_0.jsonl.gz": ("18c688c0de2f9f82", "7c75b5abbc189087"),
    "s2orc/paper_topics.parquet": ("4832abccdfb2d338", "f7ad047b4599fa36"),
    "s2orc/scidocs/cite/test.qrel": ("1d8b711e321f8b5e", "1d8b711e321f8b5e"),
    "s2orc/scidocs/cite/val.qrel": ("01dfbac421df0c1c", "01dfbac421df0c1c"),
    "s2orc/scidocs/cocite/test.qrel": ("9a5dc5377b2a0c4d", "9a5dc5377b2a0c4d"),
    "s2orc/scidocs/cocite/val.qrel": ("2b54477bcae1beb8", "2b54477bcae1beb8"),
    "s2orc/scidocs/coread/test.qrel": ("459639b2cdbbe70e", "459639b2cdbbe70e"),
    "s2orc/scidocs/coread/val.qrel": ("1d379f3ba4d1e338", "1d379f3ba4d1e338"),
    "s2orc/scidocs/coview/test.qrel": ("ff32981b81f153f4", "ff32981b81f153f4"),
    "s2orc/scidocs/coview/val.qrel": ("70ed98a787f6ab8c", "70ed98a787f6ab8c"),
    "s2orc/scidocs/mag/test.csv": ("1e5bc031ede91cd7", "1e5bc031ede91cd7"),
    "s2orc/scidocs/mag/train.csv": ("67c1cf86bdc5b1ba", "67c1cf86bdc5b1ba"),
    "s2orc/scidocs/mag/val.csv": ("8e81af41ea942847", "8e81af41ea942847"),
    "s2orc/scidocs/mesh/test.csv": ("01144718b17bd243", "01144718b17bd243"),
    "s2orc/scidocs/mesh/train.csv": ("7f48298a4d504947", "7f48298a4d504947"),
    "s2orc/scidocs/mesh/val.csv": ("89c9d0466be55ed5", "89c9d0466be55ed5"),
    "s2orc/scidocs/paper_metadata_mag_mesh.json": ("f63fc52e6a2b197d", "f63fc52e6a2b197d"),
    "s2orc/scidocs/paper_metadata_view_cite_read.json": ("4af7612933acefa9", "4af7612933acefa9"),
    "s2orc/scidocs_truth.jsonl": ("28a8e12a2788b3b0", "28a8e12a2788b3b0"),
    "s2ag/corpus/abstracts/abstracts_0.jsonl.gz": ("6be0d00e520a864e", "7bc18e9ddfe26a0f"),
    "s2ag/corpus/abstracts/abstracts_1.jsonl.gz": ("ebcc7c6a373b9612", "d7c4e84d06cfb29d"),
    "s2ag/corpus/citations/citations_0.jsonl.gz": ("1c29d9df7c8e59f2", "dc4942a7dd24543c"),
    "s2ag/corpus/citations/citations_1.jsonl.gz": ("5e8ade261e49aad3", "bde747c2e36de2fe"),
    "s2ag/corpus/papers/papers_0.jsonl.gz": ("936cf244134db018", "9bab2262efacface"),
    "s2ag/corpus/papers/papers_1.jsonl.gz": ("8fb855afc8d8662c", "03cbfc0ff22ac519"),
    "s2ag/generator.json": ("a3015674aa2a5b98", "a3015674aa2a5b98"),
    "s2ag/paper-ids/paper-ids_0.jsonl.gz": ("b700360664b30f69", "30c6b56c074ef953"),
    "s2ag/paper_topics.parquet": ("cf8ad58ced31fbcf", "9010668d336e66e8"),
    "s2ag/scidocs/cite/test.qrel": ("caa4841cebe7011b", "caa4841cebe7011b"),
    "s2ag/scidocs/cite/val.qrel": ("9fb2e4758acc2839", "9fb2e4758acc2839"),
    "s2ag/scidocs/cocite/test.qrel": ("a6cbc36fc1ba0e26", "a6cbc36fc1ba0e26"),
    "s2ag/scidocs/cocite/val.qrel": ("9a3d007c89d4334e", "9a3d007c89d4334e"),
    "s2ag/scidocs/coread/test.qrel": ("ab91bf49112ae884", "ab91bf49112ae884"),
    "s2ag/scidocs/coread/val.qrel": ("5e5d97541255b833", "5e5d97541255b833"),
    "s2ag/scidocs/coview/test.qrel": ("2088affaca3eab5c", "2088affaca3eab5c"),
    "s2ag/scidocs/coview/val.qrel": ("7560a8921ba54bb2", "7560a8921ba54bb2"),
    "s2ag/scidocs/mag/test.csv": ("f038358414d27f1d", "f038358414d27f1d"),
    "s2ag/scidocs/mag/train.csv": ("869b02b61f0d7089", "869b02b61f0d7089"),
    "s2ag/scidocs/mag/val.csv": ("6fa505feb5fe9eda", "6fa505feb5fe9eda"),
    "s2ag/scidocs/mesh/test.csv": ("2fc392ba0c2924ab", "2fc392ba0c2924ab"),
    "s2ag/scidocs/mesh/train.csv": ("9b45d93edd7e133c", "9b45d93edd7e133c"),
    "s2ag/scidocs/mesh/val.csv": ("04cb2b686fda056d", "04cb2b686fda056d"),
    "s2ag/scidocs/paper_metadata_mag_mesh.json": ("a9ec3f70a4c8f582", "a9ec3f70a4c8f582"),
    "s2ag/scidocs/paper_metadata_view_cite_read.json": ("fed2774cac3e2b8e", "fed2774cac3e2b8e"),
    "s2ag/scidocs_truth.jsonl": ("f799e3356cc15be9", "f799e3356cc15be9"),
    "s2orc-r2/corpus/metadata/metadata_0.jsonl.gz": ("2a2ba34237a711ac", "fed27f8295c467f6"),
    "s2orc-r2/corpus/metadata/metadata_1.jsonl.gz": ("88427541146f1f78", "764f9a8991281637"),
    "s2orc-r2/corpus/metadata/metadata_2.jsonl.gz": ("5ba4c173fa66ae58", "535d83b747ece94f"),
    "s2orc-r2/generator.json": ("54470b545417f9a0", "54470b545417f9a0"),
    "s2orc-r2/paper-ids/paper-ids_0.jsonl.gz": ("3e17bdfcdfa19ce7", "1c53ad462ed53239"),
    "s2orc-r2/paper_topics.parquet": ("df808863012838e2", "e786d5a20b094e2f"),
    "s2orc-r2/release_diff.parquet": ("b47e7e38e657b436", "7f07cb9f21187ee4"),
    "s2orc-r2/scidocs/cite/test.qrel": ("1d8b711e321f8b5e", "1d8b711e321f8b5e"),
    "s2orc-r2/scidocs/cite/val.qrel": ("01dfbac421df0c1c", "01dfbac421df0c1c"),
    "s2orc-r2/scidocs/cocite/test.qrel": ("9a5dc5377b2a0c4d", "9a5dc5377b2a0c4d"),
    "s2orc-r2/scidocs/cocite/val.qrel": ("2b54477bcae1beb8", "2b54477bcae1beb8"),
    "s2orc-r2/scidocs/coread/test.qrel": ("459639b2cdbbe70e", "459639b2cdbbe70e"),
    "s2orc-r2/scidocs/coread/val.qrel": ("1d379f3ba4d1e338", "1d379f3ba4d1e338"),
    "s2orc-r2/scidocs/coview/test.qrel": ("ff32981b81f153f4", "ff32981b81f153f4"),
    "s2orc-r2/scidocs/coview/val.qrel": ("70ed98a787f6ab8c", "70ed98a787f6ab8c"),
    "s2orc-r2/scidocs/mag/test.csv": ("1e5bc031ede91cd7", "1e5bc031ede91cd7"),
    "s2orc-r2/scidocs/mag/train.csv": ("67c1cf86bdc5b1ba", "67c1cf86bdc5b1ba"),
    "s2orc-r2/scidocs/mag/val.csv": ("8e81af41ea942847", "8e81af41ea942847"),
    "s2orc-r2/scidocs/mesh/test.csv": ("01144718b17bd243", "01144718b17bd243"),
    "s2orc-r2/scidocs/mesh/train.csv": ("7f48298a4d504947", "7f48298a4d504947"),
    "s2orc-r2/scidocs/mesh/val.csv": ("89c9d0466be55ed5", "89c9d0466be55ed5"),
    "s2orc-r2/scidocs/paper_metadata_mag_mesh.json": ("f63fc52e6a2b197d", "f63fc52e6a2b197d"),
    "s2orc-r2/scidocs/paper_metadata_view_cite_read.json": ("4af7612933acefa9", "4af7612933acefa9"),
    "s2orc-r2/scidocs_truth.jsonl": ("28a8e12a2788b3b0", "28a8e12a2788b3b0"),
    "s2ag-r2/corpus/abstracts/abstracts_0.jsonl.gz": ("97e450a468a59e5d", "e4c58623b2371198"),
    "s2ag-r2/corpus/abstracts/abstracts_1.jsonl.gz": ("6fa5f23127c74025", "5d84f26e994a8c73"),
    "s2ag-r2/corpus/citations/citations_0.jsonl.gz": ("5d79ff748ee7c26e", "fcadb101f1216ff5"),
    "s2ag-r2/corpus/citations/citations_1.jsonl.gz": ("0019430d73836c54", "d25345b63003b45e"),
    "s2ag-r2/corpus/papers/papers_0.jsonl.gz": ("11afe4ee5334479e", "7d2612f837da7498"),
    "s2ag-r2/corpus/papers/papers_1.jsonl.gz": ("5c227aa404109119", "af39e3b142e5e2d4"),
    "s2ag-r2/generator.json": ("92afbc1e8ced707b", "92afbc1e8ced707b"),
    "s2ag-r2/paper-ids/paper-ids_0.jsonl.gz": ("0043ab23b200aa15", "e4969388d669fbd0"),
    "s2ag-r2/paper_topics.parquet": ("1802af9511d24dc3", "90f5ff65167c0707"),
    "s2ag-r2/release_diff.parquet": ("ff51136aad385335", "97a76ba4b3b59289"),
    "s2ag-r2/scidocs/cite/test.qrel": ("caa4841cebe7011b", "caa4841cebe7011b"),
    "s2ag-r2/scidocs/cite/val.qrel": ("9fb2e4758acc2839", "9fb2e4758acc2839"),
    "s2ag-r2/scidocs/cocite/test.qrel": ("a6cbc36fc1ba0e26", "a6cbc36fc1ba0e26"),
    "s2ag-r2/scidocs/cocite/val.qrel": ("9a3d007c89d4334e", "9a3d007c89d4334e"),
    "s2ag-r2/scidocs/coread/test.qrel": ("ab91bf49112ae884", "ab91bf49112ae884"),
    "s2ag-r2/scidocs/coread/val.qrel": ("5e5d97541255b833", "5e5d97541255b833"),
    "s2ag-r2/scidocs/coview/test.qrel": ("2088affaca3eab5c", "2088affaca3eab5c"),
    "s2ag-r2/scidocs/coview/val.qrel": ("7560a8921ba54bb2", "7560a8921ba54bb2"),
    "s2ag-r2/scidocs/mag/test.csv": ("f038358414d27f1d", "f038358414d27f1d"),
    "s2ag-r2/scidocs/mag/train.csv": ("869b02b61f0d7089", "869b02b61f0d7089"),
    "s2ag-r2/scidocs/mag/val.csv": ("6fa505feb5fe9eda", "6fa505feb5fe9eda"),
    "s2ag-r2/scidocs/mesh/test.csv": ("2fc392ba0c2924ab", "2fc392ba0c2924ab"),
    "s2ag-r2/scidocs/mesh/train.csv": ("9b45d93edd7e133c", "9b45d93edd7e133c"),
    "s2ag-r2/scidocs/mesh/val.csv": ("04cb2b686fda056d", "04cb2b686fda056d"),
    "s2ag-r2/scidocs/paper_metadata_mag_mesh.json": ("a9ec3f70a4c8f582", "a9ec3f70a4c8f582"),
    "s2ag-r2/scidocs/paper_metadata_view_cite_read.json": ("fed2774cac3e2b8e", "fed2774cac3e2b8e"),
    "s2ag-r2/scidocs_truth.jsonl": ("f799e3356cc15be9", "f799e3356cc15be9"),
    "s2ag-r3/corpus/abstracts/abstracts_0.jsonl.gz": ("e22f600da08899e3", "b0c765eb184e62ad"),
    "s2ag-r3/corpus/abstracts/abstracts_1.jsonl.gz": ("f89eefe163d4589e", "03160728b8a4dbc8"),
    "s2ag-r3/corpus/citations/citations_0.jsonl.gz": ("354ec9fc93440d8f", "985b72f8f9b393e1"),
    "s2ag-r3/corpus/citations/citations_1.jsonl.gz": ("3cf10e0143079a1c", "5e8e3ced78027c7b"),
    "s2ag-r3/corpus/papers/papers_0.jsonl.gz": ("bfc7968217b28426", "a8aef0fe287761de"),
    "s2ag-r3/corpus/papers/papers_1.jsonl.gz": ("3e1f1f47a9bc598f", "b073cc4dadd76a6a"),
    "s2ag-r3/generator.json": ("07ecb30b52148a2a", "07ecb30b52148a2a"),
    "s2ag-r3/paper-ids/paper-ids_0.jsonl.gz": ("76ed888bfb66a9ba", "6c2ded0df4e87b09"),
    "s2ag-r3/paper_topics.parquet": ("b239059b5620caf9", "cf4c5ed5f39a2000"),
    "s2ag-r3/release_diff.parquet": ("58870a331344478b", "498f787d49015cf6"),
    "s2ag-r3/scidocs/cite/test.qrel": ("caa4841cebe7011b", "caa4841cebe7011b"),
    "s2ag-r3/scidocs/cite/val.qrel": ("9fb2e4758acc2839", "9fb2e4758acc2839"),
    "s2ag-r3/scidocs/cocite/test.qrel": ("a6cbc36fc1ba0e26", "a6cbc36fc1ba0e26"),
    "s2ag-r3/scidocs/cocite/val.qrel": ("9a3d007c89d4334e", "9a3d007c89d4334e"),
    "s2ag-r3/scidocs/coread/test.qrel": ("ab91bf49112ae884", "ab91bf49112ae884"),
    "s2ag-r3/scidocs/coread/val.qrel": ("5e5d97541255b833", "5e5d97541255b833"),
    "s2ag-r3/scidocs/coview/test.qrel": ("2088affaca3eab5c", "2088affaca3eab5c"),
    "s2ag-r3/scidocs/coview/val.qrel": ("7560a8921ba54bb2", "7560a8921ba54bb2"),
    "s2ag-r3/scidocs/mag/test.csv": ("f038358414d27f1d", "f038358414d27f1d"),
    "s2ag-r3/scidocs/mag/train.csv": ("869b02b61f0d7089", "869b02b61f0d7089"),
    "s2ag-r3/scidocs/mag/val.csv": ("6fa505feb5fe9eda", "6fa505feb5fe9eda"),
    "s2ag-r3/scidocs/mesh/test.csv": ("2fc392ba0c2924ab", "2fc392ba0c2924ab"),
    "s2ag-r3/scidocs/mesh/train.csv": ("9b45d93edd7e133c", "9b45d93edd7e133c"),
    "s2ag-r3/scidocs/mesh/val.csv": ("04cb2b686fda056d", "04cb2b686fda056d"),
    "s2ag-r3/scidocs/paper_metadata_mag_mesh.json": ("a9ec3f70a4c8f582", "a9ec3f70a4c8f582"),
    "s2ag-r3/scidocs/paper_metadata_view_cite_read.json": ("fed2774cac3e2b8e", "fed2774cac3e2b8e"),
    "s2ag-r3/scidocs_truth.jsonl": ("f799e3356cc15be9", "f799e3356cc15be9"),
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
        sys.stdout.write(f'    "{name}": ("{content}", "{file}"),\n')
    sys.stdout.write("}\n")
