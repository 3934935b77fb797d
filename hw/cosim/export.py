"""Verilog export of the accelerator, and its lint under ``verilator --lint-only -Wall``.

Amaranth's generated Verilog trips a handful of Verilator style warnings that say
nothing about the design; they are waived here, each with its reason.  Every other
warning is a finding.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from openvta.isa import Config, CounterSet, LeanBuild, Machine, Timing, timing_for

from .runner import TOP_NAME, toolchain_environ, verilog_of

__all__ = ["export_verilog", "machine_verilog", "lint", "LINT_WAIVERS"]

#: Verilator warnings waived for Amaranth-generated Verilog, with the reason for each.
LINT_WAIVERS = {
    "UNUSEDSIGNAL": "Amaranth keeps every named signal, including bits a consumer ignores "
                    "(e.g. the upper fields of an instruction word a module does not decode)",
    "CASEINCOMPLETE": "Amaranth emits FSM and Switch cases without a default branch; the "
                      "preceding assignment is the default",
    "WIDTHEXPAND": "Amaranth's arithmetic widens operands implicitly (TOOLCHAIN.md)",
    "WIDTHTRUNC": "Amaranth truncates on assignment implicitly (TOOLCHAIN.md)",
    "PROCASSINIT": "Amaranth initialises registers in declarations and assigns them in processes",
    "DECLFILENAME": "the file is named after the configuration, not after the module",
    "UNDRIVEN": "Amaranth's internal $signal temporaries of memory read ports have bits the "
                "port never drives",
    "ALWNEVER": "Amaranth emits empty always @* blocks for constant memory-port enables",
    "ASCRANGE": "Amaranth emits a zero-width signal as [-1:0]; they are legal there, e.g. the "
                "address of the one-entry FIFO inside a command queue of CMD_QUEUE_DEPTH=2",
}


def export_verilog(cfg: Config, timing: Timing | None = None) -> str:
    """The top level's Verilog for ``cfg`` (module ``openvta_top``)."""
    from ..rtl.top import make_top

    return verilog_of(make_top(cfg, timing))


def machine_verilog(machine: Machine) -> str:
    """The top level's Verilog for ``machine``: its configuration, its build and its counters
    (the memory is the SoC's, outside the top level); a plain machine's is :func:`export_verilog`'s."""
    from ..rtl.top import Top

    if machine.build == LeanBuild() and machine.counters == CounterSet.ALL:
        return export_verilog(machine.config)
    timing = machine.build.timing(timing_for(machine.config))
    return verilog_of(Top(machine.config, timing, machine.counters, shared_dma=bool(machine.build.shared_dma)))


def lint(verilog: str) -> list[str]:
    """Warnings of ``verilator --lint-only -Wall`` beyond :data:`LINT_WAIVERS` (empty when clean)."""
    with tempfile.TemporaryDirectory() as tmp, toolchain_environ():
        path = Path(tmp) / f"{TOP_NAME}.v"
        path.write_text(verilog)
        waivers = [f"-Wno-{rule}" for rule in LINT_WAIVERS]
        proc = subprocess.run(["verilator", "--lint-only", "-Wall", *waivers, "--top-module",
                               TOP_NAME, str(path)], capture_output=True, text=True, check=False)
    return [line for line in proc.stderr.splitlines()
            if line.startswith("%Warning") or line.startswith("%Error")
            and "Exiting due to" not in line]
