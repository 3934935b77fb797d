"""The ``openvta`` command line.

    openvta run PROGRAM.npz [--backend functional|cycle|rtl|board] [-o RESULT.npz] [--quiet]
                [--no-race-check] [--trace TRACE.json] [--timeline TIMELINE.png]
                [--max-cycles N] [--waves RUN.vcd] [--machine MACHINE] [--memory on-chip|sdram|spram]
                [--gemm-ii N] [--alu-ii N] [--acc-ports 1|2] [--mul-cycles 1|2]
                [--uop-stage 0|1] [--shared-dma] [--insn-words 1|2|4|8] [--port PORT] [--baud N]
    openvta read RESULT.npz SYMBOL [-o ARRAY.npy] [--packed] [--program PROGRAM.npz]
    openvta disasm PROGRAM.npz [--uops]
    openvta compile conv2d --hw H --ci CI --co CO --kernel K [--pad P] [--stride S] ... -o PROG.npz
    openvta compile conv2d --layer resnet18.C5 ... [--records C5.jsonl] -o PROG.npz
    openvta compile dense --batch N --in I --out O ... -o PROG.npz
    openvta verilog [--machine MACHINE] -o FILE.v [--lint]
    openvta bitstream --board icebreaker|ulx3s-85f [--machine MACHINE] [-o DIR] [--mem-kib N] [--sdram]
                      [--link-test] [--counters all|cycles|none]
                      [--gemm-ii N] [--alu-ii N] [--acc-ports 1|2] [--mul-cycles 1|2]
                      [--uop-stage 0|1] [--shared-dma] [--insn-words 1|2|4|8] [--seed N]
    openvta config [MACHINE]

A MACHINE is a preset's name (``openvta config --list``), ``PRESET:KEY=VALUE,...``, a JSON
object or a ``.json`` file (docs/MACHINES.md); ``--config`` is ``--machine``'s older name.
    openvta dse --board ulx3s-85f --workload resnet18 [--configs SPEC ...] -o DIR
                                         (see openvta/dse_cli.py)
    openvta model compile|run|show|evaluate ...   (see openvta/model_cli.py)
    openvta tune conv2d --layer resnet18.C5 --trials N --tuner xgb --executor local:2 --log C5.jsonl
                                         (see openvta/tune_cli.py)

Errors in the program (a malformed file, a deadlock, a race…) exit with status 1
and the message on stderr; a bad command line exits with status 2; Ctrl-C exits with
status 130. Output folders are created as needed. Long work shows a live progress
line on a terminal (never in a pipe, never with ``--quiet``).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from openvta.hw.fpga.boards import BOARDS
from openvta.isa import (MACHINES, MEMORIES, ConfigError, ISAError, Machine, MemInsn, MemoryType,
                         decode_uops, format_insn, parse_machine)
from openvta.isa.counters import CounterSet
from openvta.isa.timing import INSN_MOVE_CHOICES
from openvta.runtime import BackendError, Device, ProgramError, RunReport, backends, load_program, load_result

from .dse_cli import add_dse_parser, run_dse_command
from .machine_option import MACHINE_HELP, add_machine_option, machine_of
from .model_cli import add_model_parser, run_model_command
from .progress import ProgressDisplay
from .tune_cli import add_tune_parser, run_tune_command

__all__ = ["main"]


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    from openvta import __version__

    parser = argparse.ArgumentParser(prog="openvta", description="openvta: compile, simulate and build a "
                                     "VTA-style deep-learning accelerator")
    parser.add_argument("--version", action="version", version=f"openvta {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                help="what to do (openvta COMMAND --help says more)")
    run = sub.add_parser("run", help="run a program file on a back end")
    run.add_argument("program", help="program file (.npz)")
    run.add_argument("--backend", default="functional",
                     help=f"where to run it: {', '.join(backends())} (default functional)")
    run.add_argument("-o", "--output", help="write the result file (.npz) here")
    run.add_argument("--no-race-check", action="store_true",
                     help="functional and cycle back ends: skip the token race checker (faster)")
    run.add_argument("--quiet", action="store_true", help="print nothing but errors")
    run.add_argument("--trace", help="cycle back end: write a Chrome/Perfetto trace (JSON) here")
    run.add_argument("--timeline", help="cycle back end: write a timeline figure (PNG) here")
    run.add_argument("--max-cycles", type=_positive_int,
                     help="cycle and rtl back ends: stop past this many cycles")
    run.add_argument("--waves", help="rtl back end: write the waveform (VCD) of the run here")
    run.add_argument("--machine", "--config", dest="machine", metavar="MACHINE",
                     help="cycle and rtl back ends: run on this machine (its configuration must be the "
                          "program's); default: the machine the program file records, else its "
                          "configuration's. " + MACHINE_HELP)
    run.add_argument("--memory", choices=MEMORIES,
                     help="cycle and rtl back ends: the DRAM of the machine: on-chip RAM (the default), "
                          "the ULX3S's SDR SDRAM behind the SoC's controller (the cycle model's "
                          "sdram_timing; on rtl, the controller on the model of its part), or "
                          "(cycle back end) the UP5K image's single-port SPRAM (spram_timing)")
    _add_lean_arguments(run.add_argument_group(
        "lean build", "cycle and rtl back ends: the machine of a lean image, as openvta bitstream builds "
        "it with the same options (the cycle model charges each; rtl builds that RTL); each replaces "
        "the machine's"))
    run.add_argument("--port", help="board back end: the serial port of the board (e.g. /dev/ttyUSB0)")
    run.add_argument("--baud", type=_positive_int, default=115200,
                     help="board back end: serial speed (default 115200)")
    read = sub.add_parser("read", help="write or print a tensor of a result file")
    read.add_argument("result", help="result file (.npz) written by run -o")
    read.add_argument("symbol", help="the tensor to read, e.g. out")
    read.add_argument("-o", "--output", help="write it as a NumPy .npy file here (default: print it)")
    read.add_argument("--packed", action="store_true",
                      help="keep the packed DRAM layout (default: the logical NCHW/OIHW/NC array)")
    dis = sub.add_parser("disasm", help="print a program's instructions as assembly")
    dis.add_argument("program", help="program file (.npz)")
    dis.add_argument("--uops", action="store_true", help="also list the micro-ops each LOAD UOP brings in")
    _compile_parser(sub)
    add_tune_parser(sub, add_operator_options)
    ver = sub.add_parser("verilog", help="export the accelerator's Verilog (module openvta_top)")
    add_machine_option(ver)
    ver.add_argument("-o", "--output", required=True, help="Verilog file to write")
    ver.add_argument("--lint", action="store_true",
                     help="also run verilator --lint-only -Wall (documented waivers only)")
    _bitstream_parser(sub)
    add_dse_parser(sub, sorted(BOARDS))
    add_model_parser(sub)
    cfg = sub.add_parser("config", help="print a machine's configuration as JSON (or the whole machine, when it "
                         "is more than its configuration)")
    cfg.add_argument("machine", nargs="?", default="default", help="the machine (default default). " + MACHINE_HELP)
    cfg.add_argument("--list", action="store_true", help="list the preset machines, one per line")
    return parser


def _bitstream_parser(sub: Any) -> None:
    bit = sub.add_parser("bitstream", help="build the SoC's FPGA bitstream with Yosys and nextpnr")
    bit.add_argument("--board", required=True, choices=sorted(BOARDS), help="the FPGA board")
    add_machine_option(bit, "tiny")
    bit.add_argument("-o", "--output", help="build directory (default build/BOARD-MACHINE)")
    bit.add_argument("--mem-kib", type=_positive_int, help="on-chip DRAM of the SoC in KiB (a power "
                     "of two; default 4 on icebreaker, 64 on ulx3s-85f)")
    bit.add_argument("--sdram", action="store_true",
                     help="the SoC's DRAM on the board's SDR SDRAM instead of on-chip block RAM: "
                          "ulx3s-85f's AS4C32M16SB-7, 64 MiB, enough for whole models (the controller "
                          "of openvta.hw.rtl.sdram; run its programs on the cycle model with "
                          "--memory sdram). Without it, --mem-kib of block RAM, which holds one "
                          "small layer; the same as the machine's memory=sdram")
    bit.add_argument("--spram", action="store_true",
                     help="the SoC's DRAM single-ported in the part's SPRAM instead of block RAM, "
                          "which it leaves to the accelerator: icebreaker's UP5K, up to 128 KiB "
                          "(--mem-kib, default 128; run its programs on the cycle model with "
                          "--memory spram)")
    bit.add_argument("--baud", type=_positive_int, default=115200,
                     help="UART speed of the host bridge (default 115200)")
    bit.add_argument("--freq", type=float, help="Fmax target for nextpnr in MHz "
                     "(default 24 on icebreaker, 50 on ulx3s-85f)")
    bit.add_argument("--link-test", action="store_true",
                     help="build the link-test image: UART bridge and memory, no accelerator")
    bit.add_argument("--counters", choices=[c.label for c in CounterSet],
                     help="hardware counters built: all of them, only cycles, or none (smaller "
                     "images; the board back end then reports only those) (default: the machine's)")
    _add_lean_arguments(bit)
    bit.add_argument("--seed", type=_positive_int, default=1,
                     help="nextpnr's placement seed (Fmax moves by a few percent with it, and a "
                     "crowded design may route with one seed and not another; default 1)")
    bit.add_argument("--timeout", type=float, default=7200.0,
                     help="seconds each tool may run before the build is abandoned (default 7200)")
    bit.add_argument("--quiet", action="store_true", help="print only the final figures and errors")


def _add_lean_arguments(parser: argparse.ArgumentParser | Any) -> None:
    """The lean build's options (:class:`~openvta.isa.LeanBuild`), shared by
    ``bitstream`` (the image) and ``run`` (its machine on the cycle and rtl back ends); each
    given replaces the machine's (whose full build has 1, 1, 2, 1, 0, off, 1)."""
    parser.add_argument("--gemm-ii", type=_positive_int, metavar="N",
                        help="lean build: the GEMM core folded over N cycles, 1/N of the "
                        "multipliers, one micro-op every N cycles")
    parser.add_argument("--alu-ii", type=_positive_int, metavar="N",
                        help="lean build: the ALU folded over N cycles, 1/N of its lanes")
    parser.add_argument("--acc-ports", type=int, choices=(1, 2),
                        help="lean build: read ports of the accumulator buffer; with 1, an ALU "
                        "micro-op with a tile operand takes a cycle more")
    parser.add_argument("--mul-cycles", type=int, choices=(1, 2),
                        help="lean build: cycles of each ALU MUL pass; 2 registers the products "
                        "before their sum, for the clock")
    parser.add_argument("--uop-stage", type=int, choices=(0, 1),
                        help="1: register the micro-op read before its indices are added, a sixth "
                        "pipeline stage for the clock (a cycle more per GEMM and ALU)")
    parser.add_argument("--shared-dma", action="store_const", const=1,
                        help="lean build: one DMA reader per module, of the width each LOAD "
                        "chooses, instead of one per buffer: less logic, the same transfers")
    parser.add_argument("--insn-words", type=int, choices=INSN_MOVE_CHOICES,
                        help="lean build: instructions held in fetch's buffer and the command queues "
                        "as N words (8: 16-bit block RAM entries, one block per queue on the iCE40); "
                        "each then takes N cycles to route and N to take")


