"""The cost model: predicts a configuration's ``log(cycles / roofline)`` from its features.

:class:`TreeModel` is gradient-boosted trees (XGBoost's CPU package, the ``tune`` extra:
``pip install 'openvta[tune]'``), refitted after every batch, single-threaded and seeded so
that a search is reproducible.  Without XGBoost, :func:`cost_model` falls back to
:class:`RidgeModel`: ridge regression in numpy on the standardized features and their
squares — weaker on the knobs' interactions (a tile that fits only with fewer threads),
but enough to steer the search away from the slowest regions.

>>> import numpy as np
>>> x = np.array([[0.0], [1.0], [2.0], [3.0]])
>>> model = RidgeModel().fit(x, 2 * x[:, 0] + 1)
>>> [round(float(v), 2) for v in model.predict(np.array([[1.5]]))]
[4.0]
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

__all__ = ["CostModel", "RidgeModel", "TreeModel", "cost_model", "have_xgboost", "MODELS"]

#: The names :func:`cost_model` takes.
MODELS = ("auto", "xgb", "numpy")


class CostModel(Protocol):
    """What the search needs of a model: fit on features and targets, predict targets."""

    name: str

    def fit(self, x: np.ndarray, y: np.ndarray) -> CostModel: ...

    def predict(self, x: np.ndarray) -> np.ndarray: ...


class RidgeModel:
    """Ridge regression on standardized features and their squares (numpy only)."""

    name = "numpy"

    def __init__(self, alpha: float = 1e-2) -> None:
        self.alpha = alpha
        self._coef: np.ndarray | None = None

    def _design(self, x: np.ndarray) -> np.ndarray:
        z = (x - self._mean) / self._scale
        return np.hstack([np.ones((len(z), 1)), z, z * z])

    def fit(self, x: np.ndarray, y: np.ndarray) -> RidgeModel:
        self._mean = x.mean(axis=0)
        self._scale = np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
        a = self._design(x)
        penalty = self.alpha * np.eye(a.shape[1])
        penalty[0, 0] = 0.0  # the intercept is not shrunk
        self._coef = np.linalg.lstsq(a.T @ a + penalty, a.T @ y, rcond=None)[0]
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        if self._coef is None:
            raise ValueError("the cost model must be fitted before it predicts")
        return self._design(x) @ self._coef


class TreeModel:
    """XGBoost regression trees: 200 rounds of depth 6, one thread, a fixed seed."""

    name = "xgb"

    def __init__(self, seed: int = 0) -> None:
        import xgboost

        self._model = xgboost.XGBRegressor(n_estimators=200, max_depth=6, learning_rate=0.1,
                                           tree_method="hist", n_jobs=1, random_state=seed)

    def fit(self, x: np.ndarray, y: np.ndarray) -> TreeModel:
        self._model.fit(x, y)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self._model.predict(x), dtype=np.float64)


def have_xgboost() -> bool:
    """XGBoost can be imported (the ``tune`` extra is installed)."""
    try:
        import xgboost  # noqa: F401
    except ImportError:
        return False
    return True


def cost_model(kind: str = "auto", seed: int = 0) -> CostModel:
    """A fresh cost model: ``"xgb"``, ``"numpy"``, or ``"auto"`` (XGBoost when installed).

    Raises
    ------
    ValueError
        ``"cost model must be one of auto, xgb, numpy, not 'svm'"``, or for ``"xgb"``
        without XGBoost installed.
    """
    if kind not in MODELS:
        raise ValueError(f"cost model must be one of {', '.join(MODELS)}, not {kind!r}")
    if kind == "numpy" or (kind == "auto" and not have_xgboost()):
        return RidgeModel()
    if not have_xgboost():
        raise ValueError("cost model 'xgb' needs XGBoost (pip install 'openvta[tune]'); "
                         "'numpy' works without it")
    return TreeModel(seed)
