"""A few-channel convolution (a stem's 3 input channels) runs on the accelerator: its kernel
windows packed into channels on the host (``Im2Col``), then a 1×1 convolution that fills
the GEMM's input blocks (``passes/legalize.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import ModelProto, helper
from onnx_models import make_model, run_onnxruntime

import openvta
from openvta.compiler.reference import conv2d_nchw
from openvta.graph.ir import Attrs, Device, Op
from openvta.graph.ops.tensor import im2col

RNG = np.random.default_rng(13)


@settings(max_examples=40, deadline=None)
@given(c=st.integers(1, 3), k=st.integers(1, 4), s=st.integers(1, 3), p=st.integers(0, 2), size=st.integers(4, 9))
def test_im2col_then_a_1x1_conv_is_the_conv(c: int, k: int, s: int, p: int, size: int) -> None:
    rng = np.random.default_rng(c * 1000 + k * 100 + s * 10 + p)
    x = rng.integers(-128, 128, (2, c, size, size)).astype(np.int8)
    w = rng.integers(-128, 128, (5, c, k, k)).astype(np.int8)
    if size + 2 * p < k:
        return
    cols = im2col(x, Attrs({"kernel_shape": (k, k), "strides": (s, s), "pads": (p, p, p, p)}))
    assert np.array_equal(conv2d_nchw(cols, w.reshape(5, -1, 1, 1)), conv2d_nchw(x, w, s, p))


def _stem() -> ModelProto:
    weight = (RNG.standard_normal((16, 3, 7, 7)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2], pads=[3, 3, 3, 3], name="stem"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    return make_model(nodes, {"x": ["N", 3, 16, 16]}, ["y"], {"w": weight})


def test_a_stem_runs_on_the_accelerator_exactly() -> None:
    proto = _stem()
    x = RNG.standard_normal((2, 3, 16, 16)).astype(np.float32)
    model = openvta.compile_model(proto, x, config="default")
    conv = next(n for n in model.graph.nodes if n.op is Op.CONV)
    assert conv.placement.device is Device.ACCEL and conv.attrs["kernel_shape"] == (1, 1)
    packing = next(n for n in model.graph.nodes if n.op is Op.IM2COL)
    assert packing.placement.device is Device.CPU
    assert model.graph.notes == ("node stem: its 3 input channels' 7x7 windows packed into 147 channels on the "
                                 "host (im2col), then a 1x1 convolution",)
    np.testing.assert_allclose(model.float_reference(x)["y"], run_onnxruntime(proto, {"x": x})[0],
                               rtol=1e-5, atol=1e-5)
    assert np.array_equal(model.run(x, backend="cycle")["y"], model.reference(x)["y"])


@pytest.mark.parametrize("options", [{"cpu_ops": ["Conv"]}, {"cpu_nodes": ["stem"]}, {"config": "tiny"}])
def test_no_packing_where_the_conv_stays_or_fills_the_block(options: dict) -> None:
    """Forced onto the CPU, it is not packed; on ``tiny`` (4-lane blocks) 3 channels fill it."""
    x = RNG.standard_normal((2, 3, 16, 16)).astype(np.float32)
    model = openvta.compile_model(_stem(), x, **options)
    assert not any(n.op is Op.IM2COL for n in model.graph.nodes) and not model.graph.notes
