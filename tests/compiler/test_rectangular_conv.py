"""conv2d and depthwise_conv2d on rectangular data (``hw`` rows of ``w`` columns).

The kernel stays square, with one stride and one padding; everything the data's width
decides (output columns, column tiles, the plan space, features, used input, logical shapes,
ops, the graph's matcher, the kernel key) is checked against a count or a model of its own.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, TypeAlias

import numpy as np
import pytest

import naive_models
import openvta
from openvta.compiler.kernel_key import kernel_key
from openvta.compiler.ops import REGISTRY
from openvta.compiler.ops.common import out_size, tile_sizes
from openvta.compiler.ops.conv2d import Conv2dPlan
from openvta.compiler.ops.depthwise_conv2d import DepthwisePlan
from openvta.compiler.ops.descriptor import Anchor
from openvta.isa import preset
from openvta.runtime.program import program_bytes

TINY = preset("tiny")

#: (operator, shape, forced plan or None): padded, strided, 1×1, strided 1×1 (rows only),
#: taller than wide, and tail tiles in width (13 columns in tiles of 5, 7 in tiles of 3)
CASES = [
    ("conv2d", dict(ci=8, co=8, hw=5, w=11, kernel=3, pad=1), None),
    ("conv2d", dict(ci=8, co=12, hw=9, w=14, kernel=3, pad=1, stride=2), None),
    ("conv2d", dict(ci=4, co=8, hw=4, w=9, kernel=1), None),
    ("conv2d", dict(ci=8, co=8, hw=7, w=12, kernel=1, stride=2), None),
    ("conv2d", dict(ci=4, co=4, hw=12, w=3, kernel=3), None),
    ("conv2d", dict(ci=8, co=8, hw=4, w=13, kernel=3, pad=1), Conv2dPlan(2, 4, 5, 1, 1, "co")),
    ("conv2d", dict(ci=8, co=8, hw=6, w=13, kernel=1, stride=2), Conv2dPlan(1, 1, 3, 2, 3, "y")),
    ("depthwise_conv2d", dict(channels=8, hw=5, w=12, kernel=3, pad=1, stride=2), None),
    ("depthwise_conv2d", dict(channels=8, hw=7, w=3, kernel=3, pad=1), None),
    ("depthwise_conv2d", dict(channels=4, hw=3, w=10, kernel=1), None),
    ("depthwise_conv2d", dict(channels=8, hw=4, w=13, kernel=3, pad=1), DepthwisePlan(1, 4, 5, 2, "co")),
    ("depthwise_conv2d", dict(channels=8, hw=6, w=7, kernel=3, pad=2, stride=2, group_size=2),
     DepthwisePlan(2, 2, 3, 1, "co")),
]
Plan: TypeAlias = Conv2dPlan | DepthwisePlan | None
IDS = [f"{name}-{'-'.join(f'{k}{v}' for k, v in shape.items())}" for name, shape, _ in CASES]


def _operator(name: str, shape: dict, plan: Plan) -> openvta.compiler.Operator:
    forced: dict[str, Any] = {} if plan is None else {"plan": plan, "vthreads": plan.vthreads}
    return REGISTRY[name].operator(TINY, **shape, **forced)


def _naive(name: str, shape: dict, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The layer from naive_models' seven loops and per-element requantization."""
    groups = shape["channels"] // shape.get("group_size", 1) if name == "depthwise_conv2d" else 1
    acc = naive_models.conv2d(inputs["data"], inputs["weight"], shape.get("stride", 1), shape.get("pad", 0),
                              groups)
    return naive_models.shift_bias_clip(acc, 8, inputs["bias"])


@pytest.mark.parametrize(("name", "shape", "plan"), CASES, ids=IDS)
@pytest.mark.parametrize("backend", ["functional", "cycle"])
def test_rectangular_layers_equal_the_naive_model(name: str, shape: dict, plan: Plan, backend: str) -> None:
    op = _operator(name, shape, plan)
    oh = out_size(shape["hw"], shape["kernel"], shape.get("pad", 0), shape.get("stride", 1))
    ow = out_size(shape["w"], shape["kernel"], shape.get("pad", 0), shape.get("stride", 1))
    if plan is not None:
        assert op.plan == plan and ow % plan.xb  # a tail tile in width
        assert REGISTRY[name].plan_refusals(op) == []
    inputs = REGISTRY[name].random_operands(op, shape["w"])
    expected = _naive(name, shape, inputs)
    assert expected.shape[2:] == (oh, ow)
    np.testing.assert_array_equal(op.reference(inputs), expected)
    result = openvta.simulate(op.build(inputs), backend=backend)  # functional: race checker on
    np.testing.assert_array_equal(result["out"], expected)


