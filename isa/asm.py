"""A text assembler and disassembler for instruction streams.

One instruction per line: a mnemonic (``LOAD``, ``STORE``, ``GEMM``, ``ALU``,
``FINISH``), for LOAD/STORE the memory type and for ALU the ALU opcode, then the
non-zero fields as ``name=value`` and the set flags as bare names.  Fields left out
are zero.  ``#`` starts a comment.  :func:`disassemble` writes exactly this form,
so ``assemble(disassemble(x)) == x``::

    LOAD INP sram_base=0 dram_base=8 y_size=1 x_size=16 x_stride=16 pop_next_dep
    GEMM uop_bgn=0 uop_end=16 iter_out=4 iter_in=1 dst_factor_out=1 src_factor_out=16
    ALU SHR use_imm imm=8 uop_bgn=16 uop_end=17 iter_out=64 iter_in=1 dst_factor_out=1
    FINISH
"""

from __future__ import annotations

from typing import Any

from .config import Config
from .encoding import layouts_of
from .enums import Opcode
from .instructions import BOOL_FIELDS, CLASS_OF, Instruction, valid_members

__all__ = ["AsmError", "assemble", "disassemble", "format_insn"]


class AsmError(ValueError):
    """A line of assembly that does not describe a valid instruction."""


_SUBTYPE = {Opcode.LOAD: "memory_type", Opcode.STORE: "memory_type", Opcode.ALU: "alu_opcode"}


def format_insn(insn: Instruction) -> str:
    """One line of assembly for ``insn``."""
    parts = [insn.opcode.name]
    subtype = _SUBTYPE.get(insn.opcode)
    if subtype is not None:
        parts.append(getattr(insn, subtype).name)
    for name, value in insn.fields().items():
        if name in ("opcode", subtype) or value == 0:
            continue
        parts.append(name if name in BOOL_FIELDS else f"{name}={value}")
    return " ".join(parts)


def disassemble(insns: list[Instruction] | tuple[Instruction, ...]) -> str:
    """Assembly text for a stream, one instruction per line."""
    return "".join(format_insn(insn) + "\n" for insn in insns)


def assemble(text: str, cfg: Config) -> list[Instruction]:
    """Parse assembly text into instructions for ``cfg``.

    Raises
    ------
    AsmError
        naming the line number and what is wrong with it.
    """
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            out.append(_parse_line(line, cfg))
        except (AsmError, ValueError) as exc:
            raise AsmError(f"line {number}: {exc}: {raw.strip()!r}") from None
    return out


def _parse_line(line: str, cfg: Config) -> Instruction:
    words = line.split()
    try:
        opcode = Opcode[words[0].upper()]
    except KeyError:
        names = ", ".join(op.name for op in Opcode)
        raise AsmError(f"unknown mnemonic {words[0]!r} (one of {names})") from None
    cls = CLASS_OF[opcode]
    layout = layouts_of(cfg)[cls.format]
    values: dict[str, Any] = {"opcode": opcode}
    rest = words[1:]
    subtype = _SUBTYPE.get(opcode)
    if subtype is not None:
        members = {m.name: m for m in valid_members(subtype, cfg).values()}
        if not rest:
            what = "memory type" if subtype == "memory_type" else "ALU opcode"
            raise AsmError(f"{opcode.name} needs its {what} ({', '.join(members)})")
        try:
            values[subtype] = members[rest[0].upper()]
        except KeyError:
            names = ", ".join(members)
            raise AsmError(f"unknown {subtype} {rest[0]!r} (one of {names})") from None
        rest = rest[1:]
    for word in rest:
        name, sep, text = word.partition("=")
        if name not in layout.names or name in ("opcode", subtype):
            raise AsmError(f"{opcode.name} has no field {name!r}")
        if name in values:
            raise AsmError(f"field {name} is given twice")
        if not sep:
            if name not in BOOL_FIELDS:
                raise AsmError(f"field {name} needs a value ({name}=N)")
            values[name] = True
            continue
        try:
            value = int(text, 0)
        except ValueError:
            raise AsmError(f"field {name} value {text!r} is not an integer") from None
        layout.field(name).check(value, opcode.name)
        values[name] = bool(value) if name in BOOL_FIELDS else value
    return cls(cfg=cfg, **values)
