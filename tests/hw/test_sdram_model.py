# amaranth: UnusedElaboratable=no
"""The SDRAM part's model: its timings in cycles, its storage through legal
command streams, and each datasheet rule it enforces, with its message (Amaranth's
simulator: a violation raises ``AssertionError`` naming the rule)."""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Sequence

import pytest
from amaranth.sim import Simulator, SimulatorContext
from hypothesis import given, settings
from hypothesis import strategies as st

from openvta.hw.cosim.sdram_model import AS4C32M16SB_7, MAX_POSTPONED_REFRESHES, SdramModel, SdramPart

CLOCK = 50.0
ROWS = 16  # rows simulated per bank
NOP = ("NOP",)
CODES = {"ACTIVE": 0b011, "READ": 0b101, "WRITE": 0b100, "PRECHARGE": 0b010, "REFRESH": 0b001, "MODE": 0b000,
         "NOP": 0b111}


def mode(cas_latency: int = 2, burst: int = 1) -> tuple:
    return ("MODE", 0, cas_latency << 4 | {1: 0, 2: 1, 4: 2, 8: 3}[burst])


def run(commands: Sequence[tuple], part: SdramPart = AS4C32M16SB_7, clock: float = CLOCK,
        rows: int = ROWS) -> dict[int, int]:
    """Drive one command per cycle (``(name, bank, address[, data[, dm]])``); returns the
    data the part drove, by cycle."""
    dut = SdramModel(part, clock, rows=rows)
    seen: dict[int, int] = {}

    async def bench(ctx: SimulatorContext) -> None:
        for cycle, command in enumerate([*commands, *[NOP] * 6]):
            name, *rest = command
            code = CODES[name]
            bank, address = (rest + [0, 0])[:2]
            data = rest[2] if len(rest) > 2 else None
            dm = rest[3] if len(rest) > 3 else 0
            ctx.set(dut.cs_n, 0)
            ctx.set(dut.ras_n, code >> 2 & 1)
            ctx.set(dut.cas_n, code >> 1 & 1)
            ctx.set(dut.we_n, code & 1)
            ctx.set(dut.ba, bank)
            ctx.set(dut.a, address)
            ctx.set(dut.dq_oe, data is not None)
            ctx.set(dut.dq_o, data or 0)
            ctx.set(dut.dm, dm)
            value = ctx.get(dut.dq_i)
            if value:
                seen[cycle] = value
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6 / clock)
    sim.add_testbench(bench)
    sim.run()
    return seen


def test_timings_in_cycles_round_up_the_datasheets_nanoseconds() -> None:
    t = AS4C32M16SB_7.timing(50.0)  # 20 ns
    assert (t.t_rcd, t.t_rp, t.t_ras, t.t_rc, t.t_rrd, t.t_wr, t.t_rfc, t.t_mrd) == (2, 2, 3, 4, 1, 1, 4, 1)
    assert (t.t_refi, t.t_ras_max, t.min_cas_latency) == (390, 6000, 2)
    fast = AS4C32M16SB_7.timing(140.0)  # 7.14 ns
    assert (fast.t_rcd, fast.t_rc, fast.min_cas_latency) == (3, 9, 3)
    with pytest.raises(ValueError, match=r"^AS4C32M16SB-7 runs at most at 142\.9 MHz, not 150$"):
        AS4C32M16SB_7.timing(150.0)
    with pytest.raises(ValueError, match=r"^rows must be an integer from 1 to 8192, not 0$"):
        SdramModel(rows=0)


@pytest.mark.parametrize("cas_latency", [2, 3])
def test_a_write_then_a_read_gives_the_data_after_the_cas_latency(cas_latency: int) -> None:
    seen = run([mode(cas_latency), NOP, ("ACTIVE", 1, 5), NOP, ("WRITE", 1, 3, 0xBEEF), ("WRITE", 1, 4, 0x1234, 0b10),
                ("READ", 1, 3), ("READ", 1, 4), NOP, ("PRECHARGE", 1, 0), NOP, NOP, ("REFRESH",)])
    assert seen == {6 + cas_latency: 0xBEEF, 7 + cas_latency: 0x0034}  # dm[1] kept the high byte unwritten


def test_a_burst_of_four_wraps_inside_its_block() -> None:
    write = [("WRITE", 0, 6, 0x11), ("NOP", 0, 0, 0x22), ("NOP", 0, 0, 0x33), ("NOP", 0, 0, 0x44)]
    seen = run([mode(2, 4), NOP, ("ACTIVE", 0, 2), NOP, *write, ("READ", 0, 4), NOP, NOP, NOP, NOP, NOP,
                ("PRECHARGE", 0, 0)])
    # written at columns 6, 7, 4, 5; read from 4: 4, 5, 6, 7
    assert [seen[c] for c in sorted(seen)] == [0x33, 0x44, 0x11, 0x22]


