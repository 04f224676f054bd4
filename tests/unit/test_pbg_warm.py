"""models/pbg/warm.py: the init_path folder, read back by PBG's own CheckpointManager (the reader `train` uses)."""

import json

import numpy as np
import pytest

pytest.importorskip("torchbiggraph")


def test_survivors_keep_their_vectors_and_new_papers_start_small(tmp_path):
    from torchbiggraph.checkpoint_manager import CheckpointManager

    from citeflow.models.pbg import compat as pbg_compat
    from citeflow.models.pbg.warm import pbg_init_scale, write_init

    pbg_compat.apply()
    entities = tmp_path / "entities"
    entities.mkdir()
    # the new release's entity order: 11, 30 (new), 7 in partition 0; 99 (new), 5 in partition 1
    (entities / "entity_names_paper_0.json").write_text(json.dumps(["11", "30", "7"]))
    (entities / "entity_names_paper_1.json").write_text(json.dumps(["99", "5"]))
    previous_ids = np.array([5, 7, 11, 12], dtype=np.int64)  # 12 is gone from the new release
    previous = np.arange(16, dtype=np.float32).reshape(4, 4) + 1
    counts = write_init(tmp_path / "init", entities, 2, previous_ids, previous, init_scale=1e-3, seed=0)
    assert counts == {"kept": 3, "new": 2}

    reader = CheckpointManager(str(tmp_path / "init"))
    part0, optim0 = reader.maybe_read("paper", 0)
    part1, _ = reader.maybe_read("paper", 1)
    assert optim0 is None
    assert part0.shape == (3, 4) and part1.shape == (2, 4)
    np.testing.assert_array_equal(part0[0].numpy(), previous[2])  # paper 11
    np.testing.assert_array_equal(part0[2].numpy(), previous[1])  # paper 7
    np.testing.assert_array_equal(part1[1].numpy(), previous[0])  # paper 5
    for row in (part0[1], part1[0]):  # papers 30 and 99: random, at PBG's init scale
        assert 0 < float(row.abs().max()) < 0.01
    assert pbg_init_scale() == 1e-3  # PBG's default, which the stage passes unless pbg= sets init_scale
