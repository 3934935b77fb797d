"""Config (docs/ISA.md §1): presets, derived widths and depths, JSON, validation errors."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import openvta.isa
from openvta.isa import ISA_KEYS, MACHINE_KEYS, PRESETS, V2_KEYS, Config, ConfigError, DrainOp, MemoryType, preset
from openvta.isa.config import V2_DRAIN
from openvta.isa.encoding import _pack_layout

from isa_reference import TOTAL_BITS, log_depths, reference_pack, spec_widths

PRESET_NAMES = ("default", "vta", "v2", "small", "tiny")

# VTA's shipped 3rdparty/vta-hw/config/vta_config.json, verbatim.
VTA_CONFIG_JSON = """{
  "TARGET" : "sim",
  "HW_VER" : "0.0.2",
  "LOG_INP_WIDTH" : 3,
  "LOG_WGT_WIDTH" : 3,
  "LOG_ACC_WIDTH" : 5,
  "LOG_BATCH" : 0,
  "LOG_BLOCK" : 4,
  "LOG_UOP_BUFF_SIZE" : 15,
  "LOG_INP_BUFF_SIZE" : 15,
  "LOG_WGT_BUFF_SIZE" : 18,
  "LOG_ACC_BUFF_SIZE" : 17
}
"""


def _params(cfg: Config) -> dict[str, int]:
    return {key: getattr(cfg, key) for key in ISA_KEYS}


# -- presets ---------------------------------------------------------------------------


def test_presets_are_the_named_configs():
    assert set(PRESETS) == set(PRESET_NAMES)
    for name in PRESET_NAMES:
        assert preset(name) is PRESETS[name]
        assert isinstance(preset(name), Config)
        # `default` is machine v2 under another name: one configuration, named `v2`.
        assert preset(name).name == ("v2" if name == "default" else name)
    assert preset("default") is preset("v2")
    assert preset("vta") == Config()
    assert len({PRESETS[name] for name in PRESET_NAMES}) == 4


def test_v2_preset_is_vta_with_a_drain_unit():
    # docs/ISA.md §9: v2 is VTA's machine with a 16 KiB epi buffer and twelve drain stages.
    v2 = preset("v2")
    assert v2 == preset("vta").replace(LOG_EPI_BUFF_SIZE=14, DRAIN_STAGES=12)
    assert v2.has_drain and preset("default").has_drain and not preset("vta").has_drain
    assert (v2.LOG_EPI_DEPTH, v2.epi_depth) == (8, 256)
    assert preset("vta").epi_depth == 0
    for name in ("small", "tiny"):
        assert not preset(name).has_drain


def test_vta_preset_is_vta_default_table():
    # docs/ISA.md §1 "vta" column.
    expected = {
        "LOG_INP_WIDTH": 3, "LOG_WGT_WIDTH": 3, "LOG_ACC_WIDTH": 5, "LOG_BATCH": 0,
        "LOG_BLOCK": 4, "LOG_UOP_BUFF_SIZE": 15, "LOG_INP_BUFF_SIZE": 15,
        "LOG_WGT_BUFF_SIZE": 18, "LOG_ACC_BUFF_SIZE": 17,
    }
    assert _params(preset("vta")) == expected
    assert _params(preset("default")) == expected
    assert preset("vta") == Config()
    assert openvta.isa.preset is preset


def test_default_derived_values():
    cfg = preset("default")
    # docs/ISA.md §1, the bracketed defaults.
    assert (cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT) == (1, 16, 16)
    assert (cfg.INP_WIDTH, cfg.WGT_WIDTH, cfg.ACC_WIDTH, cfg.OUT_WIDTH) == (8, 8, 32, 8)
    assert (cfg.inp_elem_bytes, cfg.wgt_elem_bytes, cfg.acc_elem_bytes,
            cfg.out_elem_bytes, cfg.uop_elem_bytes) == (16, 256, 64, 16, 4)
    assert (cfg.inp_depth, cfg.wgt_depth, cfg.acc_depth, cfg.out_depth,
            cfg.uop_depth) == (2048, 1024, 2048, 2048, 8192)
    assert (cfg.LOG_UOP_DEPTH, cfg.LOG_INP_DEPTH, cfg.LOG_WGT_DEPTH,
            cfg.LOG_ACC_DEPTH) == (13, 11, 10, 11)
    assert cfg.macs_per_uop == 256


def test_vta_elem_bytes_per_memory_type():
    cfg = preset("vta")
    # docs/ISA.md §4: UOP 4 B, WGT 256 B, INP 16 B, ACC 64 B, OUT 16 B, ACC_8BIT 16 B;
    # §9: EPI 64 B (an acc tile), EPI_8BIT 16 B (an out tile).
    expected = {"UOP": 4, "WGT": 256, "INP": 16, "ACC": 64, "OUT": 16, "ACC_8BIT": 16, "EPI": 64, "EPI_8BIT": 16}
    assert {m.name: cfg.elem_bytes(m) for m in MemoryType} == expected
    assert cfg.max_elem_bytes == 256
    # Without a drain unit the epi buffer has no words; v2's has 2**14 / 64.
    assert cfg.buffer_depth(MemoryType.EPI) == cfg.buffer_depth(MemoryType.EPI_8BIT) == 0
    v2 = preset("v2")
    assert {m.name: v2.elem_bytes(m) for m in MemoryType} == expected
    assert v2.buffer_depth(MemoryType.EPI) == v2.buffer_depth(MemoryType.EPI_8BIT) == 256


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_derived_values_follow_the_formulas(name):
    cfg = preset(name)
    batch, block = 2 ** cfg.LOG_BATCH, 2 ** cfg.LOG_BLOCK
    inp_bytes, wgt_bytes, acc_bytes = batch * block, block * block, batch * block * 4
    assert (cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT) == (batch, block, block)
    assert (cfg.inp_elem_bytes, cfg.wgt_elem_bytes, cfg.acc_elem_bytes,
            cfg.out_elem_bytes) == (inp_bytes, wgt_bytes, acc_bytes, batch * block)
    depths = {
        "uop": 2 ** cfg.LOG_UOP_BUFF_SIZE // 4,
        "inp": 2 ** cfg.LOG_INP_BUFF_SIZE // inp_bytes,
        "wgt": 2 ** cfg.LOG_WGT_BUFF_SIZE // wgt_bytes,
        "acc": 2 ** cfg.LOG_ACC_BUFF_SIZE // acc_bytes,
    }
    assert (cfg.uop_depth, cfg.inp_depth, cfg.wgt_depth, cfg.acc_depth) == tuple(depths.values())
    assert cfg.out_depth == cfg.acc_depth
    for kind, depth in depths.items():
        assert 2 ** getattr(cfg, f"LOG_{kind.upper()}_DEPTH") == depth
    assert cfg.macs_per_uop == batch * block * block
    epi_depth = 2 ** cfg.LOG_EPI_BUFF_SIZE // acc_bytes if cfg.DRAIN_STAGES else 0
    assert cfg.epi_depth == epi_depth
    by_type = {
        MemoryType.UOP: (4, depths["uop"]),
        MemoryType.WGT: (wgt_bytes, depths["wgt"]),
        MemoryType.INP: (inp_bytes, depths["inp"]),
        MemoryType.ACC: (acc_bytes, depths["acc"]),
        MemoryType.OUT: (batch * block, depths["acc"]),
        MemoryType.ACC_8BIT: (batch * block, depths["acc"]),
        MemoryType.EPI: (acc_bytes, epi_depth),
        MemoryType.EPI_8BIT: (batch * block, epi_depth),
    }
    for memory_type, (nbytes, depth) in by_type.items():
        assert cfg.elem_bytes(memory_type) == nbytes
        assert cfg.buffer_depth(memory_type) == depth


def test_unknown_preset():
    message = r"^preset must be one of default, small, tiny, v2, vta, not 'huge'$"
    with pytest.raises(ConfigError, match=message):
        preset("huge")


def test_custom_config_name():
    assert Config(LOG_UOP_BUFF_SIZE=14).name == "custom"


# -- frozen, hashable ------------------------------------------------------------------


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_config_is_frozen_and_hashable(name):
    cfg = preset(name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.LOG_BLOCK = 1
    with pytest.raises(TypeError):
        cfg.extras["TARGET"] = "sim"
    twin = Config.from_dict(cfg.to_dict())
    assert twin == cfg and twin is not cfg
    assert hash(twin) == hash(cfg)
    assert {cfg: 1}[twin] == 1


def test_extras_do_not_affect_equality_and_are_copied():
    extras = {"TARGET": "sim"}
    cfg = Config(extras=extras)
    extras["TARGET"] = "pynq"
    assert cfg.extras == {"TARGET": "sim"}
    assert cfg == Config() and hash(cfg) == hash(Config())


def test_replace_validates():
    assert preset("default").replace(LOG_UOP_BUFF_SIZE=14).uop_depth == 4096
    with pytest.raises(ConfigError, match=r"^LOG_BLOCK must be between 1 and 6, not 9$"):
        preset("default").replace(LOG_BLOCK=9)


# -- JSON ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_json_round_trip_keeps_extra_keys(name):
    cfg = Config.from_dict({**preset(name).to_dict(), "TARGET": "sim", "CLOCK_MHZ": 100})
    text = cfg.to_json()
    values = json.loads(text)
    assert values["TARGET"] == "sim" and values["CLOCK_MHZ"] == 100
    for key in ISA_KEYS + MACHINE_KEYS:
        assert values[key] == getattr(preset(name), key)
    # machine v2's keys are written only when set: a VTA configuration's JSON is unchanged.
    for key in V2_KEYS:
        assert values.get(key, 0) == getattr(preset(name), key)
        assert (key in values) == bool(getattr(preset(name), key))
    back = Config.from_json(text)
    assert back == preset(name)
    assert dict(back.extras) == {"TARGET": "sim", "CLOCK_MHZ": 100}
    assert back.to_json() == text


def test_to_dict_orders_isa_then_machine_then_extras():
    cfg = Config(extras={"TARGET": "sim"})
    assert list(cfg.to_dict()) == list(ISA_KEYS) + list(MACHINE_KEYS) + ["TARGET"]
    v2 = preset("v2").replace(extras={"TARGET": "sim"})
    assert list(v2.to_dict()) == list(ISA_KEYS) + list(MACHINE_KEYS) + ["LOG_EPI_BUFF_SIZE", "DRAIN_STAGES", "TARGET"]
    lean = v2.replace(DRAIN_STAGES=2, DRAIN_OPS=0x0440)
    assert list(lean.to_dict()) == list(ISA_KEYS) + list(MACHINE_KEYS) + list(V2_KEYS) + ["TARGET"]
    assert Config.from_json(lean.to_json()) == lean


@pytest.mark.parametrize(("changes", "message"), [
    ({"DRAIN_OPS": 4}, "DRAIN_OPS needs a drain unit (DRAIN_STAGES is 0), not 4"),
    ({**V2_DRAIN, "DRAIN_OPS": -1},
     "DRAIN_OPS must be 0 (every operation in every stage) or one byte per stage, not -1"),
    ({**V2_DRAIN, "DRAIN_STAGES": 2, "DRAIN_OPS": 0x010101},
     "DRAIN_OPS gives operation sets to 3 stages, but the drain unit has 2 (DRAIN_STAGES)"),
    ({**V2_DRAIN, "DRAIN_STAGES": 3, "DRAIN_OPS": 0x010001},
     "DRAIN_OPS gives stage 1 the operation set 0x00: it must hold at least one operation and only bits 0-6 "
     "(DrainOp)"),
    ({**V2_DRAIN, "DRAIN_STAGES": 1, "DRAIN_OPS": 0x81},
     "DRAIN_OPS gives stage 0 the operation set 0x81: it must hold at least one operation and only bits 0-6 "
     "(DrainOp)"),
])
def test_drain_ops_errors(changes, message):
    with pytest.raises(ConfigError) as info:
        Config(**changes)
    assert str(info.value) == message


def test_drain_stage_ops():
    assert preset("v2").drain_stage_ops == (frozenset(DrainOp),) * 12
    lean = Config(**{**V2_DRAIN, "DRAIN_STAGES": 3, "DRAIN_OPS": 0x40_04_28})
    assert lean.drain_stage_ops == (frozenset({DrainOp.SHR, DrainOp.RSHR}), frozenset({DrainOp.ADD}),
                                    frozenset({DrainOp.CLIP}))


def test_vta_config_json_loads():
    cfg = Config.from_json(VTA_CONFIG_JSON)
    assert cfg == preset("vta")
    assert cfg.name == "vta"
    assert dict(cfg.extras) == {"TARGET": "sim", "HW_VER": "0.0.2"}
    assert Config.from_json(cfg.to_json()).extras == cfg.extras


def test_from_json_missing_keys_take_defaults():
    cfg = Config.from_json('{"LOG_UOP_BUFF_SIZE": 14}')
    assert cfg == Config(LOG_UOP_BUFF_SIZE=14)
    assert cfg.extras == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", r"^configuration is not valid JSON: Expecting property name enclosed in double "
              r"quotes: line 1 column 2 \(char 1\)$"),
        ("", r"^configuration is not valid JSON: Expecting value: line 1 column 1 \(char 0\)$"),
        ("[3, 4]", r"^configuration must be a JSON object, not list$"),
        ('"LOG_BLOCK"', r"^configuration must be a JSON object, not str$"),
        ("4", r"^configuration must be a JSON object, not int$"),
        ('{"LOG_BLOCK": "4"}', r"^LOG_BLOCK must be an integer, not '4'$"),
        ('{"LOG_BLOCK": 4.0}', r"^LOG_BLOCK must be an integer, not 4\.0$"),
        ('{"LOG_BATCH": null}', r"^LOG_BATCH must be an integer, not None$"),
    ],
)
def test_from_json_errors(text, message):
    with pytest.raises(ConfigError, match=message):
        Config.from_json(text)


# -- validation ------------------------------------------------------------------------

_BUFFER = r"must give a buffer of 2 to 2\*\*16 elements \(sram_base is 16 bits\), not"
_WIDTHS = r"\(openvta implements int8 inputs and weights with int32 accumulators\)"
_REDUCE = r"reduce the buffer sizes of the configuration"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"LOG_BATCH": "0"}, r"^LOG_BATCH must be an integer, not '0'$"),
        ({"LOG_BLOCK": True}, r"^LOG_BLOCK must be an integer, not True$"),
        ({"LOG_ACC_BUFF_SIZE": 17.0}, r"^LOG_ACC_BUFF_SIZE must be an integer, not 17\.0$"),
        ({"DEP_QUEUE_DEPTH": None}, r"^DEP_QUEUE_DEPTH must be an integer, not None$"),
        ({"LOG_INP_WIDTH": 4}, rf"^LOG_INP_WIDTH must be 3 {_WIDTHS}, not 4$"),
        ({"LOG_WGT_WIDTH": 2}, rf"^LOG_WGT_WIDTH must be 3 {_WIDTHS}, not 2$"),
        ({"LOG_ACC_WIDTH": 4}, rf"^LOG_ACC_WIDTH must be 5 {_WIDTHS}, not 4$"),
        ({"LOG_BATCH": -1}, r"^LOG_BATCH must be between 0 and 4, not -1$"),
        ({"LOG_BATCH": 5}, r"^LOG_BATCH must be between 0 and 4, not 5$"),
        ({"LOG_BLOCK": 0}, r"^LOG_BLOCK must be between 1 and 6, not 0$"),
        ({"LOG_BLOCK": 7}, r"^LOG_BLOCK must be between 1 and 6, not 7$"),
        ({"LOG_UOP_BUFF_SIZE": 2}, rf"^LOG_UOP_BUFF_SIZE {_BUFFER} 2 \(2\*\*0 elements\)$"),
        ({"LOG_UOP_BUFF_SIZE": 19}, rf"^LOG_UOP_BUFF_SIZE {_BUFFER} 19 \(2\*\*17 elements\)$"),
        ({"LOG_INP_BUFF_SIZE": 4}, rf"^LOG_INP_BUFF_SIZE {_BUFFER} 4 \(2\*\*0 elements\)$"),
        ({"LOG_INP_BUFF_SIZE": 21}, rf"^LOG_INP_BUFF_SIZE {_BUFFER} 21 \(2\*\*17 elements\)$"),
        ({"LOG_WGT_BUFF_SIZE": 7}, rf"^LOG_WGT_BUFF_SIZE {_BUFFER} 7 \(2\*\*-1 elements\)$"),
        ({"LOG_WGT_BUFF_SIZE": 25}, rf"^LOG_WGT_BUFF_SIZE {_BUFFER} 25 \(2\*\*17 elements\)$"),
        ({"LOG_ACC_BUFF_SIZE": 6}, rf"^LOG_ACC_BUFF_SIZE {_BUFFER} 6 \(2\*\*0 elements\)$"),
        ({"LOG_ACC_BUFF_SIZE": 23}, rf"^LOG_ACC_BUFF_SIZE {_BUFFER} 23 \(2\*\*17 elements\)$"),
        ({"CMD_QUEUE_DEPTH": 0}, r"^CMD_QUEUE_DEPTH must be between 1 and 65536, not 0$"),
        ({"CMD_QUEUE_DEPTH": 65537}, r"^CMD_QUEUE_DEPTH must be between 1 and 65536, not 65537$"),
        ({"DEP_QUEUE_DEPTH": 0}, r"^DEP_QUEUE_DEPTH must be between 1 and 65536, not 0$"),
        ({"LOG_BUS_WIDTH": 2}, r"^LOG_BUS_WIDTH must be between 3 and 10, not 2$"),
        ({"LOG_BUS_WIDTH": 11}, r"^LOG_BUS_WIDTH must be between 3 and 10, not 11$"),
        # A 2**16-deep accumulator: GEMM word 1 needs 2*16 + 2*11 + 2*10 = 74 bits.
        ({"LOG_ACC_BUFF_SIZE": 22},
         rf"^GEMM field wgt_factor_in \(10 bits at bit 128\) does not fit in 128 bits; {_REDUCE}$"),
        # GEMM word 1 fits (2*12 + 2*10 + 2*10 = 64) but ALU's does not (4*12 + 20 = 68).
        ({"LOG_ACC_BUFF_SIZE": 18, "LOG_INP_BUFF_SIZE": 14, "LOG_WGT_BUFF_SIZE": 18},
         rf"^ALU field imm \(16 bits at bit 128\) does not fit in 128 bits; {_REDUCE}$"),
        # Instructions fit, the micro-op does not: 11 + 11 + 11 = 33 bits.
        ({"LOG_WGT_BUFF_SIZE": 19, "LOG_INP_BUFF_SIZE": 14},
         rf"^micro-op field wgt_idx \(11 bits at bit 22\) does not fit in 32 bits; {_REDUCE}$"),
    ],
)
def test_validation_errors(changes, message):
    with pytest.raises(ConfigError, match=message):
        Config(**changes)


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_zero_width_field_is_rejected():
    # Unreachable through Config (a buffer of one element is rejected first); the
    # packer still refuses a field without bits.
    message = r"^GEMM field uop_bgn must be at least 1 bit wide, not 0$"
    with pytest.raises(ConfigError, match=message):
        _pack_layout("GEMM", [("uop_bgn", 0, False)], 128)


# -- sweep against the naive model -------------------------------------------------------

_LABEL = {"memory": "LOAD/STORE", "gemm": "GEMM", "alu": "ALU", "uop": "micro-op"}

@st.composite
def params(draw: st.DrawFn) -> dict[str, int]:
    """Raw log2 parameters, drawn through their depths so most land near the edges."""
    log_batch, log_block = draw(st.integers(0, 4)), draw(st.integers(1, 6))
    tile_logs = {"UOP": 2, "INP": log_batch + log_block, "WGT": 2 * log_block,
                 "ACC": log_batch + log_block + 2}
    values = {"LOG_BATCH": log_batch, "LOG_BLOCK": log_block}
    for key, tile_log in tile_logs.items():
        values[f"LOG_{key}_BUFF_SIZE"] = draw(st.integers(0, 17)) + tile_log
    return values


def _expected_error(values: dict[str, int]) -> str | None:
    """The anchored message the naive model predicts, or None if the config must build."""
    depths = log_depths(values)
    for key in ("UOP", "INP", "WGT", "ACC"):
        if not 1 <= depths[f"LOG_{key}_DEPTH"] <= 16:
            name = f"LOG_{key}_BUFF_SIZE"
            return rf"^{name} {_BUFFER} {values[name]} "
    for fmt, widths in spec_widths(depths).items():
        rows = reference_pack(widths, TOTAL_BITS[fmt])
        if isinstance(rows, str):
            return (rf"^{_LABEL[fmt]} field {rows} \(\d+ bits at bit \d+\) "
                    rf"does not fit in {TOTAL_BITS[fmt]} bits; {_REDUCE}$")
    return None


@settings(max_examples=300, deadline=None)
@given(params())
def test_any_config_is_accepted_exactly_when_the_spec_layout_fits(values):
    message = _expected_error(values)
    if message is not None:
        with pytest.raises(ConfigError, match=message):
            Config(**values)
    else:
        layouts = openvta.isa.layouts_of(Config(**values))
        for fmt, widths in spec_widths(log_depths(values)).items():
            rows = reference_pack(widths, TOTAL_BITS[fmt])
            assert [(f.name, f.offset, f.width) for f in layouts[fmt].fields] == rows
