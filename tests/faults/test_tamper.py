"""Tampered versions are never trusted (issue #16, attack 3): every read checks, verify names the file,
--repair moves the damage aside and rebuilds exactly the reference version."""

from __future__ import annotations

import json
import os

import pytest

from tests.faults.conftest import SNAPSHOT, digest, error_lines, finish, read


def _verify(root, capsys, stage):
    from citeflow.jobs.cli import main

    code = main(["verify", "--artifacts", str(root), "--snapshot", SNAPSHOT, "--stage", stage])
    return code, capsys.readouterr().out


def _first_part(folder):
    return sorted(p for p in folder.iterdir() if p.name.startswith("part-") and p.suffix == ".parquet")[0]


def test_edited_manifest_and_deleted_part_of_build_graph(world, capsys):
    """The issue's attack: edit `tables.papers.rows`, delete a part. Before: `citeflow artifacts` showed the
    edited count, the rerun said "up to date" and filter_leakage was built on the damaged table."""
    from citeflow.jobs import build_graph, filter_leakage
    from citeflow.manifest import DamagedVersion

    reference = world.manifests["build_graph"]
    root = world.copy("tamper-build-graph", without=("filter_leakage", "embed_graph", "mine_triplets", "train_encoder"))
    folder = root / SNAPSHOT / "build_graph" / reference.version
    manifest = json.loads((folder / "_manifest.json").read_text())
    manifest["tables"]["papers"]["rows"] += 1
    (folder / "_manifest.json").write_text(json.dumps(manifest, indent=2))
    code, out = _verify(root, capsys, "build_graph")
    assert code == 1 and "_manifest.json: its checksum does not match its content: the manifest was edited" in out
    with pytest.raises(DamagedVersion, match="the manifest was edited"):
        build_graph.run(world.config(root))

    # the intact manifest back, and a deleted part instead
    (folder / "_manifest.json").write_bytes(
        (world.reference / SNAPSHOT / "build_graph" / reference.version / "_manifest.json").read_bytes()
    )
    part = _first_part(folder / "papers")
    part.unlink()
    code, out = _verify(root, capsys, "build_graph")
    assert code == 1 and f"papers/{part.name} is missing" in out
    # a downstream stage reading it stops with one line naming the file: nothing is built on damage
    with pytest.raises(
        DamagedVersion,
        match=f"build_graph version {reference.version} of snapshot faults is damaged: papers/{part.name} is missing",
    ):
        filter_leakage.run(world.config(root))
    assert not (root / SNAPSHOT / "filter_leakage").exists() or not any(
        p.name != ".leases.lock" for p in (root / SNAPSHOT / "filter_leakage").iterdir()
    )


def test_truncated_file_is_found_and_repaired_to_the_reference(world, capsys):
    from citeflow.jobs import embed_graph
    from citeflow.manifest import DamagedVersion

    reference = world.manifests["embed_graph"]
    root = world.copy("tamper-embed-graph", without=("mine_triplets", "train_encoder"))
    folder = root / SNAPSHOT / "embed_graph" / reference.version
    target = folder / "paper_embeddings" / "part-0.parquet"
    truncated = target.stat().st_size // 2
    os.truncate(target, truncated)
    code, out = _verify(root, capsys, "embed_graph")
    assert code == 1 and "paper_embeddings/part-0.parquet has" in out
    with pytest.raises(DamagedVersion, match="paper_embeddings/part-0.parquet has .* bytes, the manifest says"):
        embed_graph.run(world.config(root))
    repaired = embed_graph.run(world.config(root, "store.repair=true"))
    assert not repaired.skipped and digest(repaired) == world.digests["embed_graph"]
    (aside,) = (root / SNAPSHOT / "embed_graph" / ".damaged").iterdir()
    assert aside.name.startswith(reference.version + "-")  # the evidence, kept as it was
    assert (aside / "paper_embeddings" / "part-0.parquet").stat().st_size == truncated
    assert _verify(root, capsys, "embed_graph")[0] == 0


def test_same_size_tampering_is_found_by_verify_and_by_repair(world, capsys):
    from citeflow.jobs import mine_triplets

    reference = world.manifests["mine_triplets"]
    root = world.copy("tamper-mine", without=("train_encoder",))
    target = root / SNAPSHOT / "mine_triplets" / reference.version / "triplets" / "part-0.parquet"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit, same size: only a content hash sees it
    target.write_bytes(bytes(data))
    code, out = _verify(root, capsys, "mine_triplets")
    assert code == 1 and "triplets/part-0.parquet: content hash differs from the manifest" in out
    repaired = mine_triplets.run(world.config(root, "store.repair=true"))
    assert not repaired.skipped and digest(repaired) == world.digests["mine_triplets"]
    assert _verify(root, capsys, "mine_triplets")[0] == 0
    assert digest(read(root, "mine_triplets")) == world.digests["mine_triplets"]


def test_bytes_flipped_in_a_committed_input_stop_the_next_run_and_repair_rebuilds_it(world):
    """Same size, other bytes: the cheap check of every read passes, so the run called build_graph up to
    date and built filter_leakage on it. The stage re-hashes its inputs before it builds."""
    graph = world.manifests["build_graph"]
    root = world.copy("flipped-input", without=("filter_leakage", "embed_graph", "mine_triplets", "train_encoder"))
    folder = root / SNAPSHOT / "build_graph" / graph.version
    part = _first_part(folder / "papers")
    data = bytearray(part.read_bytes())
    data[len(data) // 3] ^= 0x10
    part.write_bytes(bytes(data))

    code, log = finish(world.cli(root, "filter_leakage"))
    assert code == 2 and "Traceback" not in log, log
    assert error_lines(log) == [
        f"citeflow: error: filter_leakage cannot build on build_graph version {graph.version} of snapshot "
        f"{SNAPSHOT}, which is damaged: {part}: content hash differs from the manifest (same size, other bytes). "
        f"`citeflow run ... --repair` moves it aside and rebuilds it (`citeflow verify --snapshot {SNAPSHOT} "
        "--stage build_graph` lists every problem)"
    ]
    stage = root / SNAPSHOT / "filter_leakage"
    assert not stage.exists() or [p.name for p in stage.iterdir()] == []  # nothing built or left, no lock file

    code, log = finish(world.cli(root, "filter_leakage", args=("--repair",)))
    assert code == 0, log[-4000:]
    (aside,) = (root / SNAPSHOT / "build_graph" / ".damaged").iterdir()
    assert (aside / "papers" / part.name).read_bytes() == bytes(data)  # the evidence, as it was
    for name in ("build_graph", "filter_leakage"):
        assert digest(read(root, name)) == world.digests[name], name
