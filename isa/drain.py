"""Machine v2's drain unit, written once: its descriptor words and what it computes.

A STORE of memory type ACC (docs/ISA.md §9) drains accumulator tiles to DRAM through the
store module's pipeline of ALU stages instead of storing the out buffer: each tile ``X``
(int32 lanes) runs the stages of a *descriptor* in the epi buffer, the low 8 bits of the
result are written as an OUT element, and the accumulator tile is zeroed (so the next
tile's GEMM needs no reset pass).  A stage is one ALU operation
(:func:`~openvta.isa.arith.alu_lanes`) on ``X`` or on the residual ``R`` (an epi word read
in step with the store), whose operand is its own epi word or ``R``.

A descriptor at epi word ``d``:

- ``epi[d]`` is the **header**: lane 0 the stage count ``n``, lane 1 the residual's base
  (``R`` of the store's element ``e = y·x_size + x`` is ``epi[res_base + e]``), lane 2
  the stride ``s`` of the operand words, lanes 3… the stage codes,
  :data:`~openvta.isa.config.DRAIN_CODES_PER_LANE` per lane, 8 bits each, stage 0 in the
  low byte of lane 3;
- ``epi[d + (k + 1)·s]`` is stage ``k``'s operand word (read even when the stage takes
  ``R``).  With ``s = 1`` a descriptor is contiguous; the compiler lays the descriptors of
  ``s`` channel blocks side by side (the headers at ``d … d + s − 1``, then every
  channel block's word of stage 0, …), so one LOAD fills a stage's words from a channel
  vector.

A code is ``op | on_residual << 3 | operand_residual << 4`` (bits 5–7 zero), ``op`` a
:class:`DrainOp`: the five ALU operations, and RSHR (the ALU's rounding shift ``SHR s-1,
ADD 1, SHR 1`` in one stage) and CLIP (MIN and MAX by the two 16-bit halves of the word).

Examples
--------
>>> from openvta.isa import preset
>>> stages = (DrainStage(DrainOp.SHR), DrainStage(DrainOp.ADD, operand_residual=True), DrainStage(DrainOp.MAX))
>>> header = encode_header(preset("v2"), stages, res_base=40, stride=2)
>>> header[:4].tolist()
[3, 40, 2, 70147]
>>> decode_header(header, "epi[0]") == (stages, 40, 2)
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .arith import alu_lanes, clip_lanes, round_shift_lanes
from .config import DRAIN_CODES_PER_LANE, DRAIN_HEADER_LANES, DRAIN_OPS_BITS, Config
from .enums import AluOp, DrainOp
from .instructions import MemInsn
from .widths import ConfigError

__all__ = ["DRAIN_CODE_BITS", "DRAIN_ON_RESIDUAL_BIT", "DRAIN_OPERAND_RESIDUAL_BIT", "EPI_BASE_FIELDS",
           "DrainError", "DrainOp", "DrainStage", "drain_lanes", "decode_header", "drain_tiles", "encode_header",
           "epi_base_of", "format_drain_ops", "max_stages", "parse_drain_ops", "reads_residual", "stages_fit",
           "with_epi_base"]

#: Bits of a stage's code in a header lane: the op in the low bits, then whether the stage
#: works on the residual and whether its operand is the residual.
DRAIN_CODE_BITS = 8
#: Bit of a stage code set when the stage works on the residual tile.
DRAIN_ON_RESIDUAL_BIT = 3
#: Bit of a stage code set when the stage's operand is the residual tile.
DRAIN_OPERAND_RESIDUAL_BIT = 4
_ON_R, _B_R = 1 << DRAIN_ON_RESIDUAL_BIT, 1 << DRAIN_OPERAND_RESIDUAL_BIT
_OP_MASK = (1 << DRAIN_ON_RESIDUAL_BIT) - 1


def drain_lanes(op: DrainOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One stage on int32 lanes (int32)."""
    if op == DrainOp.RSHR:
        return round_shift_lanes(a, b)
    if op == DrainOp.CLIP:
        return clip_lanes(a, b)
    return alu_lanes(AluOp(int(op)), a, b)


class DrainError(ValueError):
    """A descriptor the drain unit cannot run (a bad code, too many stages)."""


