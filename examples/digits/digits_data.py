"""scikit-learn's bundled 8x8 digits as float32 NCHW images, with a fixed held-out split.

The data set ships with scikit-learn (1,797 images, no download).  Pixels (0..16) are
scaled to [0, 1]; 20 % of the images, stratified by class, are held out for testing.
"""

from __future__ import annotations

import numpy as np

__all__ = ["load_split", "SPLIT_SEED", "TEST_FRACTION"]

SPLIT_SEED = 0
TEST_FRACTION = 0.2


def load_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x_train, y_train, x_test, y_test)``: images ``(N, 1, 8, 8)`` float32, labels int64."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=TEST_FRACTION, random_state=SPLIT_SEED, stratify=labels)
    return x_train, y_train, x_test, y_test