VIOLATIONS = [
    ([mode(), NOP, ("ACTIVE", 0, 1), ("READ", 0, 0)],
     r"tRCD: READ or WRITE to bank 0 1 cycles after its ACTIVE \(needs 2\) at cycle 3"),
    ([mode(), NOP, ("ACTIVE", 2, 1), NOP, NOP, ("PRECHARGE", 2, 0), ("ACTIVE", 2, 1)],
     r"tRP: ACTIVE to bank 2 1 cycles after its PRECHARGE \(needs 2\)"),
    ([mode(), NOP, ("ACTIVE", 0, 1), NOP, ("PRECHARGE", 0, 0)],
     r"tRAS: PRECHARGE of bank 0 2 cycles after its ACTIVE \(needs 3\)"),
    ([mode(), NOP, ("REFRESH",), ("ACTIVE", 0, 1)],
     r"tRFC: ACTIVE 1 cycles after AUTO REFRESH \(needs 4\)"),
    ([("ACTIVE", 0, 1)], r"ACTIVE before the mode register is loaded"),
    ([mode(), NOP, ("READ", 3, 0)], r"READ or WRITE to bank 3 with no open row"),
    ([mode(), NOP, ("ACTIVE", 1, 1), NOP, ("ACTIVE", 1, 2)], r"ACTIVE to bank 1 whose row 1 is open"),
    ([mode(), NOP, ("ACTIVE", 1, 1), NOP, ("REFRESH",)], r"AUTO REFRESH with bank 1 open"),
    ([mode(), NOP, ("ACTIVE", 0, ROWS)], rf"row {ROWS} beyond the {ROWS} rows simulated"),
    ([mode(4)], r"CAS latency 4 \(the part has 2 and 3\)"),
    ([mode(), NOP, ("ACTIVE", 0, 1), NOP, ("WRITE", 0, 0)], r"write data with the data bus not driven"),
    ([mode(), NOP, ("ACTIVE", 0, 1), NOP, ("READ", 0, 1024 | 0), ("ACTIVE", 0, 2)], r"bank 0 is in its auto precharge"),
]


@pytest.mark.parametrize("commands, message", VIOLATIONS)
def test_each_rule_stops_the_simulation_with_its_name(commands: list, message: str) -> None:
    with pytest.raises(AssertionError) as info:
        run(commands)
    assert re.fullmatch(rf"Assertion violated: SDRAM AS4C32M16SB-7: .*{message}.*", str(info.value)), str(info.value)


def test_trc_where_tras_and_trp_leave_it_short() -> None:
    part = dataclasses.replace(AS4C32M16SB_7, name="slow-rows", t_rc_ns=200)  # 10 cycles at 50 MHz
    with pytest.raises(AssertionError, match=r"tRC: ACTIVE to bank 0 5 cycles after its last ACTIVE \(needs 10\)"):
        run([mode(), NOP, ("ACTIVE", 0, 1), NOP, NOP, ("PRECHARGE", 0, 0), NOP, ("ACTIVE", 0, 1)], part)


@pytest.mark.parametrize("commands, message", [
    ([mode(3), ("ACTIVE", 0, 1)], r"tMRD: a command 1 cycles after LOAD MODE REGISTER \(needs 2\)"),
    ([mode(3), NOP, ("ACTIVE", 0, 1), NOP, NOP, NOP, NOP, ("WRITE", 0, 0, 7), ("PRECHARGE", 0, 0)],
     r"tWR: PRECHARGE of bank 0 1 cycles after its last write data \(needs 2\)"),
])
def test_rules_of_more_than_one_cycle_at_140_mhz(commands: list, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        run(commands, clock=140.0)


def test_cas_latency_2_is_refused_above_100_mhz() -> None:
    with pytest.raises(AssertionError, match=r"CAS latency 2 at 125 MHz \(needs 3 above 100 MHz\)"):
        run([mode(2)], clock=125.0)


def test_refresh_every_trefi_is_legal_and_nine_missed_are_a_violation() -> None:
    t = AS4C32M16SB_7.timing(CLOCK)
    kept = [mode(), *([NOP] * (t.t_refi - 1) + [("REFRESH",)]) * 10]
    run(kept)
    missed = [mode(), *[NOP] * ((MAX_POSTPONED_REFRESHES + 1) * t.t_refi + 2)]
    with pytest.raises(AssertionError, match=r"refresh: 9 intervals of tREFI \(390 cycles\) passed without their "
                                             r"AUTO REFRESH"):
        run(missed)
    postponed = [mode(), *[NOP] * (MAX_POSTPONED_REFRESHES * t.t_refi), *[("REFRESH",), NOP, NOP, NOP] * 8]
    run(postponed)  # eight postponed, then made up


@settings(max_examples=8, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3), st.integers(0, ROWS - 1), st.integers(0, 1023),
                          st.integers(1, 0xFFFF)), min_size=1, max_size=12), st.sampled_from([2, 3]))
