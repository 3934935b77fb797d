"""The widths docs/ISA.md §2 fixes for every configuration, and the configuration's error.

:mod:`.config` (the parameters) and :mod:`.encoding` (the bit layouts the parameters give)
both read them, so neither has to import the other's module to know them.
"""

from __future__ import annotations

__all__ = ["ConfigError", "SRAM_BASE_WIDTH", "LOOP_ITER_WIDTH", "UOP_WIDTH", "INSN_WIDTH",
           "INSN_BYTES", "UOP_BYTES"]


class ConfigError(ValueError):
    """A configuration that the ISA cannot encode or the machine cannot build."""


SRAM_BASE_WIDTH = 16
LOOP_ITER_WIDTH = 14
UOP_WIDTH = 32
INSN_WIDTH = 128
INSN_BYTES = INSN_WIDTH // 8
UOP_BYTES = UOP_WIDTH // 8
