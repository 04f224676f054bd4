"""The port of lightning's LinearSVR (evaluation/lightning_svr.py). Its oracle is the reference fixture
(tests/unit/test_reference_scirepeval.py: both regression tasks to the last bit); these tests pin its parts."""

from __future__ import annotations

import numpy as np
import pytest

from citeflow.evaluation.lightning_svr import LinearSVR, fit_path


def test_the_permutation_rng_is_mt19937_seeded_as_randomkit():
    # randomkit's rk_seed is MT19937's init_genrand; its first output for the reference seed 5489 is 3499211612
    # (Matsumoto & Nishimura's reference implementation), which numpy's legacy RandomState reproduces
    assert np.random.RandomState(5489).randint(0, 2**32, dtype=np.uint64) == 3499211612


def test_recovers_an_exact_linear_target():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 4))
    w = np.array([1.0, -2.0, 0.5, 3.0])
    model = LinearSVR(C=100.0, random_state=42, max_iter=5000, tol=1e-6).fit(x, x @ w)
    assert model.coef_ == pytest.approx(w, abs=1e-3)
    assert model.intercept_ == 0.0  # lightning's default: no intercept


def test_no_intercept_by_default_and_one_when_asked():
    x = np.linspace(-1, 1, 40).reshape(-1, 1)
    y = 2 * x.ravel() + 10  # an offset the default model cannot fit
    plain = LinearSVR(C=10.0, random_state=0).fit(x, y)
    with_intercept = LinearSVR(C=10.0, random_state=0, fit_intercept=True, max_iter=5000, tol=1e-6).fit(x, y)
    assert np.abs(plain.predict(x) - y).min() > 5
    assert with_intercept.intercept_ == pytest.approx(10.0, abs=0.05) and with_intercept.coef_[0] == pytest.approx(
        2.0, abs=0.05
    )


@pytest.mark.slow  # fits every grid point twice: make test, not make test-fast
def test_lockstep_path_equals_separate_fits_bit_for_bit():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 6)).astype(np.float32)
    y = rng.normal(size=50)
    cs = [1e-3, 1e-1, 10.0]
    path = fit_path(x, y, cs, random_state=42)
    for c, w in zip(cs, path, strict=True):
        assert np.array_equal(w, LinearSVR(C=c, random_state=42).fit(x, y).coef_)


def test_squared_loss_and_bad_input():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(30, 3))
    y = x @ np.array([1.0, 1.0, -1.0])
    model = LinearSVR(C=10.0, loss="squared_epsilon_insensitive", random_state=1).fit(x, y)
    assert np.corrcoef(model.predict(x), y)[0, 1] > 0.99
    with pytest.raises(ValueError):
        fit_path(x, y, [1.0], loss="huber")
    with pytest.raises(ValueError):
        fit_path(x, y[:-1], [1.0])


def test_bit_identical_to_lightning_when_it_is_installed():
    """With sklearn-contrib-lightning importable (it does not install with pip's defaults, see the README), the
    port's weights equal lightning's own, bit for bit."""
    reference = pytest.importorskip("lightning.regression")
    rng = np.random.default_rng(0)
    for n, d, c, loss in [(40, 5, 1e-2, "epsilon_insensitive"), (120, 16, 100.0, "squared_epsilon_insensitive")]:
        x = rng.normal(size=(n, d)).astype(np.float32)
        y = x @ rng.normal(size=d) + rng.normal(size=n) + 2011.0
        theirs = reference.LinearSVR(C=c, loss=loss, random_state=42).fit(x, y).coef_.ravel()
        assert np.array_equal(LinearSVR(C=c, loss=loss, random_state=42).fit(x, y).coef_, theirs)
