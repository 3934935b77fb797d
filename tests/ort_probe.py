"""Whether onnxruntime's int8 kernels are exact on this CPU: a known-answer probe.

onnxruntime's MLAS picks its int8 GEMM by instruction set. With AVX-512 VNNI or AVX-VNNI
(``vpdpbusd``) every product is summed in 32 bits; without them its u8s8 kernel
(``vpmaddubsw``) adds *pairs* of products in 16 bits and saturates, so a QDQ model whose
activations and weights are large gives other integers on such a machine (onnxruntime's
quantization docs advise ``reduce_range`` there for this reason). openvta's ``exact`` mode
is defined by the ONNX specification, so the tests compare it with ``onnx.reference``; a
comparison with onnxruntime's int8 outputs runs only where this probe finds them exact,
and is skipped with the probe's finding otherwise.

The probe is a QDQ 1×1 convolution of 64 channels to 16 over 8×8 pixels (a GEMM of
16 × 64 × 64, large enough for MLAS's packed kernels), each activation 127 (255 once
onnxruntime shifts int8 activations to uint8 for its u8s8 kernel) and each weight 127:
a pair of products is 2 · 255 · 127 = 64,770, past int16's 32,767, so a saturating kernel
cannot give the answer. The scales are powers of two and the sum is no tie, so the
answer is one integer every exact implementation agrees on.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

CHANNELS = 64
OUT_CHANNELS = 16
PIXELS = 8
OUT_SHIFT = 13  # y_scale = 2**13: 64 · 127 · 127 / 8192 = 126.008, rounded to 126


@dataclass(frozen=True)
class Probe:
    """The probe's finding: onnxruntime's and the specification's first differing output code
    (or their common code when all are equal)."""

    ort: int
    spec: int

    @property
    def exact(self) -> bool:
        return self.ort == self.spec

    def describe(self) -> str:
        verdict = "exact" if self.exact else "saturating"
        return (f"onnxruntime int8 kernels: {verdict} on this CPU (known-answer probe: "
                f"onnxruntime {self.ort}, the ONNX specification {self.spec})")


def probe_model() -> onnx.ModelProto:
    """x → Q/DQ → Conv(DQ(w)) → Q/DQ → y, as ``quantize_static`` writes a convolution."""
    inits = {"s": np.float32(1.0), "z": np.int8(0), "sy": np.float32(2.0 ** OUT_SHIFT),
             "wq": np.full((OUT_CHANNELS, CHANNELS, 1, 1), 127, np.int8), "ws": np.float32(1.0)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "z"], ["w"]),
             helper.make_node("Conv", ["xd", "w"], ["c"]),
             helper.make_node("QuantizeLinear", ["c", "sy", "z"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "sy", "z"], ["y"])]
    graph = helper.make_graph(
        nodes, "ort_int8_probe",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, (1, CHANNELS, PIXELS, PIXELS))],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def probe_input() -> dict[str, np.ndarray]:
    return {"x": np.full((1, CHANNELS, PIXELS, PIXELS), 127.0, np.float32)}


def _codes(y: object) -> np.ndarray:
    return np.rint(np.asarray(y, np.float64).ravel() / 2.0 ** OUT_SHIFT).astype(np.int64)


def spec_codes() -> np.ndarray:
    """The probe's output codes as ``onnx.reference`` computes them."""
    (y,) = ReferenceEvaluator(probe_model()).run(None, probe_input())
    return _codes(y)


def ort_codes() -> np.ndarray:
    """The probe's output codes as onnxruntime's CPU provider computes them (fusions on)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(probe_model().SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    (y,) = session.run(None, probe_input())
    return _codes(y)


def finding(ort: np.ndarray, spec: np.ndarray) -> Probe:
    """The first code where ``ort`` and ``spec`` differ, or their first code."""
    differ = np.flatnonzero(ort != spec)
    at = int(differ[0]) if len(differ) else 0
    return Probe(ort=int(ort[at]), spec=int(spec[at]))


def saturating_u8s8_code() -> int:
    """What a kernel that sums pairs of u8·s8 products in int16 gives for the probe.

    onnxruntime shifts int8 activations by +128 to uint8 and subtracts ``128 · Σw`` after
    the GEMM; ``vpmaddubsw`` saturates each pair's sum to int16 on the way.
    """
    x_u8 = np.full(CHANNELS, 127 + 128, np.int64)
    w = np.full(CHANNELS, 127, np.int64)
    pairs = np.clip((x_u8 * w).reshape(-1, 2).sum(1), -2 ** 15, 2 ** 15 - 1)
    acc = int(pairs.sum()) - 128 * int(w.sum())
    return int(np.clip(np.rint(acc / 2.0 ** OUT_SHIFT), -128, 127))


@functools.lru_cache(maxsize=1)
def probe() -> Probe | None:
    """This CPU's finding, or None when onnxruntime is not installed."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return None
    return finding(ort_codes(), spec_codes())


def require_exact_ort_int8(found: Probe | None = None) -> None:
    """Skip the calling test's onnxruntime comparison unless onnxruntime's int8 is exact here."""
    found = probe() if found is None else found
    if found is None:
        pytest.skip("onnxruntime is not installed (the dev extra)")
    if not found.exact:
        pytest.skip(found.describe() + "; the ONNX specification's comparison still runs")
