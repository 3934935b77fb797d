"""Compiled operators against numpy, exactly, with the race checker on."""

from __future__ import annotations

import numpy as np
import pytest

import openvta
from openvta.compiler import conv2d, dense, elementwise
from openvta.compiler.workloads import RESNET18, random_inputs
from openvta.isa import Counter, preset
from openvta.runtime import Device
from openvta.sim.functional import run


def _check(op, inputs, backend: str = "functional") -> None:
    program = op.build(inputs)
    result = Device(backend).run(program)  # functional: race checker on
    out = op.unpack(program.read("out", result.dram))
    np.testing.assert_array_equal(out, op.reference(inputs))


def _inputs(rng, data_shape, weight_shape=None, bias_len=None):
    inputs = {"data": rng.integers(-128, 128, data_shape, dtype=np.int8)}
    if weight_shape is not None:
        inputs["weight"] = rng.integers(-128, 128, weight_shape, dtype=np.int8)
    if bias_len is not None:
        inputs["bias"] = rng.integers(-(2**14), 2**14, (bias_len,), dtype=np.int32)
    return inputs


@pytest.mark.parametrize("shape", [(1, 16, 16), (4, 40, 24), (16, 64, 48), (3, 17, 5), (33, 20, 9)])
@pytest.mark.parametrize("vthreads", [1, 2])
def test_dense_matches_numpy(cfg, shape, vthreads) -> None:
    batch, fin, fout = shape
    rng = np.random.default_rng(sum(shape))
    o_t = -(-fout // cfg.BLOCK_OUT)
    if o_t < vthreads:  # fewer output blocks than threads: even an uneven split leaves a thread none
        pytest.skip(f"{vthreads} threads cannot split {o_t} output blocks")
    op = dense(cfg, batch=batch, in_features=fin, out_features=fout, vthreads=vthreads)
    _check(op, _inputs(rng, (batch, fin), (fout, fin), fout))


def test_dense_without_bias_or_clip_wraps_to_int8() -> None:
    cfg = preset("tiny")
    op = dense(cfg, batch=4, in_features=12, out_features=8, shift=None, bias=False, clip=None)
    rng = np.random.default_rng(1)
    _check(op, _inputs(rng, (4, 12), (8, 12)))


@pytest.mark.parametrize("name", [f"C{i}" for i in range(2, 12)])
@pytest.mark.parametrize("vthreads", [1, 2, 4])
def test_resnet18_layers_full_channels(name: str, vthreads: int) -> None:
    """Every ResNet-18 layer with its full channel counts; spatial size cut to 14 (or 7)."""
    wl = RESNET18[name]
    hw = min(wl.hw, 14)
    cfg = preset("default")
    op = conv2d(cfg, ci=wl.in_channels, co=wl.out_channels, hw=hw, kernel=wl.kernel, pad=wl.pad,
                stride=wl.stride, vthreads=vthreads)
    rng = np.random.default_rng(int(name[1:]))
    _check(op, _inputs(rng, (1, wl.in_channels, hw, hw),
                       (wl.out_channels, wl.in_channels, wl.kernel, wl.kernel), wl.out_channels))


@pytest.mark.parametrize("params", [
    dict(ci=8, co=8, hw=8, kernel=3, pad=1, stride=1),
    dict(ci=6, co=12, hw=9, kernel=3, pad=1, stride=2),
    dict(ci=16, co=8, hw=7, kernel=1, pad=0, stride=1),
    dict(ci=4, co=4, hw=10, kernel=5, pad=2, stride=1),
    dict(ci=4, co=8, hw=11, kernel=7, pad=3, stride=2),
])
def test_conv2d_on_every_preset(cfg, params) -> None:
    rng = np.random.default_rng(params["hw"])
    op = conv2d(cfg, **params)
    ci, co, hw, k = params["ci"], params["co"], params["hw"], params["kernel"]
    _check(op, _inputs(rng, (1, ci, hw, hw), (co, ci, k, k), co))


def test_conv2d_batch_above_one_and_cycle_backend() -> None:
    cfg = preset("tiny").replace(LOG_BATCH=1, LOG_ACC_BUFF_SIZE=13)
    op = conv2d(cfg, n=2, ci=4, co=4, hw=6, kernel=3, pad=1)
    rng = np.random.default_rng(3)
    _check(op, _inputs(rng, (2, 4, 6, 6), (4, 4, 3, 3), 4), backend="cycle")


@pytest.mark.parametrize("kwargs", [dict(shift=4), dict(bias=True), dict(clip=(-3, 9)),
                                    dict(relu=True), dict(shift=2, bias=True, relu=True)])
def test_elementwise(cfg, kwargs) -> None:
    op = elementwise(cfg, batch=2, channels=3 * cfg.BLOCK_OUT, **kwargs)
    rng = np.random.default_rng(5)
    inputs = {"data": rng.integers(-(2**24), 2**24, (2, 3 * cfg.BLOCK_OUT), dtype=np.int32)}
    if kwargs.get("bias"):
        inputs["bias"] = rng.integers(-(2**10), 2**10, (3 * cfg.BLOCK_OUT,), dtype=np.int32)
    _check(op, inputs)


def test_virtual_threads_hide_latency_on_the_cycle_model() -> None:
    operands = random_inputs("C8", seed=0)
    cycles = []
    for vthreads in (1, 2):
        program = openvta.compile("conv2d", layer="resnet18.C8", vthreads=vthreads, config="vta",
                                  inputs={k: operands[k] for k in ("data", "weight", "bias")})
        report = openvta.simulate(program, backend="cycle").report
        assert report is not None
        cycles.append(report.cycles)
    assert cycles[1] < cycles[0]


def test_compiled_program_counts_the_layers_macs() -> None:
    wl = RESNET18["C11"]
    program = openvta.compile("conv2d", layer="resnet18.C11", vthreads=2, seed=1)
    counters = run(program).counters
    assert 2 * counters[Counter.MACS] == wl.ops


@pytest.mark.parametrize("params", [
    dict(ci=8, co=8, hw=8, kernel=3, pad=1, stride=1),
    dict(ci=6, co=12, hw=9, kernel=3, pad=1, stride=2),
    dict(ci=4, co=8, hw=11, kernel=7, pad=3, stride=2),
])
@pytest.mark.parametrize("vthreads", [1, 2])
def test_conv2d_padded_with_minus_128(cfg, params, vthreads) -> None:
    """pad_value=-128 (data whose zero point is -128): the padding the DMA writes is LOAD INP's
    pad_min, and the result is the numpy convolution of the data padded with -128."""
    rng = np.random.default_rng(params["hw"] + vthreads)
    op = conv2d(cfg, pad_value=-128, vthreads=vthreads, shift=12, bias=False, clip=(-128, 127), **params)
    ci, co, hw, k = params["ci"], params["co"], params["hw"], params["kernel"]
    inputs = _inputs(rng, (1, ci, hw, hw), (co, ci, k, k))
    _check(op, inputs)
    zero_padded = conv2d(cfg, vthreads=vthreads, shift=12, bias=False, clip=(-128, 127), **params).reference(inputs)
    assert not np.array_equal(op.reference(inputs), zero_padded)  # the padding's value shows
    assert any(insn.pad_min for insn in op.build(inputs).instructions() if hasattr(insn, "pad_min"))


def test_depthwise_padded_with_minus_128_on_the_cycle_model() -> None:
    from openvta.compiler.ops import REGISTRY
    op = REGISTRY["depthwise_conv2d"].operator("tiny", channels=8, hw=6, kernel=3, pad=1, pad_value=-128)
    rng = np.random.default_rng(9)
    _check(op, _inputs(rng, (1, 8, 6, 6), (8, 1, 3, 3), 8), backend="cycle")


@pytest.mark.parametrize(("value", "message"), [
    (-127, r"^conv2d pad_value must be 0 or -128 \(what the DMA pads with\), not -127$"),
    (-1, r"^conv2d pad_value must be 0 or -128 \(what the DMA pads with\), not -1$"),
    (5, r"^conv2d pad_value must be an integer in -128\.\.0 or None, not 5$"),
])
def test_a_pad_value_the_dma_cannot_write_is_refused(value, message) -> None:
    with pytest.raises(ValueError, match=message):
        conv2d(preset("tiny"), ci=8, co=8, hw=8, kernel=3, pad=1, pad_value=value)


def test_a_padding_value_the_dma_cannot_write_is_a_lowering_error(monkeypatch) -> None:
    """Past conv2d's own check (a schedule of one's own could pad with anything): lowering
    names the padding stage."""
    import openvta.compiler.ops.conv2d as conv2d_module
    from openvta.compiler import LoweringError

    monkeypatch.setattr(conv2d_module, "check_pad_value", lambda name, value: 5)
    with pytest.raises(LoweringError, match=r"^lower data_pad: padding must be 0 or -128 \(the DMA pads with "
                                            r"zeros, or with -128 by pad_min\)$"):
        conv2d(preset("tiny"), ci=8, co=8, hw=8, kernel=3, pad=1, pad_value=-128).build(
            _inputs(np.random.default_rng(0), (1, 8, 8, 8), (8, 8, 3, 3), 8))
