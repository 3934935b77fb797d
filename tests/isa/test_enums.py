"""Enumerations, token queues and routing (docs/ISA.md §2, §5)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from openvta.isa import (
    LOAD_MODULE_TYPES,
    STORE_MODULE_TYPES,
    AluInsn,
    AluOp,
    FinishInsn,
    GemmInsn,
    MemInsn,
    MemoryType,
    Module,
    Opcode,
    TokenQueue,
    dram_type,
    module_of,
    modules_of,
    preset,
)

from isa_reference import ALU_OPCODES, MEMORY_TYPES, OPCODES, V2_MEMORY_TYPES

# docs/ISA.md §5: queue, pushed by (module, flag), popped by (module, flag).
QUEUE_TABLE = [
    (TokenQueue.LOAD_TO_COMPUTE, Module.LOAD, "push_next_dep", Module.COMPUTE, "pop_prev_dep"),
    (TokenQueue.COMPUTE_TO_LOAD, Module.COMPUTE, "push_prev_dep", Module.LOAD, "pop_next_dep"),
    (TokenQueue.COMPUTE_TO_STORE, Module.COMPUTE, "push_next_dep", Module.STORE, "pop_prev_dep"),
    (TokenQueue.STORE_TO_COMPUTE, Module.STORE, "push_prev_dep", Module.COMPUTE, "pop_next_dep"),
]
PUSH_FLAGS = ("push_prev_dep", "push_next_dep")
POP_FLAGS = ("pop_prev_dep", "pop_next_dep")


def test_enum_values_are_the_spec():
    assert {m.name: m.value for m in Opcode} == OPCODES
    assert {m.name: m.value for m in MemoryType} == MEMORY_TYPES
    assert {m.name: m.value for m in AluOp} == ALU_OPCODES
    assert [m.name for m in Module] == ["LOAD", "COMPUTE", "STORE"]  # upstream first


def test_four_token_queues():
    assert set(TokenQueue) == {row[0] for row in QUEUE_TABLE}
    assert len(TokenQueue) == 4


@pytest.mark.parametrize(("queue", "producer", "push_flag", "consumer", "pop_flag"), QUEUE_TABLE)
def test_token_queue_ends_and_flags(queue, producer, push_flag, consumer, pop_flag):
    assert queue.producer is producer
    assert queue.consumer is consumer
    assert queue.label == f"{producer.name.lower()}→{consumer.name.lower()}"
    assert TokenQueue.between(producer, consumer) is queue
    assert TokenQueue.pushed_by(producer, push_flag) is queue
    assert TokenQueue.popped_by(consumer, pop_flag) is queue


def test_every_other_module_pair_has_no_queue():
    pairs = {(row[1], row[3]) for row in QUEUE_TABLE}
    missing = [(a, b) for a, b in itertools.product(Module, Module) if (a, b) not in pairs]
    assert (Module.LOAD, Module.STORE) in missing and (Module.STORE, Module.LOAD) in missing
    for producer, consumer in missing:
        names = producer.name.lower(), consumer.name.lower()
        message = rf"^there is no token queue from {names[0]} to {names[1]}$"
        with pytest.raises(ValueError, match=message):
            TokenQueue.between(producer, consumer)


# docs/ISA.md §5: a load-module instruction never sets prev flags, a store never sets next flags.
NO_QUEUE = [
    (Module.LOAD, "pop_prev_dep", "prev"),
    (Module.LOAD, "push_prev_dep", "prev"),
    (Module.STORE, "pop_next_dep", "next"),
    (Module.STORE, "push_next_dep", "next"),
]


def test_every_module_flag_pair_is_either_a_queue_end_or_has_no_queue():
    ends = {(row[1], row[2]) for row in QUEUE_TABLE} | {(row[3], row[4]) for row in QUEUE_TABLE}
    none = {(module, flag) for module, flag, _ in NO_QUEUE}
    assert not ends & none
    assert ends | none == set(itertools.product(Module, PUSH_FLAGS + POP_FLAGS))


@pytest.mark.parametrize(("module", "flag", "side"), NO_QUEUE)
def test_flags_without_a_queue(module, flag, side):
    lookup = TokenQueue.pushed_by if flag.startswith("push") else TokenQueue.popped_by
    message = rf"^{module.name.lower()} module has no {side} neighbour$"
    with pytest.raises(ValueError, match=message):
        lookup(module, flag)


# -- routing (fetch) ----------------------------------------------------------------------


def _spec_module(opcode: int, memory_type: int) -> Module:
    # docs/ISA.md §5: STORE → store; LOAD of INP/WGT → load; everything else → compute.
    # docs/ISA.md §9: LOAD of EPI/EPI_8BIT (the drain unit's epi buffer) → store.
    if opcode == OPCODES["STORE"]:
        return Module.STORE
    if opcode == OPCODES["LOAD"] and memory_type in V2_MEMORY_TYPES.values():
        return Module.STORE
    if opcode == OPCODES["LOAD"] and memory_type in (MEMORY_TYPES["INP"], MEMORY_TYPES["WGT"]):
        return Module.LOAD
    return Module.COMPUTE


def test_load_module_types():
    assert set(LOAD_MODULE_TYPES) == {MemoryType.INP, MemoryType.WGT}
    assert set(STORE_MODULE_TYPES) == {MemoryType.EPI, MemoryType.EPI_8BIT}


@pytest.mark.parametrize("opcode", list(Opcode))
@pytest.mark.parametrize("memory_type", list(MemoryType))
def test_dram_type(opcode, memory_type):
    # docs/ISA.md §9: every STORE writes OUT elements (STORE ACC drains to int8).
    expected = MemoryType.OUT if opcode == Opcode.STORE else memory_type
    assert dram_type(opcode, memory_type) is expected


@pytest.mark.parametrize(("opcode", "memory_type"), list(itertools.product(Opcode, MemoryType)))
def test_module_of_every_opcode_and_memory_type(opcode, memory_type):
    assert module_of(opcode, memory_type) is _spec_module(opcode, memory_type)


def test_instruction_module_property():
    cfg = preset("default")
    for memory_type in MemoryType:
        assert MemInsn(cfg=cfg, opcode=Opcode.LOAD, memory_type=memory_type).module is \
            _spec_module(OPCODES["LOAD"], memory_type)
        assert MemInsn(cfg=cfg, opcode=Opcode.STORE, memory_type=memory_type).module is Module.STORE
    for insn in (GemmInsn(cfg=cfg), AluInsn(cfg=cfg), FinishInsn(cfg=cfg)):
        assert insn.module is Module.COMPUTE


def test_modules_of_full_grid():
    grid = list(itertools.product(range(8), range(8)))
    opcodes = np.array([op for op, _ in grid], dtype=np.int64)
    types = np.array([mt for _, mt in grid], dtype=np.int64)
    out = modules_of(opcodes, types)
    assert out.tolist() == [int(module_of(op, mt)) for op, mt in grid]
    assert out.tolist() == [int(_spec_module(op, mt)) for op, mt in grid]


@settings(max_examples=100, deadline=None)
@given(
    st.integers(0, 64).flatmap(
        lambda n: st.tuples(
            hnp.arrays(np.int64, n, elements=st.integers(0, 7)),
            hnp.arrays(np.int64, n, elements=st.integers(0, 7)),
        )
    )
)
def test_modules_of_equals_module_of(arrays):
    opcodes, types = arrays
    out = modules_of(opcodes, types)
    assert out.shape == opcodes.shape
    assert out.tolist() == [int(module_of(int(op), int(mt))) for op, mt in zip(opcodes, types)]
