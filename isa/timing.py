"""Timing parameters of the machine: what the cycle model charges, and the RTL must match.

Every field is a whole number of clock cycles (``*_cycles``) or of bus beats
(``*_beats``); the bus width itself is the configuration's ``LOG_BUS_WIDTH``.  The
costs the cycle model derives from them (ISA.md instruction by instruction):

* **fetch** reads the stream in bursts of ``max_burst_beats``: per burst
  ``dram_read_latency_cycles`` + its beats, then ``fetch_dispatch_cycles`` per
  instruction routed into a command queue;
* every instruction costs ``issue_cycles`` in its module, then:
* **LOAD** (and sync instructions with ``x_size = 0``: nothing more):
  ``dram_read_latency_cycles`` once, then the beats of every burst (rows split at
  ``max_burst_beats``), then ``pad_cycles_per_elem`` for every zero-padding element
  (padding is written to the buffer, not read from DRAM);
* **STORE**: the beats of every burst on the write channel, then
  ``dram_write_latency_cycles`` for the last write response;
* **GEMM**: ``gemm_pipeline_cycles`` + ``gemm_ii_cycles`` per micro-op execution, plus a
  stall of ``gemm_pipeline_cycles − d`` for a micro-op whose accumulator tile was
  written ``d < gemm_pipeline_cycles`` executions before (ISA.md has no hazard rule:
  the hardware stalls, the schedule decides how often);
* **ALU**: ``alu_pipeline_cycles`` + per execution ``alu_imm_ii_cycles`` (immediate
  operand) or ``alu_vec_ii_cycles`` (accumulator operand), plus the same kind of stall
  when a tile it reads or writes was written within ``alu_pipeline_cycles`` executions;
* **FINISH**: ``issue_cycles`` only.

Read and write channels are separate and shared by fetch, load, compute and store;
requests are served in arrival order, one burst at a time, which is round-robin among
the modules that wait.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .config import Config, ConfigError

__all__ = ["Timing", "TIMING_PRESETS", "timing_for"]


@dataclass(frozen=True)
class Timing:
    """Cycle costs of the machine (see the module docstring for how each is charged).

    Examples
    --------
    >>> Timing().gemm_ii_cycles
    1
    """

    #: cycles from a read request to its first data beat
    dram_read_latency_cycles: int = 24
    #: cycles from the last write beat to the write response
    dram_write_latency_cycles: int = 8
    #: beats per burst on either channel (AXI4 allows up to 256)
    max_burst_beats: int = 64
    #: cycles fetch spends routing one instruction into a command queue
    fetch_dispatch_cycles: int = 1
    #: cycles a module spends taking an instruction from its queue and decoding it
    issue_cycles: int = 2
    #: buffer-write cycles per zero-padding element of a LOAD
    pad_cycles_per_elem: int = 1
    #: GEMM core latency from a micro-op's issue to its accumulator write
    gemm_pipeline_cycles: int = 4
    #: cycles between consecutive GEMM micro-ops
    gemm_ii_cycles: int = 1
    #: ALU latency from a micro-op's issue to its accumulator write
    alu_pipeline_cycles: int = 3
    #: cycles between ALU micro-ops with an immediate operand
    alu_imm_ii_cycles: int = 1
    #: cycles between ALU micro-ops with an accumulator operand (two reads)
    alu_vec_ii_cycles: int = 2
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
        for name in ("max_burst_beats", "gemm_ii_cycles", "alu_imm_ii_cycles", "alu_vec_ii_cycles"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, not {getattr(self, name)!r}")
        if self.max_burst_beats > 256:
            raise ConfigError(f"max_burst_beats must be at most 256 (AXI4), not {self.max_burst_beats!r}")

    def replace(self, **changes: object) -> Timing:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


TIMING_PRESETS: dict[str, Timing] = {
    "default": Timing(),
    "small": Timing(),
    "tiny": Timing(dram_read_latency_cycles=16, max_burst_beats=32),
}


def timing_for(cfg: Config) -> Timing:
    """The timing preset of ``cfg``'s preset (the default timing for a custom config)."""
    return TIMING_PRESETS.get(cfg.name, TIMING_PRESETS["default"])
