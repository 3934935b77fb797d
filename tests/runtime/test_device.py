"""Device and the back-end registry."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from openvta.blocked_gemm import read_gemm_output, reference_gemm
from openvta.isa import EVENT_COUNTERS, Config, MemoryType, Uop
from openvta.runtime import (
    BackendError,
    Device,
    Program,
    ProgramBuilder,
    Result,
    UopKernel,
    backends,
    register_backend,
)
from openvta.sim.functional import FunctionalBackend, RaceError


def test_functional_device_runs_a_gemm(cfg: Config, make_gemm: Any) -> None:
    program, a, w = make_gemm(cfg, 7, 10, 19, vthreads=2, shift=4, seed=3)
    image = program.dram.copy()
    device = Device("functional")
    assert device.name == "functional" and isinstance(device.backend, FunctionalBackend)
    result = device.run(program)
    assert isinstance(result, Result)
    np.testing.assert_array_equal(read_gemm_output(program, result.dram, 7, 10),
                                  reference_gemm(a, w, 4))
    assert set(result.counters) == {c.value for c in EVENT_COUNTERS}
    assert result.counters["fetch_insns"] == program.insn_count
    np.testing.assert_array_equal(program.dram, image)  # the program is not modified
    again = device.run(program)
    np.testing.assert_array_equal(again.dram, result.dram)
    assert again.counters == result.counters


def test_default_device_is_functional() -> None:
    assert Device().name == "functional"


def test_backends_lists_functional() -> None:
    names = backends()
    assert "functional" in names and names == sorted(names)


def test_unknown_backend_lists_the_available_ones() -> None:
    with pytest.raises(BackendError, match=r"^unknown back end 'fpga9000'; available: .*\bfunctional\b"):
        Device("fpga9000")


def test_run_needs_a_program() -> None:
    device = Device("functional")
    with pytest.raises(TypeError, match=r"^program must be a Program, not str$"):
        device.run("prog.npz")
    with pytest.raises(TypeError, match=r"^program must be a Program, not ndarray$"):
        device.run(np.zeros(16, np.uint8))


def test_functional_options(tiny: Config) -> None:
    with pytest.raises(TypeError, match=r"^the functional back end takes no options \['speed'\]$"):
        Device("functional", speed=2)
    # A racy program: the GEMM reads inp that the load writes with no token between them.
    b = ProgramBuilder(tiny)
    x = b.tensor("x", data=np.ones((2, 1, 4), np.int8))
    b.load_2d(MemoryType.INP, 0, x, y_size=1, x_size=2)
    b.gemm(UopKernel((Uop(0, 0, 0),)))
    program = b.finish()
    with pytest.raises(RaceError, match=r"^race on inp buffer element 0: "):
        Device("functional").run(program)
    assert Device("functional", check_races=False).run(program).counters["gemm_insns"] == 1


class _Recorder:
    """A custom back end: records what it is given and returns a fixed result."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.programs: list[Program] = []

    def run(self, program: Program) -> Result:
        self.programs.append(program)
        return Result(dram=program.dram[::-1].copy(), counters={"runs": len(self.programs)})


class _Factory:
    """A factory object (not a class or function) that remembers the back ends it made."""

    def __init__(self) -> None:
        self.made: list[_Recorder] = []

    def __call__(self, **options: Any) -> _Recorder:
        self.made.append(_Recorder(**options))
        return self.made[-1]


def test_register_a_factory_object(registry: None, tiny: Config) -> None:
    factory = _Factory()
    register_backend("recorder", factory)
    assert "recorder" in backends() and "functional" in backends()
    device = Device("recorder", lanes=4)
    assert device.name == "recorder" and factory.made == [device.backend]
    assert device.backend.options == {"lanes": 4}
    program = ProgramBuilder(tiny).finish()
    result = device.run(program)
    assert device.backend.programs == [program]
    np.testing.assert_array_equal(result.dram, program.dram[::-1])
    assert result.counters == {"runs": 1}


def test_register_a_module_path(registry: None, tiny: Config) -> None:
    register_backend("golden", "openvta.sim.functional:FunctionalBackend")
    assert "golden" in backends()
    device = Device("golden", check_races=False)
    assert isinstance(device.backend, FunctionalBackend) and not device.backend.check_races
    program = ProgramBuilder(tiny).finish()
    assert device.run(program).counters["fetch_insns"] == 1


def test_registered_factory_replaces_a_builtin(registry: None) -> None:
    factory = _Factory()
    register_backend("functional", factory)
    assert isinstance(Device("functional").backend, _Recorder)
    assert backends().count("functional") == 1


def test_registry_fixture_restores_the_builtins() -> None:
    assert isinstance(Device("functional").backend, FunctionalBackend)
    assert "recorder" not in backends() and "golden" not in backends()


def test_unimportable_backend(registry: None) -> None:
    register_backend("ghost", "openvta.no_such_module:Backend")
    with pytest.raises(BackendError, match=(
        r"^back end 'ghost' cannot be imported: No module named 'openvta.no_such_module'$"
    )):
        Device("ghost")


def test_backend_path_naming_a_missing_attribute(registry: None) -> None:
    register_backend("typo", "openvta.sim.functional:FunctionalBakend")
    with pytest.raises(BackendError, match=r"'typo'"):
        Device("typo")


@pytest.mark.parametrize("name", ["", None, 3])
def test_backend_name_must_be_a_non_empty_string(registry: None, name: Any) -> None:
    with pytest.raises(ValueError, match=rf"^back-end name must be a non-empty string, not {name!r}$"):
        register_backend(name, _Factory())