_LEAN_OPTIONS = ("gemm_ii", "alu_ii", "acc_ports", "mul_cycles", "uop_stage", "shared_dma", "insn_words")


def _with_options(machine: Machine, args: argparse.Namespace) -> Machine:
    """``machine`` with the lean build options, ``--counters`` and the memory given on the command line."""
    changes: dict[str, Any] = {k: getattr(args, k) for k in _LEAN_OPTIONS if getattr(args, k, None) is not None}
    if getattr(args, "counters", None) is not None:
        changes["counters"] = args.counters
    memory = getattr(args, "memory", None) or ("sdram" if getattr(args, "sdram", False) else None) \
        or ("spram" if getattr(args, "spram", False) else None)
    if memory is not None:
        changes["memory"] = memory
    return machine.replace(**changes)


def _output(path: str | None) -> Path | None:
    """``path`` with its folder created (``-o nodir/x.npz`` makes ``nodir``)."""
    return None if path is None else _output_file(path)


def _output_file(path: str) -> Path:
    """A required output ``path``, with its folder created."""
    out = Path(path)
    if out.is_dir():
        raise ValueError(f"output {path} is a folder; give a file name")
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


def _run(args: argparse.Namespace) -> int:
    program = load_program(args.program)
    options: dict[str, object] = {}
    if args.no_race_check and args.backend in ("functional", "cycle"):
        options["check_races"] = False
    if (args.trace or args.timeline) and args.backend != "cycle":
        raise ProgramError("--trace and --timeline need --backend cycle")
    if args.max_cycles is not None:
        if args.backend not in ("cycle", "rtl"):
            raise ProgramError("--max-cycles needs --backend cycle or rtl")
        options["max_cycles"] = args.max_cycles

    given = [k for k in _LEAN_OPTIONS if getattr(args, k) is not None]
    if given and args.backend not in ("cycle", "rtl"):
        lean = ", ".join(f"{k}={int(getattr(args, k))}" for k in given)
        raise ProgramError(f"the lean build's options ({lean}) need --backend cycle or rtl")
    if args.machine is not None and args.backend not in ("cycle", "rtl"):
        raise ProgramError("--machine needs --backend cycle or rtl (the other back ends run the program's "
                           "configuration as it is)")
    if args.memory == "spram" and args.backend != "cycle":
        raise ProgramError("--memory spram needs --backend cycle")
    if args.memory == "sdram" and args.backend not in ("cycle", "rtl"):
        raise ProgramError("--memory sdram needs --backend cycle or rtl")
    machine = program.target if args.machine is None else machine_of(args)
    if machine.config != program.config:
        raise ProgramError(f"--machine {args.machine} has another configuration than the program's "
                           f"({program.config.name}); a program runs on the configuration it was compiled for")
    machine = _with_options(machine, args)
    if args.backend in ("cycle", "rtl"):
        program = program.on(machine)  # the cycle and rtl back ends run the machine the program records

    if args.waves:
        if args.backend != "rtl":
            raise ProgramError("--waves needs --backend rtl")
        options["waves"] = str(_output(args.waves))
    if args.backend == "board":
        if not args.port:
            raise ProgramError("--backend board needs --port (the board's serial port)")
        options.update(port=args.port, baud=args.baud)
    elif args.port:
        raise ProgramError("--port needs --backend board")
    paths = [_output(p) for p in (args.output, args.trace, args.timeline)]
    with ProgressDisplay(f"{args.backend}", enabled=None if not args.quiet else False) as show:
        result = Device(args.backend, progress=show, **options).run(program)
    if paths[0]:
        result.save(paths[0])
    if paths[1]:
        result.report.write_trace(paths[1])
    if paths[2]:
        result.report.write_timeline(paths[2], title=str(args.program))
    if not args.quiet:
        print(f"ran {program.insn_count} instructions on the {args.backend} back end")
        text = result.report.format() if isinstance(result.report, RunReport) else ""
        if text:  # the cycle model's report, or the units' timing the back end measured
            print(text)
            print()
        width = max((len(k) for k in result.counters), default=0)
        for name, value in result.counters.items():
            print(f"  {name:<{width}}  {value}")
        for what, path in (("result", args.output), ("trace", args.trace),
                           ("timeline", args.timeline)):
            if path:
                print(f"{what} written to {path}")
    return 0


