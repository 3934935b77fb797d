"""``--machine``, the option every command that targets a machine takes (``compile``,
``run``, ``verilog``, ``bitstream``, ``model compile``, ``tune``), in a module of its own so
that the commands' modules share it without importing each other."""

from __future__ import annotations

import argparse
from typing import Any

from openvta.isa import MACHINES, Machine, parse_machine

__all__ = ["MACHINE_HELP", "add_machine_option", "machine_of"]

#: What ``--machine`` takes (docs/PRESETS.md).
MACHINE_HELP = (f"the machine: a preset ({', '.join(MACHINES)}), PRESET:KEY=VALUE,... (KEY a configuration key, "
                "DRAIN_OPS by name such as RSHR+SHR/ADD/CLIP, a lean build option such as alu_ii, counters or "
                "memory), a JSON object or a .json file (docs/PRESETS.md); --config is its older name")


def add_machine_option(parser: argparse.ArgumentParser | Any, default: str | None = "default") -> None:
    """``--machine`` (and its older name ``--config``) with ``default`` (None: not given)."""
    shown = f" (default {default})" if default else ""
    parser.add_argument("--machine", "--config", dest="machine", default=default, metavar="MACHINE",
                        help=MACHINE_HELP + shown)


def machine_of(args: argparse.Namespace) -> Machine:
    """The machine of a command line's ``--machine`` (a one-line ``ConfigError`` if it names none)."""
    return parse_machine(args.machine)