@pytest.mark.parametrize(("name", "shape", "plan"), CASES, ids=IDS)
def test_what_the_width_decides(name: str, shape: dict, plan: Plan) -> None:
    """Logical shapes, ops, used input and the plan space's column tiles follow ``w``."""
    op = _operator(name, shape, plan)
    hw, w, kernel, pad, stride = shape["hw"], shape["w"], shape["kernel"], shape.get("pad", 0), shape.get("stride", 1)
    oh, ow = out_size(hw, kernel, pad, stride), out_size(w, kernel, pad, stride)
    n, ci = 1, shape["ci"] if name == "conv2d" else shape["channels"]
    co = shape["co"] if name == "conv2d" else ci
    assert op.logical_shapes["data"] == (n, ci, hw, w) and op.logical_shapes["out"] == (n, co, oh, ow)
    per_output = ci * kernel * kernel if name == "conv2d" else shape.get("group_size", 1) * kernel * kernel
    assert op.ops == 2 * n * co * oh * ow * per_output
    rows = {y * stride + k - pad for y in range(oh) for k in range(kernel)} & set(range(hw))
    cols = {x * stride + k - pad for x in range(ow) for k in range(kernel)} & set(range(w))
    assert op.used_bytes("data") == n * ci * len(rows) * len(cols)
    spec = REGISTRY[name]
    knobs = {knob.name: knob.values for knob in spec.plans.knobs(TINY, op.params)}
    assert knobs["yb"] == tuple(tile_sizes(oh)) and knobs["xb"] == tuple(tile_sizes(ow))
    features = spec.plans.features(TINY, op.params, spec.plans.of_operator(op) or {})
    assert (features["oh"], features["ow"]) == (oh, ow)
    assert features["out_bytes"] == -(-co // TINY.BLOCK_OUT) * oh * ow * TINY.BATCH * TINY.BLOCK_OUT


COUNTERS = {"inp_bytes": "inp_load_bytes", "wgt_bytes": "wgt_load_bytes", "acc_bytes": "acc_load_bytes",
            "out_bytes": "out_store_bytes"}


@pytest.mark.parametrize(("name", "shape"), [(name, shape) for name, shape, _ in CASES[:4] + CASES[7:8]])
def test_the_features_bytes_are_those_a_rectangular_program_moves(name: str, shape: dict) -> None:
    spec = REGISTRY[name]
    params = spec.operator(TINY, **shape).params
    knobs = spec.plans.knobs(TINY, params)
    fitting = [dict(zip([k.name for k in knobs], values)) for values in itertools.product(*(k.values for k in knobs))]
    fitting = [k for k in fitting if not spec.plans.check(TINY, params, k)]
    assert fitting
    for chosen in fitting[::max(1, len(fitting) // 5)]:
        op = spec.operator(TINY, **shape, **spec.plan_kwargs(chosen))
        counters = openvta.simulate(op.build(), backend="functional").counters
        named = spec.plans.features(TINY, params, chosen)
        assert {key: named[key] for key in COUNTERS} == {key: counters[c] for key, c in COUNTERS.items()}, chosen


@pytest.mark.parametrize("name", ["conv2d", "depthwise_conv2d"])
def test_square_data_is_w_none_in_params_key_and_program(name: str) -> None:
    spec = REGISTRY[name]
    square = spec.operator(TINY, **spec.example)
    explicit = spec.operator(TINY, **spec.example, w=spec.example["hw"])
    assert square.params["w"] is None and explicit.params["w"] is None
    assert kernel_key(square) == kernel_key(explicit) and ", w=" not in kernel_key(square)
    assert program_bytes(square.build()) == program_bytes(explicit.build())
    wide = spec.operator(TINY, **{**spec.example, "w": spec.example["hw"] + 3})
    assert f"hw={spec.example['hw']}, w={spec.example['hw'] + 3}, kernel=" in kernel_key(wide)


@pytest.mark.parametrize("name", ["conv2d", "depthwise_conv2d"])
def test_a_kernel_wider_than_the_padded_width_is_refused(name: str) -> None:
    shape = {"ci": 4, "co": 4} if name == "conv2d" else {"channels": 4}
    detail = "2 + 2*1 = 4"
    with pytest.raises(ValueError, match=rf"^{name} kernel must fit the padded input \(w \+ 2\*pad = "
                                         rf"{re.escape(detail)}\), not 5$"):
        REGISTRY[name].operator(TINY, **shape, hw=8, w=2, kernel=5, pad=1)


def _anchor(name: str, data: tuple[int, ...], kernel: tuple[int, int], **attrs: object) -> Anchor:
    channels = data[1]
    weight = (channels, 1, *kernel) if name == "depthwise_conv2d" else (16, channels, *kernel)
    group = {"group": channels} if name == "depthwise_conv2d" else {}
    return Anchor("Conv", {"strides": (1, 1), "pads": (1, 1, 1, 1), **group, **attrs}, (data, weight),
                  ("int8", "int8"), (False, True))


@pytest.mark.parametrize("name", ["conv2d", "depthwise_conv2d"])
def test_the_matcher_takes_rectangular_data(name: str) -> None:
    match = REGISTRY[name].match
    assert match is not None
    found = match(_anchor(name, (1, 16, 6, 10), (3, 3)), preset("default"))
    assert isinstance(found, tuple) and (found[0]["hw"], found[0]["w"]) == (6, 10)
    square = match(_anchor(name, (1, 16, 6, 6), (3, 3)), preset("default"))
    assert isinstance(square, tuple) and "w" not in square[0]
    op = REGISTRY[name].operator("default", **found[0])
    assert op.logical_shapes["data"] == (1, 16, 6, 10) and op.logical_shapes["out"] == (1, 16, 6, 10)


@pytest.mark.parametrize("name", ["conv2d", "depthwise_conv2d"])
@pytest.mark.parametrize(("kernel", "attrs"), [((3, 1), {}), ((3, 3), {"strides": (1, 2)}),
                                                ((3, 3), {"pads": (1, 0, 1, 0)})])
def test_the_matcher_still_refuses_a_non_square_kernel_stride_or_padding(name: str, kernel: tuple[int, int],
                                                                         attrs: dict) -> None:
    match = REGISTRY[name].match
    assert match is not None
    what = "depthwise conv2d" if name == "depthwise_conv2d" else "conv2d"
    assert match(_anchor(name, (1, 16, 6, 10), kernel, **attrs), preset("default")) == \
        f"the accelerator's {what} needs a square kernel, one stride and the same padding on every side"
