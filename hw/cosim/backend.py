"""The ``rtl`` back end: run a program on the Amaranth RTL under Verilator.

Each configuration is elaborated and built once (the build is cached on disk, see
:func:`openvta.hw.cosim.runner.build`); every program then runs in a fresh simulator
process.  The first run of a configuration pays the Verilator build, later runs and
later sessions only the simulation, with or without waves (one build serves both).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from amaranth.lib import wiring

from openvta.isa import Config, LeanBuild, RunReport, timing_for
from openvta.runtime.program import Program, Progress, Result

from ..rtl.sdram import AS4C32M16SB_7
from . import native_dram, runner
from .sdram_model import SdramSystem

__all__ = ["DEFAULT_TOP", "MEMORIES", "RtlBackend"]

#: Where the DRAM of a run lives: inside the Verilated design, or cocotbext-axi's
#: AxiRam in Python (every beat a Python call; it has idle and back-pressure generators).
#: The SDRAM controller of the ULX3S image on the model of its part, inside the design.
MEMORIES = ("native", "cocotb", "sdram")

#: Where the default top-level factory lives ("module:attribute"), imported on first use.
DEFAULT_TOP = "openvta.hw.rtl.top:make_top"

TopFactory = Callable[[Config], wiring.Component]


def _default_top_factory() -> TopFactory:
    module_name, _, attr = DEFAULT_TOP.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise runner.RtlError(f"the rtl back end needs the top level {DEFAULT_TOP}, which cannot "
                              f"be imported: {exc}") from exc
    try:
        factory: TopFactory = getattr(module, attr)
    except AttributeError:
        raise runner.RtlError(f"the rtl back end needs {DEFAULT_TOP}, but module {module_name} "
                              f"has no {attr!r}") from None
    return factory


def _lean_top(build: LeanBuild) -> TopFactory:
    """The top level of a lean build (every counter, as the default top level has, for the
    comparison with the simulators)."""
    from ..rtl.top import Top

    def factory(cfg: Config) -> wiring.Component:
        return Top(cfg, build.timing(timing_for(cfg)), shared_dma=bool(build.shared_dma))

    return factory


#: The least cycle bound of a run when none is given (:func:`cycle_bound`).
MIN_CYCLE_BOUND = 2_000_000
#: How many times a program's work (:func:`cycle_bound`) a run may take.
WORK_FACTOR = 4
#: Cycles charged to every GEMM or ALU micro-op iteration: the slowest lean build's (an ALU
#: folded four times, its MUL in two cycles; a folded GEMM core).
ITERATION_CYCLES = 8
#: Cycles charged to every DMA row and instruction on top of its beats (memory latency, queues).
ROW_CYCLES = 64


def cycle_bound(program: Program) -> int:
    """A cycle bound for ``program`` on the RTL: :data:`WORK_FACTOR` times its work — every
    GEMM and ALU micro-op iteration (:data:`ITERATION_CYCLES` each), every DMA row's bus
    beats (each element taken at the widest element size) plus :data:`ROW_CYCLES` — and at
    least :data:`MIN_CYCLE_BOUND`.
    No machine of the ISA takes that long for a program that does not deadlock; one that does
    still stops.

    >>> from openvta.isa import preset
    >>> from openvta.runtime import ProgramBuilder
    >>> cycle_bound(ProgramBuilder(preset("tiny")).finish())
    2000000
    """
    from openvta.isa.instructions import AluInsn, GemmInsn, MemInsn

    cfg = program.config
    work = 0
    for insn in program.instructions():
        work += ROW_CYCLES
        if isinstance(insn, (GemmInsn, AluInsn)):
            work += max(insn.uop_end - insn.uop_bgn, 1) * max(insn.iter_out, 1) * max(insn.iter_in, 1) \
                * ITERATION_CYCLES
        elif isinstance(insn, MemInsn):
            work += insn.y_size * (-(-insn.x_size * cfg.max_elem_bytes // cfg.bus_bytes) + ROW_CYCLES)
    return max(MIN_CYCLE_BOUND, WORK_FACTOR * work)


class RtlBackend:
    """Runs programs on the RTL top level in Verilator, through the cocotb harness.

    Parameters
    ----------
    top_factory :
        builds the top-level component for a configuration (default
        ``openvta.hw.rtl.top.make_top``, or for a program that records a lean build,
        :class:`~openvta.hw.rtl.top.Top` with that build); it must have the ports of
        :func:`openvta.hw.cosim.runner.top_members` for ``cfg.bus_bytes * 8``.
    max_cycles :
        cycles after start before a run is abandoned with :class:`~openvta.hw.cosim.runner.RtlError`;
        None (the default): :func:`cycle_bound` of each program — its work several times
        over, at least two million — so that a long program (a transformer's layer) runs and
        a deadlocked one still stops.
    idle, backpressure :
        random stalls in the DRAM model (see :func:`openvta.hw.cosim.runner.run`); they need
        ``memory="cocotb"``.
    memory :
        ``"native"``: the DRAM is inside the Verilated design
        (:mod:`openvta.hw.cosim.native_dram`, with cocotbext-axi AxiRam's timing, so the same
        results and counters, cycles included, at several times the speed);
        ``"cocotb"``: cocotbext-axi's AxiRam; ``"sdram"``: inside the design too, the ULX3S
        image's SDRAM controller (:mod:`openvta.hw.rtl.sdram`, at 50 MHz, the image's Fmax target;
        the board image runs it at the board's clock) on the model
        of its part (:mod:`openvta.hw.cosim.sdram_model`), whose datasheet checks stop a run
        that breaks one, with the rule's name; up to the part's 64 MiB.  Default: native
        unless idle or backpressure is asked for.  Each has its own Verilator build.
    seed :
        seed of those stalls and of cocotb's random module.
    waves :
        write a VCD of every run to this path (the same build as without waves).
    build_root :
        the Verilator build cache (default ``$OPENVTA_RTL_CACHE`` or
        ``~/.cache/openvta/rtl``).
    progress :
        ``progress(what, done, total)``, or None: ``("building the Verilator model", 0,
        None)`` when a Verilator build starts (and ``(…, 1, 1)`` when it is built), then
        ``("cycles", cycles, max_cycles)`` at every status poll of a run, increasing,
        and with the final count (:func:`openvta.hw.cosim.runner.run`).

    Examples
    --------
    >>> from openvta.hw.cosim.backend import RtlBackend
    >>> backend = RtlBackend(max_cycles=100_000)  # doctest: +SKIP
    >>> result = backend.run(program)  # doctest: +SKIP
    """

    def __init__(self, top_factory: TopFactory | None = None, *, max_cycles: int | None = None,
                 idle: bool = False, backpressure: bool = False, seed: int = 0,
                 waves: Path | str | None = None, build_root: Path | str | None = None,
                 progress: Progress | None = None, memory: str | None = None) -> None:
        if top_factory is not None and not callable(top_factory):
            raise TypeError(f"top_factory must be callable, not {top_factory!r}")
        if progress is not None and not callable(progress):
            raise TypeError(f"progress must be callable or None, not {progress!r}")
        if max_cycles is not None and (not isinstance(max_cycles, int) or isinstance(max_cycles, bool)
                                       or max_cycles < 1):
            raise ValueError(f"max_cycles must be a positive integer, not {max_cycles!r}")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"seed must be an integer, not {seed!r}")
        stalls = bool(idle) or bool(backpressure)
        self._memory_given = memory is not None or stalls
        if memory is None:
            memory = "cocotb" if stalls else "native"
        if memory not in MEMORIES:
            raise ValueError(f"memory must be one of {', '.join(map(repr, MEMORIES))}, "
                             f"not {memory!r}")
        if memory != "cocotb" and stalls:
            raise ValueError(f"idle and backpressure need memory='cocotb' (cocotbext-axi's "
                             f"AxiRam has the pause generators), not {memory!r}")
        self.memory = memory
        self.max_cycles = max_cycles
        self.idle, self.backpressure, self.seed = bool(idle), bool(backpressure), seed
        self.waves = None if waves is None else Path(waves)
        self.build_root = None if build_root is None else Path(build_root)
        self._top_factory = top_factory
        self.progress = progress
        self._builds: dict[tuple[Config, int | None, LeanBuild, str], Path] = {}

    def build_dir(self, cfg: Config, image_bytes: int = 0, build: LeanBuild | None = None,
                  memory: str | None = None) -> Path:
        """The Verilator build for ``cfg``, elaborated and built on first use.

        With the native memory, the build whose DRAM holds ``image_bytes``
        (:func:`~openvta.hw.cosim.native_dram.dram_bytes_for`: one build up to 16 MiB).
        For the default top level, a build made from the same configuration and the same
        ``hw/`` sources is found without elaborating again (elaborating ``default`` takes
        several seconds).  ``build`` is the compute unit's (a lean build's RTL), ``memory``
        the run's (default the back end's).
        """
        memory, build = memory or self.memory, build or LeanBuild()
        dram_bytes = native_dram.dram_bytes_for(image_bytes) if memory != "cocotb" else None
        if memory == "sdram" and dram_bytes is not None and dram_bytes > AS4C32M16SB_7.size_bytes:
            raise runner.RtlError(f"the program's DRAM image ({image_bytes} bytes) does not fit the "
                                  f"SDRAM ({AS4C32M16SB_7.name}, {AS4C32M16SB_7.size_bytes} bytes)")
        key = (cfg, dram_bytes, build, memory)
        if key not in self._builds:
            index = self._index(cfg, dram_bytes, memory) if build == LeanBuild() else None
            known = index.read_text().strip() if index is not None and index.is_file() else ""
            if known and (Path(known) / runner.BUILD_MARKER).is_file():
                self._builds[key] = Path(known)
                return self._builds[key]
            factory = self._top_factory or (_default_top_factory() if build == LeanBuild() else _lean_top(build))
            top = factory(cfg)
            runner.check_top(top, cfg.bus_bytes * 8)
            verilog = runner.verilog_of(top)
            if dram_bytes is not None:
                sdram = (runner.verilog_of(SdramSystem(cfg.bus_bytes, dram_bytes), name=native_dram.SDRAM_NAME)
                         if memory == "sdram" else None)
                verilog = native_dram.native_verilog(verilog, cfg.bus_bytes, dram_bytes, sdram)
            self._builds[key] = runner.build(verilog, self.build_root, progress=self.progress,
                                            dram_bytes=dram_bytes)
            if index is not None:
                index.parent.mkdir(parents=True, exist_ok=True)
                index.write_text(str(self._builds[key]))
        return self._builds[key]

    def _index(self, cfg: Config, dram_bytes: int | None, memory: str) -> Path | None:
        """Where the build of ``cfg`` made from the current ``hw/`` sources is recorded."""
        if self._top_factory is not None:
            return None  # a custom top: only its Verilog identifies it
        import hashlib

        digest = hashlib.sha256(cfg.to_json().encode())
        digest.update(f"{DEFAULT_TOP} traced".encode())  # a build serves runs with and without waves
        if dram_bytes is not None:
            digest.update(f"{memory} {dram_bytes}".encode())
        digest.update(runner._tool_versions().encode())
        for source in sorted(Path(__file__).parent.parent.rglob("*.py")):  # every room of hw/
            digest.update(source.read_bytes())
        root = self.build_root or runner.default_build_root()
        return root / "index" / digest.hexdigest()[:24]

    def run(self, program: Program) -> Result:
        """Run ``program`` to FINISH; the final DRAM image and every hardware counter.

        Raises
        ------
        RtlError
            when the top level cannot be imported, the build fails or the run does not
            finish correctly (see :func:`openvta.hw.cosim.runner.run`).
        """
        if not isinstance(program, Program):
            raise TypeError(f"program must be a Program, not {type(program).__name__}")
        target = program.target
        memory = "sdram" if target.memory == "sdram" and not self._memory_given else self.memory
        build_dir = self.build_dir(program.config, len(program.dram), target.build, memory)
        bound = self.max_cycles if self.max_cycles is not None else cycle_bound(program)
        result = runner.run(build_dir, program, max_cycles=bound,
                            idle=self.idle, backpressure=self.backpressure, seed=self.seed,
                            waves=self.waves, progress=self.progress)
        result.report = RunReport.measured("rtl", result.counters)  # the RTL's own counters
        return result
