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

__all__ = ["DIGITS", "load_split", "quantize_qdq", "qdq_fragment", "ort_outputs"]


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
    quantize_static(str(model), str(out), _reader(input_name, samples, 32),  # type: ignore[arg-type]
                    quant_format=QuantFormat.QDQ, per_channel=per_channel,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    return out


def ort_outputs(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The model's outputs as onnxruntime computes them (its default optimizations)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in session.run(None, feeds)]


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
