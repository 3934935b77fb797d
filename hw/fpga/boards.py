"""The FPGA boards a bitstream is built for, and whether a configuration fits one.

Two checks stop a build that cannot fit before place and route spends minutes on it:

* :func:`check_fit` — from the configuration alone, before any tool runs: the GEMM
  core's multipliers against the part's DSP blocks, and the buffers plus the on-chip
  DRAM against its block RAM bits;
* :func:`check_synthesis` — from Yosys's cell counts, after synthesis: DSP blocks,
  block RAMs and logic against what the part has.

Both raise :class:`FitError`, naming every resource that is short.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openvta.isa import Config

__all__ = ["Board", "BOARDS", "FitError", "board", "check_fit", "check_synthesis",
           "check_packing", "synthesis_usage", "buffer_bits", "PACKED_NAMES"]


class FitError(ValueError):
    """A configuration cannot fit the board's FPGA."""


#: One iCE40 SPRAM block (SB_SPRAM256KA): 16K words of 16 bits.
SPRAM_WORDS, SPRAM_BITS = 16384, 16


@dataclass(frozen=True)
class Board:
    """One board: its part, clock, capacities and Yosys/nextpnr cell names.

    ``capacity`` maps a resource (``logic``, ``dsp``, ``bram``) to how many the part
    has; ``cells`` maps it to the Yosys cell types that use it.
    """

    name: str
    part: str
    family: str  # "ice40" or "ecp5"
    platform_name: str  # module:class in amaranth_boards
    clock_hz: float  # the board oscillator the SoC runs from
    target_mhz: float  # the Fmax nextpnr is asked for (the target)
    capacity: dict[str, int]
    cells: dict[str, tuple[str, ...]]
    bram_bits: int  # bits of one block RAM
    default_mem_bytes: int  # on-chip DRAM of the SoC
    nextpnr_opts: tuple[str, ...] = ()
    synth_opts: str = ""
    #: the board's SDR SDRAM part (:data:`openvta.hw.rtl.sdram.PARTS`), or "" for none
    sdram: str = ""
    #: bytes of single-port RAM on the part (the UP5K's SPRAM), 0 for none
    spram_bytes: int = 0

    @property
    def spram_blocks(self) -> int:
        """The part's single-port RAM blocks."""
        return self.spram_bytes * 8 // (SPRAM_WORDS * SPRAM_BITS)

    def sprams_for(self, mem_bytes: int, bus_bits: int) -> int:
        """The single-port RAM blocks (:data:`SPRAM_WORDS` words of :data:`SPRAM_BITS`
        bits) a DRAM of ``mem_bytes`` on a ``bus_bits`` bus takes: side by side for the
        bus, in rows for the depth."""
        words = mem_bytes // (bus_bits // 8)
        return -(-bus_bits // SPRAM_BITS) * -(-words // SPRAM_WORDS)

    def platform(self) -> Any:
        """A fresh amaranth-boards platform object for this board."""
        module, cls = self.platform_name.split(":")
        try:
            mod = __import__(module, fromlist=[cls])
        except ImportError:
            raise FitError(f"building for {self.name} needs amaranth-boards: "
                           "pip install 'openvta[fpga]'") from None
        factory: Callable[[], Any] = getattr(mod, cls)
        return factory()


BOARDS: dict[str, Board] = {
    "icebreaker": Board(
        name="icebreaker", part="iCE40 UP5K", family="ice40",
        platform_name="amaranth_boards.icebreaker:ICEBreakerPlatform",
        clock_hz=12e6, target_mhz=24.0,
        capacity={"logic": 5280, "dsp": 8, "bram": 30},
        cells={"logic": ("SB_LUT4",), "dsp": ("SB_MAC16",), "bram": ("SB_RAM40_4K",),
               "ff": ("SB_DFF", "SB_DFFE", "SB_DFFSR", "SB_DFFR", "SB_DFFS", "SB_DFFESR",
                      "SB_DFFER", "SB_DFFES", "SB_DFFSS", "SB_DFFESS"),
               "carry": ("SB_CARRY",)},
        bram_bits=4096, default_mem_bytes=4096, synth_opts="-dsp", spram_bytes=131072,
    ),
    "ulx3s-85f": Board(
        name="ulx3s-85f", part="ECP5 LFE5U-85F", family="ecp5",
        platform_name="amaranth_boards.ulx3s:ULX3S_85F_Platform",
        clock_hz=25e6, target_mhz=50.0,
        capacity={"logic": 83640, "dsp": 156, "bram": 208},
        cells={"logic": ("LUT4",), "dsp": ("MULT18X18D",), "bram": ("DP16KD",),
               "ff": ("TRELLIS_FF",), "carry": ("CCU2C",), "lutram": ("TRELLIS_DPR16X4",)},
        bram_bits=18432, default_mem_bytes=65536, sdram="AS4C32M16SB-7",
        # router2 with nextpnr's electrostatic placer: `small` routes in minutes (the
        # default heap placer left router2 with hundreds of congested wires after 45 min)
        nextpnr_opts=("--router", "router2", "--placer", "static"),
    ),
}

_NAMES = {"logic": "logic cells (LUT4)", "dsp": "DSP blocks", "bram": "block RAMs"}
#: nextpnr's packed resources (:func:`check_packing`), by their keys in ``BitstreamReport.packed``
PACKED_NAMES = {"lut": "logic cells", "dsp": "DSP blocks", "bram": "block RAMs", "spram": "SPRAMs"}


def board(name: str) -> Board:
    """The board called ``name`` (``icebreaker`` or ``ulx3s-85f``)."""
    try:
        return BOARDS[name]
    except KeyError:
        raise FitError(f"unknown board {name!r}; choose one of "
                       f"{', '.join(sorted(BOARDS))}") from None


def buffer_bits(cfg: Config) -> int:
    """Bits of the on-chip buffers (uop, inp, wgt, acc, out, and machine v2's epi buffer
    when ``cfg`` has a drain unit)."""
    total = (1 << cfg.LOG_UOP_BUFF_SIZE) + (1 << cfg.LOG_INP_BUFF_SIZE) \
        + (1 << cfg.LOG_WGT_BUFF_SIZE) + (1 << cfg.LOG_ACC_BUFF_SIZE)
    total += (1 << cfg.LOG_ACC_DEPTH) * cfg.out_elem_bytes + cfg.epi_depth * cfg.acc_elem_bytes
    return total * 8


def check_fit(target: Board, cfg: Config, mem_bytes: int, preset_name: str = "",
              gemm_ii: int = 1) -> dict[str, int]:
    """Lower bounds of what ``cfg`` needs on ``target``, before any tool runs; a GEMM
    core folded over ``gemm_ii`` cycles has ``1/gemm_ii`` of the multipliers.

    Returns the estimate (``multipliers``, ``ram_bits``).

    Raises
    ------
    FitError
        naming each resource whose lower bound exceeds the part.
    """
    what = f"preset {preset_name!r}" if preset_name else "this configuration"
    shape = f"{cfg.BATCH}×{cfg.BLOCK_IN}×{cfg.BLOCK_OUT}"
    multipliers = cfg.BATCH * cfg.BLOCK_IN * cfg.BLOCK_OUT // gemm_ii
    folded = f" folded over {gemm_ii} cycles" if gemm_ii > 1 else ""
    ram_bits = buffer_bits(cfg) + mem_bytes * 8
    available_bits = target.capacity["bram"] * target.bram_bits
    problems = []
    if multipliers > target.capacity["dsp"]:
        problems.append(f"its {shape} GEMM core{folded} alone needs {multipliers} multipliers (one "
                        f"8×8 product per DSP block) but the {target.part} has "
                        f"{target.capacity['dsp']} DSP blocks")
    if ram_bits > available_bits:
        problems.append(f"its buffers ({buffer_bits(cfg) // 8192} KiB) and the SoC's "
                        f"{mem_bytes // 1024} KiB of on-chip DRAM need {ram_bits // 8192} KiB "
                        f"of block RAM but the {target.part} has {available_bits // 8192} KiB "
                        f"({target.capacity['bram']} blocks)")
    if problems:
        raise FitError(f"{what} cannot fit {target.name} ({target.part}): "
                       + "; ".join(problems) + ". Choose a smaller preset or board "
                       "(see docs/FPGA.md).")
    return {"multipliers": multipliers, "ram_bits": ram_bits}


def synthesis_usage(target: Board, cell_counts: dict[str, int]) -> dict[str, int]:
    """Per-resource use from Yosys's cell counts (``logic``, ``dsp``, ``bram``, ``ff``, …).

    ``logic`` on iCE40 is a lower bound of the logic cells after packing: each holds
    one LUT4, one flip-flop and one carry, so it is the largest of the three counts.
    """
    usage = {res: sum(cell_counts.get(c, 0) for c in cells) for res, cells in target.cells.items()}
    if target.family == "ice40":
        usage["logic"] = max(usage["logic"], usage.get("ff", 0), usage.get("carry", 0))
    return usage


def check_synthesis(target: Board, cell_counts: dict[str, int], what: str = "the design") -> dict[str, int]:
    """Check Yosys's cell counts against ``target`` (before place and route).

    Returns :func:`synthesis_usage`.

    Raises
    ------
    FitError
        naming each resource used beyond the part's capacity.
    """
    usage = synthesis_usage(target, cell_counts)
    over = [f"{usage[res]} {_NAMES[res]} of {cap} ({math.ceil(100 * usage[res] / cap)} %)"
            for res, cap in target.capacity.items() if usage[res] > cap]
    if over:
        raise FitError(f"{what} does not fit {target.name} ({target.part}) after synthesis: "
                       + ", ".join(over) + "; place and route was not started.")
    return usage


def check_packing(target: Board, packed: dict[str, dict[str, int]], what: str = "the design") -> None:
    """Check nextpnr's packed cells (``{"lut": {"used": n, "available": n}, ...}``)
    against ``target``'s part, before placement.

    On iCE40 this is the figure that decides: a logic cell holds one LUT4, one
    flip-flop and one carry, and a flip-flop whose input is not a LUT of its own (a
    block RAM's output, another register, a LUT that drives other cells too) or a carry
    without its adder's LUT takes a cell of its own, so the cells can exceed Yosys's
    LUT4 count by far (:func:`synthesis_usage` is only a lower bound; the UP5K's lean
    ``tiny``: 7 862 cells for 5 665 LUT4, docs/FPGA_NOTES.md).

    Raises
    ------
    FitError
        naming each resource used beyond the part's capacity.
    """
    over = [f"{v['used']} {PACKED_NAMES.get(res, res)}"
            + (" (a LUT4, a flip-flop and a carry each)" if res == "lut" else "")
            + (f" of {v['available']} ({math.ceil(100 * v['used'] / v['available'])} %)" if v["available"]
               else ", which the part has none of")
            for res, v in packed.items() if v["used"] > v["available"]]
    if over:
        raise FitError(f"{what} does not fit {target.name} ({target.part}) after packing: "
                       + ", ".join(over) + "; place and route was not started.")
