"""depthwise_conv2d with groups of several channels (``group_size``): block-diagonal weight
tiles of ``c×c`` blocks, exactly numpy's grouped convolution on the functional simulator
and the cycle model, for random shapes, group sizes and plans; and its refusals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import openvta
from openvta.compiler.ops.common import benchmark_operands
from openvta.compiler.ops.depthwise_conv2d import depthwise_reference, pack_depthwise_kernel
from openvta.isa import preset
from openvta.runtime import Device


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=st.sampled_from(["tiny", "default"]), blocks=st.integers(1, 3), hw=st.integers(3, 8),
       kernel=st.integers(1, 3), stride=st.integers(1, 2), threads=st.integers(1, 2), data=st.data())
def test_grouped_layers_equal_numpy(config: str, blocks: int, hw: int, kernel: int, stride: int, threads: int,
                                    data: st.DataObject) -> None:
    cfg = preset(config)
    group_size = data.draw(st.sampled_from([c for c in (2, 4, 8, 16) if cfg.BLOCK_IN % c == 0]))
    channels = blocks * cfg.BLOCK_IN - data.draw(st.sampled_from([0, group_size] if blocks > 1 else [0]))
    pad = data.draw(st.integers(0, kernel - 1))
    op = openvta.operator("depthwise_conv2d", config=config, channels=channels, hw=hw, kernel=kernel, pad=pad,
                          stride=stride, group_size=group_size, vthreads=threads if blocks > 1 else 1)
    inputs = benchmark_operands(op, 3)
    assert inputs["weight"].shape == (channels, group_size, kernel, kernel)
    program = op.build(inputs)
    for backend in ("functional", "cycle"):
        result = Device(backend).run(program)
        np.testing.assert_array_equal(op.unpack(program.read("out", result.dram)), op.reference(inputs),
                                      err_msg=backend)


def test_the_reference_is_a_grouped_convolution() -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(-5, 5, (1, 4, 5, 5))
    w = rng.integers(-5, 5, (4, 2, 3, 3))
    params = {"stride": 1, "pad": 1, "shift": None, "bias": False, "clip": None, "epilogue": None}
    got = depthwise_reference({"data": x, "weight": w}, params)
    want = np.zeros((1, 4, 5, 5), np.int64)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for o in range(4):
        for i in range(2):
            for dy in range(3):
                for dx in range(3):
                    want[0, o] += w[o, i, dy, dx] * padded[0, (o // 2) * 2 + i, dy:dy + 5, dx:dx + 5]
    assert np.array_equal(got, want)


def test_group_sizes_that_do_not_divide_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^depthwise_conv2d group_size must divide the 12 channels and BLOCK_IN "
                                         r"\(4\), not 3$"):
        openvta.operator("depthwise_conv2d", config="tiny", channels=12, hw=5, kernel=3, group_size=3)
    with pytest.raises(ValueError, match=r"^depthwise kernel must have shape \(C, c, KH, KW\) with c dividing C "
                                         r"and 4, not \(6, 3, 1, 1\)$"):
        pack_depthwise_kernel(np.zeros((6, 3, 1, 1), np.int8), preset("tiny"))
