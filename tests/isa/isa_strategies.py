"""Hypothesis strategies for :mod:`openvta.isa`.

Every field is drawn within the width its configuration's layout gives it
(``layouts_of(cfg)``), never from re-typed constants; enumerated fields are drawn
from the ISA's enums, only the members valid on the configuration (machine v2's memory
types EPI and EPI_8BIT only with a drain unit, docs/ISA.md §9).  Dependency flags
follow docs/ISA.md §5: an instruction routed to the load module sets no prev flag, a
store-module instruction no next flag.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from openvta.isa import (
    AluInsn,
    AluOp,
    Config,
    FinishInsn,
    Format,
    GemmInsn,
    Layout,
    MemInsn,
    MemoryType,
    Module,
    Opcode,
    Uop,
    layouts_of,
    module_of,
)
from openvta.isa.instructions import valid_members

from isa_reference import DEP_FLAGS

_ENUMS: dict[str, Any] = {"memory_type": MemoryType, "alu_opcode": AluOp}


def _field_strategy(layout: Layout, name: str, cfg: Config) -> st.SearchStrategy[Any]:
    if name in _ENUMS:
        return st.sampled_from(list(valid_members(name, cfg).values()))
    f = layout.field(name)
    if f.width == 1:
        return st.booleans()
    return st.integers(f.low, f.high)


def field_values(layout: Layout, cfg: Config, exclude: tuple[str, ...] = ("opcode",)) -> st.SearchStrategy[dict]:
    """A dict of every field of ``layout`` (except ``exclude``), each within its width and,
    for an enumerated field, valid on ``cfg``."""
    return st.fixed_dictionaries(
        {f.name: _field_strategy(layout, f.name, cfg) for f in layout.fields if f.name not in exclude}
    )


def _legal_flags(values: dict, module: Module) -> dict:
    if module == Module.LOAD:
        values.update(pop_prev_dep=False, push_prev_dep=False)
    if module == Module.STORE:
        values.update(pop_next_dep=False, push_next_dep=False)
    return values


@st.composite
def mem_insns(draw: st.DrawFn, cfg: Config) -> MemInsn:
    opcode = draw(st.sampled_from([Opcode.LOAD, Opcode.STORE]))
    values = draw(field_values(layouts_of(cfg)[Format.MEM], cfg))
    _legal_flags(values, module_of(opcode, values["memory_type"]))
    return MemInsn(cfg=cfg, opcode=opcode, **values)


def gemm_insns(cfg: Config) -> st.SearchStrategy[GemmInsn]:
    return field_values(layouts_of(cfg)[Format.GEMM], cfg).map(lambda v: GemmInsn(cfg=cfg, **v))


def alu_insns(cfg: Config) -> st.SearchStrategy[AluInsn]:
    return field_values(layouts_of(cfg)[Format.ALU], cfg).map(lambda v: AluInsn(cfg=cfg, **v))


def finish_insns(cfg: Config) -> st.SearchStrategy[FinishInsn]:
    """FINISH: every field zero except the dependency flags (docs/ISA.md §2)."""
    flags = st.fixed_dictionaries({name: st.booleans() for name in DEP_FLAGS})
    return flags.map(lambda v: FinishInsn(cfg=cfg, **v))


def instructions(cfg: Config) -> st.SearchStrategy[Any]:
    return st.one_of(mem_insns(cfg), gemm_insns(cfg), alu_insns(cfg), finish_insns(cfg))


def streams(cfg: Config, max_size: int = 24) -> st.SearchStrategy[list]:
    return st.lists(instructions(cfg), min_size=0, max_size=max_size)


def uops(cfg: Config) -> st.SearchStrategy[Uop]:
    return field_values(layouts_of(cfg)[Format.UOP], cfg, exclude=()).map(lambda v: Uop(**v))


@st.composite
def valid_words(draw: st.DrawFn, cfg: Config) -> tuple[int, dict[str, int]]:
    """A 128-bit word of a valid instruction, packed by hand, and its field values.

    Packing is plain shifting at each field's offset; the offsets themselves are
    checked against docs/ISA.md in ``test_encoding.py``.
    """
    opcode = draw(st.sampled_from(list(Opcode)))
    fmt = {Opcode.LOAD: Format.MEM, Opcode.STORE: Format.MEM, Opcode.GEMM: Format.GEMM,
           Opcode.FINISH: Format.GEMM, Opcode.ALU: Format.ALU}[opcode]
    layout = layouts_of(cfg)[fmt]
    if opcode == Opcode.FINISH:
        values = {f.name: 0 for f in layout.fields}
        values.update(draw(st.fixed_dictionaries({n: st.integers(0, 1) for n in DEP_FLAGS})))
    else:
        values = draw(field_values(layout, cfg))
        if fmt == Format.MEM:
            _legal_flags(values, module_of(opcode, values["memory_type"]))
        values = {k: int(v) for k, v in values.items()}
    values["opcode"] = int(opcode)
    word = 0
    for f in layout.fields:
        word |= (values[f.name] & f.mask) << f.offset
    return word, values
