"""Random legal programs: the functional simulator against the naive reference, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from programs import random_programs
from reference import run_reference

from openvta.isa import PRESETS
from openvta.sim.functional import run

EXAMPLES = {"tiny": 60, "small": 30, "default": 8}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_random_programs_match_reference(name: str) -> None:
    cfg = PRESETS[name]

    @settings(max_examples=EXAMPLES[name], deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def check(data: st.DataObject) -> None:
        program = data.draw(random_programs(cfg))
        result = run(program)
        expected = run_reference(program)
        np.testing.assert_array_equal(result.dram, expected)

    check()
