"""compile_model and CompiledModel: options, input checks, run, summary, the .ovta file."""

from __future__ import annotations

from typing import Any

from openvta.compiler.ops import REGISTRY

import io
import json
import zipfile

import numpy as np
import pytest
from graphs import conv_relu_graph
from onnx import helper
from onnx_models import make_model

from openvta.graph.errors import ExecutionError, ModelError
from openvta.graph.ir import Device, RequantMode
from openvta.graph.compiled_model import CompiledModel, load_model
from openvta.graph.pipeline import FLOAT_STAGE, PASSES, compile_model as compile_graph

RNG = np.random.default_rng(7)
X = RNG.standard_normal((6, 16, 6, 6)).astype(np.float32)


def compile_model(*args: Any, **kwargs: Any) -> CompiledModel:
    """The graph level's ``compile_model`` with symmetric activations: these tests reason about
    the integer graph's ReLU nodes and kernel names (at the default zero points a ReLU is the
    requantization's clip, no node of its own; tests/graph/test_zero_points.py)."""
    return compile_graph(*args, **{"activations": "symmetric", **kwargs})


@pytest.fixture(scope="module")
def model() -> CompiledModel:
    return compile_model(conv_relu_graph(), X, config="default", quantize="pow2")


def _bytes(model: CompiledModel) -> bytes:
    buffer = io.BytesIO()
    model.save(buffer)
    return buffer.getvalue()


def test_compile_model_runs_every_pass(model: CompiledModel) -> None:
    names = [name for name, _ in PASSES]
    assert [name for name in names if ":" not in name] == ["infer shapes", "correct biases", "calibrate", "quantize",
                                                           "partition", "fuse", "match kernels", "pack layouts",
                                                           "plan memory", "lower"]
    # the last float step: bias correction (an option) changes what the int8 model is made from
    assert names.index(FLOAT_STAGE) == names.index("correct biases") - 1
    assert model.mode is RequantMode.POW2 and model.config.name == "v2"  # default is v2, by its own name
    assert model.graph.memory is not None and all(n.group is not None for n in model.graph.nodes)
    out = model.reference(X[:3])
    assert set(out) == {"y"} and out["y"].shape == (3, 4) and out["y"].dtype == np.float32
    ref = model.float_reference(X[:3])["y"]
    assert np.abs(out["y"] - ref).max() < 0.05 * np.abs(ref).max()


def test_an_onnx_model_and_feeds_from_an_iterable() -> None:
    node = helper.make_node("Relu", ["x"], ["y"])
    batches = [np.array([[-4.0, 1.0, 0.0]]), np.array([[0.5, 2.5, -1.0]])]
    m = compile_model(make_model([node], {"x": ["N", 3]}, ["y"]), ({"x": b} for b in batches))
    x = np.array([[-1.0, 0.5, 2.0]], np.float64)  # float64 is accepted
    scale = 2.5 / 127  # the input is read only by a ReLU: its positive range
    np.testing.assert_allclose(m.reference({"x": x})["y"], [[0.0, 0.5, 2.0]], atol=scale / 2)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"quantize": "int4"}, r"^quantize must be one of pow2, fixed, exact, not 'int4'$"),
    ({"cpu_ops": ["Lstm"]}, r"^cpu_ops entries must be op types \(.*\), not 'Lstm'$"),
    ({"cpu_nodes": "conv"}, r"^cpu_nodes must be a collection of node names, not the string 'conv'$"),
    ({"calibration": X[:, :3]}, r"^input 'x' must have shape \(N, 16, 6, 6\), not \(6, 3, 6, 6\)$"),
    ({"calibration": X.astype(np.int32)}, r"^input 'x' must hold floating-point values, not int32$"),
    ({"calibration": X[:0]}, r"^calibration must hold at least one sample, not none$"),
    ({"calibration": {"z": X}}, r"^calibration names must be the model's inputs \(x\), not 'z'$"),
    ({"calibration": [X]}, r"^calibration must be an array or an iterable of mappings of input "
                           r"name to array, not an iterable of ndarray$"),
    ({"calibration": 3}, r"^calibration must be an array or an iterable of mappings of input "
                         r"name to array, not int$"),
    ({"config": "huge"}, r"."),
])
def test_compile_model_errors(kwargs: dict, message: str) -> None:
    kwargs = {"calibration": X, **kwargs}
    with pytest.raises(ValueError, match=message):
        compile_model(conv_relu_graph(), **kwargs)


def test_inputs_are_checked_at_run_and_reference(model: CompiledModel) -> None:
    with pytest.raises(ValueError, match=r"^input 'x' must have shape \(N, 16, 6, 6\), not "
                                         r"\(16, 6, 6\)$"):
        model.reference(X[0])
    with pytest.raises(ValueError, match=r"^input must give every model input; 'x' is missing$"):
        model.float_reference({})