@dataclass(frozen=True)
class DrainStage:
    """One stage: ``T = op(T, B)`` with ``T`` = ``R`` if ``on_residual`` else ``X``, ``B`` =
    ``R`` if ``operand_residual`` else the stage's operand word."""

    op: DrainOp
    on_residual: bool = False
    operand_residual: bool = False

    @property
    def code(self) -> int:
        return int(self.op) | _ON_R * self.on_residual | _B_R * self.operand_residual

    @classmethod
    def from_code(cls, code: int, what: str) -> DrainStage:
        op = code & _OP_MASK
        if code & ~(_OP_MASK | _ON_R | _B_R) or op > max(DrainOp):
            raise DrainError(f"{what}: invalid drain stage code {code:#04x}")
        return cls(DrainOp(op), bool(code & _ON_R), bool(code & _B_R))


def max_stages(cfg: Config) -> int:
    """The stages a header of ``cfg`` can name (its ``DRAIN_STAGES`` bounds them further)."""
    return DRAIN_CODES_PER_LANE * (cfg.BATCH * cfg.BLOCK_OUT - DRAIN_HEADER_LANES)


def parse_drain_ops(text: str) -> int:
    """The ``DRAIN_OPS`` value of a per-stage description: stages separated by ``/``, a
    stage's operations by ``+`` (``"RSHR+SHR/ADD/CLIP"``: three stages).

    >>> hex(parse_drain_ops("RSHR+SHR/ADD/CLIP"))
    '0x400428'
    """
    value = 0
    for k, stage in enumerate(text.split("/")):
        for name in stage.split("+"):
            op = DrainOp.__members__.get(name.strip().upper())
            if op is None:
                raise DrainError(f"DRAIN_OPS {text!r}: {name.strip()!r} is not a drain operation "
                                 f"(one of {', '.join(DrainOp.__members__)}; stages separated by '/', "
                                 "a stage's operations by '+')")
            value |= 1 << (DRAIN_OPS_BITS * k + op)
    return value


def format_drain_ops(cfg: Config) -> str:
    """``cfg``'s stage operation sets as :func:`parse_drain_ops` reads them (``"all"`` when
    every stage has every operation)."""
    if not cfg.DRAIN_OPS:
        return "all"
    return "/".join("+".join(op.name for op in sorted(ops)) for ops in cfg.drain_stage_ops)


def stages_fit(cfg: Config, stages: tuple[DrainStage, ...]) -> str | None:
    """Why ``cfg``'s drain unit cannot run ``stages`` (too many, or an operation a stage
    does not have), or None."""
    if len(stages) > cfg.DRAIN_STAGES:
        return f"{len(stages)} stages, more than the drain unit's {cfg.DRAIN_STAGES} (DRAIN_STAGES)"
    if not cfg.DRAIN_OPS:
        return None
    for k, (stage, ops) in enumerate(zip(stages, cfg.drain_stage_ops)):
        if stage.op not in ops:
            return (f"stage {k} {stage.op.name}, which the drain unit's stage {k} does not have "
                    f"(DRAIN_OPS: it has {'+'.join(op.name for op in sorted(ops))})")
    return None


def encode_header(cfg: Config, stages: tuple[DrainStage, ...], res_base: int = 0, stride: int = 1) -> np.ndarray:
    """The header word (int32 lanes, ``BATCH·BLOCK_OUT`` of them) of a descriptor."""
    if not cfg.has_drain:
        raise ConfigError("this configuration has no drain unit (DRAIN_STAGES is 0)")
    if len(stages) > cfg.DRAIN_STAGES:
        raise DrainError(f"a descriptor of {len(stages)} stages does not fit a drain unit of "
                         f"{cfg.DRAIN_STAGES} (DRAIN_STAGES)")
    why = stages_fit(cfg, stages)
    if why is not None:
        raise DrainError(f"a descriptor the drain unit cannot run: it has {why}")
    lanes = np.zeros(cfg.BATCH * cfg.BLOCK_OUT, dtype=np.int64)
    lanes[0], lanes[1], lanes[2] = len(stages), res_base, stride
    for k, stage in enumerate(stages):
        lane, byte = divmod(k, DRAIN_CODES_PER_LANE)
        lanes[DRAIN_HEADER_LANES + lane] |= stage.code << (DRAIN_CODE_BITS * byte)
    return lanes.astype(np.uint32).astype(np.int32)