def _read(args: argparse.Namespace) -> int:
    from openvta.compiler.layout import unpack_by_layout

    result = load_result(args.result)
    array = result.read(args.symbol)
    symbol = result.symbols[args.symbol]
    if not args.packed and symbol.layout and symbol.logical_shape is not None:
        array = unpack_by_layout(array, symbol.layout, symbol.logical_shape)
    out = _output(args.output)
    if out is None:
        with np.printoptions(threshold=sys.maxsize if array.size <= 4096 else 1000):
            print(array)
        return 0
    with open(out, "wb") as handle:  # np.save would append .npy to another suffix
        np.save(handle, np.ascontiguousarray(array), allow_pickle=False)
    print(f"{args.symbol}: {array.dtype}{list(array.shape)} written to {out}")
    return 0


def _disasm(args: argparse.Namespace) -> int:
    program = load_program(args.program)
    cfg = program.config
    print(f"# {program.insn_count} instructions at byte {program.insn_addr}, config {cfg.name}")
    for index, insn in enumerate(program.instructions()):
        print(f"{index:6d}  {format_insn(insn)}")
        if args.uops and isinstance(insn, MemInsn) and insn.memory_type == MemoryType.UOP \
                and insn.x_size:
            start = insn.dram_base * cfg.uop_elem_bytes
            end = start + insn.x_size * cfg.uop_elem_bytes
            if end > len(program.dram):
                print(f"          micro-ops at bytes {start}..{end - 1} lie outside the DRAM "
                      f"image ({len(program.dram)} bytes)")
                continue
            raw = program.dram[start:end]
            uops = decode_uops(np.ascontiguousarray(raw).view("<u4"), cfg)
            for k in range(insn.x_size):
                print(f"          uop[{insn.sram_base + k}] dst_idx={uops['dst_idx'][k]} "
                      f"src_idx={uops['src_idx'][k]} wgt_idx={uops['wgt_idx'][k]}")
    return 0


