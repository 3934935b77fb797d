"""What exporters write, imported: shape computations and constant subgraphs folded by
``onnx.reference`` at compile time (graph/frontends/onnx_prepare.py), the batch kept free
where the shape computations allow it, fixed (and said so) where they do not."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import ModelProto, helper
from onnx_models import make_model, run_onnxruntime

import openvta
from openvta.graph.errors import ModelError
from openvta.graph.frontends.onnx import import_onnx
from openvta.graph.ir import Op

RNG = np.random.default_rng(5)
W = (RNG.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
FC = (RNG.standard_normal((10, 8 * 6 * 6)) * 0.05).astype(np.float32)
IDX = {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64), "minus1": np.array([-1], np.int64)}


def _torch_flatten(x: str, out: str) -> list:
    """PyTorch's export of ``x.view(x.size(0), -1)``."""
    return [helper.make_node("Shape", [x], ["s"], name="shape"),
            helper.make_node("Gather", ["s", "zero"], ["n"], axis=0, name="gather"),
            helper.make_node("Unsqueeze", ["n", "axes"], ["n1"], name="unsqueeze"),
            helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0, name="concat"),
            helper.make_node("Reshape", [x, "target"], [out], name="flatten")]


def _cnn(batch_dependent: bool = False) -> ModelProto:
    """conv (weights a ConstantOfShape fill plus a constant), ReLU, a flatten by shape
    computations, and a dense layer."""
    fill = [helper.make_node("ConstantOfShape", ["wshape"], ["w0"], name="fill",
                             value=helper.make_tensor("v", 1, [1], [0.01])),
            helper.make_node("Add", ["w0", "w"], ["w1"], name="weights")]
    nodes = fill + [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1], name="conv"),
                    helper.make_node("Relu", ["c"], ["r"], name="relu")]
    if batch_dependent:  # a reshape to (2·N, -1), then back: the batch reaches a constant's value
        nodes += [helper.make_node("Shape", ["r"], ["s"], name="shape"),
                  helper.make_node("Gather", ["s", "zero"], ["n"], axis=0, name="gather"),
                  helper.make_node("Mul", ["n", "two"], ["n2"], name="double"),
                  helper.make_node("Unsqueeze", ["n2", "axes"], ["n1"], name="unsqueeze"),
                  helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0, name="concat"),
                  helper.make_node("Reshape", ["r", "target"], ["halves"], name="halves"),
                  helper.make_node("Reshape", ["halves", "flat"], ["f"], name="flatten")]
    else:
        nodes += _torch_flatten("r", "f")
    nodes.append(helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1, name="fc"))
    constants = {**IDX, "wshape": np.array(W.shape, np.int64), "w": W, "fc": FC, "two": np.array(2, np.int64),
                 "flat": np.array([-1, 8 * 6 * 6], np.int64)}
    return make_model(nodes, {"x": ["N", 3, 6, 6]}, ["y"], constants)


def _images(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, 3, 6, 6)).astype(np.float32)


def test_a_torch_flatten_and_a_fill_fold_and_the_batch_stays_free() -> None:
    proto = _cnn()
    model = openvta.compile_model(proto, _images(8, 1), config="tiny")
    assert not model.graph.notes
    for batch in (1, 3):  # calibrated on 8 images, run on others
        x = _images(batch, 2)
        np.testing.assert_allclose(model.float_reference(x)["y"], run_onnxruntime(proto, {"x": x})[0],
                                   rtol=1e-5, atol=1e-5)
        assert np.array_equal(model.run(x, backend="functional")["y"], model.reference(x)["y"])
    ops = {n.op.value for n in model.graph.nodes}
    assert not ops & {"Shape", "Gather", "Concat", "ConstantOfShape", "Unsqueeze"}


def test_a_batch_in_a_constant_fixes_the_batch_and_says_so() -> None:
    proto = _cnn(batch_dependent=True)
    model = openvta.compile_model(proto, _images(4, 1), config="tiny")
    assert model.graph.notes == ("input x: the batch fixed at 4 (a shape computation reads it)",)
    assert "note: input x: the batch fixed at 4" in str(model.summary())
    x = _images(4, 2)
    np.testing.assert_allclose(model.float_reference(x)["y"], run_onnxruntime(proto, {"x": x})[0],
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"^input 'x' must have shape \(4, 3, 6, 6\), not \(1, 3, 6, 6\)$"):
        model.run(_images(1, 2))


def test_input_shapes_given_override_the_calibrations() -> None:
    model = openvta.compile_model(_cnn(batch_dependent=True), _images(4, 1), config="tiny",
                                  input_shapes={"x": (4, 3, 6, 6)})
    assert model.graph.notes == ("input x: the batch fixed at 4 (a shape computation reads it)",)


def test_a_shape_not_known_at_compile_time_is_named() -> None:
    with pytest.raises(ModelError, match=r"^node 'shape' \(Shape\) reads the shape of 'r', which is not known "
                                         r"when the model is compiled: give the input shapes \(input_shapes=, "
                                         r"--input-shape\)$"):
        import_onnx(_cnn(batch_dependent=True))