#: Headers decoded before (a program drains with a few descriptors, many times each).
_DECODED: dict[tuple[str, bytes], tuple[tuple[DrainStage, ...], int, int]] = {}
_DECODED_MAX = 4096


def decode_header(header: np.ndarray, what: str) -> tuple[tuple[DrainStage, ...], int, int]:
    """``(stages, res_base, stride)`` of a header word; :class:`DrainError` for a bad code or count."""
    header = np.asarray(header)
    key = (header.dtype.str, header.tobytes())
    decoded = _DECODED.get(key)
    if decoded is None:
        decoded = _decode_header(header, what)
        if len(_DECODED) >= _DECODED_MAX:
            _DECODED.clear()
        _DECODED[key] = decoded
    return decoded


def _decode_header(header: np.ndarray, what: str) -> tuple[tuple[DrainStage, ...], int, int]:
    lanes = header.reshape(-1).astype(np.int64) & 0xFFFF_FFFF
    count = int(lanes[0])
    capacity = DRAIN_CODES_PER_LANE * (len(lanes) - DRAIN_HEADER_LANES)
    if count > capacity:
        raise DrainError(f"{what}: a header of {count} stages (at most {capacity})")
    stages = []
    for k in range(count):
        lane, byte = divmod(k, DRAIN_CODES_PER_LANE)
        code = (int(lanes[DRAIN_HEADER_LANES + lane]) >> (DRAIN_CODE_BITS * byte)) & ((1 << DRAIN_CODE_BITS) - 1)
        stages.append(DrainStage.from_code(code, what))
    return tuple(stages), int(np.int32(np.uint32(lanes[1]))), int(np.int32(np.uint32(lanes[2])))


def drain_tiles(x: np.ndarray, r: np.ndarray | None, stages: tuple[DrainStage, ...],
                words: np.ndarray) -> np.ndarray:
    """The drain unit on a run of tiles: ``X`` after every stage (int32).

    ``x`` and ``r`` are ``(tiles, lanes)`` int32 (``r`` None when no stage reads it);
    ``words`` ``(stages, lanes)`` the operand words.
    """
    xs = np.asarray(x, np.int32)
    rs = None if r is None else np.asarray(r, np.int32)
    for k, stage in enumerate(stages):
        if (stage.on_residual or stage.operand_residual) and rs is None:
            raise DrainError("a stage reads the residual, which was not given")
        b = rs if stage.operand_residual else words[k][None, :]
        assert b is not None  # the residual was given (checked above)
        if stage.on_residual:
            assert rs is not None
            rs = drain_lanes(stage.op, rs, b)
        else:
            xs = drain_lanes(stage.op, xs, b)
    return xs


def reads_residual(stages: tuple[DrainStage, ...]) -> bool:
    """Whether any stage reads or updates ``R``."""
    return any(s.on_residual or s.operand_residual for s in stages)


#: The STORE fields that hold a draining STORE's descriptor index, low bits first.
EPI_BASE_FIELDS = ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1")
_PAD_BITS = 4


def epi_base_of(insn: MemInsn) -> int:
    """The descriptor index of a STORE ACC: its four pad fields, ``x_pad_1:x_pad_0:y_pad_1:y_pad_0``."""
    return sum(getattr(insn, name) << (_PAD_BITS * i) for i, name in enumerate(EPI_BASE_FIELDS))


def with_epi_base(insn: MemInsn, epi_base: int) -> MemInsn:
    """``insn`` with its pad fields holding ``epi_base`` (0 … 2**16 − 1)."""
    if not 0 <= epi_base < 1 << (_PAD_BITS * len(EPI_BASE_FIELDS)):
        raise DrainError(f"epi_base must be in 0..{(1 << (_PAD_BITS * len(EPI_BASE_FIELDS))) - 1}, not {epi_base!r}")
    mask = (1 << _PAD_BITS) - 1
    return insn.replace(**{name: (epi_base >> (_PAD_BITS * i)) & mask for i, name in enumerate(EPI_BASE_FIELDS)})