def _compile_parser(sub: Any) -> None:
    from openvta.compiler.ops import REGISTRY

    comp = sub.add_parser("compile", help="compile an operator with random operands into a program")
    ops = comp.add_subparsers(dest="operator", required=True, metavar="OPERATOR",
                              help=", ".join(REGISTRY))
    for spec in REGISTRY.values():
        op = ops.add_parser(spec.name, help=spec.summary, description=spec.summary)
        add_operator_options(op, spec)
        op.add_argument("--seed", type=int, default=0, help="seed of the random operands (default 0)")
        op.add_argument("--records", help="a tuning log (openvta tune --log): use the best plan found "
                                          "there for this kernel (docs/TUNING.md)")
        op.add_argument("-o", "--output", required=True, help="program file to write (.npz)")
        op.add_argument("--quiet", action="store_true", help="print nothing but errors")


def add_operator_options(op: argparse.ArgumentParser, spec: Any, *, skip: tuple[str, ...] = ()) -> None:
    """``--layer``, an option per parameter of registry entry ``spec`` (but ``skip``) and ``--config``."""
    if spec.layers:
        op.add_argument("--layer", choices=spec.layers, metavar="LAYER",
                        help=f"a named layer of docs/WORKLOADS.md ({', '.join(spec.layers)}); "
                             f"fixes {', '.join(spec.param(n).option for n in spec.shape_params)}")
    for param in spec.params:
        if param.cli and param.name not in skip:
            op.add_argument(param.option, dest=param.name, default=None, help=_param_help(param),
                            **_param_type(param))
    add_machine_option(op)


