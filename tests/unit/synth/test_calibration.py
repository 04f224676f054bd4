"""The real statistics the generator is calibrated on (citeflow/synth/calibration.py): the recorded TARGETS are
what `python -m citeflow.synth.calibration` measures on the real samples (skipped without shared/data beside the
checkout)."""

from __future__ import annotations

from citeflow.synth.calibration import BOUNDS, TARGETS, UNMATCHED, measure_real


def test_recorded_targets_equal_a_fresh_measurement(shared_data):
    measured, other = measure_real(shared_data)
    assert measured == {**TARGETS, **UNMATCHED}
    assert len(other) == 6  # the other samples' lengths, for comparison


def test_every_target_has_a_bound():
    assert set(BOUNDS) == set(TARGETS) and all(b > 0 for b in BOUNDS.values())
