"""The architecture contract: configuration, encodings, assembler, counters, arithmetic.

Everything here is derived from :class:`Config`; the rest of openvta imports its
widths, opcodes, field offsets and counter names from this package.
"""

from .arith import (
    INT8_LIMIT,
    INT8_MAX,
    INT8_MIN,
    INT8_RANGE,
    INT32_LIMIT,
    INT32_MAX,
    INT32_MIN,
    MAX_SHR_AMOUNT,
    MIN_SHR_AMOUNT,
    SHR_AMOUNT_WIDTH,
    WIDE_BYTE_SHIFT,
    WIDE_MAX,
    WIDE_MIN,
    WIDE_RANGE,
    alu_lanes,
    join_wide,
    requantize_int32,
    round_shift,
    round_shift_steps,
    shr_amount,
    wide_high,
    wide_low,
    wrap_int32,
)
from .asm import AsmError, assemble, disassemble, format_insn
from .config import INSN_BYTES, ISA_KEYS, MACHINE_KEYS, PRESETS, UOP_BYTES, V2_KEYS, Config, ConfigError, preset
from .drain import (DrainError, DrainOp, DrainStage, decode_header, drain_tiles, encode_header, epi_base_of,
                    format_drain_ops, parse_drain_ops, reads_residual, stages_fit, with_epi_base)
from .counters import (
    COUNTER_BASE,
    COUNTER_DOC,
    CYCLE_COUNTERS,
    EVENT_COUNTERS,
    HW_COUNTERS,
    REG_CONTROL,
    REG_COUNTERS,
    REG_INSN_ADDR,
    REG_INSN_COUNT,
    REG_STATUS,
    UNIT_COUNTERS,
    Counter,
    CounterSet,
    UnitCounters,
    counter_set,
)
from .encoding import Field, Format, ISAError, Layout, layouts_of
from .enums import (LOAD_MODULE_TYPES, STORE_MODULE_TYPES, AluOp, MemoryType, Module, Opcode, TokenQueue, Unit,
                    dram_type, module_of, modules_of)
from .report import InsnTiming, LinkTiming, Roofline, RunReport, UnitTiming, unit_timing
from .timing import (TIMING_PRESETS, LeanBuild, Timing, drain_fill_cycles, drain_split_stages, sdram_timing,
                     spram_timing, timing_for)
from .machine import MACHINES, MEMORIES, Machine, machine, parse_machine
from .instructions import (
    AluInsn,
    FinishInsn,
    GemmInsn,
    Instruction,
    MemInsn,
    Uop,
    decode,
    decode_stream,
    decode_table,
    decode_uop,
    decode_uops,
    encode_stream,
    encode_uops,
    words_from_bytes,
    words_to_bytes,
)

__all__ = [
    "AluInsn", "AluOp", "MACHINES", "MEMORIES", "Machine", "machine", "parse_machine",
    "AsmError", "COUNTER_DOC", "CYCLE_COUNTERS", "Config", "ConfigError",
    "Counter", "EVENT_COUNTERS", "Field", "FinishInsn", "Format", "GemmInsn", "INSN_BYTES",
    "ISAError", "ISA_KEYS", "Instruction", "Layout", "MACHINE_KEYS", "MemInsn", "MemoryType",
    "Module", "Opcode", "PRESETS", "TokenQueue", "UOP_BYTES", "Uop", "assemble", "decode",
    "decode_stream", "decode_table", "decode_uop", "decode_uops", "disassemble",
    "encode_stream", "encode_uops", "format_insn", "layouts_of", "module_of", "modules_of",
    "preset", "LOAD_MODULE_TYPES", "TIMING_PRESETS", "Timing", "timing_for", "sdram_timing", "spram_timing",
    "LeanBuild", "HW_COUNTERS",
    "COUNTER_BASE", "REG_CONTROL", "REG_STATUS", "REG_INSN_ADDR", "REG_INSN_COUNT", "REG_COUNTERS",
    "CounterSet", "counter_set", "UNIT_COUNTERS", "UnitCounters", "Unit", "UnitTiming", "InsnTiming",
    "RunReport", "Roofline", "unit_timing", "LinkTiming",
    "words_from_bytes", "words_to_bytes",
    "INT8_LIMIT", "INT8_MAX", "INT8_MIN", "INT8_RANGE", "INT32_LIMIT", "INT32_MAX", "INT32_MIN",
    "MAX_SHR_AMOUNT", "MIN_SHR_AMOUNT", "SHR_AMOUNT_WIDTH", "alu_lanes", "requantize_int32", "round_shift",
    "round_shift_steps", "shr_amount", "wrap_int32", "WIDE_BYTE_SHIFT", "WIDE_MAX", "WIDE_MIN", "WIDE_RANGE",
    "join_wide", "wide_high", "wide_low",
    "V2_KEYS", "STORE_MODULE_TYPES", "DrainError", "DrainOp", "DrainStage", "decode_header", "drain_tiles",
    "encode_header", "format_drain_ops", "parse_drain_ops", "stages_fit",
    "reads_residual", "epi_base_of", "with_epi_base", "dram_type", "drain_fill_cycles", "drain_split_stages",
]
