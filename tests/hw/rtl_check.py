"""The RTL tests' one check: a program on the RTL against the functional simulator (final
DRAM and event counters, exactly) and the cycle model (cycles, within a tolerance)."""

from __future__ import annotations

import numpy as np

from openvta.hw.cosim.backend import RtlBackend
from openvta.isa import EVENT_COUNTERS
from openvta.runtime import Program
from openvta.sim.cycle import simulate_cycles
from openvta.sim.functional import run

_BACKENDS: dict[tuple[bool, int], RtlBackend] = {}


def rtl_backend(stress: bool, seed: int) -> RtlBackend:
    """The RTL back end (one per process and setting: its Verilator builds are cached);
    ``stress``: under random AXI idle cycles and back-pressure, from ``seed``."""
    key = (stress, seed)
    if key not in _BACKENDS:
        _BACKENDS[key] = RtlBackend(idle=stress, backpressure=stress, seed=seed)
    return _BACKENDS[key]


def check_on_rtl(program: Program, *, stress: bool, tolerance: float, seed: int) -> None:
    """``program``'s final DRAM and event counters on the RTL equal the functional
    simulator's; without stress its cycles are the cycle model's within ``tolerance``."""
    rtl = rtl_backend(stress, seed).run(program)
    golden = run(program)
    np.testing.assert_array_equal(rtl.dram, golden.dram)
    for counter in EVENT_COUNTERS:
        assert rtl.counters[counter.value] == golden.counters[counter.value], counter.value
    if not stress:  # the model is calibrated against the memory without idle cycles
        model, cycles = simulate_cycles(program).counters["cycles"], rtl.counters["cycles"]
        assert abs(model - cycles) / cycles <= tolerance, f"cycle model {model} vs RTL {cycles}"
