"""Fixtures shared by the runtime and command-line tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest

from openvta.blocked_gemm import build_blocked_gemm
from openvta.isa import Config, preset
from openvta.runtime import Program
from openvta.runtime import device as device_module

# ``cfg`` (each named preset in turn) comes from tests/conftest.py.


@pytest.fixture
def tiny() -> Config:
    return preset("tiny")


GemmCase = tuple[Program, np.ndarray, np.ndarray]


@pytest.fixture
def make_gemm() -> Callable[..., GemmCase]:
    """``make_gemm(cfg, m, n, k, vthreads=1, shift=None, seed=0) -> (program, a, w)``."""

    def make(cfg: Config, m: int, n: int, k: int, *, vthreads: int = 1,
             shift: int | None = None, seed: int = 0) -> GemmCase:
        rng = np.random.default_rng(seed)
        a = rng.integers(-128, 128, (m, k), dtype=np.int8)
        w = rng.integers(-128, 128, (n, k), dtype=np.int8)
        return build_blocked_gemm(cfg, a, w, vthreads=vthreads, shift=shift), a, w

    return make


@pytest.fixture
def registry() -> Iterator[None]:
    """Restore the back-end registry after a test that registers back ends."""
    builtin = dict(device_module._BUILTIN)
    loaded = dict(device_module._REGISTRY)
    yield
    device_module._BUILTIN.clear()
    device_module._BUILTIN.update(builtin)
    device_module._REGISTRY.clear()
    device_module._REGISTRY.update(loaded)
