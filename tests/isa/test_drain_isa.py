"""Machine v2's drain unit in the ISA (docs/ISA.md §9): the descriptor header, the stage
codes, the descriptor index in a STORE's pads, and the two configuration keys.

The header layout is re-derived here from the spec's words (lane 0 the count, lane 1 the
residual's base, lane 2 the stride, four 8-bit codes per lane from lane 3, ``code = op |
on_residual << 3 | operand_residual << 4``), not from ``isa/drain.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openvta.isa import (
    AluOp,
    Config,
    ConfigError,
    DrainError,
    DrainOp,
    DrainStage,
    MemInsn,
    MemoryType,
    Opcode,
    decode,
    decode_header,
    encode_header,
    epi_base_of,
    format_drain_ops,
    parse_drain_ops,
    preset,
    reads_residual,
    stages_fit,
    with_epi_base,
)
from openvta.isa.drain import max_stages

V2 = preset("v2")
#: a drain unit on tiny's geometry: 4 lanes, so one lane of codes and at most 4 stages
TINY_V2 = preset("tiny").replace(LOG_EPI_BUFF_SIZE=10, DRAIN_STAGES=4)
DRAIN_CONFIGS = {"v2": V2, "tiny-drain": TINY_V2}

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
stages_strategy = st.builds(DrainStage, st.sampled_from(list(DrainOp)), st.booleans(), st.booleans())


def _spec_header(cfg: Config, stages: list[DrainStage], res_base: int, stride: int) -> list[int]:
    """The header's lanes as unsigned 32-bit values, straight from docs/ISA.md §9."""
    lanes = [0] * (cfg.BATCH * cfg.BLOCK_OUT)
    lanes[0], lanes[1], lanes[2] = len(stages), res_base & 0xFFFF_FFFF, stride & 0xFFFF_FFFF
    for k, s in enumerate(stages):
        code = int(s.op) | int(s.on_residual) << 3 | int(s.operand_residual) << 4
        lanes[3 + k // 4] |= code << (8 * (k % 4))
    return lanes


# -- header round trip ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DRAIN_CONFIGS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_header_round_trip(name: str, data: st.DataObject) -> None:
    cfg = DRAIN_CONFIGS[name]
    stages = data.draw(st.lists(stages_strategy, max_size=cfg.DRAIN_STAGES))
    res_base, stride = data.draw(INT32), data.draw(INT32)
    header = encode_header(cfg, tuple(stages), res_base=res_base, stride=stride)
    assert header.dtype == np.int32 and header.shape == (cfg.BATCH * cfg.BLOCK_OUT,)
    assert (header.astype(np.int64) & 0xFFFF_FFFF).tolist() == _spec_header(cfg, stages, res_base, stride)
    assert decode_header(header, "epi[0]") == (tuple(stages), res_base, stride)
    assert reads_residual(tuple(stages)) == any(s.on_residual or s.operand_residual for s in stages)


def test_every_code_decodes_exactly_when_the_spec_says() -> None:
    for code in range(256):
        valid = code & 0b1110_0000 == 0 and code & 0b111 <= max(DrainOp)  # ops 0-6: the ALU's, RSHR, CLIP
        if valid:
            stage = DrainStage.from_code(code, "here")
            assert stage.code == code
            assert (stage.op, stage.on_residual, stage.operand_residual) == \
                (DrainOp(code & 7), bool(code & 8), bool(code & 16))
        else:
            with pytest.raises(DrainError, match=rf"^here: invalid drain stage code {code:#04x}$"):
                DrainStage.from_code(code, "here")


@pytest.mark.parametrize(("lane", "byte", "code"), [(3, 0, 0x07), (3, 1, 0x0F), (3, 0, 0x20), (4, 0, 0x80),
                                                    (3, 3, 0x3F)])
def test_decode_header_names_an_invalid_code(lane: int, byte: int, code: int) -> None:
    header = encode_header(V2, (DrainStage(AluOp.ADD),) * 8)
    header = header.astype(np.int64) & 0xFFFF_FFFF
    header[lane] &= ~(0xFF << (8 * byte))
    header[lane] |= code << (8 * byte)
    with pytest.raises(DrainError, match=rf"^STORE: descriptor epi\[7\]: invalid drain stage code {code:#04x}$"):
        decode_header(header.astype(np.uint32).astype(np.int32), "STORE: descriptor epi[7]")


def test_decode_header_ignores_the_codes_past_its_count() -> None:
    header = encode_header(V2, (DrainStage(AluOp.MAX),))
    header[3] |= 0x7F << 8  # stage 1's byte holds an invalid code, but the count is 1
    assert decode_header(header, "d") == ((DrainStage(AluOp.MAX),), 0, 1)


@pytest.mark.parametrize("name", sorted(DRAIN_CONFIGS))
def test_decode_header_count_beyond_its_lanes(name: str) -> None:
    cfg = DRAIN_CONFIGS[name]
    most = 4 * (cfg.BATCH * cfg.BLOCK_OUT - 3)
    assert max_stages(cfg) == most
    header = np.zeros(cfg.BATCH * cfg.BLOCK_OUT, np.int32)
    header[0] = most  # every code 0: MIN on X
    assert decode_header(header, "d")[0] == (DrainStage(AluOp.MIN),) * most
    header[0] = most + 1
    with pytest.raises(DrainError, match=rf"^d: a header of {most + 1} stages \(at most {most}\)$"):
        decode_header(header, "d")
    header[0] = -1  # lane 0 is read unsigned
    with pytest.raises(DrainError, match=rf"^d: a header of 4294967295 stages \(at most {most}\)$"):
        decode_header(header, "d")


def test_encode_header_errors() -> None:
    with pytest.raises(ConfigError, match=r"^this configuration has no drain unit \(DRAIN_STAGES is 0\)$"):
        encode_header(preset("vta"), ())
    nine = (DrainStage(AluOp.ADD),) * 13
    with pytest.raises(DrainError, match=r"^a descriptor of 13 stages does not fit a drain unit of 12 "
                                         r"\(DRAIN_STAGES\)$"):
        encode_header(V2, nine)
    with pytest.raises(DrainError, match=r"^a descriptor of 5 stages does not fit a drain unit of 4"):
        encode_header(TINY_V2, nine[:5])


# -- per-stage operation sets (DRAIN_OPS) --------------------------------------------------

op_sets = st.lists(st.sets(st.sampled_from(list(DrainOp)), min_size=1), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(op_sets)
def test_drain_ops_by_name_round_trip(sets: list[set[DrainOp]]) -> None:
    text = "/".join("+".join(op.name.lower() for op in ops) for ops in sets)
    value = parse_drain_ops(text)
    # the spec's byte per stage, bit ``op`` for each operation (docs/ISA.md §9)
    assert value == sum(1 << (8 * k + op) for k, ops in enumerate(sets) for op in ops)
    cfg = V2.replace(DRAIN_STAGES=len(sets), DRAIN_OPS=value)
    assert cfg.drain_stage_ops == tuple(frozenset(ops) for ops in sets)
    assert parse_drain_ops(format_drain_ops(cfg)) == value
    assert format_drain_ops(V2) == "all"


def test_parse_drain_ops_names_a_bad_operation() -> None:
    with pytest.raises(DrainError, match=r"^DRAIN_OPS 'RSHR/ADDD': 'ADDD' is not a drain operation \(one of MIN, "
                                         r"MAX, ADD, SHR, MUL, RSHR, CLIP; stages separated by '/', a stage's "
                                         r"operations by '\+'\)$"):
        parse_drain_ops("RSHR/ADDD")


@settings(max_examples=80, deadline=None)
@given(op_sets, st.lists(stages_strategy, max_size=12))
def test_stages_fit_their_stage_sets(sets: list[set[DrainOp]], stages: list[DrainStage]) -> None:
    cfg = V2.replace(DRAIN_STAGES=len(sets), DRAIN_OPS=parse_drain_ops("/".join("+".join(o.name for o in ops)
                                                                                   for ops in sets)))
    fits = len(stages) <= len(sets) and all(stage.op in ops for stage, ops in zip(stages, sets))
    assert (stages_fit(cfg, tuple(stages)) is None) == fits
    if fits:
        assert decode_header(encode_header(cfg, tuple(stages)), "d")[0] == tuple(stages)
    else:
        with pytest.raises(DrainError, match=r"^a descriptor "):
            encode_header(cfg, tuple(stages))


def test_a_stage_without_the_operation_is_named() -> None:
    cfg = V2.replace(DRAIN_STAGES=3, DRAIN_OPS=parse_drain_ops("RSHR+SHR/ADD/CLIP"))
    with pytest.raises(DrainError, match=r"^a descriptor the drain unit cannot run: it has stage 1 MUL, which the "
                                         r"drain unit's stage 1 does not have \(DRAIN_OPS: it has ADD\)$"):
        encode_header(cfg, (DrainStage(DrainOp.RSHR), DrainStage(DrainOp.MUL)))


def test_drain_error_is_a_value_error() -> None:
    assert issubclass(DrainError, ValueError)


# -- the descriptor index in a STORE's pads --------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.integers(0, (1 << 16) - 1))
def test_epi_base_round_trip(epi_base: int) -> None:
    store = MemInsn(cfg=V2, opcode=Opcode.STORE, memory_type=MemoryType.ACC, sram_base=3, x_size=2, y_size=1)
    drained = with_epi_base(store, epi_base)
    assert epi_base_of(drained) == epi_base
    # docs/ISA.md §9: x_pad_1:x_pad_0:y_pad_1:y_pad_0, y_pad_0 the low four bits
    pads = (drained.y_pad_0, drained.y_pad_1, drained.x_pad_0, drained.x_pad_1)
    assert pads == tuple((epi_base >> (4 * i)) & 0xF for i in range(4))
    assert drained.replace(y_pad_0=0, y_pad_1=0, x_pad_0=0, x_pad_1=0) == store
    assert epi_base_of(decode(drained.encode(), V2)) == epi_base


@pytest.mark.parametrize("epi_base", [-1, 1 << 16, 1 << 20])
def test_epi_base_range_error(epi_base: int) -> None:
    store = MemInsn(cfg=V2, opcode=Opcode.STORE, memory_type=MemoryType.ACC)
    with pytest.raises(DrainError, match=rf"^epi_base must be in 0\.\.65535, not {epi_base}$"):
        with_epi_base(store, epi_base)


# -- the configuration keys -------------------------------------------------------------------

_EPI_BUFFER = r"must give a buffer of 2 to 2\*\*16 elements of"


@pytest.mark.parametrize(
    ("base", "changes", "message"),
    [
        ("vta", {"LOG_EPI_BUFF_SIZE": 14},
         r"^LOG_EPI_BUFF_SIZE and DRAIN_STAGES must both be 0 \(no drain unit\) or both be set, not 14 and 0$"),
        ("vta", {"DRAIN_STAGES": 8},
         r"^LOG_EPI_BUFF_SIZE and DRAIN_STAGES must both be 0 \(no drain unit\) or both be set, not 0 and 8$"),
        ("v2", {"DRAIN_STAGES": 0}, r"^LOG_EPI_BUFF_SIZE and DRAIN_STAGES must both be 0 .* not 14 and 0$"),
        ("v2", {"DRAIN_STAGES": "8"}, r"^DRAIN_STAGES must be an integer, not '8'$"),
        ("v2", {"LOG_EPI_BUFF_SIZE": 14.0}, r"^LOG_EPI_BUFF_SIZE must be an integer, not 14\.0$"),
        # 16 lanes: 13 lanes of four codes
        ("v2", {"DRAIN_STAGES": 53}, r"^DRAIN_STAGES must be between 1 and 52, not 53$"),
        ("v2", {"DRAIN_STAGES": -1}, r"^DRAIN_STAGES must be between 1 and 52, not -1$"),
        ("vta", {"DRAIN_STAGES": -1}, r"^LOG_EPI_BUFF_SIZE and DRAIN_STAGES must both be 0 .* not 0 and -1$"),
        # tiny's 4 lanes: one lane of codes, so at most 4 stages
        ("tiny", {"LOG_EPI_BUFF_SIZE": 10, "DRAIN_STAGES": 5}, r"^DRAIN_STAGES must be between 1 and 4, not 5$"),
        # 2 lanes: no lane left for a code
        ("tiny", {"LOG_BLOCK": 1, "LOG_EPI_BUFF_SIZE": 10, "DRAIN_STAGES": 1},
         r"^DRAIN_STAGES needs epi words of more than 3 lanes \(BATCH \* BLOCK_OUT\), not 2$"),
        # one 64-byte word, and 2**17 words
        ("v2", {"LOG_EPI_BUFF_SIZE": 6}, rf"^LOG_EPI_BUFF_SIZE {_EPI_BUFFER} 64 bytes, not 6 \(2\*\*0 elements\)$"),
        ("v2", {"LOG_EPI_BUFF_SIZE": 23},
         rf"^LOG_EPI_BUFF_SIZE {_EPI_BUFFER} 64 bytes, not 23 \(2\*\*17 elements\)$"),
    ],
)
def test_config_errors(base: str, changes: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        preset(base).replace(**changes)


def test_smallest_and_largest_drain_units_build() -> None:
    assert TINY_V2.has_drain and TINY_V2.epi_depth == 64 and max_stages(TINY_V2) == 4
    assert preset("tiny").replace(LOG_BATCH=1, LOG_EPI_BUFF_SIZE=6, DRAIN_STAGES=20).epi_depth == 2
    big = V2.replace(LOG_EPI_BUFF_SIZE=22, DRAIN_STAGES=52)
    assert big.epi_depth == 1 << 16 and max_stages(big) == 52


@pytest.mark.parametrize("cfg", [V2, TINY_V2], ids=["v2", "tiny-drain"])
def test_drain_config_json_round_trip(cfg: Config) -> None:
    back = Config.from_json(cfg.to_json())
    assert back == cfg and back.has_drain
    assert back.name == ("v2" if cfg == V2 else "custom")
