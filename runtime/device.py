"""Device: runs a :class:`Program` on one of the registered back ends.

Back ends live in higher layers (``openvta.sim``, ``openvta.hw``); the runtime only
knows their names and where to import them from, so that ``runtime`` never imports
a simulator at load time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Protocol

from openvta.isa.report import RunReport

from .program import Program, Progress, Result

__all__ = ["Backend", "Device", "Progress", "register_backend", "backends", "BackendError"]


class BackendError(RuntimeError):
    """A back end that is unknown or cannot be started."""


class Backend(Protocol):
    """What a back end provides: run a program to FINISH and return the result."""

    def run(self, program: Program) -> Result: ...


BackendFactory = Callable[..., Backend]

# name → "module:attribute" of a factory, imported on first use.
_BUILTIN: dict[str, str] = {
    "functional": "openvta.sim.functional:FunctionalBackend",
    "cycle": "openvta.sim.cycle:CycleBackend",
    "rtl": "openvta.hw.cosim.backend:RtlBackend",
    "board": "openvta.hw.fpga.backend:BoardBackend",
}
_REGISTRY: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory | str) -> None:
    """Register a back end under ``name``: a factory, or its ``"module:attribute"`` path."""
    if not name or not isinstance(name, str):
        raise ValueError(f"back-end name must be a non-empty string, not {name!r}")
    if isinstance(factory, str):
        _BUILTIN[name] = factory
    else:
        _REGISTRY[name] = factory


def backends() -> list[str]:
    """Names of every registered back end."""
    return sorted(set(_BUILTIN) | set(_REGISTRY))


def _factory(name: str) -> BackendFactory:
    if name in _REGISTRY:
        return _REGISTRY[name]
    if name not in _BUILTIN:
        raise BackendError(f"unknown back end {name!r}; available: {', '.join(backends())}")
    module_name, _, attr = _BUILTIN[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendError(f"back end {name!r} cannot be imported: {exc}") from exc
    try:
        factory: BackendFactory = getattr(module, attr)
    except AttributeError:
        raise BackendError(f"back end {name!r}: module {module_name} has no {attr!r}") from None
    _REGISTRY[name] = factory
    return factory


class Device:
    """A target that runs programs.

    Parameters
    ----------
    backend :
        a registered back-end name (see :func:`backends`).
    options :
        passed to the back end's factory. Every built-in back end takes ``progress``: a
        callable ``progress(what, done, total)`` told how far a long run is (``what`` is
        ``"instructions"`` or ``"cycles"``, or a phase such as a Verilator build with
        ``done = 0`` and ``total = None``); the command line draws it as a progress bar.

    Examples
    --------
    >>> from openvta.isa import preset
    >>> from openvta.runtime import Device, ProgramBuilder
    >>> result = Device("functional").run(ProgramBuilder(preset("tiny")).finish())
    >>> result.counters["compute_insns"]
    1
    """

    def __init__(self, backend: str = "functional", **options: Any) -> None:
        self.name = backend
        self.backend = _factory(backend)(**options)

    def run(self, program: Program) -> Result:
        """Run ``program`` to FINISH on the back end.

        The result's ``report`` is a :class:`~openvta.isa.RunReport` of what the back end
        measured (made from its counters when the back end returns none): the cycle
        model's has every unit's timing and a per-instruction timeline, the RTL's and a
        board's the hardware counters, the functional simulator's no time at all.

        Raises
        ------
        TypeError
            for something other than a :class:`Program`.
        BackendError
            when the back end returns a report that is not a :class:`~openvta.isa.RunReport`.
        """
        if not isinstance(program, Program):
            raise TypeError(f"program must be a Program, not {type(program).__name__}")
        result = self.backend.run(program)
        if result.report is None:  # a back end that reports counters only
            result.report = RunReport.measured(self.name, result.counters)
        elif not isinstance(result.report, RunReport):
            raise BackendError(f"back end {self.name!r} report must be a RunReport or None, "
                               f"not {type(result.report).__name__}")
        if not result.symbols:
            result.symbols = dict(program.symbols)
        return result
