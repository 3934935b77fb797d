"""The ONNX frontend: what imports, and a one-line error for everything that does not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import ModelProto, TensorProto, helper
from onnx_models import make_model, tensor_input

from openvta.graph.errors import ModelError
from openvta.graph.frontends.onnx import SUPPORTED_OPS, import_onnx
from openvta.graph.ir import DType, Op

W = np.ones((4, 2, 3, 3), np.float32)


def _conv_model(**attrs) -> ModelProto:
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv1", **attrs)
    return make_model([node], {"x": ["N", 2, 6, 6]}, ["y"], {"w": W})


def test_a_model_with_a_dynamic_batch_imports_typed() -> None:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Constant", [], ["shape"], value=helper.make_tensor(
                 "s", TensorProto.INT64, [2], [0, -1])),
             helper.make_node("Reshape", ["r", "shape"], ["y"], name="flat")]
    graph = import_onnx(make_model(nodes, {"x": ["batch", 2, 6, 6]}, ["y"], {"w": W}))
    assert [n.op for n in graph.nodes] == [Op.CONV, Op.RELU, Op.RESHAPE]
    assert graph.types["y"].shape == ("batch", 144) and graph.types["y"].dtype is DType.FLOAT32
    assert graph.node("flat").attrs["shape"] == (0, -1) and list(graph.constants) == ["w"]
    assert graph.node("conv1").attrs["pads"] == (1, 1, 1, 1)


def test_auto_pad_becomes_explicit_pads() -> None:
    graph = import_onnx(_conv_model(auto_pad="SAME_LOWER", strides=[2, 2]))
    assert graph.node("conv1").attrs["pads"] == (1, 1, 0, 0)
    assert graph.types["y"].shape == ("N", 4, 3, 3)


def test_file_errors(tmp_path) -> None:
    good = tmp_path / "good.onnx"
    good.write_bytes(_conv_model().SerializeToString())
    assert import_onnx(str(good)).name == "test"
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(ModelError, match=r"^model file '.*truncated\.onnx' is not an ONNX model "
                                         r"\(truncated or another format: .*\)$"):
        import_onnx(truncated)
    text = tmp_path / "notes.onnx"
    text.write_bytes(b"this is a text file, not a model\n")
    with pytest.raises(ModelError, match=r"^model file '.*notes\.onnx' is not an ONNX model"):
        import_onnx(text)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ModelError, match=r"^model file '.*empty\.onnx' is not an ONNX model "
                                         r"\(no IR version or graph\)$"):
        import_onnx(empty)
    with pytest.raises(ModelError, match=r"^model file '.*missing\.onnx' does not exist$"):
        import_onnx(tmp_path / "missing.onnx")
    with pytest.raises(TypeError, match=r"^model must be a path or an onnx\.ModelProto, not int$"):
        import_onnx(3)


def test_model_level_errors() -> None:
    with pytest.raises(ModelError, match=r"^model opset must be 7 or newer, not 6$"):
        import_onnx(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": [2]}, ["y"],
                               opset=6))
    scatter = make_model([helper.make_node("Scatter", ["x", "x"], ["y"])], {"x": [2]}, ["y"], opset=8)
    with pytest.raises(ModelError, match=r"^model opset 8 could not be upgraded to 13 with "
                                         r"onnx\.version_converter: .*No Adapter From Version \$8 for Scatter$"):
        import_onnx(scatter)
    lstm = helper.make_node("LSTM", ["x", "w"], ["y"], name="conv7")
    with pytest.raises(ModelError, match=r"^node 'conv7' \(LSTM\) is not supported; supported: "
                                         + ", ".join(SUPPORTED_OPS) + "$"):
        import_onnx(make_model([lstm], {"x": [2]}, ["y"], {"w": W}))
    custom = helper.make_node("FusedConv", ["x"], ["y"], name="f", domain="com.microsoft")
    with pytest.raises(ModelError, match=r"^node 'f' \(com\.microsoft\.FusedConv\) is not supported"):
        import_onnx(make_model([custom], {"x": [2]}, ["y"]))
    quantized = [helper.make_node("Relu", ["x"], ["r"]),
                 helper.make_node("DynamicQuantizeLinear", ["r"], ["y", "s", "z"], name="q0")]
    with pytest.raises(ModelError, match=r"^model is quantized with DynamicQuantizeLinear \(node "
                                         r"'q0'\); only QuantizeLinear/DequantizeLinear \(QDQ\) "
                                         r"models are imported$"):
        import_onnx(make_model(quantized, {"x": [2]}, ["y"]))


def test_input_errors() -> None:
    relu = [helper.make_node("Relu", ["x"], ["y"])]
    model = make_model(relu, {"x": [2]}, ["y"])
    model.graph.input[0].CopyFrom(tensor_input("x", [2], TensorProto.INT32))
    with pytest.raises(ModelError, match=r"^input 'x' must be float32 \(or int64: token ids, a mask\), not int32$"):
        import_onnx(model)
    with pytest.raises(ModelError, match=r"^input 'x' dimension 1 must be a fixed size, not 'H' "
                                         r"\(only the batch may vary\)$"):
        import_onnx(make_model(relu, {"x": ["N", "H"]}, ["y"]))
    model.graph.input[0].CopyFrom(tensor_input("x", None))
    with pytest.raises(ModelError, match=r"^input 'x' must have a shape, not none$"):
        import_onnx(model)
    bad_init = make_model([helper.make_node("Add", ["x", "b"], ["y"])], {"x": [2]}, ["y"],
                          {"b": np.zeros(2, np.float64)})
    with pytest.raises(ModelError, match=r"^constant 'b' must be float32 \(or int64 for shapes\), "
                                         r"not float64$"):
        import_onnx(bad_init)


@pytest.mark.parametrize(("attrs", "message"), [
    ({"group": 2}, r"attribute group must divide the 2 input channels and the 4 output channels "
                   r"\(weight \(4, 2, 3, 3\)\), not 2"),
    ({"dilations": [2, 2]}, r"attribute dilations must be all 1, not \[2, 2\]"),
    ({"auto_pad": "SAME"}, r"attribute auto_pad must be NOTSET, VALID, SAME_UPPER or SAME_LOWER, "
                           r"not 'SAME'"),
    ({"kernel_shape": [2, 2]}, r"attribute kernel_shape must match the weight's \(3, 3\), not "
                               r"\(2, 2\)"),
    ({"pads": [1, 1]}, r"attribute pads must be 4 integers, not \[1, 1\]"),
    ({"foo": 1}, r"attribute 'foo' is not supported; supported: auto_pad, dilations, group, "
                 r"kernel_shape, pads, strides"),
])
def test_conv_attribute_errors(attrs, message) -> None:
    with pytest.raises(ModelError, match=r"^node 'conv1' \(Conv\) " + message + "$"):
        import_onnx(_conv_model(**attrs))


def test_depthwise_conv_imports() -> None:
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="dw", group=2, pads=[1, 1, 1, 1])
    graph = import_onnx(make_model([node], {"x": [1, 2, 5, 5]}, ["y"],
                                   {"w": np.ones((2, 1, 3, 3), np.float32)}))
    assert graph.node("dw").attrs["group"] == 2 and graph.types["y"].shape == (1, 2, 5, 5)


@pytest.mark.parametrize(("node", "inits", "message"), [
    (helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 2], storage_order=1), {},
     r"^node 'p' \(MaxPool\) attribute storage_order must be 0, not 1$"),
    (helper.make_node("MaxPool", ["x"], ["y", "i"], name="p", kernel_shape=[2, 2]), {},
     r"^node 'p' \(MaxPool\) must have one output, not \['y', 'i'\]$"),
    (helper.make_node("Clip", ["x", "x"], ["y"], name="c"), {},
     r"^node 'c' \(Clip\) min must be a constant \(an initializer\)$"),
    (helper.make_node("Reshape", ["x", "x"], ["y"], name="r"), {},
     r"^node 'r' \(Reshape\) shape must be a constant \(an initializer\)$"),
    (helper.make_node("Reshape", ["x", "s"], ["y"], name="r"), {"s": np.array([5, -1])},
     r"^node 'r' \(Reshape\) Reshape of \('N', 2, 6, 6\) to \(5, -1\) cannot keep the symbolic "
     r"batch$"),
    (helper.make_node("Gemm", ["x", "x"], ["y"], name="g"), {},
     r"^node 'g' \(Gemm\) Gemm A must be 2-D, not 4-D float32\[N,2,6,6\]$"),
    (helper.make_node("Dropout", ["x", "", "t"], ["y"], name="d"), {"t": np.array(True)},
     r"^node 'd' \(Dropout\) training_mode must be false \(inference only\)$"),
    (helper.make_node("Relu", ["nowhere"], ["y"], name="r"), {},
     r"^node 'r' \(Relu\) reads 'nowhere' before it is defined$"),
    (helper.make_node("Unsqueeze", ["x"], ["y"], name="u"), {},
     r"^node 'u' \(Unsqueeze\) needs its axes \(a constant second input\)$"),
    (helper.make_node("Pad", ["x"], ["y"], name="p"), {},
     r"^node 'p' \(Pad\) needs its pads \(a constant second input\)$"),
    (helper.make_node("Pad", ["x", "p", "", "a"], ["y"], name="p"), {"p": np.array([1, 1, 1]), "a": np.array([2, 3])},
     r"^node 'p' \(Pad\) pads must hold two sizes per axis of \[2, 3\], not \[1, 1, 1\]$"),
    (helper.make_node("Pad", ["x", "p"], ["y"], name="p", mode="mirror"), {"p": np.zeros(8, np.int64)},
     r"^node 'p' \(Pad\) Pad mode must be one of constant, reflect, edge, wrap, not 'mirror'$"),
    (helper.make_node("Squeeze", ["x", "a"], ["y"], name="s"), {"a": np.array([1])},
     r"^node 's' \(Squeeze\) Squeeze axes \(1,\) must be dimensions of size 1 in \('N', 2, 6, 6\)$"),
])
def test_node_errors(node, inits, message) -> None:
    with pytest.raises(ModelError, match=message):
        import_onnx(make_model([node], {"x": ["N", 2, 6, 6]}, ["y"], inits))


def test_undefined_output_is_an_error() -> None:
    with pytest.raises(ModelError, match=r"^model output 'z' is never computed$"):
        import_onnx(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": [2]}, ["z"]))


def test_a_kept_bool_constant_is_an_error() -> None:
    node = helper.make_node("Add", ["x", "t"], ["y"], name="a")
    with pytest.raises(ModelError, match=r"^node 'a' \(Add\) input 't' must be float32 \(or int64 "
                                         r"for shapes\), not bool$"):
        import_onnx(make_model([node], {"x": [1]}, ["y"], {"t": np.array(True)}))


def test_an_older_opset_is_upgraded_and_the_notes_say_so() -> None:
    graph = import_onnx(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": [2]}, ["y"], opset=11))
    assert graph.notes == ("opset 11 upgraded to 13 with onnx.version_converter",)


def _external_model(tmp_path: Path) -> Path:
    import onnx
    from onnx import numpy_helper

    weight = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [weight])
    path = tmp_path / "model.onnx"
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path,
                    save_as_external_data=True, location="weights.bin", size_threshold=0)
    return path


def test_external_data_is_read_from_beside_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _external_model(tmp_path)
    monkeypatch.chdir(tmp_path.parent)  # not the model's folder
    graph = import_onnx(path)
    assert np.array_equal(graph.constants["w"], np.arange(16, dtype=np.float32).reshape(4, 4))


def test_missing_or_short_external_data_is_one_line(tmp_path: Path) -> None:
    import onnx

    path = _external_model(tmp_path)
    (tmp_path / "weights.bin").write_bytes(b"\0" * 10)
    with pytest.raises(ModelError, match=r"^model file '.*model\.onnx': the external data 'weights\.bin' of tensor "
                                         r"'w' cannot be read \(External data length \(64\) exceeds .*\)$"):
        import_onnx(path)
    proto = onnx.load(path, load_external_data=False)  # an exporter that wrote no length
    entries = [e for e in proto.graph.initializer[0].external_data if e.key != "length"]
    del proto.graph.initializer[0].external_data[:]
    proto.graph.initializer[0].external_data.extend(entries)
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(ModelError, match=r"^model file '.*model\.onnx': the external data 'weights\.bin' of tensor "
                                         r"'w' holds 10 bytes, not 64$"):
        import_onnx(path)
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(ModelError, match=r"^model file '.*model\.onnx': the external data 'weights\.bin' of tensor "
                                         r"'w' cannot be read \(.*\)$"):
        import_onnx(path)
    with pytest.raises(ModelError, match=r"^tensor 'w' keeps its data in the external file 'weights\.bin': give "
                                         r"the model's path, or load it with its external data \(onnx\.load\)$"):
        import_onnx(onnx.load(path, load_external_data=False))
