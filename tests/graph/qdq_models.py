"""QDQ models for the graph tests: float models quantized by onnxruntime's ``quantize_static``,
and hand-made Q/DQ fragments for the importer's errors."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

DIGITS = Path(__file__).resolve().parents[2] / "examples" / "digits"
sys.path.insert(0, str(DIGITS))
from digits_data import load_split  # noqa: E402

__all__ = ["DIGITS", "load_split", "quantize_qdq", "qdq_fragment", "ort_outputs", "spec_outputs",
           "assert_equals_spec"]

#: the opset at which ``onnx.reference`` implements QuantizeLinear and DequantizeLinear
#: (it has no kernel of opset 13, which ``quantize_static`` writes)
SPEC_OPSET = 21


def _reader(name: str, samples: np.ndarray, batch: int) -> object:
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        """Feeds ``samples`` to the calibrator ``batch`` at a time."""

        def __init__(self) -> None:
            self.feeds: Iterator[dict[str, np.ndarray]] = iter(
                {name: samples[i:i + batch]} for i in range(0, len(samples), batch))

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    return Reader()


def quantize_qdq(model: str | Path | onnx.ModelProto, out: Path, samples: np.ndarray, *,
                 per_channel: bool, input_name: str = "image") -> Path:
    """``model`` quantized by onnxruntime (QDQ, int8 activations and weights) into ``out``."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    # quantize_static writes "<model>-inferred.onnx" beside its input: always quantize a
    # private copy, so that two test workers never share (and delete) that file.
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(str(model))
    source = out.with_suffix(".float.onnx")
    onnx.save(model, str(source))
    model = source
    quantize_static(str(model), str(out), _reader(input_name, samples, 32),
                    quant_format=QuantFormat.QDQ, per_channel=per_channel,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    return out


def ort_outputs(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The model's outputs as onnxruntime computes them (its default optimizations)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in session.run(None, feeds)]


def spec_outputs(path: Path | onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The model's outputs as the ONNX specification computes them: ``onnx.reference`` on the
    model upgraded to :data:`SPEC_OPSET` by ``onnx.version_converter``."""
    from onnx import version_converter
    from onnx.reference import ReferenceEvaluator

    model = path if isinstance(path, onnx.ModelProto) else onnx.load(str(path))
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if opset < SPEC_OPSET:
        model = version_converter.convert_version(model, SPEC_OPSET)
    return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds)]


def output_step(path: Path | onnx.ModelProto, output: str) -> float:
    """The scale of the DequantizeLinear that writes ``output``: one int8 code of it."""
    model = path if isinstance(path, onnx.ModelProto) else onnx.load(str(path))
    node = next(n for n in model.graph.node if output in n.output)
    assert node.op_type == "DequantizeLinear", f"{output!r} is written by {node.op_type}"
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return float(np.max(inits[node.input[1]]))


def assert_equals_spec(got: np.ndarray, spec: np.ndarray, step: float) -> None:
    """``exact`` mode's dequantized outputs against the specification's, code for code.

    They differ only where the real requantized value lies within float32 rounding of a
    half: the specification's QDQ graph computes the convolution in float32 on dequantized
    values (BLAS's summation order, so the CPU decides such a tie) and divides by the output
    scale, ``exact`` multiplies its int32 sum by one float32 multiplier, as onnxruntime's
    exact kernels do. Such a value is one code off, and rare: at most one in 2,000 (the
    digits model, 17,970 values: 3 per tensor and 1 per channel, measured).
    """
    assert got.shape == spec.shape and got.dtype == spec.dtype
    differ = got != spec
    assert np.all(np.abs(got[differ].astype(np.float64) - spec[differ]) <= step * 1.0001), \
        f"values more than one code ({step}) from the specification: {np.abs(got - spec).max()}"
    assert int(differ.sum()) <= got.size // 2000, f"{int(differ.sum())} of {got.size} differ"


def qdq_fragment(nodes: Sequence[onnx.NodeProto], initializers: dict[str, np.ndarray],
                 shape: Sequence[int] = (1, 2), output: str = "y") -> onnx.ModelProto:
    """A model of ``nodes`` reading float ``x`` of ``shape`` (for the importer's errors)."""
    graph = helper.make_graph(
        list(nodes), "fragment", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(output, onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model