def test_run_equals_the_reference_and_reports_cycles(model: CompiledModel) -> None:
    assert model.accelerator_groups() == [1, 3]
    expected = model.reference(X)["y"]
    out = model.run(X, backend="functional")
    assert np.array_equal(out["y"], expected) and out["y"].dtype == np.float32
    assert out.report.cycles is None and all(k.utilization is None for k in out.report.kernels)
    timed = model.run(X, backend="cycle", max_cycles=10 ** 7)
    assert np.array_equal(timed["y"], expected)
    accel = [k for k in timed.report.kernels if k.placement is Device.ACCEL]
    assert [k.name for k in accel] == ["conv+conv.requantize+relu", "fc+fc.requantize"]
    assert timed.report.cycles == sum(k.cycles for k in accel) and min(k.cycles for k in accel) > 0
    assert all(0 < k.utilization <= 1 for k in accel)
    assert np.array_equal(model.run(X[:0])["y"], expected[:0])  # an empty batch runs nothing


def test_run_errors(model: CompiledModel) -> None:
    with pytest.raises(ValueError, match=r"^backend must be one of .*functional.*, not 'gpu'$"):
        model.run(X, backend="gpu")
    with pytest.raises(ValueError, match=r"^input 'x' must have shape \(N, 16, 6, 6\), not "
                                         r"\(2, 16, 5, 5\)$"):
        model.run(X[:2, :, :5, :5])
    with pytest.raises(TypeError, match=r"^the functional back end takes no options \['speed'\]$"):
        model.run(X, speed=2)
    stale = CompiledModel(model.graph.replace(regions=()), model.float_graph, model.config, model.mode)
    with pytest.raises(ExecutionError, match=r"^node 'conv' \(Conv\) is placed on the accelerator "
                                             r"but no region program runs it; compile the model "
                                             r"again$"):
        stale.run(X)


def test_a_model_on_the_cpu_runs_without_cycles() -> None:
    cpu = compile_model(conv_relu_graph(), X, cpu_ops=["Conv", "Gemm"])
    out = cpu.run(X, backend="cycle")
    assert np.array_equal(out["y"], cpu.reference(X)["y"])
    assert out.report.cycles is None and {k.placement for k in out.report.kernels} == {Device.CPU}
    assert out.report.regions == ()
    assert [k.name for k in out.report.kernels][:2] == ["x.quantize", "conv+conv.requantize+relu"]


def test_summary_lists_every_node(model: CompiledModel) -> None:
    text = model.summary()
    lines = text.splitlines()
    assert lines[0] == ("model conv_relu (pow2, config v2): 8 nodes in 5 fused groups, "
                        "2 on the accelerator; 85,248 MACs per image")
    assert lines[1] == "MACs: 100.0% on the accelerator (int8 products), none on the CPU"
    lines = lines[:1] + lines[2:]
    assert lines[1].startswith("arena ") and lines[4].split() == [
        "group", "node", "op", "placement", "MACs", "out", "B", "param", "B", "reason"]
    assert lines[2].startswith("region 0 (group 1): 1 kernel in one program of ")
    fc = model.graph.regions[1]
    assert fc.program is not None
    assert lines[3] == (f"region 1 (group 3): 1 kernel in one program of {fc.program.insn_count} "
                        f"instructions; accelerator arena {fc.arena_bytes:,} bytes with reuse, "
                        f"{fc.no_reuse_bytes:,} without")
    conv = next(line for line in lines if " conv " in line)
    assert conv.split()[:7] == ["1", "conv", "Conv", "accel", "82,944", "2,304", "2,368"]
    assert [r.name for r in model.nodes()] == [n.name for n in model.graph.nodes]


def test_the_model_file_round_trips(model: CompiledModel, tmp_path) -> None:
    path = tmp_path / "m.ovta"
    model.save(path)
    loaded = load_model(path)
    assert loaded.mode is model.mode and loaded.config == model.config
    assert loaded.graph.dump() == model.graph.dump()
    assert loaded.float_graph.dump() == model.float_graph.dump()
    assert loaded.graph.memory == model.graph.memory
    assert np.array_equal(loaded.reference(X)["y"], model.reference(X)["y"])
    with zipfile.ZipFile(path) as archive:  # plain data: no pickled objects anywhere
        assert all(name.endswith(".npy") for name in archive.namelist())


def _rewrite(data: bytes, change) -> bytes:
    entries = dict(np.load(io.BytesIO(data), allow_pickle=False))
    change(entries)
    out = io.BytesIO()
    np.savez(out, **entries)
    return out.getvalue()


def _header(entries: dict, edit) -> None:
    header = json.loads(str(entries["header"]))
    edit(header)
    entries["header"] = np.array(json.dumps(header))


