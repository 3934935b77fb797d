"""The RTL back end's default cycle bound: several times what a compiled program takes on the
cycle model (which the RTL matches within a few percent), so a long program runs to its end,
and still finite, so a deadlocked one stops."""

from __future__ import annotations

import pytest

import openvta
from openvta.compiler.workloads import RESNET18, random_inputs
from openvta.hw.cosim.backend import MIN_CYCLE_BOUND, RtlBackend, cycle_bound
from openvta.sim.cycle import simulate_cycles


@pytest.mark.parametrize("layer, config", [("C2", "vta"), ("C5", "default"), ("C9", "small")])
def test_the_bound_is_several_times_the_cycles_a_program_takes(layer: str, config: str) -> None:
    operands = random_inputs(RESNET18[layer], seed=0)
    op = openvta.operator("conv2d", layer=layer, config=config)
    program = op.build({k: operands[k] for k in ("data", "weight", "bias")})
    cycles = simulate_cycles(program).report.cycles
    assert cycle_bound(program) >= max(MIN_CYCLE_BOUND, 4 * cycles)
    assert cycle_bound(program) < 1000 * cycles + MIN_CYCLE_BOUND  # finite: a deadlock still stops


def test_a_given_bound_is_kept_and_none_is_the_programs() -> None:
    assert RtlBackend(max_cycles=5000).max_cycles == 5000
    assert RtlBackend().max_cycles is None
    with pytest.raises(ValueError, match=r"^max_cycles must be a positive integer, not 0$"):
        RtlBackend(max_cycles=0)
