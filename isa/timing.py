"""Timing parameters of the machine: what the cycle model charges, mirroring the RTL.

Every field is a whole number of clock cycles (``*_cycles``) or of bus beats
(``*_beats``); the bus width itself is the configuration's ``LOG_BUS_WIDTH``.  The
cycle model follows the RTL's structure (``hw/``), and these are the costs it charges:

* **memory**: one burst at a time per channel (read, write), shared by fetch, load,
  compute and store in arrival order (round-robin among the waiting masters).  A read
  burst of ``n`` beats holds the channel ``request_cycles + dram_read_latency_cycles
  + n`` cycles; a write burst ``request_cycles + n + 1 + dram_write_latency_cycles``,
  where ``n`` is the burst's beats times ``dram_beat_cycles``.
  Rows are split into bursts of at most ``max_burst_beats``, and at every 4 KiB
  boundary (AXI4); a burst of items narrower than a beat (elements, instructions)
  moves one item per cycle, so its ``n`` counts items, not beats;
* **fetch** reads a burst of instructions into its prefetch buffer (never holding the
  bus while a command queue is full), and reads the next burst once the buffer is
  empty; the router moves one instruction per cycle, ``prefetch_latency_cycles`` after
  its last beat, into its module's command queue, where the module sees it
  ``queue_latency_cycles`` later.  With ``insn_move_cycles`` = k above 1 (a build whose
  prefetch buffer and command queues hold an instruction as k narrower words), each
  instruction takes k cycles to enter the prefetch buffer (or its beats, if more), the
  router moves one every k cycles, and its module takes k cycles to take it;
* every instruction costs ``issue_cycles`` in its module (take it, pop, start, push),
  and ``insn_move_cycles − 1`` more to take its words;
* **LOAD** adds per data row ``dma_row_cycles`` + its bursts + one cycle per padding
  element of the row, per padding row ``dma_pad_row_cycles`` + one cycle per element,
  and ``dma_done_cycles`` at the end (padding is written to the buffer, not read);
* **STORE** adds per row ``store_row_cycles`` + its bursts, and ``dma_done_cycles``;
* **GEMM** adds ``gemm_pipeline_cycles`` + ``gemm_ii_cycles`` per micro-op execution,
  **ALU** ``alu_pipeline_cycles`` + ``alu_imm_ii_cycles`` or ``alu_vec_ii_cycles`` per
  execution, and a MUL ``(alu_mul_cycles − 1) · alu_imm_ii_cycles`` more; a loop with no
  execution adds one cycle.  An execution touching a tile
  written fewer than ``hazard_window`` executions before waits out the difference
  (0: the RTL forwards the accumulator, docs/ISA.md's no-hazard rule costs nothing);
* a draining STORE ACC (machine v2) adds :func:`drain_fill_cycles` once, before its rows;
  a LOAD EPI/EPI_8BIT costs what a LOAD does, on the store module;
* sync instructions (``x_size = 0``) and FINISH add nothing.

Defaults are calibrated against the RTL with cocotbext-axi's AxiRam as memory
(``benchmarks/rtl.py`` reports the remaining error per program).  The three micro-op
intervals are also how the RTL is built (:class:`LeanBuild`):
``gemm_ii_cycles`` = k folds the GEMM core over k cycles, ``alu_imm_ii_cycles`` = k the
ALU's lanes, ``alu_vec_ii_cycles`` one above it leaves the accumulator one read port, and
``alu_mul_cycles`` = 2 registers the ALU's products before their sum.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar
from dataclasses import dataclass

from .config import Config, ConfigError
from .enums import DrainOp
from .widths import INSN_WIDTH

__all__ = ["Timing", "TIMING_PRESETS", "drain_fill_cycles", "drain_split_stages", "timing_for", "sdram_timing",
           "SDRAM_WORD_BYTES",
           "SDRAM_READ_LATENCY_CYCLES", "SDRAM_WRITE_LATENCY_CYCLES", "INSN_MOVE_CHOICES", "spram_timing",
           "LeanBuild", "PIPELINE_CYCLES", "check_fold"]

#: AXI4 bursts never cross a 4 KiB address boundary (the RTL and the cycle model split
#: them there), in bytes.
AXI_BOUNDARY = 4096
#: The longest AXI4 INCR burst, in beats.
AXI_MAX_BURST_BEATS = 256
#: ``insn_move_cycles``' values: an instruction in 1, 2, 4 or 8 words (of 128 to 16 bits;
#: the router needs an instruction's module, opcode and memory type, in its first word).
INSN_MOVE_CHOICES = (1, 2, 4, 8)
#: The GEMM and ALU cycles besides one per pass (``Timing.gemm_pipeline_cycles``): the
#: compute unit's five stages' fill and drain (one more with the micro-op stage).
PIPELINE_CYCLES = 5


@dataclass(frozen=True)
class Timing:
    """Cycle costs of the machine (see the module docstring for how each is charged).

    Examples
    --------
    >>> Timing().gemm_ii_cycles
    1
    """

    #: cycles between the read-address handshake and the first data beat, beyond one
    dram_read_latency_cycles: int = 1
    #: cycles between the last write beat and the write response, beyond one
    dram_write_latency_cycles: int = 1
    #: cycles the memory takes for each beat of a burst (1: on-chip RAM; an SDR SDRAM
    #: moves one 16-bit word a cycle, :func:`sdram_timing`)
    dram_beat_cycles: int = 1
    #: bursts the memory serves at once: 2, a read and a write (AXI RAM); 1, one burst
    #: at a time in either direction (the SDRAM controller)
    dram_channels: int = 2
    #: beats per burst on either channel (AXI4 allows up to 256)
    max_burst_beats: int = 64
    #: cycles of a burst before its address is accepted (request, arbitration)
    request_cycles: int = 2
    #: cycles from an instruction's last beat to the router seeing it (prefetch buffer)
    prefetch_latency_cycles: int = 2
    #: cycles from the router routing an instruction to its module seeing it
    queue_latency_cycles: int = 1
    #: cycles a module spends per instruction: take it, pop tokens, start, push tokens
    issue_cycles: int = 4
    #: cycles to move one instruction into the prefetch buffer, through the router and
    #: into its module: 1 (whole instructions), or 2, 4, 8 (in as many words of 128 / k
    #: bits: block RAM entries that narrow, 16 bits and one block per queue on the iCE40)
    insn_move_cycles: int = 1
    #: cycles of a LOAD per data row besides its bursts and padding
    dma_row_cycles: int = 3
    #: cycles of a LOAD per padding row besides one per element
    dma_pad_row_cycles: int = 2
    #: cycles at the end of a LOAD or STORE
    dma_done_cycles: int = 1
    #: cycles of a STORE per row besides its bursts
    store_row_cycles: int = 1
    #: buffer-write cycles per zero-padding element of a LOAD
    pad_cycles_per_elem: int = 1
    #: GEMM cycles besides one per micro-op execution (pipeline fill and drain)
    gemm_pipeline_cycles: int = 5
    #: cycles between consecutive GEMM micro-ops
    gemm_ii_cycles: int = 1
    #: ALU cycles besides one per micro-op execution
    alu_pipeline_cycles: int = 5
    #: cycles between ALU micro-ops with an immediate operand
    alu_imm_ii_cycles: int = 1
    #: cycles between ALU micro-ops with an accumulator operand
    alu_vec_ii_cycles: int = 1
    #: cycles of each lane pass of an ALU MUL (2: its products registered before the sum)
    alu_mul_cycles: int = 1
    #: executions within which reading a freshly written tile stalls (0: forwarded)
    hazard_window: int = 0
    #: cycles a draining STORE (machine v2) costs beyond the STORE of the out buffer it
    #: replaces, besides two per stage of its descriptor (:func:`drain_fill_cycles`: the
    #: descriptor's words and stages, less what the DMA writer's start hides; the RTL's)
    drain_extra_cycles: int = 1
    #: nominal clock for GOPS figures, in MHz
    clock_mhz: float = 100.0

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "clock_mhz":
                if not isinstance(value, (int, float)) or value <= 0:
                    raise ConfigError(f"clock_mhz must be a positive number, not {value!r}")
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{f.name} must be a non-negative integer, not {value!r}")
        for name in ("dram_beat_cycles", "max_burst_beats", "gemm_ii_cycles", "alu_imm_ii_cycles", "alu_vec_ii_cycles",
                     "alu_mul_cycles"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, not {getattr(self, name)!r}")
        if self.insn_move_cycles not in INSN_MOVE_CHOICES:
            raise ConfigError(f"insn_move_cycles must be {', '.join(map(str, INSN_MOVE_CHOICES[:-1]))} "
                              f"or {INSN_MOVE_CHOICES[-1]} (instructions moved in words of "
                              f"{', '.join(str(INSN_WIDTH // k) for k in INSN_MOVE_CHOICES)} bits), "
                              f"not {self.insn_move_cycles!r}")
        if self.dram_channels not in (1, 2):
            raise ConfigError(f"dram_channels must be 1 or 2, not {self.dram_channels!r}")
        if self.max_burst_beats > AXI_MAX_BURST_BEATS:
            raise ConfigError(f"max_burst_beats must be at most {AXI_MAX_BURST_BEATS} (AXI4), "
                              f"not {self.max_burst_beats!r}")

    def replace(self, **changes: Any) -> Timing:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


TIMING_PRESETS: dict[str, Timing] = {
    "default": Timing(),
    "vta": Timing(),
    "v2": Timing(),
    "small": Timing(),
    "tiny": Timing(max_burst_beats=32),
}


def drain_split_stages(cfg: Config, mul_cycles: int) -> frozenset[int]:
    """The drain stages whose product takes two cycles: with ``mul_cycles`` = 2 (the lean
    build's, :class:`LeanBuild`), each stage of MUL alone, as the compute ALU splits its own
    (the lanes' 16×16 partial products registered, summed the next cycle)."""
    if mul_cycles != 2:
        return frozenset()
    return frozenset(k for k, ops in enumerate(cfg.drain_stage_ops) if ops == {DrainOp.MUL})


def drain_fill_cycles(cfg: Config, timing: Timing, stages: int) -> int:
    """What a draining STORE ACC whose descriptor has ``stages`` stages costs beyond the
    STORE of the out buffer it replaces: two cycles per stage (its operand word's read, its
    pipeline register; one word's read even for none), one more per stage of them whose
    product takes two cycles (:func:`drain_split_stages`, with the timing's
    ``alu_mul_cycles``) and ``drain_extra_cycles`` (a STORE ACC, which only a machine with a
    drain unit runs).  Measured on the RTL (``hw/rtl/drain.py``,
    ``tests/hw/test_drain_rtl.py``): ``2·stages + 1``.

    >>> from openvta.isa import preset
    >>> drain_fill_cycles(preset("v2"), Timing(), 3), drain_fill_cycles(preset("v2"), Timing(), 12)
    (7, 25)
    """
    count = min(stages, cfg.DRAIN_STAGES)
    split = sum(1 for k in drain_split_stages(cfg, timing.alu_mul_cycles) if k < count)
    return max(count, 1) + count + split + timing.drain_extra_cycles


def timing_for(cfg: Config) -> Timing:
    """The timing preset of ``cfg``'s preset (the default timing for a custom config)."""
    return TIMING_PRESETS.get(cfg.name, TIMING_PRESETS["default"])


#: The ULX3S's SDR SDRAM moves one word of this many bytes a cycle (16-bit ``dq``).
SDRAM_WORD_BYTES = 2
#: The SDRAM controller's (``hw/rtl/sdram.py``, at 50 MHz on the AS4C32M16SB-7's timings)
#: latencies as the cycle model charges them: calibrated on ResNet-18's eleven layers on
#: ``small`` with one and two virtual threads against the Verilated design
#: (``RtlBackend(memory="sdram")``; benchmarks/fpga.py ``--sdram``) at 50 MHz, the image's
#: Fmax target: the opening of rows, CAS latency, the pin and input registers, the read
#: FIFO and the refreshes in between.
SDRAM_READ_LATENCY_CYCLES = 8
SDRAM_WRITE_LATENCY_CYCLES = 2


def sdram_timing(cfg: Config, base: Timing | None = None) -> Timing:
    """``base`` (default :func:`timing_for` ``cfg``) with the DRAM on the ULX3S's SDR SDRAM:
    a beat in ``bus_bytes / 2`` cycles, one burst at a time in either direction, and the
    controller's latencies (:data:`SDRAM_READ_LATENCY_CYCLES`, :data:`SDRAM_WRITE_LATENCY_CYCLES`).

    >>> from openvta.isa import preset
    >>> t = sdram_timing(preset("small"))
    >>> t.dram_beat_cycles, t.dram_channels, t.dram_read_latency_cycles
    (4, 1, 8)
    """
    return (base or timing_for(cfg)).replace(
        dram_beat_cycles=max(1, cfg.bus_bytes // SDRAM_WORD_BYTES), dram_channels=1,
        dram_read_latency_cycles=SDRAM_READ_LATENCY_CYCLES, dram_write_latency_cycles=SDRAM_WRITE_LATENCY_CYCLES)


def spram_timing(cfg: Config, base: Timing | None = None) -> Timing:
    """``base`` (default :func:`timing_for` ``cfg``) with the DRAM in a single-port
    on-chip RAM (the UP5K's SPRAM, ``openvta bitstream --spram``): the two-port RAM's
    latencies, one burst at a time in either direction.

    >>> from openvta.isa import preset
    >>> spram_timing(preset("tiny")).dram_channels
    1
    """
    return (base or timing_for(cfg)).replace(dram_channels=1)


def check_fold(fold: object, lanes: int, what: str, of: str) -> int:
    """``fold`` if it is a positive integer dividing ``lanes``."""
    if not isinstance(fold, int) or isinstance(fold, bool) or fold < 1 or lanes % fold:
        raise ValueError(f"{what} must be a positive integer dividing {of} ({lanes}), "
                         f"not {fold!r}")
    return fold


@dataclass(frozen=True)
class LeanBuild:
    """The compute unit's lean build options, and the :class:`Timing` they give the
    machine (the RTL is built from the timing; the cycle model charges it).

    Examples
    --------
    >>> lean = LeanBuild(gemm_ii=2, acc_ports=1)
    >>> t = lean.timing(Timing())
    >>> t.gemm_ii_cycles, t.alu_imm_ii_cycles, t.alu_vec_ii_cycles
    (2, 1, 2)
    >>> lean.label
    'gemm_ii=2,acc_ports=1'
    """

    #: cycles per GEMM micro-op: the GEMM core has 1/gemm_ii of the multipliers
    gemm_ii: int = 1
    #: cycles per ALU micro-op: the ALU has 1/alu_ii of the lanes
    alu_ii: int = 1
    #: read ports of the accumulator buffer (1: an ALU micro-op with a tile operand
    #: takes one cycle more)
    acc_ports: int = 2
    #: cycles of each lane pass of an ALU MUL (2: the products registered before the sum)
    mul_cycles: int = 1
    #: 1: the micro-op read from the uop buffer is registered (a sixth pipeline stage,
    #: one cycle more per GEMM and ALU instruction)
    uop_stage: int = 0
    #: 1: one DMA reader per module, of the width each LOAD chooses, instead of one per
    #: buffer (``openvta.hw.rtl.dma.DmaReaders``): the same cycles, so not in the timing
    #: (:meth:`of` gives 0); the core's build option
    shared_dma: int = 0
    #: instructions held in the prefetch buffer and the command queues as this many
    #: words (``Timing.insn_move_cycles``: 8 gives 16-bit entries, one iCE40 block RAM
    #: per queue; each instruction then takes 8 cycles to route and to take)
    insn_words: int = 1

    #: The values of the options that have few, the full build's first (the folds
    #: ``gemm_ii`` and ``alu_ii`` take any positive integer dividing their tile).
    CHOICES: ClassVar[dict[str, tuple[int, ...]]] = {"acc_ports": (2, 1), "mul_cycles": (1, 2),
                                                     "uop_stage": (0, 1), "shared_dma": (0, 1),
                                                     "insn_words": INSN_MOVE_CHOICES}

    def __post_init__(self) -> None:
        for name in ("gemm_ii", "alu_ii"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        for name, choices in self.CHOICES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or value not in choices:
                raise ValueError(f"{name} must be {' or '.join(map(str, sorted(choices)))}, "
                                 f"not {value!r}")

    @property
    def label(self) -> str:
        """The options that differ from the full build, as ``key=value,…`` ("" for none)."""
        full = LeanBuild()
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self)
                        if getattr(self, f.name) != getattr(full, f.name))

    def to_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)

    def timing(self, base: Timing) -> Timing:
        """``base`` with the micro-op intervals of this build."""
        return base.replace(gemm_ii_cycles=self.gemm_ii, alu_imm_ii_cycles=self.alu_ii,
                            alu_vec_ii_cycles=self.alu_ii + (self.acc_ports == 1),
                            alu_mul_cycles=self.mul_cycles,
                            gemm_pipeline_cycles=PIPELINE_CYCLES + self.uop_stage,
                            alu_pipeline_cycles=PIPELINE_CYCLES + self.uop_stage,
                            insn_move_cycles=self.insn_words)

    @classmethod
    def of(cls, cfg: Config, timing: Timing) -> LeanBuild:
        """The build ``timing`` describes for ``cfg``: the GEMM fold is
        ``gemm_ii_cycles`` (dividing ``BLOCK_OUT``), the ALU's ``alu_imm_ii_cycles``
        (dividing ``BATCH·BLOCK_OUT``), and ``alu_vec_ii_cycles`` is either
        ``alu_imm_ii_cycles`` (two read ports) or one more (one read port);
        ``alu_mul_cycles`` is 1 or 2; ``gemm_pipeline_cycles`` and
        ``alu_pipeline_cycles`` are both 5, or both 6 (the micro-op register stage).

        Raises
        ------
        ValueError
            when no build of the compute unit has that timing.
        """
        gemm = check_fold(timing.gemm_ii_cycles, cfg.BLOCK_OUT, "gemm_ii_cycles (the GEMM "
                          "core's fold)", "BLOCK_OUT")
        alu = check_fold(timing.alu_imm_ii_cycles, cfg.BATCH * cfg.BLOCK_OUT,
                         "alu_imm_ii_cycles (the ALU's fold)", "BATCH·BLOCK_OUT")
        if timing.alu_vec_ii_cycles not in (alu, alu + 1):
            raise ValueError(f"alu_vec_ii_cycles must be alu_imm_ii_cycles ({alu}: two "
                             f"accumulator read ports) or one more ({alu + 1}: one read port), "
                             f"not {timing.alu_vec_ii_cycles!r}")
        if timing.alu_mul_cycles not in (1, 2):
            raise ValueError(f"alu_mul_cycles must be 1 or 2 (the ALU's products registered "
                             f"before their sum), not {timing.alu_mul_cycles!r}")
        stages = (timing.gemm_pipeline_cycles, timing.alu_pipeline_cycles)
        if stages not in ((PIPELINE_CYCLES, PIPELINE_CYCLES), (PIPELINE_CYCLES + 1, PIPELINE_CYCLES + 1)):
            raise ValueError(f"gemm_pipeline_cycles and alu_pipeline_cycles must both be "
                             f"{PIPELINE_CYCLES}, or both {PIPELINE_CYCLES + 1} (the micro-op "
                             f"register stage), not {stages[0]} and {stages[1]}")
        return cls(gemm, alu, 2 if timing.alu_vec_ii_cycles == alu else 1, timing.alu_mul_cycles,
                   stages[0] - PIPELINE_CYCLES, insn_words=timing.insn_move_cycles)