def operator_params(args: argparse.Namespace, spec: Any, verb: str) -> dict[str, Any]:
    """The operator parameters given on the command line (and ``layer``), checked for a
    layer given with its shape and for missing shape options."""
    given = {p.name: getattr(args, p.name) for p in spec.params
             if p.cli and getattr(args, p.name, None) is not None}
    layer = getattr(args, "layer", None)
    if layer is not None:
        fixed = [spec.param(n).option for n in spec.shape_params if n in given]
        if fixed:
            raise ValueError(f"--layer {layer} fixes the shape; give either --layer or "
                             f"{', '.join(fixed)}, not both")
        given["layer"] = layer
    else:
        missing = [p.option for p in spec.params if p.cli and p.required and p.name not in given]
        if missing:
            alternative = " (or --layer)" if spec.layers else ""
            raise ValueError(f"{verb} {spec.name} needs {', '.join(missing)}{alternative}")
    return {k: tuple(v) if isinstance(v, list) else v for k, v in given.items()}


def _param_help(param: Any) -> str:
    default = "" if param.required else f"; default {param.default}"
    return f"{param.help} ({param.constraint}{default})"


def _param_type(param: Any) -> dict[str, Any]:
    if param.kind is bool:
        return {"action": argparse.BooleanOptionalAction}
    if param.kind is tuple:
        return {"type": int, "nargs": 2, "metavar": ("LOW", "HIGH")}
    return {"type": int}


def _compile(args: argparse.Namespace) -> int:
    import time

    from openvta.api import compile as compile_operator
    from openvta.compiler.ops import REGISTRY
    from openvta.tune.records import TuningNote

    spec = REGISTRY[args.operator]
    given = operator_params(args, spec, "compile")
    out = _output_file(args.output)  # required by its parser
    start = time.perf_counter()
    with ProgressDisplay(f"compile {spec.name}", enabled=False if args.quiet else None) as show, \
            warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always", TuningNote)
        program = compile_operator(spec.name, config=machine_of(args), seed=args.seed, progress=show,
                                   records=args.records, **given)
    for note in notes:
        print(f"openvta: note: {note.message}", file=sys.stderr)
    program.save(out)
    if not args.quiet:
        print(f"compiled {spec.name} into {program.insn_count} instructions in "
              f"{time.perf_counter() - start:.2f} s; program written to {args.output}")
    return 0