@pytest.mark.parametrize("shapes, error, message", [
    ({"x": (4, 3, 7, 6)}, ModelError, r"^input 'x' has shape \('N', 3, 6, 6\) in the model, but its shape is "
                                      r"given as \(4, 3, 7, 6\)$"),
    ({"x": (4, 3, 6)}, ModelError, r"^input 'x' has 4 dimensions, but its shape is given as \(4, 3, 6\) "
                                   r"\(3 dimensions\)$"),
    ({"x": (4, 0, 6, 6)}, ValueError, r"^input_shapes\['x'\] must be a tuple of positive integers, "
                                      r"not \(4, 0, 6, 6\)$"),
    ([4, 3, 6, 6], ValueError, r"^input_shapes must be a mapping of input name to shape, not list$"),
])
def test_bad_input_shapes_are_named(shapes: Any, error: type, message: str) -> None:  # not all mappings
    with pytest.raises(error, match=message):
        openvta.compile_model(_cnn(), _images(4, 1), config="tiny", input_shapes=shapes)


def test_a_constant_subgraph_that_cannot_be_evaluated_is_named() -> None:
    bad = helper.make_node("Reshape", ["w", "wrong"], ["w1"], name="bad_reshape")
    proto = make_model([bad, helper.make_node("Conv", ["x", "w1"], ["y"], name="conv")], {"x": [1, 3, 6, 6]},
                       ["y"], {"w": W, "wrong": np.array([5, 5], np.int64)})
    with pytest.raises(ModelError, match=r"^node 'bad_reshape' \(Reshape\) on constants could not be folded by "
                                         r"onnx\.reference: "):
        import_onnx(proto)


def test_an_input_shape_for_no_input_is_named() -> None:
    with pytest.raises(ValueError, match=r"^input_shapes names 'image', which is not an input of the model "
                                         r"\(its inputs: x\)$"):
        openvta.compile_model(_cnn(), _images(4, 1), config="tiny", input_shapes={"image": (1, 3, 6, 6)})


def test_the_command_line_takes_input_shapes(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    import onnx

    from openvta.cli import main
    from openvta.graph.compiled_model import load_model

    onnx.save(_cnn(batch_dependent=True), str(tmp_path / "m.onnx"))
    np.savez(tmp_path / "cal.npz", x=_images(4, 1))
    assert main(["model", "compile", str(tmp_path / "m.onnx"), "--calibration", str(tmp_path / "cal.npz"),
                 "--config", "tiny", "--input-shape", "x=4,3,6,6", "-o", str(tmp_path / "m.ovta")]) == 0
    assert "note: input x: the batch fixed at 4 (a shape computation reads it)" in capsys.readouterr().out
    assert load_model(tmp_path / "m.ovta").graph.notes == ("input x: the batch fixed at 4 (a shape computation "
                                                           "reads it)",)  # saved with the model
    for bad in ("x=4,3,six,6", "4,3,6,6", "x=4,3,0,6"):
        assert main(["model", "compile", str(tmp_path / "m.onnx"), "--calibration", str(tmp_path / "cal.npz"),
                     "--input-shape", bad, "-o", str(tmp_path / "m.ovta")]) == 1
        assert capsys.readouterr().err == (f"openvta: error: --input-shape {bad!r} must be NAME=D1,D2,... with "
                                           "positive integer sizes, e.g. image=1,3,224,224\n")


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_an_older_opsets_softmax_normalizes_the_coerced_2d_input(axis: int) -> None:
    """Before opset 13 Softmax normalized over every axis from ``axis`` on; the upgrade keeps
    that meaning (onnxruntime runs the opset-11 model as it was written)."""
    proto = make_model([helper.make_node("Softmax", ["x"], ["y"], axis=axis, name="softmax")],
                       {"x": [2, 3, 4]}, ["y"], opset=11)
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    model = openvta.compile_model(proto, x, config="tiny")
    np.testing.assert_allclose(model.float_reference(x)["y"], run_onnxruntime(proto, {"x": x})[0], rtol=1e-6,
                               atol=1e-7)
    assert model.graph.notes[0] == "opset 11 upgraded to 13 with onnx.version_converter"


def test_a_scalar_constant_stays_a_scalar_between_folding_rounds() -> None:
    """A 0-D ``Constant`` folded in one round and read in a later one (the index of a
    ``Shape → Gather`` whose shape is known only once an earlier Reshape's target has
    folded) stays 0-D: BERT-style exports flatten attention heads this way."""
    nodes = [helper.make_node("Constant", [], ["c0"], value=helper.make_tensor("v", 7, [], [0]), name="c0"),
             helper.make_node("Concat", ["two", "minus1"], ["t"], axis=0, name="target"),
             helper.make_node("Reshape", ["x", "t"], ["y"], name="split"),
             helper.make_node("Shape", ["y"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "c0"], ["n"], axis=0, name="gather"),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"], name="unsqueeze"),
             helper.make_node("Concat", ["n1", "minus1"], ["back"], axis=0, name="concat"),
             helper.make_node("Reshape", ["y", "back"], ["z"], name="join")]
    constants = {"two": np.array([2], np.int64), "minus1": np.array([-1], np.int64),
                 "axes": np.array([0], np.int64)}
    proto = make_model(nodes, {"x": [4, 6]}, ["z"], constants)
    graph = import_onnx(proto)
    assert [n.op for n in graph.nodes] == [Op.RESHAPE, Op.RESHAPE]
    assert graph.types["z"].shape == (2, 12)
