"""The ResNet-18 example: the builder makes torchvision's graph, deterministically, and the
compiled model runs every conv (the first packed by the host's Im2Col), the residual adds, the ReLUs and the dense
layer on the accelerator, equal to its integer reference on the simulators."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx_models import run_onnxruntime

import openvta
from openvta.graph.execute import execute
from openvta.graph.feeds import as_feeds
from openvta.graph.ir import Device, Op
from openvta.graph.compiled_model import CompiledModel

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "resnet18"
sys.path.insert(0, str(EXAMPLE))
from make_model import build_resnet18, random_images  # noqa: E402

SMALL = {"size": 32, "width": 16}
TORCHVISION_PARAMETERS = 11_689_512  # sum(p.numel() for p in resnet18().parameters())


@pytest.fixture(scope="module")
def small() -> CompiledModel:
    model = build_resnet18(**SMALL)
    # (symmetric: the ReLUs stay nodes whose codes the tests count; the default zero points make
    # each the requantization's clip: tests/graph/test_zero_points.py runs this model with them)
    return openvta.compile_model(model, random_images(4, SMALL["size"], seed=1), activations="symmetric")


def _nonzero_fractions(model: CompiledModel, x: np.ndarray, nodes: list[str]) -> dict[str, float]:
    """The fraction of non-zero int8 values each named node makes on ``x``."""
    wanted = {n.outputs[0]: n.name for n in model.graph.nodes if n.name in nodes}
    seen: dict[str, float] = {}

    def observe(value: str, array: np.ndarray) -> None:
        if value in wanted:
            assert array.dtype == np.int8
            seen[wanted[value]] = float(np.count_nonzero(array)) / array.size

    execute(model.graph, as_feeds(model.graph, x), observe)
    return seen


def _check_placement(model: CompiledModel) -> None:
    placed = {n.name: n.placement for n in model.graph.nodes}
    convs = [n for n in model.graph.nodes if n.op is Op.CONV]
    assert len(convs) == 20
    for node in convs:  # conv1's 3 channels packed into 147 by the host's Im2Col
        assert placed[node.name].device is Device.ACCEL, (node.name, placed[node.name])
    assert placed["fc"].device is Device.ACCEL
    for node in model.graph.nodes:
        if node.op is Op.ADD or (node.op is Op.RELU and node.name != "relu"):
            assert placed[node.name].device is Device.ACCEL, node.name
            anchor = [m for m in model.graph.nodes if m.group == node.group and m.op is Op.CONV]
            assert len(anchor) == 1, f"{node.name} is not fused into a conv kernel"
    assert all(p.reason for p in placed.values())
    # the residual inputs are rescaled inside the Add's kernel, even when they come from
    # the CPU (the MaxPool) or from a downsample conv: conv1 is one region, every conv after
    # it another (after the MaxPool), and fc a third (after the pooling)
    assert len(model.graph.regions) == 3


def test_building_is_deterministic() -> None:
    first = build_resnet18().SerializeToString()
    assert build_resnet18().SerializeToString() == first
    assert build_resnet18(seed=1).SerializeToString() != first
    assert build_resnet18(**SMALL).SerializeToString() == build_resnet18(**SMALL).SerializeToString()
    images = random_images(2, 32)
    assert np.array_equal(images, random_images(2, 32))


def test_the_graph_is_torchvision_resnet18() -> None:
    model = build_resnet18()
    onnx.checker.check_model(model, full_check=True)
    ops = Counter(node.op_type for node in model.graph.node)
    assert ops == {"Conv": 20, "BatchNormalization": 20, "Relu": 17, "Add": 8, "MaxPool": 1,
                   "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1}
    parameters = sum(int(np.prod(t.dims)) for t in model.graph.initializer
                     if not t.name.endswith(("running_mean", "running_var")))
    assert parameters == TORCHVISION_PARAMETERS
    shape = model.graph.output[0].type.tensor_type.shape
    assert [d.dim_param or d.dim_value for d in shape.dim] == ["N", 1000]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"size": 16}, r"^size must be an integer of at least 32, not 16$"),
    ({"width": 0}, r"^width must be a positive integer, not 0$"),
    ({"classes": -1}, r"^classes must be a positive integer, not -1$"),
])
def test_bad_arguments_are_refused(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_resnet18(**kwargs)


def test_float_reference_equals_onnxruntime(small: CompiledModel) -> None:
    x = random_images(2, SMALL["size"], seed=3)
    (expected,) = run_onnxruntime(build_resnet18(**SMALL), {"image": x})
    ours = small.float_reference(x)["logits"]
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_small_variant_placement(small: CompiledModel) -> None:
    _check_placement(small)


def test_activations_survive_quantization(small: CompiledModel) -> None:
    last = ["layer4.0.relu2", "layer4.1.relu1", "layer4.1.relu2"]
    fractions = _nonzero_fractions(small, random_images(1, SMALL["size"], seed=2), last)
    assert set(fractions) == set(last)
    assert min(fractions.values()) > 0.25, fractions


@pytest.mark.parametrize("backend", ["functional", "cycle"])
def test_small_variant_runs_equal_to_its_reference(small: CompiledModel, backend: str) -> None:
    x = random_images(1, SMALL["size"], seed=2)
    out = small.run(x, backend=backend)
    assert np.array_equal(out["logits"], small.reference(x)["logits"])
    assert (out.report.cycles is not None and out.report.cycles > 0) is (backend == "cycle")


@pytest.mark.slow
def test_full_resnet18_from_a_file_runs_equal_to_its_reference(tmp_path: Path) -> None:
    path = tmp_path / "resnet18.onnx"
    onnx.save(build_resnet18(), str(path))
    model = openvta.compile_model(path, random_images(4, seed=1), activations="symmetric")  # (ReLU nodes)
    _check_placement(model)
    x = random_images(1, seed=2)
    last = ["layer4.0.relu2", "layer4.1.relu1", "layer4.1.relu2"]
    assert min(_nonzero_fractions(model, x, last).values()) > 0.25
    expected = model.reference(x)["logits"]
    for backend in ("functional", "cycle"):
        assert np.array_equal(model.run(x, backend=backend)["logits"], expected)
