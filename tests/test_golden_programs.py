"""Every shape that compiled before the descriptor refactoring compiles to the same bytes.

The files under tests/data/programs were written by its ``make_programs.py`` at the commit
before that refactoring; each entry of the program file (config, DRAM image with instructions,
micro-ops and constants, instruction address and count, symbols) must be equal.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).resolve().parent / "data" / "programs"
sys.path.insert(0, str(DATA))
import make_programs  # noqa: E402


def _check(name: str, program) -> None:
    with np.load(DATA / f"{name}.npz", allow_pickle=False) as archive:
        committed = {key: archive[key] for key in archive.files}
    fresh = make_programs.entries(program)
    assert sorted(fresh) == sorted(committed)
    for key, value in committed.items():
        assert fresh[key].dtype == value.dtype and fresh[key].shape == value.shape, (name, key)
        assert np.array_equal(fresh[key], value), f"{name}: entry {key!r} differs from the committed program"


@pytest.mark.slow
@pytest.mark.parametrize("threads", (1, 2))
@pytest.mark.parametrize("layer", make_programs.LAYERS)
def test_resnet18_layers_compile_to_the_committed_programs(layer: str, threads: int) -> None:
    _check(f"resnet18_{layer}_t{threads}", make_programs.resnet_program(layer, threads))


def test_digits_regions_compile_to_the_committed_programs() -> None:
    found = list(make_programs.digits_programs())
    assert found
    committed = sorted(p.stem for p in DATA.glob("digits_region*.npz"))
    assert sorted(name for name, _ in found) == committed
    for name, program in found:
        _check(name, program)
