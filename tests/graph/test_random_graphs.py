"""Random small models of openvta's ops and of ops it has no kernel for (run on ONNX's
reference kernels, the fallback): openvta's float reference against onnxruntime, and the
integer model's numbers independent of placement and of the back end (``functional``,
``cycle``) that runs its accelerator regions."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper
from onnx_models import make_model, run_onnxruntime

from openvta.graph.execute import execute
from openvta.graph.frontends.onnx import import_onnx
from openvta.graph.pipeline import ACTIVATIONS, compile_model


#: Ops openvta has no kernel for that the random models draw (ONNX's reference runs them).
FALLBACK_OPS = frozenset({"Where", "Equal", "TopK", "CumSum", "Trilu", "Mod", "ReduceMax", "Abs", "Neg", "Sin",
                          "Softsign", "HardSigmoid"})


class _Builder:
    """Draws a chain of 4-D ops with random attributes, then a dense head."""

    def __init__(self, data: st.DataObject, rng: np.random.Generator) -> None:
        self.data, self.rng = data, rng
        self.nodes: list = []
        self.inits: dict[str, np.ndarray] = {}
        self.shape: tuple[int, ...] = (2, data.draw(st.integers(1, 4)), data.draw(st.integers(3, 7)),
                                       data.draw(st.integers(3, 7)))
        self.value = "x"
        self.history: list[tuple[str, tuple[int, ...]]] = [("x", self.shape)]
        self.flags: set[str] = set()  # the bool values (a comparison's)

    def const(self, shape: tuple[int, ...], positive: bool = False) -> str:
        name = f"k{len(self.inits)}"
        value = self.rng.standard_normal(shape).astype(np.float32)
        self.inits[name] = np.abs(value) + 0.5 if positive else value
        return name

    def add(self, op: str, inputs: list[str], shape: tuple[int, ...], **attrs: Any) -> None:
        out = f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"n{len(self.nodes)}", **attrs))
        self.value, self.shape = out, shape
        self.history.append((out, shape))

    def conv(self) -> None:
        n, c, h, w = self.shape
        k = self.data.draw(st.sampled_from([1, 3]))
        s = self.data.draw(st.sampled_from([1, 2]))
        p = self.data.draw(st.integers(0, k // 2))
        if min(h, w) + 2 * p < k:
            k, p = 1, 0
        o = self.data.draw(st.integers(1, 6))
        group = c if self.data.draw(st.booleans()) and o == c else 1
        w_name = self.const((o, c // group, k, k))
        inputs = [self.value, w_name] + ([self.const((o,))] if self.data.draw(st.booleans()) else [])
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        self.add("Conv", inputs, (n, o, oh, ow), kernel_shape=[k, k], strides=[s, s],
                 pads=[p, p, p, p], group=group)

    def fallback(self) -> None:
        """One op openvta has no kernel for, on the 4-D value (its shape kept or cut)."""
        n, c, h, w = self.shape
        kind = self.data.draw(st.sampled_from(sorted(FALLBACK_OPS)))
        x = self.value
        if kind == "Where":  # a leaky ReLU by Greater and Where
            self.inits[f"where_zero{len(self.nodes)}"] = np.array(0.0, np.float32)
            self.add("Greater", [x, f"where_zero{len(self.nodes)}"], self.shape)
            self.flags.add(self.value)  # (bool: no residual adds it)
            self.add("Mul", [x, self.const((1,))], self.shape)
            self.add("Where", [self.history[-2][0], x, self.value], self.shape)
        elif kind == "Equal":  # the positions of a max pool's maxima, as 0/1
            self.add("MaxPool", [x], self.shape, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
            self.add("Equal", [x, self.value], self.shape)
            self.flags.add(self.value)
            self.add("Cast", [self.value], self.shape, to=1)
        elif kind == "TopK":
            k = self.data.draw(st.integers(1, w))
            self.inits[f"topk_k{len(self.nodes)}"] = np.array([k], np.int64)
            out = f"t{len(self.nodes)}"
            largest = self.data.draw(st.sampled_from([0, 1]))
            self.nodes.append(helper.make_node("TopK", [x, f"topk_k{len(self.nodes)}"], [out, f"{out}.i"],
                                               name=f"n{len(self.nodes)}", largest=largest))
            self.value, self.shape = out, (n, c, h, k)
            self.history.append((out, self.shape))
        elif kind == "GatherElements":
            axis = self.data.draw(st.integers(1, 3))
            index = self.rng.integers(-self.shape[axis], self.shape[axis], self.shape).astype(np.int64)
            self.inits[f"gather_i{len(self.nodes)}"] = index
            self.add("GatherElements", [x, f"gather_i{len(self.nodes)}"], self.shape, axis=axis)
        elif kind == "CumSum":
            self.inits[f"cumsum_axis{len(self.nodes)}"] = np.array(self.data.draw(st.integers(-4, 3)), np.int64)
            reverse = self.data.draw(st.sampled_from([0, 1]))
            self.add("CumSum", [x, f"cumsum_axis{len(self.nodes)}"], self.shape, reverse=reverse)
        elif kind == "Trilu":
            self.add("Trilu", [x], self.shape, upper=self.data.draw(st.sampled_from([0, 1])))
        elif kind == "Mod":
            self.inits[f"mod_d{len(self.nodes)}"] = np.array(1.75, np.float32)
            self.add("Mod", [x, f"mod_d{len(self.nodes)}"], self.shape, fmod=1)
        elif kind == "ReduceMax":
            self.add("ReduceMax", [x], (n, c, h, 1), axes=[3], keepdims=1)
        else:  # an element-wise function: Abs, Neg, Sin, Softsign, HardSigmoid
            self.add(kind, [x], self.shape)

    def step(self) -> None:
        n, c, h, w = self.shape
        kind = self.data.draw(st.sampled_from(["conv", "relu", "clip", "add_const", "residual",
                                               "bn", "maxpool", "avgpool", "identity", *["fallback"] * 4]))
        if kind == "fallback":
            self.fallback()
        elif kind == "conv":
            self.conv()
        elif kind == "relu":
            self.add("Relu", [self.value], self.shape)
        elif kind == "clip":
            self.inits[f"lo{len(self.nodes)}"] = np.array(-0.5, np.float32)
            self.inits[f"hi{len(self.nodes)}"] = np.array(1.5, np.float32)
            self.add("Clip", [self.value, f"lo{len(self.nodes)}", f"hi{len(self.nodes)}"], self.shape)
        elif kind == "add_const":
            self.add("Add", [self.value, self.const((c, 1, 1))], self.shape)
        elif kind == "residual":
            same = [v for v, shape in self.history if shape == self.shape and v not in self.flags]
            self.add("Add", [self.value, self.data.draw(st.sampled_from(same))], self.shape)
        elif kind == "bn":
            self.add("BatchNormalization", [self.value, self.const((c,)), self.const((c,)),
                                            self.const((c,)), self.const((c,), positive=True)],
                     self.shape)
        elif kind == "maxpool" and h >= 2 and w >= 2:
            self.add("MaxPool", [self.value], (n, c, h // 2, w // 2), kernel_shape=[2, 2],
                     strides=[2, 2])
        elif kind == "avgpool":
            self.add("AveragePool", [self.value], self.shape, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        else:
            self.add("Identity" if kind == "identity" else "Relu", [self.value], self.shape)

    def head(self) -> None:
        n, c, h, w = self.shape
        if self.data.draw(st.booleans()):
            self.add("GlobalAveragePool", [self.value], (n, c, 1, 1))
            features = c
        else:
            features = c * h * w
        self.add("Flatten", [self.value], (n, features))
        self.add("Gemm", [self.value, self.const((3, features)), self.const((3,))], (n, 3), transB=1)
        if self.data.draw(st.booleans()):
            self.add("Softmax", [self.value], (n, 3))


def _random_model(data: st.DataObject):
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    b = _Builder(data, rng)
    for _ in range(data.draw(st.integers(1, 5))):
        b.step()
    b.head()
    model = make_model(b.nodes, {"x": ["N", *b.history[0][1][1:]]}, [b.value], b.inits, opset=17)
    x = rng.standard_normal(b.history[0][1]).astype(np.float32)
    return model, x, b.value


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_float_reference_matches_onnxruntime(data) -> None:
    model, x, out = _random_model(data)
    (expected,) = run_onnxruntime(model, {"x": x})
    got = execute(import_onnx(model), {"x": x})[out]
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()  # (1e-4 relative to the largest)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_integer_outputs_do_not_depend_on_placement(data) -> None:
    model, x, out = _random_model(data)
    forced = data.draw(st.lists(st.sampled_from(["Conv", "Gemm", "Relu", "Clip", "Add"]),
                                unique=True))
    mode = data.draw(st.sampled_from(["fixed", "pow2"]))
    activations = data.draw(st.sampled_from(ACTIVATIONS))  # (asymmetric: zero points on non-negative ones)
    default = compile_model(model, x, quantize=mode, config="tiny", activations=activations)
    other = compile_model(model, x, quantize=mode, config="tiny", cpu_ops=forced, activations=activations)
    got, expected = other.reference(x)[out], default.reference(x)[out]
    assert got.shape == x.shape[:1] + (3,) and np.isfinite(got).all()
    assert np.array_equal(got, expected)
    for model in (default, other):  # and run with the accelerator regions, the same numbers
        assert np.array_equal(model.run(x, backend="functional")[out], expected)
    assert np.array_equal(default.run(x, backend="cycle")[out], expected)


def test_the_random_models_draw_at_least_eight_ops_without_an_openvta_kernel() -> None:
    from openvta.graph.registry import ONNX_OPS

    kernels = {op.value for op in ONNX_OPS}
    assert len(FALLBACK_OPS - kernels) >= 8, sorted(FALLBACK_OPS & kernels)