def _verilog(args: argparse.Namespace) -> int:
    from openvta.hw.cosim.export import lint, machine_verilog

    machine = machine_of(args)
    out = _output_file(args.output)  # required by its parser
    text = machine_verilog(machine)
    out.write_text(text)
    print(f"wrote {len(text.splitlines())} lines of Verilog (module openvta_top, machine "
          f"{args.machine}) to {args.output}")
    if args.lint:
        findings = lint(text)
        for line in findings:
            print(line, file=sys.stderr)
        print(f"verilator --lint-only -Wall: {len(findings)} warnings beyond the documented waivers")
        return 1 if findings else 0
    return 0


def _bitstream(args: argparse.Namespace) -> int:
    from openvta.hw.fpga.bitstream import build_bitstream

    from openvta.hw.fpga.bitstream import SocOptions

    if args.spram and args.sdram:
        raise ProgramError("--spram and --sdram both choose the DRAM: take one")
    machine = _with_options(machine_of(args), args)
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in args.machine)
    out = args.output or f"build/{args.board}-{'link-test' if args.link_test else name}"
    mem = None if args.mem_kib is None else args.mem_kib * 1024
    if machine.memory == "sdram" and mem is not None:
        raise ProgramError("--mem-kib sizes the on-chip DRAM; with --sdram the DRAM is the board's SDRAM")
    if machine.memory == "sdram" and not BOARDS[args.board].sdram:
        raise ProgramError(f"{args.board} has no SDRAM: build it without --sdram (on-chip DRAM, --mem-kib)")
    if machine.memory == "spram" and not BOARDS[args.board].spram_bytes:
        raise ProgramError(f"{args.board}'s {BOARDS[args.board].part} has no SPRAM: build it without --spram")
    with ProgressDisplay(f"bitstream for {args.board}", enabled=False if args.quiet else None,
                         delay_s=0) as show:
        def say(line: str) -> None:
            if show.enabled:
                show.line(line)
            elif not args.quiet:
                print(line, flush=True)

        soc = SocOptions(mem_bytes=mem, baud=args.baud, target_mhz=args.freq, link_test=args.link_test,
                         seed=args.seed, timeout_s=args.timeout)
        report = build_bitstream(args.board, machine, soc, out_dir=out, name=args.machine, progress=say)
    res = report.resources or {}
    print(json.dumps({"fmax_mhz": report.fmax_mhz, "timing_met": report.timing_met,
                      **{k: f"{v['used']}/{v['available']}" for k, v in res.items()}}))
    return 0


def _config(args: argparse.Namespace) -> int:
    if args.list:
        for name, machine in MACHINES.items():
            print(f"{name:<8} {_describe(machine)}")
        return 0
    machine = parse_machine(args.machine)
    print(machine.config.to_json() if machine.is_plain else machine.to_json())
    return 0


def _describe(machine: Machine) -> str:
    cfg = machine.config
    drain = f", drain unit of {cfg.DRAIN_STAGES} stages" if cfg.DRAIN_STAGES else ""
    build = f", {machine.build.label}" if machine.build.label else ""
    return (f"{cfg.BATCH}x{cfg.BLOCK_IN}x{cfg.BLOCK_OUT} GEMM{drain}{build}, counters {machine.counters.label}, "
            f"{machine.memory} memory")


def _model(args: argparse.Namespace) -> int:
    return run_model_command(args, _output)


def _tune(args: argparse.Namespace) -> int:
    return run_tune_command(args, operator_params, _output)


_COMMANDS = {"model": _model, "tune": _tune, "run": _run, "read": _read, "disasm": _disasm, "compile": _compile,
             "verilog": _verilog, "bitstream": _bitstream, "config": _config,
             "dse": run_dse_command}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("openvta: interrupted", file=sys.stderr)
        return 130
    except (ProgramError, BackendError, ConfigError, ISAError, ValueError) as exc:
        print(f"openvta: error: {exc}", file=sys.stderr)
        return 1
    except KeyError as exc:  # an unknown symbol: the message names the known ones
        print(f"openvta: error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # SimulationError and back-end failures
        print(f"openvta: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `openvta disasm prog.npz | head`: the reader has enough
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a folder that cannot be created, a full disk, no permission
        where = f" {exc.filename}" if exc.filename else ""
        print(f"openvta: error: cannot write{where}: {exc.strerror or exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
