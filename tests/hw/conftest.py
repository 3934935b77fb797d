"""Fixtures of the hardware tests."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator

import pytest


@pytest.fixture
def no_unused_elaboratable() -> Iterator[None]:
    """Fail the test if an Elaboratable it made was never elaborated (a component that
    refuses its parameters, or one left over by an elaboration that failed).

    Amaranth keeps the warning silent until the first elaboration in the process; here
    it is on from the start, whatever ran before.
    """
    hdl = pytest.importorskip("amaranth.hdl")
    silenced = hdl.UnusedElaboratable._MustUse__silence
    hdl.UnusedElaboratable._MustUse__silence = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
            gc.collect()
    finally:
        hdl.UnusedElaboratable._MustUse__silence = silenced
    unused = [str(w.message) for w in caught if issubclass(w.category, hdl.UnusedElaboratable)]
    assert unused == []
