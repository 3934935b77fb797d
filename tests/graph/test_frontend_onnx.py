"""The ONNX frontend: what imports, and a one-line error for everything that does not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import ModelProto, TensorProto, helper
from onnx_models import make_model, tensor_input

from openvta.graph.execute import execute
from openvta.graph.errors import ModelError
from openvta.graph.frontends.onnx import import_onnx
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
    with pytest.raises(ModelError, match=r"^node 'conv7' \(LSTM\): ONNX's shape inference refuses it: First input "
                                         r"tensor must have rank 3$"):
        lstm = helper.make_node("LSTM", ["x", "w"], ["y"], name="conv7")
        import_onnx(make_model([lstm], {"x": [2]}, ["y"], {"w": W}))
    custom = helper.make_node("FusedConv", ["x"], ["y"], name="f", domain="com.microsoft")
    with pytest.raises(ModelError, match=r"^node 'f' \(com\.microsoft\.FusedConv\) is of the domain 'com\.microsoft'; "
                                         r"openvta runs ONNX's default domain only$"):
        import_onnx(make_model([custom], {"x": [2]}, ["y"]))
    with pytest.raises(ModelError, match=r"^node 'Scatter_0' \(Scatter\) is not an operator of ONNX's default domain "
                                         r"at opset 8$"):
        import_onnx(make_model([helper.make_node("Scatter", ["x", "x"], ["y"])], {"x": [2]}, ["y"], opset=8))
    noise = helper.make_node("RandomNormalLike", ["x"], ["y"], name="n")
    with pytest.raises(ModelError, match=r"^node 'n' \(RandomNormalLike\) draws random numbers: no reference can be "
                                         r"bit-exact, so openvta does not run it$"):
        import_onnx(make_model([noise], {"x": [2]}, ["y"]))
    to_sequence = helper.make_node("SplitToSequence", ["x"], ["y"], name="s")
    with pytest.raises(ModelError, match=r"^node 's' \(SplitToSequence\) output 'y' is a sequence; openvta's graphs "
                                         r"hold tensors only$"):
        import_onnx(make_model([to_sequence], {"x": [2]}, ["y"]))
    nonzero = helper.make_node("NonZero", ["x"], ["y"], name="nz")
    with pytest.raises(ModelError, match=r"^node 'nz' \(NonZero\) output 'y' has a shape that ONNX's shape "
                                         r"inference cannot give without the data: openvta compiles static shapes "
                                         r"only$"):
        import_onnx(make_model([nonzero], {"x": [2]}, ["y"]))


def test_an_operator_without_an_openvta_kernel_runs_on_onnxs_reference() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("DynamicQuantizeLinear", ["r"], ["y", "s", "z"], name="q0")]
    graph = import_onnx(make_model(nodes, {"x": [2]}, ["y", "z"]))
    assert [(n.name, n.op, n.op_name) for n in graph.nodes] == [
        ("Relu_0", Op.RELU, "Relu"), ("q0", Op.ONNX_REFERENCE, "DynamicQuantizeLinear"),
        ("q0:2", Op.ONNX_REFERENCE, "DynamicQuantizeLinear")]  # one node per output read
    assert graph.types["y"].dtype is DType.UINT8 and graph.types["z"] == graph.types["z"].with_quant(None)
    assert "y: uint8[2] = DynamicQuantizeLinear(r) opset=13 out_dtype=uint8 output=0 outputs=2  # q0" in graph.dump()


def test_an_older_opset_with_an_operator_whose_meaning_changed_is_kept() -> None:
    graph = import_onnx(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": [2]}, ["y"], opset=6))
    assert graph.notes == ("opset 6 kept (onnx.version_converter upgrades from opset 7 on): every node runs on "
                           "ONNX's reference kernels, on the CPU",)
    assert graph.nodes[0].op is Op.ONNX_REFERENCE
    from onnx.backend.test.case.node import collect_testcases

    (scan,) = [case.model for case in collect_testcases() if case.name == "test_scan_sum"]  # Scan 8
    graph = import_onnx(scan)
    assert graph.notes == ("opset 8 kept (Scan changed meaning by opset 13 and openvta has no kernel for "
                           "it): every node runs on ONNX's reference kernels, on the CPU",)


def test_an_operator_whose_new_version_only_adds_types_is_upgraded() -> None:
    """Upsample 9 and Resize 13 have one signature (the converter makes the one the other);
    Slice 11 and 13 too (13 adds bfloat16): the model is upgraded, its nodes openvta's."""
    upsample = helper.make_node("Upsample", ["x", "s"], ["y"], mode="nearest")
    graph = import_onnx(make_model([upsample], {"x": [1, 1, 2, 2]}, ["y"],
                                   {"s": np.array([1, 1, 2, 2], np.float32)}, opset=9))
    assert graph.notes == ("opset 9 upgraded to 13 with onnx.version_converter",)
    assert [n.op for n in graph.nodes] == [Op.RESHAPE, Op.EXPAND, Op.RESHAPE]  # the nearest Resize a repetition
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    np.testing.assert_array_equal(execute(graph, {"x": x})["y"], x.repeat(2, axis=2).repeat(2, axis=3))