def test_a_legal_stream_keeps_every_value(accesses: list, cas_latency: int) -> None:
    """Random writes and reads, each opening its row at the earliest the rules allow and
    closing it after: no violation, and every read gives the last value written."""
    t = AS4C32M16SB_7.timing(CLOCK)
    commands: list[tuple] = [mode(cas_latency), *[NOP] * t.t_mrd]
    memory: dict[tuple[int, int, int], int] = {}
    expected: dict[int, int] = {}
    rng = random.Random(len(accesses))
    for write, bank, row, col, value in accesses:
        commands += [("ACTIVE", bank, row), *[NOP] * (t.t_rcd - 1)]
        if write:
            commands.append(("WRITE", bank, col, value))
            memory[bank, row, col] = value
        else:
            commands.append(("READ", bank, col))
            if memory.get((bank, row, col)):
                expected[len(commands) - 1 + cas_latency] = memory[bank, row, col]
        commands += [NOP] * max(t.t_ras - t.t_rcd - 1, t.t_wr, cas_latency) + [("PRECHARGE", bank, 0)]
        commands += [NOP] * (t.t_rp - 1 + rng.randint(0, 2))
    seen = run(commands)
    assert {c: v for c, v in seen.items() if c in expected} == expected
    assert set(seen) <= set(expected) | {c for c in seen if c not in expected and seen[c] == 0}


def test_a_command_ends_the_burst_in_flight() -> None:
    """A READ cuts a write burst (the bus released: no complaint, nothing more written), a
    WRITE cuts a read burst (no beat of it after the WRITE), and write recovery counts
    from the last data taken, not from the end the burst would have had."""
    cut_write = [mode(2, 4), NOP, ("ACTIVE", 0, 1), NOP, ("WRITE", 0, 0, 0xA), ("NOP", 0, 0, 0xB),
                 ("READ", 0, 2), NOP, NOP, NOP, NOP, ("READ", 0, 0)]
    # columns 2 and 3 were never written (0 on the bus, not recorded)
    assert run(cut_write) == {10: 0xA, 11: 0xB, 13: 0xA, 14: 0xB}
    masked = ("NOP", 0, 0, None, 0b11)
    cut_read = [mode(2, 4), NOP, ("ACTIVE", 0, 1), NOP, ("WRITE", 0, 0, 0xA), ("NOP", 0, 0, 0xB), ("NOP", 0, 0, 0xC),
                ("NOP", 0, 0, 0xD), ("READ", 0, 0), ("WRITE", 0, 3, 0xE), masked, masked, masked, NOP,
                ("READ", 0, 2)]
    assert run(cut_read) == {10: 0xA, 16: 0xC, 17: 0xE, 18: 0xA, 19: 0xB}
    part = dataclasses.replace(AS4C32M16SB_7, name="slow-writes", t_wr_ns=40)  # tWR 2 cycles at 50 MHz
    recovery = [mode(2, 2), NOP, ("ACTIVE", 0, 1), ("ACTIVE", 1, 1), NOP, ("WRITE", 0, 0, 1), ("WRITE", 1, 0, 2),
                ("PRECHARGE", 0, 0, 3)]
    run(recovery, part)  # bank 0's only data at cycle 5, its PRECHARGE tWR later: legal


def test_tras_max_is_legal_up_to_its_last_cycle() -> None:
    part = dataclasses.replace(AS4C32M16SB_7, name="short-rows", t_ras_max_ns=1000)  # 50 cycles at 50 MHz
    run([mode(), NOP, ("ACTIVE", 0, 1), *[NOP] * 49, ("PRECHARGE", 0, 0)], part)
    with pytest.raises(AssertionError, match=r"tRAS: bank 0 open for 51 cycles, past tRAS max \(50 cycles\) "
                                             r"at cycle 53"):
        run([mode(), NOP, ("ACTIVE", 0, 1), *[NOP] * 50, ("PRECHARGE", 0, 0)], part)


def test_refreshes_of_the_initialization_earn_no_credit() -> None:
    t = AS4C32M16SB_7.timing(CLOCK)
    init = [("REFRESH",), *[NOP] * t.t_rfc, ("REFRESH",), *[NOP] * t.t_rfc, mode()]
    with pytest.raises(AssertionError, match=r"refresh: 9 intervals"):
        run([*init, *[NOP] * ((MAX_POSTPONED_REFRESHES + 1) * t.t_refi + 2)])
