"""lightning's `LinearSVR`, ported to numpy: the regressor SciRepEval's reference evaluator uses.

Follows scikit-learn-contrib/lightning 0.6.2 (`lightning/impl/dual_cd.py`: `LinearSVR`; its solver
`lightning/impl/dual_cd_fast.pyx`: `_dual_cd_svr`; the permutation RNG `lightning/impl/randomkit/random_fast.pyx`:
`RandomState.shuffle`). Why a port: `sklearn-contrib-lightning` ships only an sdist that does not build with pip's
defaults (see the README), and no scikit-learn estimator solves the same problem the same way — liblinear's
`LinearSVR(fit_intercept=False, dual=True)` was up to 28 Kendall-tau points away on the reference fixture.

The algorithm, as the Cython solver runs it (quirks kept, they decide the result):
- dual coordinate descent on two dual variables per sample (alpha+ and alpha-), no intercept unless asked;
- each epoch shuffles the sample order A with lightning's own RandomState (MT19937 seeded like numpy's legacy
  `RandomState(seed)`, shuffled with the same `rk_interval` draws as numpy's legacy `shuffle`), then visits
  s = 0 .. 2n-1, sample i = A[s mod n], and updates the dual variable *number s* (not 2i or 2i+1: the variable a
  step updates is tied to the slot, whichever sample the shuffle put there), the "+" side when s is even;
- gradient G = ±(w·x_i - y_i) + epsilon + lambda * alpha_s, projected at the bounds [0, U]
  (U = C, lambda = 0 for the epsilon-insensitive loss; U = inf, lambda = 1/(2C) for the squared one);
  a step is taken when |PG| > 1e-12: alpha_s <- clip(alpha_s - G / (|x_i|^2 + lambda), 0, U), w += ±delta x_i;
- stop when the epoch's summed |PG| falls below tol times the first epoch's (never when that first sum is 0).
Sums run in sample-feature order (`cumsum`), as the C loops do, so w matches lightning's to the bit on the
reference fixture. `fit_path` runs several C values in lockstep (the shuffles do not depend on C), which the grid
search in `evaluation/svm.py` uses.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

LOSSES = {"epsilon_insensitive": 1, "l1": 1, "squared_epsilon_insensitive": 2, "l2": 2}


def _sequential_dot(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """Row-wise dot products summed left to right, as lightning's C loops sum (not BLAS's blocked order)."""
    return np.cumsum(matrix * vector, axis=-1)[..., -1]


def fit_path(
    x: np.ndarray,
    y: np.ndarray,
    cs: Sequence[float] | np.ndarray,
    *,
    epsilon: float = 0.0,
    loss: str = "epsilon_insensitive",
    max_iter: int = 1000,
    tol: float = 1e-3,
    permute: bool = True,
    random_state: int | None = None,
) -> np.ndarray:
    """Primal weights (len(cs) x n_features) of lightning's `_dual_cd_svr`, one row per C, all fitted in lockstep."""
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {sorted(LOSSES)}, not {loss!r}")
    x = np.ascontiguousarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    n, d = x.shape
    if len(y) != n:
        raise ValueError(f"x has {n} rows but y has {len(y)} values")
    cs = np.asarray(cs, dtype=np.float64).reshape(-1)
    k = len(cs)
    if LOSSES[loss] == 1:
        upper, lmbda = cs.copy(), np.zeros(k)
    else:
        upper, lmbda = np.full(k, np.finfo(np.float64).max), 1 / (2 * cs)
    # lightning's RandomState(seed) is MT19937 with numpy's legacy integer seeding; None seeds from the OS, as there
    rng = np.random.RandomState(random_state)
    order = np.arange(n, dtype=np.int64)
    w = np.zeros((k, d))
    alpha = np.zeros((k, 2 * n))
    sqnorms = _sequential_dot(x, x)[:, None] + lmbda[None, :]  # (n, k)
    active = np.ones(k, dtype=bool)
    initial = np.zeros(k)
    with np.errstate(divide="ignore", invalid="ignore"):
        for t in range(max_iter):
            if permute:
                rng.shuffle(order)
            violation = np.zeros(k)
            for s in range(2 * n):
                i = order[s % n]
                row = x[i]
                pred = _sequential_dot(w, row)
                old = alpha[:, s].copy()
                positive = s % 2 == 0
                gradient = (pred - y[i] if positive else y[i] - pred) + epsilon + lmbda * old
                projected = np.where(
                    old == 0, np.minimum(gradient, 0.0), np.where(old == upper, np.maximum(gradient, 0.0), gradient)
                )
                size = np.abs(projected)
                violation += np.where(active, size, 0.0)
                step = active & (size > 1e-12)
                if not step.any():
                    continue
                new = np.minimum(np.maximum(old - gradient / sqnorms[i], 0.0), upper)
                new = np.where(step, new, old)
                alpha[:, s] = new
                delta = new - old if positive else old - new
                if (delta != 0).any():
                    w += delta[:, None] * row[None, :]
            if t == 0:
                initial = violation.copy()
            active &= ~(violation / initial < tol)
            if not active.any():
                break
    return w


class LinearSVR(RegressorMixin, BaseEstimator):
    """lightning.regression.LinearSVR (0.6.2) with its defaults: epsilon 0, epsilon-insensitive loss, no intercept,
    1,000 epochs, tol 1e-3, permuted coordinates. `random_state=None` seeds from the OS, as lightning does."""

    def __init__(
        self,
        C: float = 1.0,
        epsilon: float = 0.0,
        loss: str = "epsilon_insensitive",
        max_iter: int = 1000,
        tol: float = 1e-3,
        fit_intercept: bool = False,
        permute: bool = True,
        random_state: int | None = None,
    ):
        self.C = C
        self.epsilon = epsilon
        self.loss = loss
        self.max_iter = max_iter
        self.tol = tol
        self.fit_intercept = fit_intercept
        self.permute = permute
        self.random_state = random_state

    def fit(self, x, y):
        x = np.asarray(x, dtype=np.float64)
        if self.fit_intercept:  # lightning adds a constant-1 first column and splits its weight off afterwards
            x = np.hstack([np.ones((len(x), 1)), x])
        w = fit_path(
            x,
            y,
            [self.C],
            epsilon=self.epsilon,
            loss=self.loss,
            max_iter=self.max_iter,
            tol=self.tol,
            permute=self.permute,
            random_state=self.random_state,
        )[0]
        self.intercept_ = float(w[0]) if self.fit_intercept else 0.0
        self.coef_ = w[1:] if self.fit_intercept else w
        return self

    def predict(self, x):
        return np.asarray(x, dtype=np.float64) @ self.coef_ + self.intercept_