def test_input_errors() -> None:
    relu = [helper.make_node("Relu", ["x"], ["y"])]
    model = make_model(relu, {"x": [2]}, ["y"])
    model.graph.input[0].CopyFrom(tensor_input("x", [2], TensorProto.STRING))
    with pytest.raises(ModelError, match=r"^input 'x' is a tensor of string; openvta holds numbers and booleans "
                                         r"\(no strings\)$"):
        import_onnx(model)
    with pytest.raises(ModelError, match=r"^input 'x' dimension 1 must be a fixed size, not 'H' "
                                         r"\(only the batch may vary\)$"):
        import_onnx(make_model(relu, {"x": ["N", "H"]}, ["y"]))
    model.graph.input[0].CopyFrom(tensor_input("x", None))
    with pytest.raises(ModelError, match=r"^input 'x' must have a shape, not none$"):
        import_onnx(model)
    bad_init = make_model([helper.make_node("Add", ["x", "b"], ["y"])], {"x": [2]}, ["y"],
                          {"b": np.array(["a", "b"])})
    with pytest.raises(ModelError, match=r"^constant 'b' holds strings; openvta holds numbers and booleans$"):
        import_onnx(bad_init)


@pytest.mark.parametrize(("attrs", "message"), [
    ({"group": 2}, "attribute group must divide the 2 input channels and the 4 output channels "
                   "(weight (4, 2, 3, 3)), not 2"),
    ({"dilations": [2, 2]}, "attribute dilations must be all 1, not [2, 2]"),
    ({"foo": 1}, "attribute 'foo' is not supported; supported: auto_pad, dilations, group, kernel_shape, pads, "
                 "strides"),
])
def test_a_conv_openvtas_kernel_does_not_take_runs_on_onnxs_reference(attrs, message) -> None:
    node = import_onnx(_conv_model(**attrs)).node("conv1")
    assert node.op is Op.ONNX_REFERENCE and node.op_name == "Conv"
    assert node.attrs["reason"] == f"openvta's Conv kernel does not take it ({message})"


def test_a_conv_onnx_refuses_is_refused() -> None:
    with pytest.raises(ModelError, match=r"^node 'conv1' \(Conv\): ONNX's shape inference refuses it: Attribute pads "
                                         r"has incorrect size$"):
        import_onnx(_conv_model(pads=[1, 1]))


def test_depthwise_conv_imports() -> None:
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="dw", group=2, pads=[1, 1, 1, 1])
    graph = import_onnx(make_model([node], {"x": [1, 2, 5, 5]}, ["y"],
                                   {"w": np.ones((2, 1, 3, 3), np.float32)}))
    assert graph.node("dw").attrs["group"] == 2 and graph.types["y"].shape == (1, 2, 5, 5)


