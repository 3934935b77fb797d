"""Instruction and micro-op objects, their encoding and decoding.

An instruction object carries exactly the field names of docs/ISA.md §2 as attributes
and the configuration it is encoded for, so ``decode(word, cfg).encode() == word``
for every valid word.  Streams encode and decode in bulk through numpy
(:func:`encode_stream`, :func:`decode_table`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, Union
from collections.abc import Sequence

import numpy as np

from .config import INSN_BYTES, UOP_BYTES, Config
from .encoding import Format, ISAError, Layout, layouts_of
from .enums import STORE_MODULE_TYPES, AluOp, MemoryType, Module, Opcode, module_of

__all__ = [
    "MemInsn",
    "GemmInsn",
    "AluInsn",
    "FinishInsn",
    "Instruction",
    "Uop",
    "decode",
    "decode_uop",
    "encode_stream",
    "decode_stream",
    "decode_table",
    "words_from_bytes",
    "words_to_bytes",
    "encode_uops",
    "decode_uops",
]

DEP_FLAGS = ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep")
#: The flags that pop a token before an instruction executes, and those that push one
#: after it (docs/ISA.md §5), in ``DEP_FLAGS`` order.
_Insn = TypeVar("_Insn", bound="_InsnBase")

POP_FLAGS = tuple(f for f in DEP_FLAGS if f.startswith("pop_"))
PUSH_FLAGS = tuple(f for f in DEP_FLAGS if f.startswith("push_"))


@dataclass(frozen=True, kw_only=True)
class _InsnBase:
    cfg: Config = field(repr=False, compare=False)
    pop_prev_dep: bool = False
    pop_next_dep: bool = False
    push_prev_dep: bool = False
    push_next_dep: bool = False

    format: str = field(default="", init=False, repr=False, compare=False)
    if TYPE_CHECKING:  # every instruction class declares it, with its own default
        opcode: Opcode

    @property
    def layout(self) -> Layout:
        return layouts_of(self.cfg)[self.format]

    def fields(self) -> dict[str, int]:
        """Field name → integer value, in layout order."""
        return {name: int(getattr(self, name)) for name in self.layout.names}

    def encode(self) -> int:
        """The 128-bit instruction word (word 0 in the low 64 bits).

        Raises
        ------
        ISAError
            for a field value outside its width or its enumeration, or an opcode
            that is not this class's.
        """
        self.check()
        return self.layout.pack(self.fields())

    def check(self) -> None:
        """Raise :class:`ISAError` unless the enumerated fields hold valid members."""
        opcodes = _OPCODES_OF[type(self).__name__]
        if self.opcode not in opcodes:
            names = " or ".join(Opcode(o).name for o in opcodes)
            raise ISAError(
                f"{type(self).__name__} must have opcode {names}, not {self.opcode!r}"
            )
        for name in _ENUM_FIELDS:
            if name != "opcode" and hasattr(self, name):
                _typed(name, int(getattr(self, name)), self.cfg)

    def to_bytes(self) -> bytes:
        return self.encode().to_bytes(INSN_BYTES, "little")

    @property
    def module(self) -> Module:
        """The module fetch routes this instruction to."""
        return module_of(self.opcode, getattr(self, "memory_type", -1))

    def replace(self: _Insn, **changes: Any) -> _Insn:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, kw_only=True)
class MemInsn(_InsnBase):
    """LOAD or STORE (docs/ISA.md §2, memory instruction)."""

    opcode: Opcode = Opcode.LOAD
    memory_type: MemoryType = MemoryType.INP
    sram_base: int = 0
    dram_base: int = 0
    pad_min: int = 0
    y_size: int = 0
    x_size: int = 0
    x_stride: int = 0
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0
    format: str = field(default=Format.MEM, init=False, repr=False, compare=False)

    @property
    def is_sync(self) -> bool:
        """``x_size == 0``: moves no data, only its dependency flags act."""
        return self.x_size == 0


@dataclass(frozen=True, kw_only=True)
class _LoopInsn(_InsnBase):
    opcode: Opcode = Opcode.GEMM
    reset_reg: bool = False
    uop_bgn: int = 0
    uop_end: int = 0
    iter_out: int = 0
    iter_in: int = 0
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0


@dataclass(frozen=True, kw_only=True)
class GemmInsn(_LoopInsn):
    """GEMM: micro-op loops of tile products into the accumulator."""

    wgt_factor_out: int = 0
    wgt_factor_in: int = 0
    format: str = field(default=Format.GEMM, init=False, repr=False, compare=False)


@dataclass(frozen=True, kw_only=True)
class FinishInsn(GemmInsn):
    """FINISH: the GEMM layout with every field zero except the dependency flags."""

    opcode: Opcode = Opcode.FINISH


@dataclass(frozen=True, kw_only=True)
class AluInsn(_LoopInsn):
    """ALU: micro-op loops of element-wise ops on the accumulator."""

    opcode: Opcode = Opcode.ALU
    alu_opcode: AluOp = AluOp.MIN
    use_imm: bool = False
    imm: int = 0
    format: str = field(default=Format.ALU, init=False, repr=False, compare=False)


Instruction = Union[MemInsn, GemmInsn, FinishInsn, AluInsn]

#: The instruction class of each opcode.
CLASS_OF: dict[Opcode, type[MemInsn] | type[GemmInsn] | type[FinishInsn] | type[AluInsn]] = {
    Opcode.LOAD: MemInsn,
    Opcode.STORE: MemInsn,
    Opcode.GEMM: GemmInsn,
    Opcode.FINISH: FinishInsn,
    Opcode.ALU: AluInsn,
}
_ENUM_FIELDS = {"opcode": Opcode, "memory_type": MemoryType, "alu_opcode": AluOp}
_OPCODES_OF = {
    "MemInsn": (Opcode.LOAD, Opcode.STORE),
    "GemmInsn": (Opcode.GEMM,),
    "FinishInsn": (Opcode.FINISH,),
    "AluInsn": (Opcode.ALU,),
}
#: Fields that are flags (0 or 1), written as bare names in assembly.
BOOL_FIELDS = set(DEP_FLAGS) | {"reset_reg", "use_imm"}


def _opcode(value: int) -> Opcode:
    """``value`` as an :class:`Opcode` (:class:`ISAError` naming the field if it is none)."""
    try:
        return Opcode(value)
    except ValueError:
        _typed("opcode", value)  # raises the ISAError that names the field and its values
        raise


def valid_members(name: str, cfg: Config | None) -> dict[int, Any]:
    """The members an enumerated field may hold on ``cfg``, by value: machine v2's memory
    types (EPI, EPI_8BIT) only on a machine with a drain unit."""
    members = {m.value: m for m in _ENUM_FIELDS[name]}
    if name == "memory_type" and not (cfg is not None and cfg.has_drain):
        for m in STORE_MODULE_TYPES:
            members.pop(m.value)
    return members


def _typed(name: str, value: int, cfg: Config | None = None) -> object:
    if name in BOOL_FIELDS:
        return bool(value)
    if name in _ENUM_FIELDS:
        members = valid_members(name, cfg)
        if value not in members:
            valid = ", ".join(f"{m.name}={m.value}" for m in members.values())
            raise ISAError(f"field {name} value {value} is not valid ({valid})")
        return members[value]
    return value


def decode(word: int, cfg: Config) -> Instruction:
    """Decode a 128-bit instruction word for ``cfg``.

    Raises
    ------
    ISAError
        for an invalid opcode, memory type or ALU opcode.

    Examples
    --------
    >>> from openvta.isa import Config, decode
    >>> insn = decode(3 | (1 << 3), Config())
    >>> insn.opcode.name, insn.pop_prev_dep
    ('FINISH', True)
    """
    word = int(word)
    if not 0 <= word < 1 << (INSN_BYTES * 8):
        raise ISAError(f"instruction word must be a 128-bit unsigned integer, not {word!r}")
    opcode = _opcode(word & 0x7)
    cls = CLASS_OF[opcode]
    layout = layouts_of(cfg)[cls.format]
    values: dict[str, Any] = {name: _typed(name, v, cfg) for name, v in layout.unpack(word).items()}
    return cls(cfg=cfg, **values)


@dataclass(frozen=True)
class Uop:
    """A micro-op: accumulator, input (or second accumulator) and weight indices."""

    dst_idx: int = 0
    src_idx: int = 0
    wgt_idx: int = 0

    def encode(self, cfg: Config) -> int:
        layout = layouts_of(cfg)[Format.UOP]
        return layout.pack(dataclasses.asdict(self))


def decode_uop(word: int, cfg: Config) -> Uop:
    """Decode a 32-bit micro-op word."""
    word = int(word)
    if not 0 <= word < 1 << (UOP_BYTES * 8):
        raise ISAError(f"micro-op word must be a 32-bit unsigned integer, not {word!r}")
    return Uop(**layouts_of(cfg)[Format.UOP].unpack(word))


# -- streams -------------------------------------------------------------------


def encode_stream(insns: list[Instruction] | tuple[Instruction, ...], cfg: Config) -> np.ndarray:
    """Encode instructions into an ``(N, 2)`` uint64 array (word 0, word 1)."""
    layouts = layouts_of(cfg)
    words = np.zeros((len(insns), 2), dtype=np.uint64)
    by_format: dict[str, list[int]] = {}
    for i, insn in enumerate(insns):
        by_format.setdefault(insn.format, []).append(i)
    for fmt, rows in by_format.items():
        layout = layouts[fmt]
        columns = {
            name: np.fromiter((int(getattr(insns[r], name)) for r in rows), np.int64, len(rows))
            for name in layout.names
        }
        try:
            words[rows] = layout.pack_array(columns, len(rows))
        except ISAError:
            for r in rows:  # find and name the offending instruction by its stream position
                try:
                    insns[r].encode()
                except ISAError as exc:
                    raise ISAError(f"instruction {r}: {exc}") from None
            raise
    for i, insn in enumerate(insns):
        try:
            insn.check()
        except ISAError as exc:
            raise ISAError(f"instruction {i}: {exc}") from None
    return words


def decode_table(words: np.ndarray, cfg: Config) -> dict[str, np.ndarray]:
    """Decode a whole stream at once: field name → int64 array over all instructions.

    Each row holds the fields of its own opcode's layout; fields that its layout
    lacks are zero.  Opcodes are not validated here (see :func:`decode_stream`).
    """
    words = np.asarray(words, dtype=np.uint64).reshape(-1, 2)
    opcode = (words[:, 0] & np.uint64(7)).astype(np.int64)
    table: dict[str, np.ndarray] = {"opcode": opcode}
    layouts = layouts_of(cfg)
    select = {
        Format.MEM: (opcode == Opcode.LOAD) | (opcode == Opcode.STORE),
        Format.GEMM: (opcode == Opcode.GEMM) | (opcode == Opcode.FINISH),
        Format.ALU: opcode == Opcode.ALU,
    }
    for fmt, mask in select.items():
        for name, column in layouts[fmt].unpack_array(words).items():
            if name == "opcode":
                continue
            current = table.setdefault(name, np.zeros(len(words), dtype=np.int64))
            current[mask] = column[mask]
    return table


def decode_stream(words: np.ndarray, cfg: Config, *,
                  table: dict[str, np.ndarray] | None = None) -> list[Instruction]:
    """Decode an ``(N, 2)`` uint64 array into instruction objects.

    ``table``, when given, is :func:`decode_table` of ``words`` (not decoded again).

    Raises
    ------
    ISAError
        naming the index of the first invalid instruction.
    """
    if table is None:
        table = decode_table(words, cfg)
    layouts = layouts_of(cfg)
    opcodes = table["opcode"]
    out: list[Instruction | None] = [None] * len(opcodes)
    invalid = np.flatnonzero(opcodes > max(Opcode)).tolist()
    for opcode, cls in CLASS_OF.items():
        selected = np.flatnonzero(opcodes == opcode)
        if not len(selected):
            continue
        rows = selected.tolist()
        names = layouts[cls.format].names
        columns = [_typed_column(name, table[name][selected].tolist(), cfg) for name in names]
        for name, column in zip(names, columns):
            if name in _ENUM_FIELDS:
                invalid += [i for i, v in zip(rows, column) if v is None]
        for i, values in zip(rows, zip(*columns)):
            out[i] = _build(cls, cfg, dict(zip(names, values)))
    if invalid:
        _decode_row(table, layouts, min(invalid), cfg)  # raises, naming the field
    return [insn for insn in out if insn is not None]  # every row is decoded or reported


def _build(cls: type, cfg: Config, values: dict[str, object]) -> Instruction:
    """``cls(cfg=cfg, **values)`` for ``values`` naming every field of ``cls``'s layout.

    The dataclass ``__init__`` of a frozen class sets each of the ~17 fields through
    ``object.__setattr__``; filling the instance dictionary at once is several times
    faster, and decoding a stream makes one object per instruction.
    """
    insn: Instruction = object.__new__(cls)
    values["cfg"] = cfg
    insn.__dict__.update(values)
    return insn


def _typed_column(name: str, column: list[int], cfg: Config) -> Sequence[object]:
    """:func:`_typed` of every value; invalid enum values become None (reported later)."""
    if name in BOOL_FIELDS:
        return [bool(v) for v in column]
    if name not in _ENUM_FIELDS:
        return column
    members = valid_members(name, cfg)
    return [members.get(v) for v in column]


def _decode_row(table: dict[str, np.ndarray], layouts: dict[str, Layout], i: int, cfg: Config) -> None:
    """Decode row ``i`` field by field; raises :class:`ISAError` at its first invalid field."""
    try:
        cls = CLASS_OF[_opcode(int(table["opcode"][i]))]
        for name in layouts[cls.format].names:
            _typed(name, int(table[name][i]), cfg)
    except ISAError as exc:
        raise ISAError(f"instruction {i}: {exc}") from None
    raise AssertionError(f"instruction {i} decodes field by field")  # pragma: no cover


def words_from_bytes(data: np.ndarray | bytes) -> np.ndarray:
    """View a byte image of instructions as ``(N, 2)`` little-endian uint64 words."""
    raw = bytes(data) if isinstance(data, bytes) else np.ascontiguousarray(data, np.uint8).tobytes()
    if len(raw) % INSN_BYTES:
        raise ISAError(f"instruction bytes must be a multiple of {INSN_BYTES}, not {len(raw)}")
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(-1, 2)


def words_to_bytes(words: np.ndarray) -> np.ndarray:
    """The little-endian byte image (uint8) of ``(N, 2)`` instruction words."""
    return np.ascontiguousarray(np.asarray(words, dtype="<u8")).view(np.uint8).reshape(-1)


def encode_uops(uops: list[Uop] | tuple[Uop, ...], cfg: Config) -> np.ndarray:
    """Encode micro-ops into a uint32 array."""
    layout = layouts_of(cfg)[Format.UOP]
    columns = {
        name: np.fromiter((getattr(u, name) for u in uops), np.int64, len(uops))
        for name in layout.names
    }
    return layout.pack_array(columns, len(uops))[:, 0].astype(np.uint32)


def decode_uops(words: np.ndarray, cfg: Config) -> dict[str, np.ndarray]:
    """Decode a uint32 array of micro-ops into ``dst_idx``/``src_idx``/``wgt_idx`` arrays."""
    layout = layouts_of(cfg)[Format.UOP]
    column = np.asarray(words, dtype=np.uint64).reshape(-1, 1)
    return layout.unpack_array(column)
