"""The linear models of the reference evaluators, with their grids, folds and scoring.

- SciDocs MAG / MeSH (allenai/scidocs `scidocs/classification.py`: `classify`): lightning's
  `LinearSVC(loss="squared_hinge", random_state=42)` — a linear SVM without intercept, dual coordinate descent —
  in `GridSearchCV(cv=3, C=logspace(-4, 2, 7))` scored by accuracy. citeflow fits scikit-learn's
  `LinearSVC(fit_intercept=False, dual=True, loss="squared_hinge", random_state=42)`, the same problem solved by
  liblinear (the reference fixture's README: exact in 15 of 16 measured cases, at most 0.93 F1 off; lightning does
  not install from PyPI, see the README). `GridSearchCV(cv=3)` on a classifier is `StratifiedKFold(3)` without
  shuffling, as in the reference's own scikit-learn (< 1.6, where lightning's estimators still were classifiers).
- SciRepEval (allenai/scirepeval `evaluation/evaluator.py`: `SupervisedEvaluator.classify / regression`):
  single-label as above with C in logspace(-2, 2, 5); multi-label `OneVsRestClassifier(GridSearchCV(LinearSVC(
  loss="hinge", max_iter=10000), cv=3))`, i.e. C chosen per label (lightning's estimator there has no
  random_state, so the reference's own runs vary; citeflow pins 42 as the fixture does); regression lightning's
  `LinearSVR(random_state=42)` (ported: `evaluation/lightning_svr.py`) in `GridSearchCV(cv=3, C=logspace(-4, 2,
  7))`, i.e. `KFold(3)` and R² as the CV score, refitted on all training papers with the best C.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

SCIDOCS_C_GRID = np.logspace(-4, 2, 7)
SCIREPEVAL_CLASSIFICATION_C_GRID = np.logspace(-2, 2, 5)
SCIREPEVAL_REGRESSION_C_GRID = np.logspace(-4, 2, 7)
RANDOM_STATE = 42


def _linear_svc(loss: str, max_iter: int = 1000):
    from sklearn.svm import LinearSVC

    # dual is "auto" or a bool (sklearn's docs); its checker type, inferred from the default "auto", is str alone
    return LinearSVC(
        loss=loss,
        fit_intercept=False,
        dual=True,  # pyright: ignore[reportArgumentType]
        max_iter=max_iter,
        random_state=RANDOM_STATE,
    )


def fit_classifier(x, y, *, grid=SCIDOCS_C_GRID, loss="squared_hinge", n_jobs=None) -> tuple[Any, float]:
    """(fitted grid search, chosen C) for a single-label task: accuracy-scored StratifiedKFold(3) over `grid`."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import GridSearchCV

    search = GridSearchCV(_linear_svc(loss), {"C": list(grid)}, cv=3, n_jobs=n_jobs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(x, y)
    return search, float(search.best_params_["C"])


def fit_multilabel(x, y, *, grid=SCIREPEVAL_CLASSIFICATION_C_GRID, n_jobs=None) -> tuple[Any, list[float]]:
    """(fitted one-vs-rest model, C chosen per label) for a multi-hot `y` (n x labels)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import GridSearchCV
    from sklearn.multiclass import OneVsRestClassifier

    search = GridSearchCV(_linear_svc("hinge", max_iter=10000), {"C": list(grid)}, cv=3, n_jobs=n_jobs)
    model = OneVsRestClassifier(search, n_jobs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)  # a label absent from train: a constant predictor, as there
        model.fit(x, y)
    # a label absent from train gets a constant predictor, not a fitted search: no C was chosen for it
    chosen = [float(e.best_params_["C"]) if isinstance(e, GridSearchCV) else float("nan") for e in model.estimators_]
    return model, chosen


def fit_regressor(x, y, *, grid=SCIREPEVAL_REGRESSION_C_GRID, folds: int = 3):
    """(fitted lightning LinearSVR, chosen C): GridSearchCV(cv=3)'s KFold(3), mean R² per C, first best, refit."""
    from sklearn.metrics import r2_score
    from sklearn.model_selection import KFold

    from citeflow.evaluation.lightning_svr import LinearSVR, fit_path

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    grid = [float(c) for c in grid]
    scores = np.zeros((folds, len(grid)))
    for fold, (train, test) in enumerate(KFold(folds).split(x)):
        weights = fit_path(x[train], y[train], grid, random_state=RANDOM_STATE)  # every C in lockstep
        for j, w in enumerate(weights):
            scores[fold, j] = r2_score(y[test], x[test] @ w)
    mean = np.nan_to_num(scores.mean(axis=0), nan=-np.inf)
    best = grid[int(np.argmax(mean))]  # GridSearchCV's rank_test_score: ties go to the first C of the grid
    return LinearSVR(C=best, random_state=RANDOM_STATE).fit(x, y), best
