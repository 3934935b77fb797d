"""The accelerator configuration: VTA's log2 parameters and everything derived from them.

A :class:`Config` holds the ISA keys of ``vta_config.json`` (docs/ISA.md §1) plus the
non-ISA keys that size the machine around the ISA (command and token queue depths,
the memory bus width).  Every width and depth used anywhere in openvta is derived
here, once.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

from .encoding import layouts_of
from .enums import DrainOp
from .widths import INSN_BYTES, INSN_WIDTH, LOOP_ITER_WIDTH, SRAM_BASE_WIDTH, UOP_BYTES, UOP_WIDTH, ConfigError

__all__ = ["Config", "ConfigError", "DEFAULT_PRESET", "V2_KEYS", "V2_DRAIN", "DRAIN_OPS_BITS", "DRAIN_HEADER_LANES",
           "DRAIN_CODES_PER_LANE",
           "INSN_BYTES", "INSN_WIDTH", "LOOP_ITER_WIDTH", "SRAM_BASE_WIDTH",
           "UOP_BYTES", "UOP_WIDTH", "ISA_KEYS", "MACHINE_KEYS", "PRESETS", "preset"]


#: The log2 parameters that define the ISA, in ``vta_config.json`` order.
ISA_KEYS = (
    "LOG_INP_WIDTH",
    "LOG_WGT_WIDTH",
    "LOG_ACC_WIDTH",
    "LOG_BATCH",
    "LOG_BLOCK",
    "LOG_UOP_BUFF_SIZE",
    "LOG_INP_BUFF_SIZE",
    "LOG_WGT_BUFF_SIZE",
    "LOG_ACC_BUFF_SIZE",
)

#: Non-ISA keys that size the machine: queue depths in entries, bus width in bits.
MACHINE_KEYS = ("CMD_QUEUE_DEPTH", "DEP_QUEUE_DEPTH", "LOG_BUS_WIDTH")

#: Machine v2's keys (docs/ISA.md §9): the drain unit, which runs a conv2d's or dense
#: layer's epilogue on the way from the accumulator to DRAM.  Both 0 is VTA's machine;
#: a configuration writes them only when they are set, so a VTA configuration's JSON
#: (and every program compiled for it) is what it was before machine v2.
V2_KEYS = ("LOG_EPI_BUFF_SIZE", "DRAIN_STAGES", "DRAIN_OPS")

#: Bits of one stage's operation set in ``DRAIN_OPS``: stage ``k``'s set is byte ``k``, bit
#: ``op`` set for each :class:`~openvta.isa.DrainOp` the stage has.
DRAIN_OPS_BITS = 8

#: Lanes of an epi word's header that hold the stage count, the residual's base and the
#: stride of the operand words (docs/ISA.md §9); the remaining lanes hold the stage codes.
DRAIN_HEADER_LANES = 3
#: Stage codes packed into one int32 lane of a header word (8 bits each).
DRAIN_CODES_PER_LANE = 4


#: The element widths (log2 bits) openvta supports: int8 inputs and weights, int32 accumulators.
SUPPORTED_WIDTHS = {"LOG_INP_WIDTH": 3, "LOG_WGT_WIDTH": 3, "LOG_ACC_WIDTH": 5}
#: ALU SHR reads the low SHR_AMOUNT_WIDTH bits of its second operand as a signed amount
#: (docs/ISA.md §3): an arithmetic right shift by 0..31, a left shift when negative.  A
#: shift across the 32-bit accumulator and its sign: LOG_ACC_WIDTH + 1 = 6 bits.
SHR_AMOUNT_WIDTH = SUPPORTED_WIDTHS["LOG_ACC_WIDTH"] + 1
#: The largest right shift SHR performs: ``x >> s`` for ``s`` in ``0..MAX_SHR_AMOUNT``.
MAX_SHR_AMOUNT = (1 << (SHR_AMOUNT_WIDTH - 1)) - 1


@dataclass(frozen=True)
class Config:
    """One accelerator configuration.

    Parameters
    ----------
    LOG_INP_WIDTH, LOG_WGT_WIDTH, LOG_ACC_WIDTH :
        log2 of the element widths in bits (3, 3, 5: int8 inputs and weights,
        int32 accumulators; the only widths openvta implements).
    LOG_BATCH, LOG_BLOCK :
        log2 of BATCH and of BLOCK_IN = BLOCK_OUT.
    LOG_UOP_BUFF_SIZE, LOG_INP_BUFF_SIZE, LOG_WGT_BUFF_SIZE, LOG_ACC_BUFF_SIZE :
        log2 of the on-chip buffer sizes in bytes.
    CMD_QUEUE_DEPTH :
        entries of each of the three command queues (fetch → load/compute/store).
    DEP_QUEUE_DEPTH :
        tokens each of the four dependency-token queues holds.
    LOG_BUS_WIDTH :
        log2 of the memory bus width in bits (6: a 64-bit AXI bus as on VTA's Pynq).
    LOG_EPI_BUFF_SIZE, DRAIN_STAGES :
        machine v2's drain unit (docs/ISA.md §9): log2 of its epi buffer in bytes and the
        stages its pipeline has; both 0 (VTA's machine, ``Config()``'s) or both set.
    DRAIN_OPS :
        the operations each drain stage has (docs/ISA.md §9): 0, every stage has all of
        :class:`~openvta.isa.DrainOp`'s seven; otherwise stage ``k``'s set is byte ``k``
        (bit ``op`` for each operation it has), so that a build spends logic only on what
        its stages run (:func:`openvta.isa.drain.parse_drain_ops` reads
        ``"RSHR+SHR/ADD/CLIP"``).
    extras :
        any other keys of the JSON file (``TARGET``, ``HW_VER``, …), kept verbatim.

    Raises
    ------
    ConfigError
        naming the parameter and the constraint it breaks.

    Examples
    --------
    >>> cfg = Config()
    >>> cfg.BLOCK_IN, cfg.LOG_INP_DEPTH, cfg.inp_elem_bytes
    (16, 11, 16)
    """

    LOG_INP_WIDTH: int = 3
    LOG_WGT_WIDTH: int = 3
    LOG_ACC_WIDTH: int = 5
    LOG_BATCH: int = 0
    LOG_BLOCK: int = 4
    LOG_UOP_BUFF_SIZE: int = 15
    LOG_INP_BUFF_SIZE: int = 15
    LOG_WGT_BUFF_SIZE: int = 18
    LOG_ACC_BUFF_SIZE: int = 17
    CMD_QUEUE_DEPTH: int = 512
    DEP_QUEUE_DEPTH: int = 256
    LOG_BUS_WIDTH: int = 6
    LOG_EPI_BUFF_SIZE: int = 0
    DRAIN_STAGES: int = 0
    DRAIN_OPS: int = 0
    extras: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        for key in ISA_KEYS + MACHINE_KEYS + V2_KEYS:
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{key} must be an integer, not {value!r}")
        for key, width in SUPPORTED_WIDTHS.items():
            if getattr(self, key) != width:
                raise ConfigError(
                    f"{key} must be {width} (openvta implements int8 inputs and weights with "
                    f"int32 accumulators), not {getattr(self, key)!r}"
                )
        _check_range("LOG_BATCH", self.LOG_BATCH, 0, 4)
        _check_range("LOG_BLOCK", self.LOG_BLOCK, 1, 6)
        for key, log_depth in (
            ("LOG_UOP_BUFF_SIZE", self.LOG_UOP_DEPTH),
            ("LOG_INP_BUFF_SIZE", self.LOG_INP_DEPTH),
            ("LOG_WGT_BUFF_SIZE", self.LOG_WGT_DEPTH),
            ("LOG_ACC_BUFF_SIZE", self.LOG_ACC_DEPTH),
        ):
            if not 1 <= log_depth <= SRAM_BASE_WIDTH:
                raise ConfigError(
                    f"{key} must give a buffer of 2 to 2**{SRAM_BASE_WIDTH} elements "
                    f"(sram_base is {SRAM_BASE_WIDTH} bits), not {getattr(self, key)!r} "
                    f"(2**{log_depth} elements)"
                )
        _check_range("CMD_QUEUE_DEPTH", self.CMD_QUEUE_DEPTH, 1, 1 << 16)
        _check_range("DEP_QUEUE_DEPTH", self.DEP_QUEUE_DEPTH, 1, 1 << 16)
        _check_range("LOG_BUS_WIDTH", self.LOG_BUS_WIDTH, 3, 10)
        self._check_drain()
        clash = sorted(set(self.extras) & set(ISA_KEYS + MACHINE_KEYS + V2_KEYS))
        if clash:
            raise ConfigError(f"extras must not repeat the configuration keys {', '.join(clash)}")
        object.__setattr__(self, "extras", MappingProxyType(dict(self.extras)))
        # Building the layouts checks that every field fits its word (docs/ISA.md §2).
        layouts_of(self)

    def _check_drain(self) -> None:
        if (self.LOG_EPI_BUFF_SIZE == 0) != (self.DRAIN_STAGES == 0):
            raise ConfigError("LOG_EPI_BUFF_SIZE and DRAIN_STAGES must both be 0 (no drain unit) or both "
                              f"be set, not {self.LOG_EPI_BUFF_SIZE!r} and {self.DRAIN_STAGES!r}")
        if self.LOG_EPI_BUFF_SIZE == 0:  # and so DRAIN_STAGES == 0 (a negative one is checked below)
            if self.DRAIN_OPS:
                raise ConfigError(f"DRAIN_OPS needs a drain unit (DRAIN_STAGES is 0), not {self.DRAIN_OPS!r}")
            return
        lanes = self.BATCH * self.BLOCK_OUT
        if lanes <= DRAIN_HEADER_LANES:
            raise ConfigError(f"DRAIN_STAGES needs epi words of more than {DRAIN_HEADER_LANES} lanes "
                              f"(BATCH * BLOCK_OUT), not {lanes}")
        most = DRAIN_CODES_PER_LANE * (lanes - DRAIN_HEADER_LANES)
        _check_range("DRAIN_STAGES", self.DRAIN_STAGES, 1, most)
        log_depth = self.LOG_EPI_DEPTH
        if not 1 <= log_depth <= SRAM_BASE_WIDTH:
            raise ConfigError(
                f"LOG_EPI_BUFF_SIZE must give a buffer of 2 to 2**{SRAM_BASE_WIDTH} elements of "
                f"{self.acc_elem_bytes} bytes, not {self.LOG_EPI_BUFF_SIZE!r} (2**{log_depth} elements)")
        if self.DRAIN_OPS:
            if self.DRAIN_OPS < 0:
                raise ConfigError(f"DRAIN_OPS must be 0 (every operation in every stage) or one byte per stage, "
                                  f"not {self.DRAIN_OPS!r}")
            named = -(-self.DRAIN_OPS.bit_length() // DRAIN_OPS_BITS)
            if named > self.DRAIN_STAGES:
                raise ConfigError(f"DRAIN_OPS gives operation sets to {named} stages, but the drain unit has "
                                  f"{self.DRAIN_STAGES} (DRAIN_STAGES)")
            for k, mask in enumerate(self._drain_masks()):
                if mask == 0 or mask >> len(DrainOp):
                    raise ConfigError(f"DRAIN_OPS gives stage {k} the operation set {mask:#04x}: it must hold "
                                      f"at least one operation and only bits 0-{len(DrainOp) - 1} (DrainOp)")

    # -- machine v2 ----------------------------------------------------------------
    @property
    def has_drain(self) -> bool:
        """Whether the machine has the drain unit (machine v2, docs/ISA.md §9)."""
        return self.DRAIN_STAGES > 0

    @cached_property
    def drain_stage_ops(self) -> tuple[frozenset[DrainOp], ...]:
        """The operations of each drain stage (``DRAIN_OPS``; all seven in each when it is 0)."""
        if not self.DRAIN_OPS:
            return (frozenset(DrainOp),) * self.DRAIN_STAGES
        return tuple(frozenset(op for op in DrainOp if mask >> op & 1) for mask in self._drain_masks())

    def _drain_masks(self) -> list[int]:
        """Each stage's byte of ``DRAIN_OPS``."""
        return [(self.DRAIN_OPS >> (DRAIN_OPS_BITS * k)) & ((1 << DRAIN_OPS_BITS) - 1)
                for k in range(self.DRAIN_STAGES)]

    @property
    def LOG_EPI_DEPTH(self) -> int:
        return self.LOG_EPI_BUFF_SIZE - _log2(self.acc_elem_bytes)

    @property
    def epi_depth(self) -> int:
        """Words of the drain unit's epi buffer (0 without one)."""
        return 1 << self.LOG_EPI_DEPTH if self.has_drain else 0

    # -- element geometry --------------------------------------------------------
    @property
    def BATCH(self) -> int:
        return 1 << self.LOG_BATCH

    @property
    def BLOCK_IN(self) -> int:
        return 1 << self.LOG_BLOCK

    @property
    def BLOCK_OUT(self) -> int:
        return 1 << self.LOG_BLOCK

    @property
    def INP_WIDTH(self) -> int:
        return 1 << self.LOG_INP_WIDTH

    @property
    def WGT_WIDTH(self) -> int:
        return 1 << self.LOG_WGT_WIDTH

    @property
    def ACC_WIDTH(self) -> int:
        return 1 << self.LOG_ACC_WIDTH

    @property
    def OUT_WIDTH(self) -> int:
        return self.INP_WIDTH

    @property
    def inp_elem_bytes(self) -> int:
        """Bytes of one inp tile ``[BATCH][BLOCK_IN]``."""
        return self.BATCH * self.BLOCK_IN * self.INP_WIDTH // 8

    @property
    def wgt_elem_bytes(self) -> int:
        """Bytes of one wgt tile ``[BLOCK_OUT][BLOCK_IN]``."""
        return self.BLOCK_OUT * self.BLOCK_IN * self.WGT_WIDTH // 8

    @property
    def acc_elem_bytes(self) -> int:
        """Bytes of one acc tile ``[BATCH][BLOCK_OUT]`` of int32."""
        return self.BATCH * self.BLOCK_OUT * self.ACC_WIDTH // 8

    @property
    def out_elem_bytes(self) -> int:
        """Bytes of one out tile ``[BATCH][BLOCK_OUT]`` (also an ACC_8BIT element)."""
        return self.BATCH * self.BLOCK_OUT * self.OUT_WIDTH // 8

    @property
    def uop_elem_bytes(self) -> int:
        return UOP_BYTES

    @property
    def macs_per_uop(self) -> int:
        """Multiply-accumulates of one GEMM micro-op."""
        return self.BATCH * self.BLOCK_IN * self.BLOCK_OUT

    @property
    def bus_bytes(self) -> int:
        """Bytes per beat of the memory bus."""
        return (1 << self.LOG_BUS_WIDTH) // 8

    # -- buffer depths (elements) ------------------------------------------------
    @property
    def LOG_UOP_DEPTH(self) -> int:
        return self.LOG_UOP_BUFF_SIZE - (UOP_BYTES.bit_length() - 1)

    @property
    def LOG_INP_DEPTH(self) -> int:
        return self.LOG_INP_BUFF_SIZE - _log2(self.inp_elem_bytes)

    @property
    def LOG_WGT_DEPTH(self) -> int:
        return self.LOG_WGT_BUFF_SIZE - _log2(self.wgt_elem_bytes)

    @property
    def LOG_ACC_DEPTH(self) -> int:
        return self.LOG_ACC_BUFF_SIZE - _log2(self.acc_elem_bytes)

    @property
    def uop_depth(self) -> int:
        return 1 << self.LOG_UOP_DEPTH

    @property
    def inp_depth(self) -> int:
        return 1 << self.LOG_INP_DEPTH

    @property
    def wgt_depth(self) -> int:
        return 1 << self.LOG_WGT_DEPTH

    @property
    def acc_depth(self) -> int:
        return 1 << self.LOG_ACC_DEPTH

    @property
    def out_depth(self) -> int:
        """The out buffer shares the accumulator's index space."""
        return self.acc_depth

    @cached_property
    def max_elem_bytes(self) -> int:
        """The largest element of any memory type: DRAM buffers are aligned to it."""
        return max(
            self.inp_elem_bytes,
            self.wgt_elem_bytes,
            self.acc_elem_bytes,
            self.out_elem_bytes,
            UOP_BYTES,
        )

    @cached_property
    def _elem_bytes(self) -> tuple[int, ...]:
        # indexed by MemoryType: UOP, WGT, INP, ACC, OUT, ACC_8BIT, EPI, EPI_8BIT
        return (UOP_BYTES, self.wgt_elem_bytes, self.inp_elem_bytes, self.acc_elem_bytes,
                self.out_elem_bytes, self.out_elem_bytes, self.acc_elem_bytes, self.out_elem_bytes)

    @cached_property
    def _buffer_depth(self) -> tuple[int, ...]:
        return (self.uop_depth, self.wgt_depth, self.inp_depth, self.acc_depth,
                self.out_depth, self.acc_depth, self.epi_depth, self.epi_depth)

    def elem_bytes(self, memory_type: int) -> int:
        """Bytes of one DRAM element of ``memory_type`` (docs/ISA.md §4)."""
        return self._elem_bytes[memory_type]

    def buffer_depth(self, memory_type: int) -> int:
        """Elements of the on-chip buffer that ``memory_type`` reads or writes."""
        return self._buffer_depth[memory_type]

    # -- (de)serialisation ---------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON object: ISA keys, machine keys, machine v2's keys when set, then the extras."""
        out: dict[str, Any] = {key: getattr(self, key) for key in ISA_KEYS + MACHINE_KEYS}
        out.update({key: getattr(self, key) for key in V2_KEYS if getattr(self, key)})
        out.update(self.extras)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Config:
        """Build from a ``vta_config.json``-style mapping; unknown keys become extras."""
        if not isinstance(values, Mapping):
            raise ConfigError(f"configuration must be a JSON object, not {type(values).__name__}")
        known = {k: values[k] for k in ISA_KEYS + MACHINE_KEYS + V2_KEYS if k in values}
        extras = {k: v for k, v in values.items() if k not in known}
        return cls(**known, extras=extras)

    @classmethod
    def from_json(cls, text: str) -> Config:
        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"configuration is not valid JSON: {exc}") from None
        return cls.from_dict(values)

    def replace(self, **changes: Any) -> Config:
        return dataclasses.replace(self, **changes)

    @property
    def name(self) -> str:
        """The preset this configuration equals, by its own name (``v2``, never its alias
        ``default``), or ``"custom"``."""
        return next((name for name, cfg in PRESETS.items() if name != DEFAULT_PRESET and cfg == self), "custom")


