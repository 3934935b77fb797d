"""Calibration methods, mixed precision by measured sensitivity, the pooled mean's own scale.

Each method's range from a histogram against a hand computation; a clipping method gives
an activation with an outlier a finer step than min–max, and the compiled model still
equals its integer reference on every back end; ``precision="auto"`` widens the value
whose int8 rounding the output feels most, never past its budget; a GlobalAveragePool's
output takes its own scale (an SE block's pooled values are a few codes of its input's);
every option's error is one line.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import openvta
from openvta.graph.ir import Op
from openvta.graph.ranges import BINS, clip_range, parse_calibration_method
from openvta.graph.sensitivity import MIN_SHARE, choose_wide


def _two_layers(k: int = 16, n: int = 8) -> object:
    rng = np.random.default_rng(0)
    w1 = rng.normal(size=(k, k)).astype(np.float32) / 4
    w2 = rng.normal(size=(k, n)).astype(np.float32) / 4
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"]), helper.make_node("Relu", ["h0"], ["h"]),
             helper.make_node("MatMul", ["h", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, n])],
                              [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _samples(count: int = 256, k: int = 16) -> np.ndarray:
    """Heavy-tailed samples (Student's t, 2 degrees of freedom): min–max spends the int8
    range on a few values far out."""
    return np.random.default_rng(1).standard_t(2, size=(count, k)).astype(np.float32)


def test_minmax_and_percentile_ranges_by_hand() -> None:
    counts = np.zeros(BINS)
    counts[:10] = 1000  # 10,000 values in the first ten bins
    counts[-1] = 1  # one at the top
    assert clip_range(counts, 8.0, "minmax", None) == 8.0
    # 99.99 % of 10,001 values is 10,000 (rounded up): the tenth bin's upper edge
    assert clip_range(counts, 8.0, "percentile", 99.99) == pytest.approx(10 * 8.0 / BINS)
    assert clip_range(counts, 8.0, "percentile", 100.0) == 8.0
    assert clip_range(np.zeros(BINS), 3.0, "mse", None) == 3.0  # nothing seen: the range as is


def test_mse_clips_a_lone_outlier_and_keeps_a_uniform_range() -> None:
    outlier = np.zeros(BINS)
    outlier[:100] = 10**5
    outlier[-1] = 1
    assert clip_range(outlier, 20.0, "mse", None) < 1.1  # one value clipped, 10**7 finer
    uniform = np.full(BINS, 100.0)
    assert clip_range(uniform, 20.0, "mse", None) > 19.0  # clipping a uniform range only loses


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, BINS - 1), st.integers(1, 10**6)), min_size=1, max_size=20),
       st.sampled_from(["mse", "entropy", "percentile"]))
def test_every_method_stays_within_the_observed_range(spikes: list[tuple[int, int]], method: str) -> None:
    counts = np.zeros(BINS)
    for index, count in spikes:
        counts[index] += count
    chosen = clip_range(counts, 5.0, method, 99.9 if method == "percentile" else None)
    assert 0 < chosen <= 5.0


@pytest.mark.parametrize("method", ["mse", "percentile:99", "percentile:99.9", "entropy"])
def test_a_clipping_method_gives_a_finer_step_and_the_model_still_equals_its_reference(method: str) -> None:
    x = _samples()
    minmax = openvta.compile_model(_two_layers(), x, precision="int8")
    clipped = openvta.compile_model(_two_layers(), x, precision="int8", calibration_method=method)
    assert clipped.graph.types["x"].quant.scale[0] < minmax.graph.types["x"].quant.scale[0]
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(clipped.run(x, backend=backend)["y"], clipped.reference(x)["y"])


@pytest.mark.parametrize("method, message", [
    ("kl", "calibration_method must be one of minmax, percentile, percentile:<p>, mse, entropy, not 'kl'"),
    ("percentile:0", "calibration_method percentile:<p> needs 0 < p <= 100, not 'percentile:0'"),
    ("percentile:x", "calibration_method percentile:<p> needs 0 < p <= 100, not 'percentile:x'"),
])
def test_a_bad_calibration_method_is_one_line(method: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        openvta.compile_model(_two_layers(), _samples(), calibration_method=method)
    assert str(info.value) == message
    assert parse_calibration_method("percentile") == ("percentile", 99.99)


def test_choose_wide_takes_the_most_sensitive_per_cost_within_the_budget() -> None:
    sensitivity = {"a": 4.0, "b": 1.0, "c": 0.001}
    cost = {"a": 10, "b": 1, "c": 1}
    assert choose_wide(sensitivity, cost, 100, 1.0) == []
    assert choose_wide(sensitivity, cost, 100, 1.05) == ["b"]  # a's 10 does not fit
    assert choose_wide(sensitivity, cost, 100, 2.0) == ["b", "a"]  # c is below MIN_SHARE of the sum
    assert 0.001 < MIN_SHARE * 5.001


def test_auto_widens_the_value_the_output_feels_and_equals_its_reference() -> None:
    x = _samples()
    model = openvta.compile_model(_two_layers(), x, precision="auto:4")
    wide = [n for n in model.graph.nodes if n.op is Op.GEMM and n.precision is not None]
    assert wide, "the outlier's input should be 16-bit within a budget of 4"
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(model.run(x, backend=backend)["y"], model.reference(x)["y"])
    exact = model.float_reference(x)["y"]
    int8 = openvta.compile_model(_two_layers(), x, precision="int8")
    assert np.abs(model.reference(x)["y"] - exact).mean() < np.abs(int8.reference(x)["y"] - exact).mean()
    narrow = openvta.compile_model(_two_layers(), x, precision="auto:1")
    assert not any(n.precision is not None for n in narrow.graph.nodes)  # a budget of 1: all int8


@pytest.mark.parametrize("precision, message", [
    ("auto:0.5", "precision auto:<budget> needs a budget of at least 1 (the all-int8 model's cycles), not 'auto:0.5'"),
    ("auto:many", "precision auto:<budget> needs a budget of at least 1 (the all-int8 model's cycles), "
                  "not 'auto:many'"),
])
def test_a_bad_budget_is_one_line(precision: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        openvta.compile_model(_two_layers(), _samples(), precision=precision)
    assert str(info.value) == message


def _pooled() -> object:
    """Conv → ReLU → GlobalAveragePool → Flatten → Gemm: the pooled mean is far narrower
    than the map it averages (one hot pixel per channel)."""
    rng = np.random.default_rng(3)
    w = rng.normal(size=(8, 4, 3, 3)).astype(np.float32)
    fc = rng.normal(size=(5, 8)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "pooled", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 12, 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(fc, "fc")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_pooled_mean_takes_its_own_scale() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(6, 1, 4, 12, 12)).astype(np.float32) * 0.1
    x[:, :, :, 5, 5] = 8.0  # one bright pixel: the map's range is far beyond its mean's
    model = openvta.compile_model(_pooled(), [{"x": s} for s in x], precision="int8")
    types = model.graph.types
    assert [n.op for n in model.graph.nodes if n.outputs[0].startswith("p.")] == [Op.REDUCE_SUM, Op.REQUANTIZE]
    pooled = next(n for n in model.graph.nodes if n.op is Op.REDUCE_SUM).inputs[0]  # (the ReLU's codes)
    assert types["p.q"].quant.scale[0] < types[pooled].quant.scale[0] / 10  # 44x finer here
    for sample in x:
        np.testing.assert_array_equal(model.run({"x": sample}, backend="functional")["y"],
                                      model.reference({"x": sample})["y"])
        exact = model.float_reference({"x": sample})["y"]
        assert np.abs(model.reference({"x": sample})["y"] - exact).max() < 0.05 * np.abs(exact).max()


def _tiny(scale_back: float, bias: float) -> object:
    """Conv with weights near 1e-14 (activations near 1e-13, as an EfficientNet's were), ReLU,
    then a Conv whose weights scale them back up by ``scale_back``, with ``bias``."""
    rng = np.random.default_rng(0)
    w1 = (rng.normal(size=(8, 4, 3, 3)) * 1e-14).astype(np.float32)
    w2 = (rng.normal(size=(8, 8, 1, 1)) * scale_back).astype(np.float32)
    b2 = np.full(8, bias, np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "w2", "b2"], ["y"])]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])],
                              [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
                               numpy_helper.from_array(b2, "b2")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("scale_back, bias, on_cpu", [
    (1e13, 0.0, False),  # tiny activations at their own tiny scale: every number fits, all int8
    (1.0, 1.0, True),  # a bias of 1 at a 1e-16 accumulator scale: beyond int32, that Conv in float
])
def test_activations_near_1e_14_keep_their_own_scale(scale_back: float, bias: float, on_cpu: bool) -> None:
    x = np.random.default_rng(1).normal(size=(4, 1, 4, 8, 8)).astype(np.float32)
    model = openvta.compile_model(_tiny(scale_back, bias), [{"x": s} for s in x])
    notes = [n for n in model.graph.notes if "runs in float on the CPU" in n]
    assert notes == (["node 'Conv_2' (Conv) runs in float on the CPU: its bias does not fit int32 in the "
                      "accumulator's scale"] if on_cpu else []), notes
    exact = model.float_reference({"x": x[0]})["y"]
    got = model.run({"x": x[0]}, backend="functional")["y"]
    np.testing.assert_array_equal(got, model.reference({"x": x[0]})["y"])
    assert np.abs(got - exact).max() <= 0.02 * np.abs(exact).max()  # before: 0 everywhere, 100 % off


def _depthwise() -> object:
    """ReLU → depthwise 3×3 Conv (nine weights a channel, drawn so that int8 rounds them off
    centre) → output: its mean error is ``ΔW``'s sum times the input's mean."""
    rng = np.random.default_rng(5)
    w = rng.normal(size=(16, 1, 3, 3)).astype(np.float32)
    w[:, :, 0, 0] = 4.0  # the peak: one step is 4/127, the others rounded off by up to half of it
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Conv", ["r", "w"], ["y"], group=16)]
    graph = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 10, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 8, 8])],
                              [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_bias_correction_takes_the_mean_error_of_int8_weights_out() -> None:
    x = (np.random.default_rng(6).normal(size=(8, 1, 16, 10, 10)) + 2.0).astype(np.float32)
    feeds = [{"x": s} for s in x]
    plain = openvta.compile_model(_depthwise(), feeds, precision="int8")
    corrected = openvta.compile_model(_depthwise(), feeds, precision="int8", bias_correction=True)

    def mean_error(model: openvta.CompiledModel) -> float:
        errors = [model.reference(f)["y"] - model.float_reference(f)["y"] for f in feeds]
        return float(np.abs(np.mean(errors, axis=(0, 1, 3, 4))).mean())  # per channel, then averaged

    assert mean_error(corrected) < mean_error(plain) / 3
    for feed in feeds[:2]:
        np.testing.assert_array_equal(corrected.run(feed, backend="functional")["y"], corrected.reference(feed)["y"])


def test_auto_counts_its_budget_in_the_int8_builds_cycles(monkeypatch: pytest.MonkeyPatch) -> None:
    """The costs ``auto`` weighs are each product's kernel cycles in the all-int8 build on the
    cycle model (a depthwise or memory-bound kernel costs far more per MAC than a dense one)."""
    import openvta.graph.passes.calibrate as calibrate_pass

    seen: list[object] = []
    original = calibrate_pass.wide_values

    def spy(graph: object, feeds: object, budget: float, costs: object = None) -> set[str]:
        seen.append(costs)
        return original(graph, feeds, budget, costs)

    monkeypatch.setattr(calibrate_pass, "wide_values", spy)
    x = _samples()
    openvta.compile_model(_two_layers(), x, precision="auto")
    int8 = openvta.compile_model(_two_layers(), x, precision="int8").run(x, backend="cycle").report  # (its feed)
    expected = {name: k.cycles for k in int8.kernels if k.cycles for name in k.name.split("+")}
    assert seen == [expected] and {"MatMul_0", "MatMul_2"} <= set(expected), (seen, expected)