@pytest.mark.parametrize(("node", "inits", "message"), [
    (helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 2], storage_order=1), {},
     "attribute storage_order must be 0, not 1"),
    (helper.make_node("MaxPool", ["x"], ["y", "i"], name="p", kernel_shape=[2, 2]), {},
     "must have one output, not ['y', 'i']"),
    (helper.make_node("Clip", ["x", "x"], ["y"], name="p"), {}, "min must be a constant (an initializer)"),
    (helper.make_node("Dropout", ["x", "", "t"], ["y"], name="p"), {"t": np.array(True)},
     "training_mode must be false (inference only)"),
    (helper.make_node("Pad", ["x", "pads"], ["y"], name="p", mode="mirror"), {"pads": np.zeros(8, np.int64)},
     "Pad mode must be one of constant, reflect, edge, wrap, not 'mirror'"),
])
def test_a_form_openvtas_kernel_does_not_take_runs_on_onnxs_reference(node, inits, message) -> None:
    made = import_onnx(make_model([node], {"x": ["N", 2, 6, 6]}, ["y"], inits)).node("p")
    assert made.op is Op.ONNX_REFERENCE
    assert made.attrs["reason"] == f"openvta's {node.op_type} kernel does not take it ({message})"


@pytest.mark.parametrize(("node", "inits", "message"), [
    (helper.make_node("Reshape", ["x", "x"], ["y"], name="r"), {},
     r"^node 'r' \(Reshape\): ONNX's shape inference refuses it: shape typestr: tensor\(int64\), has unsupported "
     r"type: tensor\(float\)$"),
    (helper.make_node("Reshape", ["x", "s"], ["y"], name="r"), {"s": np.array([5, -1])},
     r"^node 'r' \(Reshape\) output 'y' has a shape that ONNX's shape inference cannot give without the data: "
     r"openvta compiles static shapes only$"),
    (helper.make_node("Gemm", ["x", "x"], ["y"], name="g"), {},
     r"^node 'g' \(Gemm\): ONNX's shape inference refuses it: Input 0 expected to have rank 2 but has rank 4 in "
     r"node Gemm \(g\)\.$"),
    (helper.make_node("Relu", ["nowhere"], ["y"], name="r"), {},
     r"^node 'r' \(Relu\) reads 'nowhere' before it is defined$"),
    (helper.make_node("Unsqueeze", ["x"], ["y"], name="u"), {},
     r"^node 'u' \(Unsqueeze\): ONNX's shape inference refuses it: Input 1 is out of bounds\.$"),
    (helper.make_node("Pad", ["x", "p", "", "a"], ["y"], name="p"), {"p": np.array([1, 1, 1]), "a": np.array([2, 3])},
     r"^node 'p' \(Pad\): ONNX's shape inference refuses it: Pads has incorrect number of values$"),
    (helper.make_node("Squeeze", ["x", "a"], ["y"], name="s"), {"a": np.array([1])},
     r"^node 's' \(Squeeze\): ONNX's shape inference refuses it: Dimension of input 1 must be 1 instead of 2$"),
])
def test_node_errors(node, inits, message) -> None:
    with pytest.raises(ModelError, match=message):
        import_onnx(make_model([node], {"x": ["N", 2, 6, 6]}, ["y"], inits))


def test_undefined_output_is_an_error() -> None:
    with pytest.raises(ModelError, match=r"^model output 'z' is never computed$"):
        import_onnx(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": [2]}, ["z"]))


def test_a_bool_operand_onnx_refuses_is_refused() -> None:
    node = helper.make_node("Add", ["x", "t"], ["y"], name="a")
    with pytest.raises(ModelError, match=r"^node 'a' \(Add\): ONNX's shape inference refuses it: B typestr: T, has "
                                         r"unsupported type: tensor\(bool\)$"):
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


def test_a_declined_nodes_reason_keeps_its_whole_message_whatever_its_name() -> None:
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="odd) name", dilations=[2, 2])
    made = import_onnx(make_model([node], {"x": ["N", 2, 6, 6]}, ["y"], {"w": W})).node("odd) name")
    assert made.attrs["reason"] == ("openvta's Conv kernel does not take it (attribute dilations must be all 1, "
                                    "not [2, 2])")