@pytest.mark.parametrize(("corrupt", "message"), [
    (lambda d: d[: len(d) // 2], r"^model file '.*' is not an openvta model \(a truncated or damaged npz "
                                 r"archive\)$"),
    (lambda d: b"hello", r"^model file '.*' is not an openvta model \(not an npz archive\)$"),
    (lambda d: _rewrite(d, lambda e: e.update(format=np.array("openvta-program/1"))),
     r"^model file '.*' format must be 'openvta-model/1' or 'openvta-model/2', not 'openvta-program/1'$"),
    (lambda d: _rewrite(d, lambda e: e.pop("format")),
     r"^model file '.*' format must be 'openvta-model/1' or 'openvta-model/2', not None$"),
    (lambda d: _rewrite(d, lambda e: _header(e, lambda h: h["graphs"]["int"]["kernels"][0].update(
        operator="pool"))),
     rf"^model file '.*' integer graph is malformed: operator must be one of {', '.join(REGISTRY)}, "
     r"not 'pool'$"),
    (lambda d: _rewrite(d, lambda e: e.update(header=np.array("{not json"))),
     r"^model file '.*' header is not valid JSON: .*$"),
    (lambda d: _rewrite(d, lambda e: e.pop("int.c0")),
     r"^model file '.*' integer graph lacks the entry 'int\.c0'$"),
    (lambda d: _rewrite(d, lambda e: _header(e, lambda h: h.pop("mode"))),
     r"^model file '.*' header lacks 'mode'$"),
    (lambda d: _rewrite(d, lambda e: _header(e, lambda h: h["graphs"]["int"]["nodes"].reverse())),
     r"^model file '.*' integer graph holds an invalid graph: node .* reads .* before it is "
     r"defined$"),
    (lambda d: _rewrite(d, lambda e: _header(e, lambda h: h["graphs"]["int"]["nodes"][1].update(
        op="Lstm"))), r"^model file '.*' integer graph is malformed: 'Lstm' is not a valid Op$"),
    (lambda d: _rewrite(d, lambda e: _header(e, lambda h: h["config"].update(LOG_BATCH=99))),
     r"^model file '.*' header is malformed: .*$"),
])
def test_a_corrupt_or_foreign_model_file_is_a_one_line_error(model: CompiledModel, tmp_path,
                                                              corrupt, message: str) -> None:
    path = tmp_path / "bad.ovta"
    path.write_bytes(corrupt(_bytes(model)))
    with pytest.raises(ModelError, match=message) as info:
        load_model(path)
    assert "\n" not in str(info.value)


def _format_1(entries: dict) -> None:
    """The file as format 1 wrote it: no kernels in the graphs."""
    entries["format"] = np.array("openvta-model/1")
    _header(entries, lambda h: [graph.pop("kernels") for graph in h["graphs"].values()])
    for key in [k for k in entries if ".k" in k]:
        entries.pop(key)


def test_the_model_file_keeps_each_group_s_kernel_and_a_format_1_file_still_loads(model: CompiledModel,
                                                                                  tmp_path) -> None:
    assert model.graph.kernels
    path = tmp_path / "m.ovta"
    model.save(path)
    loaded = load_model(path)
    assert list(loaded.graph.kernels) == list(model.graph.kernels)
    for group, kernel in model.graph.kernels.items():
        again = loaded.graph.kernels[group]
        assert (again.name, again.operator, dict(again.params), again.epilogue, dict(again.bind), again.macs,
                again.adds, again.anchor) == (kernel.name, kernel.operator, dict(kernel.params), kernel.epilogue,
                                              dict(kernel.bind), kernel.macs, kernel.adds, kernel.anchor)
        assert kernel.vectors.keys() == again.vectors.keys()
        assert all(np.array_equal(kernel.vectors[k], again.vectors[k]) for k in kernel.vectors)
    old = tmp_path / "old.ovta"
    old.write_bytes(_rewrite(path.read_bytes(), _format_1))
    first = load_model(old)
    assert not first.graph.kernels
    np.testing.assert_array_equal(first.run(X[:2])["y"], model.run(X[:2])["y"])
    np.testing.assert_array_equal(first.run(X[:2])["y"], model.reference(X[:2])["y"])


def test_a_program_file_or_a_single_array_is_not_a_model(tmp_path) -> None:
    single = tmp_path / "one.npy"
    np.save(single, np.zeros(3))
    with pytest.raises(ModelError, match=r"^model file '.*one\.npy' is not an openvta model "
                                         r"\(a single numpy array, not an npz archive\)$"):
        load_model(single)
    with pytest.raises(ModelError, match=r"^model file '.*nothing\.ovta' does not exist$"):
        load_model(tmp_path / "nothing.ovta")


def test_a_two_input_model_takes_a_mapping() -> None:
    node = helper.make_node("Add", ["a", "b"], ["y"])
    feeds = {"a": RNG.standard_normal((4, 3)), "b": RNG.standard_normal((4, 3))}
    m = compile_model(make_model([node], {"a": ["N", 3], "b": ["N", 3]}, ["y"]), feeds)
    out = m.reference(feeds)["y"]
    np.testing.assert_allclose(out, feeds["a"] + feeds["b"], atol=0.05)
    with pytest.raises(ValueError, match=r"^input must be a mapping of input name to array for a "
                                         r"model with 2 inputs \(a, b\), not an array$"):
        m.reference(feeds["a"])
    with pytest.raises(ValueError, match=r"^input arrays must share one batch size, not \[2, 4\]$"):
        m.reference({"a": feeds["a"], "b": feeds["b"][:2]})
