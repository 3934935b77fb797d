"""The ISA's reference tables as Markdown, rendered from ``isa/`` for ``docs/ISA.md``.

``docs/ISA.md`` holds every table that states a number of the ISA (configuration
keys, derived sizes, opcodes, memory types, ALU ops, the bit layouts of every
instruction format and of the micro-op on every preset, element sizes, token
queues, routing, performance counters and registers) between marker comments::

    <!-- generated: isa-layout-gemm begin -->
    ...
    <!-- generated: isa-layout-gemm end -->

The tables are rendered here from :func:`~openvta.isa.layouts_of`, the enums and the
counters, so the document cannot drift from the code: ``tests/isa/test_docs.py``
fails when the committed text differs from :func:`isa_blocks`, and
``.venv/bin/python docs/generate.py`` rewrites every generated block of ``docs/``.
Only the words (what a field means) are written here; every number comes from
``isa/``.

Examples
--------
>>> print(markdown_table(["name", "value"], [["LOAD", 0]]))
| name | value |
|---|---|
| LOAD | 0 |
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import IntEnum
from typing import Any

from . import counters
from .config import ISA_KEYS, MACHINE_KEYS, PRESETS, V2_KEYS
from .counters import COUNTER_BASE, COUNTER_DOC, CYCLE_COUNTERS, HW_COUNTERS, REGISTER_DOC, Counter
from .encoding import Format, Layout, layouts_of
from .enums import AluOp, MemoryType, Opcode, TokenQueue, module_of
from .instructions import decode

__all__ = [
    "FIELD_DOC",
    "KEY_DOC",
    "REGENERATE",
    "REGISTER_DOC",
    "DocBlockError",
    "bits",
    "isa_blocks",
    "markdown_table",
    "replace_blocks",
    "stale_blocks",
]

#: The command that rewrites every generated block of docs/ (run from the repository root).
REGENERATE = ".venv/bin/python docs/generate.py"

_BLOCK = re.compile(
    r"<!-- generated: (?P<name>[\w-]+) begin -->\n(?P<body>.*?)<!-- generated: (?P=name) end -->",
    re.DOTALL,
)


class DocBlockError(ValueError):
    """A document whose generated blocks are missing, repeated or unknown."""


# -- Markdown helpers ---------------------------------------------------------------------


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub Markdown table (no trailing newline)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def bits(offset: int, width: int) -> str:
    """``[hi:lo]`` as the specs write a bit range (``[lo]`` for one bit)."""
    high = offset + width - 1
    return f"`[{high}]`" if width == 1 else f"`[{high}:{offset}]`"


def _blocks_in(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for match in _BLOCK.finditer(text):
        found.setdefault(match["name"], []).append(match["body"])
    return found


def _check_names(text: str, blocks: Mapping[str, str], document: str) -> None:
    found = _blocks_in(text)
    missing = sorted(set(blocks) - set(found))
    unknown = sorted(set(found) - set(blocks))
    repeated = sorted(name for name, bodies in found.items() if len(bodies) > 1)
    for what, names in (("lacks", missing), ("has unknown", unknown), ("repeats", repeated)):
        if names:
            raise DocBlockError(f"{document} {what} generated blocks: {', '.join(names)} "
                                f"(markers: <!-- generated: NAME begin/end -->)")


def replace_blocks(text: str, blocks: Mapping[str, str], document: str = "document") -> str:
    """``text`` with the body of each generated block replaced by ``blocks[name]``.

    Raises
    ------
    DocBlockError
        if a block of ``blocks`` is missing or repeated, or ``text`` has a block
        that ``blocks`` does not name.
    """
    _check_names(text, blocks, document)

    def body(match: re.Match[str]) -> str:
        name = match["name"]
        return (f"<!-- generated: {name} begin -->\n{blocks[name].rstrip()}\n"
                f"<!-- generated: {name} end -->")

    return _BLOCK.sub(body, text)


def stale_blocks(text: str, blocks: Mapping[str, str], document: str = "document") -> list[str]:
    """Names of the generated blocks of ``text`` whose body differs from ``blocks``."""
    _check_names(text, blocks, document)
    found = _blocks_in(text)
    return [name for name, body in blocks.items() if found[name][0] != body.rstrip() + "\n"]


# -- the words: what each key, field and register means -----------------------------------

KEY_DOC: dict[str, str] = {
    "LOG_INP_WIDTH": "log2 of the input element bits (3: int8)",
    "LOG_WGT_WIDTH": "log2 of the weight element bits (3: int8)",
    "LOG_ACC_WIDTH": "log2 of the accumulator element bits (5: int32)",
    "LOG_BATCH": "log2 of BATCH",
    "LOG_BLOCK": "log2 of BLOCK_IN = BLOCK_OUT",
    "LOG_UOP_BUFF_SIZE": "log2 of the micro-op buffer bytes",
    "LOG_INP_BUFF_SIZE": "log2 of the input buffer bytes",
    "LOG_WGT_BUFF_SIZE": "log2 of the weight buffer bytes",
    "LOG_ACC_BUFF_SIZE": "log2 of the accumulator buffer bytes",
    "CMD_QUEUE_DEPTH": "entries of each command queue, fetch → load/compute/store (not ISA)",
    "DEP_QUEUE_DEPTH": "tokens each dependency-token queue holds (not ISA)",
    "LOG_BUS_WIDTH": "log2 of the memory bus bits (not ISA)",
    "LOG_EPI_BUFF_SIZE": "machine v2: log2 of the drain unit's epi buffer bytes; 0 without a drain unit (§9)",
    "DRAIN_STAGES": "machine v2: stages of the drain unit's pipeline; 0 without a drain unit (§9)",
    "DRAIN_OPS": "machine v2: each drain stage's operations, a byte per stage; 0 = all seven in every stage (§9)",
}

FIELD_DOC: dict[str, str] = {
    "opcode": "instruction opcode (§2 opcodes)",
    "pop_prev_dep": "pop a token from the upstream module first (§5)",
    "pop_next_dep": "pop a token from the downstream module first (§5)",
    "push_prev_dep": "push a token to the upstream module after (§5)",
    "push_next_dep": "push a token to the downstream module after (§5)",
    "memory_type": "which buffer and element size (§2 memory types)",
    "sram_base": "first buffer element written (LOAD) or read (STORE)",
    "dram_base": "DRAM address in elements of the memory type (§4)",
    "pad_min": "LOAD INP: padding elements are −128 instead of 0",
    "y_size": "rows",
    "x_size": "elements per row; 0 moves no data (a sync instruction)",
    "x_stride": "DRAM distance between rows, in elements",
    "y_pad_0": "zero rows before",
    "y_pad_1": "zero rows after",
    "x_pad_0": "zero elements before each row",
    "x_pad_1": "zero elements after each row",
    "reset_reg": "GEMM: zero the accumulator tiles instead of accumulating; ALU: ignored",
    "uop_bgn": "first micro-op",
    "uop_end": "micro-op after the last (exclusive)",
    "iter_out": "outer loop count",
    "iter_in": "inner loop count",
    "dst_factor_out": "accumulator index step of the outer loop",
    "dst_factor_in": "accumulator index step of the inner loop",
    "src_factor_out": "source index step of the outer loop (GEMM: inp, ALU: acc)",
    "src_factor_in": "source index step of the inner loop (GEMM: inp, ALU: acc)",
    "wgt_factor_out": "weight index step of the outer loop",
    "wgt_factor_in": "weight index step of the inner loop",
    "alu_opcode": "ALU operation (§2 ALU operations)",
    "use_imm": "B is `imm` instead of `acc[src]`",
    "imm": "immediate operand, two's complement",
    "dst_idx": "accumulator index",
    "src_idx": "GEMM: inp index; ALU: acc index",
    "wgt_idx": "wgt index (GEMM only)",
}

_ALU_DOC = {
    AluOp.MIN: "signed minimum",
    AluOp.MAX: "signed maximum",
    AluOp.ADD: "addition, 32-bit wrap-around",
    AluOp.SHR: "shift by the signed low 6 bits of B: right (arithmetic) if ≥ 0, left if < 0",
    AluOp.MUL: "multiplication, 32-bit wrap-around",
}

_ELEMENT_DOC = {
    MemoryType.UOP: "one micro-op",
    MemoryType.WGT: "wgt tile `[BLOCK_OUT][BLOCK_IN]` int8",
    MemoryType.INP: "inp tile `[BATCH][BLOCK_IN]` int8",
    MemoryType.ACC: "acc tile `[BATCH][BLOCK_OUT]` int32",
    MemoryType.OUT: "out tile `[BATCH][BLOCK_OUT]` int8",
    MemoryType.ACC_8BIT: "acc tile stored as int8, sign-extended on LOAD",
    MemoryType.EPI: "machine v2 (§9): epi word `[BATCH][BLOCK_OUT]` int32, LOAD only, on the store module",
    MemoryType.EPI_8BIT: "machine v2 (§9): epi word stored as int8, sign-extended on LOAD (LOAD only, store module)",
}

_GUARD_DOC = {
    TokenQueue.LOAD_TO_COMPUTE: "inp/wgt tiles are loaded (read after write)",
    TokenQueue.COMPUTE_TO_LOAD: "compute finished reading inp/wgt (write after read)",
    TokenQueue.COMPUTE_TO_STORE: "out tiles (or the acc tiles a STORE ACC drains, §9) are ready (read after write)",
    TokenQueue.STORE_TO_COMPUTE: "store finished reading out (or draining and zeroing acc, §9) (write after read)",
}

#: Access and meaning of each AXI4-Lite register constant of :mod:`openvta.isa.counters`.


# -- the tables ------------------------------------------------------------------------------


def _presets_header(first: Sequence[str]) -> list[str]:
    return [*first, *(f"`{name}`" for name in PRESETS)]


def _config_table() -> str:
    rows = [[f"`{key}`", KEY_DOC[key], *(getattr(cfg, key) for cfg in PRESETS.values())]
            for key in ISA_KEYS + MACHINE_KEYS + V2_KEYS]
    return markdown_table(_presets_header(["key", "meaning"]), rows)


_DERIVED = (
    ("BATCH", "BATCH", "rows of an inp/acc/out tile"),
    ("BLOCK_IN", "BLOCK_IN", "lanes of an inp tile, columns of a wgt tile"),
    ("BLOCK_OUT", "BLOCK_OUT", "lanes of an acc/out tile, rows of a wgt tile"),
    ("macs_per_uop", "MACs per GEMM micro-op", "BATCH·BLOCK_IN·BLOCK_OUT"),
    ("LOG_UOP_DEPTH", "LOG_UOP_DEPTH", "log2 of the micro-op buffer's elements"),
    ("LOG_INP_DEPTH", "LOG_INP_DEPTH", "log2 of the inp buffer's elements"),
    ("LOG_WGT_DEPTH", "LOG_WGT_DEPTH", "log2 of the wgt buffer's elements"),
    ("LOG_ACC_DEPTH", "LOG_ACC_DEPTH", "log2 of the acc (and out) buffer's elements"),
    ("max_elem_bytes", "DRAM alignment (bytes)", "the largest element (§4)"),
    ("bus_bytes", "bus bytes per beat", "from `LOG_BUS_WIDTH` (not ISA)"),
    ("epi_depth", "epi buffer words",
     "machine v2 (§9): `2**LOG_EPI_BUFF_SIZE` / acc tile bytes; 0 without a drain unit"),
)


def _derived_table() -> str:
    rows = [[name, doc, *(getattr(cfg, attr) for cfg in PRESETS.values())]
            for attr, name, doc in _DERIVED]
    return markdown_table(_presets_header(["quantity", "meaning"]), rows)


def _opcode_table() -> str:
    cfg = PRESETS["vta"]  # VTA's encoding; every preset's opcodes are the same
    layouts = layouts_of(cfg)
    rows = []
    for op in Opcode:
        insn = decode(int(op), cfg)
        rows.append([op.name, op.value, layouts[insn.format].name, f"`{type(insn).__name__}`"])
    return markdown_table(["opcode", "value", "layout", "class in `openvta.isa`"], rows)


def _enum_table(members: Iterable[IntEnum], doc: Mapping[Any, str], what: str) -> str:
    return markdown_table([what, "value", "meaning"], [[m.name, m.value, doc[m]] for m in members])


def _padding(layout: Layout) -> str:
    covered = [False] * layout.total_width
    for f in layout.fields:
        covered[f.offset:f.offset + f.width] = [True] * f.width
    gaps, start = [], None
    for bit, used in enumerate([*covered, True]):
        if not used and start is None:
            start = bit
        elif used and start is not None:
            gaps.append(bits(start, bit - start))
            start = None
    return ", ".join(gaps) or "—"


def _layout_table(fmt: str) -> str:
    per_preset = [layouts_of(cfg)[fmt] for cfg in PRESETS.values()]
    rows = []
    for f in per_preset[0].fields:
        name = f"`{f.name}`" + (" (signed)" if f.signed else "")
        cells = [f"{bits(x.offset, x.width)} ({x.width})"
                 for x in (layout.field(f.name) for layout in per_preset)]
        rows.append([name, FIELD_DOC[f.name], *cells])
    rows.append(["*padding*", "zero bits no field covers", *map(_padding, per_preset)])
    return markdown_table(_presets_header(["field", "meaning"]), rows)


def _element_table() -> str:
    cfgs = list(PRESETS.values())
    rows = [[m.name, _ELEMENT_DOC[m], *(cfg.elem_bytes(m) for cfg in cfgs),
             *(cfg.buffer_depth(m) for cfg in cfgs)] for m in MemoryType]
    header = ["memory type", "element", *(f"bytes `{n}`" for n in PRESETS),
              *(f"depth `{n}`" for n in PRESETS)]
    return markdown_table(header, rows)


def _flag_of(queue: TokenQueue, action: str) -> str:
    module = queue.producer if action == "push" else queue.consumer
    queue_of = TokenQueue.pushed_by if action == "push" else TokenQueue.popped_by
    for flag in (f"{action}_prev_dep", f"{action}_next_dep"):
        try:
            found = queue_of(module, flag)
        except ValueError:
            continue
        if found == queue:
            return f"{module.name.lower()}, `{flag}`"
    raise ValueError(f"token queue {queue.label} has no {action} flag")


def _token_table() -> str:
    rows = [[q.label, _flag_of(q, "push"), _flag_of(q, "pop"), _GUARD_DOC[q]] for q in TokenQueue]
    return markdown_table(["queue", "pushed by", "popped by", "guards"], rows)


def _routing_table() -> str:
    # LOAD OUT and STORE of anything but OUT are not instructions (§3), so not rows; LOAD
    # EPI/EPI_8BIT and STORE ACC are machine v2's (§9), instructions only with a drain unit.
    pairs: list[tuple[Opcode, MemoryType | None]] = [
        *((Opcode.LOAD, m) for m in MemoryType if m != MemoryType.OUT),
        (Opcode.STORE, MemoryType.OUT), (Opcode.STORE, MemoryType.ACC), (Opcode.GEMM, None), (Opcode.ALU, None),
        (Opcode.FINISH, None),
    ]
    rows = [[op.name, "—" if mt is None else mt.name,
             module_of(op, -1 if mt is None else mt).name.lower()] for op, mt in pairs]
    return markdown_table(["instruction", "memory_type", "module"], rows)


def _counter_table() -> str:
    rows = []
    for counter in Counter:
        k = HW_COUNTERS.index(counter) if counter in HW_COUNTERS else None
        who = "cycle model, RTL" if counter in CYCLE_COUNTERS else "every back end"
        register = "—" if k is None else f"`{COUNTER_BASE + 8 * k:#05x}`"
        rows.append(["—" if k is None else k, f"`{counter.value}`", COUNTER_DOC[counter], who,
                     register])
    return markdown_table(["k", "counter", "meaning", "reported by", "register (low word)"], rows)


def _register_table() -> str:
    regs = sorted(REGISTER_DOC, key=lambda name: int(getattr(counters, name)))
    rows = [[f"`{getattr(counters, n):#04x}`", f"`{n}`", *REGISTER_DOC[n]] for n in regs]
    rows.append([f"`{COUNTER_BASE:#05x} + 8k`", "counter k, low word", "R",
                 "counter k of the table above, bits 31..0"])
    rows.append([f"`{COUNTER_BASE:#05x} + 8k + 4`", "counter k, high word", "R", "bits 63..32"])
    return markdown_table(["offset", "register", "access", "meaning"], rows)


_RENDERERS: dict[str, Callable[[], str]] = {
    "isa-config": _config_table,
    "isa-derived": _derived_table,
    "isa-opcodes": _opcode_table,
    "isa-memory-types": lambda: _enum_table(MemoryType, _ELEMENT_DOC, "memory_type"),
    "isa-alu-ops": lambda: _enum_table(AluOp, _ALU_DOC, "alu_opcode"),
    "isa-layout-memory": lambda: _layout_table(Format.MEM),
    "isa-layout-gemm": lambda: _layout_table(Format.GEMM),
    "isa-layout-alu": lambda: _layout_table(Format.ALU),
    "isa-layout-uop": lambda: _layout_table(Format.UOP),
    "isa-elements": _element_table,
    "isa-token-queues": _token_table,
    "isa-routing": _routing_table,
    "isa-counters": _counter_table,
    "isa-registers": _register_table,
}


def isa_blocks() -> dict[str, str]:
    """Every generated block of ``docs/ISA.md``: block name → Markdown."""
    return {name: render() for name, render in _RENDERERS.items()}