def _log2(value: int) -> int:
    return value.bit_length() - 1


def _check_range(key: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ConfigError(f"{key} must be between {low} and {high}, not {value!r}")


#: Machine v2's drain unit as the ``v2`` presets build it: a 16 KiB epi buffer and twelve
#: pipeline stages, enough for ResNet's residual blocks (docs/DECISIONS.md, "Machine v2").
V2_DRAIN: dict[str, Any] = {"LOG_EPI_BUFF_SIZE": 14, "DRAIN_STAGES": 12}

#: The preset a user gets who names none: an alias of machine v2's (``v2``), not a
#: configuration of its own.  ``Config()`` stays VTA's machine (``vta``), and a program
#: compiled for it stays VTA's, byte for byte (docs/DECISIONS.md, "v2 as the default").
DEFAULT_PRESET = "default"

_V2 = Config(**V2_DRAIN)

PRESETS: dict[str, Config] = {
    # Machine v2 (below) under the name users get by default.
    DEFAULT_PRESET: _V2,
    # VTA's shipped configuration: 1x16x16 GEMM, 32 KiB uop/inp, 256 KiB wgt, 128 KiB acc;
    # the programs compiled for it are VTA's.
    "vta": Config(),
    # Machine v2 on VTA's GEMM shape, buffers, bus and DRAM timing: the drain unit added.
    "v2": _V2,
    # Meant to fit an ECP5-85F: 1x8x8 GEMM (64 multipliers) and ~90 KiB of buffers.
    "small": Config(
        LOG_BLOCK=3,
        LOG_UOP_BUFF_SIZE=13,
        LOG_INP_BUFF_SIZE=13,
        LOG_WGT_BUFF_SIZE=15,
        LOG_ACC_BUFF_SIZE=15,
        CMD_QUEUE_DEPTH=64,
        DEP_QUEUE_DEPTH=64,
        LOG_BUS_WIDTH=6,
    ),
    # Meant for an iCE40 UP5K and fast RTL simulation: 1x4x4 GEMM, ~11 KiB of buffers.
    "tiny": Config(
        LOG_BLOCK=2,
        LOG_UOP_BUFF_SIZE=11,
        LOG_INP_BUFF_SIZE=10,
        LOG_WGT_BUFF_SIZE=12,
        LOG_ACC_BUFF_SIZE=12,
        CMD_QUEUE_DEPTH=16,
        DEP_QUEUE_DEPTH=16,
        LOG_BUS_WIDTH=5,
    ),
}


def preset(name: str) -> Config:
    """The named preset configuration (``default``, which is ``v2``; ``vta``, ``v2``,
    ``small`` or ``tiny``)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(
            f"preset must be one of {', '.join(sorted(PRESETS))}, not {name!r}"
        ) from None
