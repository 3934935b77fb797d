"""Pass: quantize — rewrite a calibrated float graph into the integer graph.

Every float value ``v`` of the input graph may have two versions in the output: the
float one, which keeps the name ``v`` (graph inputs, outputs, float islands), and the
int8 one, ``v.q``, with the calibrated scale.  Each one is made when first needed: a
``Quantize`` node makes ``v.q`` from ``v``, a ``Dequantize`` node ``v`` from ``v.q``.
So graph inputs are quantized once, graph outputs dequantized under their own names,
and an op without an integer reference (BatchNormalization not folded, Softmax) runs as
a float island between a Dequantize and, if an integer op reads its result, a Quantize.

Per op, by its registry entry's quantization rule (``OpDef.quantize``, :class:`~..ops.base.QuantRule`;
``BY_RULE`` holds each rule's rewrite):

- Conv, Gemm, MatMul with constant weights: int8 data × int8 weights (per output
  channel) + int32 bias → int32 accumulator ``v.acc``, then ``Requantize`` to ``v.q``.
- Add: each operand requantized to int32 in the output scale (a constant operand is
  quantized to int32 directly), an int32 Add, a saturating Clip to int8.
- Relu, Clip (bounds in the input's scale), pooling and shape ops: the same op on int8.

In ``exact`` mode (a QDQ model's own parameters) the rules of ``quantize_exact`` apply;
both build on ``quantize_builder``.

Preconditions: a calibrated float graph (every float activation has a scale).
Postconditions: a verified integer graph computing the same function within
quantization error; its inputs and outputs are the float graph's, float32.
"""

from __future__ import annotations

import math

import numpy as np

from openvta.isa import (INT8_LIMIT, INT8_MAX, INT8_MIN, INT32_LIMIT, MAX_SHR_AMOUNT, WIDE_BYTE_SHIFT, WIDE_MAX,
                        WIDE_RANGE)

from ..errors import OutOfRange, PassError
from ..ir import DType, Graph, Node, Op, Precision, QuantParams, RequantMode
from ..ops.base import float_attr, int_attr, ints_attr
from ..ops.elementwise import EXP_BITS, SOFTMAX_FRACTION, SOFTMAX_TABLE_MAX
from ..ops.quant import SATURATED_RANGE, TABLE_SIZE
from ..ops.transformer import LAYER_NORM_FRACTION, ROOT_FRACTION
from ..ops.base import QuantRule
from ..registry import REGISTRY, op_def
from ..quantization import activation_bits, pre_shift_for, quantize_weights, wide_scale
from .calibrate import ZERO_POINT_MEMBERS
from .infer_shapes import infer_shapes
from .quantize_builder import PASS_NAME, Builder, Rule, channel_axis, float_island
from .quantize_exact import EXACT_RULES, exact_island

__all__ = ["quantize"]

#: The ops that move codes (a 16-bit value moves through them on its way to a wide product).
_MOVES = frozenset(op for op, d in REGISTRY.items() if d.quantize is QuantRule.MOVE)


def _zero_points(b: Builder, node: Node) -> bool:
    """Whether an input or output of ``node`` has a zero point: the rules that do not compute
    with one keep such a node in float (calibrate gives their values none)."""
    return any(b.zero_point(v) for v in (*node.inputs, *node.outputs) if v not in b.source.constants)


def _same_op(b: Builder, node: Node) -> bool:
    x, out = node.inputs[0], node.outputs[0]
    if x in b.source.constants:
        return False
    if node.op in _MOVES and x in b.wide:  # a 16-bit value moved on its way to a wide product
        b.wide[out] = b.emit(f"{node.name}.wide", node.op, (b.wide[x],), b.name(f"{out}.q16"), dict(node.attrs),
                             b.types[b.wide[x]].quant)
        if x not in b.int8:
            return True
    if node.op in _MOVES and x not in b.int8 and x not in b.source.inputs:
        return False  # moves a value made in float (a wide product's): it stays float
    zero_point = b.zero_point(x)
    if zero_point and node.op not in ZERO_POINT_MEMBERS:
        return False  # (AveragePool, Resize, Im2Col average or pad codes: calibrate gives theirs none)
    if node.op is Op.RELU and zero_point:  # max(q, -128): the codes as they are (calibrate's only zero point)
        if zero_point != INT8_MIN:
            return False
        b.int8[out] = b.as_int8(x)
        return True
    b.int8[out] = b.emit(node.name, node.op, (b.as_int8(x),), b.name(f"{out}.q"),
                         dict(node.attrs), QuantParams((b.scale(x),), zero_point))
    return True


def _wants_wide(b: Builder, value: str) -> tuple[bool, bool]:
    """Whether ``value``'s readers, looking through moves (Reshape, Transpose, …), want its
    16-bit version (a product with a 16-bit input, a 16-bit residual sum) and whether any
    wants another."""
    wide, narrow = False, value in b.source.outputs
    for reader in b.readers.get(value, []):
        if reader.op in _MOVES:
            more = _wants_wide(b, reader.outputs[0])
            wide, narrow = wide or more[0], narrow or more[1]
        elif (reader.op in (Op.CONV, Op.GEMM) and reader.inputs[0] == value and activation_bits(reader)[0] == 16) \
                or (reader.op is Op.ADD and activation_bits(reader)[1] == 16):
            wide = True
        else:
            narrow = True
    return wide, narrow


def _clip(b: Builder, node: Node) -> bool:
    """Clip of an int8 value: its bounds in the input's scale and zero point."""
    if node.inputs[0] in b.source.constants:
        return False
    scale, zero_point = b.scale(node.inputs[0]), b.zero_point(node.inputs[0])
    attrs: dict[str, object] = {}
    for key, limit in (("min", INT8_MIN), ("max", INT8_MAX)):
        if key in node.attrs:
            bound = float_attr(node.attrs, key) / scale
            attrs[key] = int(np.clip(np.rint(bound) + zero_point, INT8_MIN, INT8_MAX)) if np.isfinite(bound) \
                else limit
    out = node.outputs[0]
    b.int8[out] = b.emit(node.name, Op.CLIP, (b.as_int8(node.inputs[0]),), b.name(f"{out}.q"),
                         attrs, QuantParams((scale,), zero_point))
    return True


def _linear(b: Builder, node: Node) -> bool:
    weight = b.source.constants.get(node.inputs[1])
    bias = b.source.constants.get(node.inputs[2]) if len(node.inputs) > 2 else None
    w_axis, out_axis = channel_axis(node)
    channels = weight.shape[w_axis] if weight is not None else 0
    # (a MatMul the accelerator can take is a Gemm by now, legalize's form: any
    # other, an N-D activation's with a symbolic batch or two activations', is a float island)
    if weight is None or node.op is Op.MATMUL or node.inputs[0] in b.source.constants \
            or (len(node.inputs) > 2 and (bias is None or bias.shape != (channels,))) \
            or any(float_attr(node.attrs, k, 1.0) != 1.0 for k in ("alpha", "beta")):
        return False  # not constant weights and bias in canonical form: a float island
    out = node.outputs[0]
    out_axis %= len(b.source.types[out].shape)
    w_q, w_scales = quantize_weights(weight, w_axis, b.mode)
    weight_sums = np.abs(np.moveaxis(w_q.astype(np.int64), w_axis, 0).reshape(channels, -1)).sum(1)
    bits = activation_bits(node)
    zero_in, zero_out = b.zero_point(node.inputs[0]), b.zero_point(out)
    if (bits[0] == 16 and zero_in) or (bits != (8, 8) and zero_out):
        return False  # (calibrate gives a 16-bit value, and a 16-bit product's output, no zero point)
    if bits != (8, 8):
        _wide_linear(b, node, bits, w_q, w_scales, weight_sums, bias)
        return True
    data_scale, out_scale = b.scale(node.inputs[0]), b.scale(out)
    acc_scales = data_scale * w_scales
    # zero points (docs/DECISIONS.md, "Zero points on non-negative activations"): the output's,
    # zp / M in the accumulator, where M is the requantization's multiplier; the input's:
    offset = _zero_offset(b, node, w_q, acc_scales) + zero_out * out_scale
    bias_q, bound = _bias(b, node, bias, acc_scales, weight_sums, offset=offset)
    attrs = _padded_with_zero_point(b, node)
    inputs = (b.as_int8(node.inputs[0]),
              b.constant(f"{node.name}.weight.q", w_q, QuantParams(tuple(w_scales), axis=w_axis)),
              b.constant(f"{node.name}.bias.q", bias_q, QuantParams(tuple(acc_scales), axis=0)))
    acc = b.emit(node.name, node.op, inputs, b.name(f"{out}.acc"), attrs,
                 QuantParams(tuple(acc_scales), axis=out_axis))
    requantized = b.requantize(node.name, out, acc, acc_scales / out_scale, bound, DType.INT8, out_scale, out_axis)
    if zero_out:
        b.types[requantized] = b.types[requantized].with_quant(QuantParams((out_scale,), zero_out))
    b.int8[out] = requantized
    return True


def _zero_offset(b: Builder, node: Node, w_q: np.ndarray, acc_scales: np.ndarray) -> np.ndarray:
    """A product's bias term for its int8 input's zero point ``zp``, real values per output
    channel: ``Σ w·(q - zp) = Σ w·q - zp·Σw``, exactly (zeros for a symmetric input)."""
    w_axis, _ = channel_axis(node)
    zero_in = b.zero_point(node.inputs[0])
    sums = np.moveaxis(w_q.astype(np.int64), w_axis, 0).reshape(len(acc_scales), -1).sum(1)
    return -zero_in * sums * acc_scales if zero_in else np.zeros(len(acc_scales))


def _padded_with_zero_point(b: Builder, node: Node) -> dict[str, object]:
    """A product's attributes, with a padded Conv's ``pad_value`` at its input's zero point (the
    code of 0.0)."""
    attrs: dict[str, object] = dict(node.attrs)
    zero_in = b.zero_point(node.inputs[0])
    if zero_in and node.op is Op.CONV and any(ints_attr(node.attrs, "pads", 4, (0, 0, 0, 0))):
        attrs["pad_value"] = zero_in
    return attrs


def _bias(b: Builder, node: Node, bias: np.ndarray | None, acc_scales: np.ndarray,
          weight_sums: np.ndarray, limit: int | None = None, offset: np.ndarray | None = None
          ) -> tuple[np.ndarray, int]:
    """The int32 bias in the accumulator's scale (with ``offset``, real values per channel
    added to it: the zero points'), with the fixed pre-shift's rounding term for the bound
    ``limit`` (default: the accumulator's), and the accumulator's bound ``128 · Σ|w| + |bias|``."""
    real = np.zeros(len(acc_scales)) if bias is None else bias.astype(np.float64)
    if offset is not None:
        real = real + offset
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        exact = np.rint(real / acc_scales)
    if not np.all(np.abs(exact) < INT32_LIMIT):  # (past int32, or an accumulator's scale underflowed to 0)
        raise OutOfRange(PASS_NAME, f"node {node.label}: its bias does not fit int32 in the "
                                   "accumulator's scale")
    bias_q = exact.astype(np.int64)
    bound = int((INT8_LIMIT * weight_sums + np.abs(bias_q)).max())
    limit = bound if limit is None else limit
    if b.mode is RequantMode.FIXED and limit < INT32_LIMIT:
        bias_q = bias_q + ((1 << pre_shift_for(limit)) >> 1)  # the pre-shift rounds to nearest
    if np.abs(bias_q).max() >= INT32_LIMIT:
        raise OutOfRange(PASS_NAME, f"node {node.label}: its bias does not fit int32 in the "
                                   "accumulator's scale")
    return bias_q.astype(np.int32), bound


def _wide_linear(b: Builder, node: Node, bits: tuple[int, int], w_q: np.ndarray, w_scales: np.ndarray,
                 weight_sums: np.ndarray, bias: np.ndarray | None) -> None:
    """A product with a wide (16-bit) input or output computed by int8 passes of the
    accelerator (docs/DECISIONS.md, "Mixed precision").

    A wide input ``x = 256·hi + lo`` (``WideByte``, both int8) makes two products.  The
    low one first: ``T = round_shift(lo·W, 8 + e)``, stored as two bytes by two kernels and
    joined on the CPU (``JoinWide``); ``e`` is the least shift whose bound ``128·Σ|w| / 2**(8+e)``
    fits the wide range, so ``T`` is never clipped.  Then the high one, ``hi·W + bias +
    T·2**e`` — ``x·W / 256`` in the accumulator, ``T`` added as an int32 tensor operand —
    requantized to the output.  Every accumulator holds int8 × int8 products: never
    ``256·hi·W``, which passes 2**31 at K = 1536 with a 16-bit ``x``.  A wide output is
    two kernels of one product, its high and low bytes, joined on the CPU and dequantized.

    Before the requantization the accumulator is clipped to what maps to twice the
    output's range (``Clip``, exact: nothing the output can hold is cut), so the fixed
    requantization's pre-shift is chosen for that bound instead of ``128·Σ|w|``, which
    at K = 1536 would drop the bits a 16-bit output needs."""
    x, out = node.inputs[0], node.outputs[0]
    w_axis, out_axis = channel_axis(node)
    out_axis %= len(b.source.types[out].shape)
    weight = b.constant(f"{node.name}.weight.q", w_q, QuantParams(tuple(w_scales), axis=w_axis))
    attrs = _padded_with_zero_point(b, node)  # (an 8-bit input's zero point; a 16-bit one has none)
    precision = Precision(*bits, passes=(2 if bits[1] == 16 else 1) + (2 if bits[0] == 16 else 0))
    wide_bound = int(INT8_LIMIT * weight_sums.max())
    if bits[0] == 16:
        x_scale = wide_scale(b.scale(x), b.mode)
        wide = b.as_wide(x)
        data_scale = x_scale * (1 << WIDE_BYTE_SHIFT)
        high, low = (b.emit(f"{x}.{part}", Op.WIDE_BYTE, (wide,), b.name(f"{x}.{part}"), {"part": part},
                            QuantParams((x_scale * scale,)))
                     for part, scale in (("high", 1 << WIDE_BYTE_SHIFT), ("low", 1)))
        extra = next(e for e in range(MAX_SHR_AMOUNT) if (wide_bound >> (WIDE_BYTE_SHIFT + e)) + 1 <= WIDE_MAX)
        low_scales = x_scale * w_scales
        bytes_ = []
        for part in ("high", "low"):
            acc = b.emit(f"{node.name}.low.{part}", node.op, (low, weight), b.name(f"{out}.acc"), attrs,
                         QuantParams(tuple(low_scales), axis=out_axis), precision)
            shifted = b.emit(f"{node.name}.low.{part}.shift", Op.REQUANTIZE, (acc,), b.name(f"{out}.r"),
                             {"mode": b.mode, "pre_shift": 0, "multiplier": (1,),
                              "post_shift": (WIDE_BYTE_SHIFT + extra,), "axis": out_axis, "out_dtype": DType.INT32})
            bytes_.append(b.emit(f"{node.name}.low.{part}.byte", Op.WIDE_BYTE, (shifted,),
                                 b.name(f"{out}.low.{part}"), {"part": part}))
        partial = b.emit(f"{node.name}.low.join", Op.JOIN_WIDE, tuple(bytes_), b.name(f"{out}.low"))
        data, bound = high, wide_bound + ((wide_bound >> WIDE_BYTE_SHIFT) + (1 << extra))
    else:
        data, data_scale, partial, extra, bound = b.as_int8(x), b.scale(x), None, 0, 0
    acc_scales = data_scale * w_scales
    out_scale = wide_scale(b.scale(out), b.mode) if bits[1] == 16 else b.scale(out)
    multipliers = acc_scales / out_scale
    # the accumulator clipped to what maps to twice the output's range: a finer requantization
    saturation = int(np.ceil(2 * (WIDE_MAX if bits[1] == 16 else INT8_MAX) / multipliers.min()))
    offset = _zero_offset(b, node, w_q, acc_scales) if bits[0] == 8 else None
    bound += _bias(b, node, bias, acc_scales, weight_sums, offset=offset)[1]
    limit = min(bound, saturation)
    bias_q = _bias(b, node, bias, acc_scales, weight_sums, limit, offset)[0]
    bias_name = b.constant(f"{node.name}.bias.q", bias_q, QuantParams(tuple(acc_scales), axis=0))
    stored = []
    for part in ("high", "low") if bits[1] == 16 else ("",):
        tag = f"{node.name}.{part}" if part else node.name
        acc = b.emit(tag, node.op, (data, weight, bias_name), b.name(f"{out}.acc"), attrs,
                     QuantParams(tuple(acc_scales), axis=out_axis), precision)
        if partial is not None:
            operand = partial if not extra else b.emit(
                f"{tag}.partial", Op.REQUANTIZE, (partial,), b.name(f"{out}.partial"),
                {"mode": b.mode, "pre_shift": 0, "multiplier": (1,), "post_shift": (-extra,), "axis": out_axis,
                 "out_dtype": DType.INT32})
            acc = b.emit(f"{tag}.add", Op.ADD, (acc, operand), b.name(f"{out}.sum"), {},
                         QuantParams(tuple(acc_scales), axis=out_axis))
        if limit < bound:
            acc = b.emit(f"{tag}.saturate", Op.CLIP, (acc,), b.name(f"{out}.sat"),
                         {"min": -limit, "max": limit}, QuantParams(tuple(acc_scales), axis=out_axis))
        if not part:
            b.int8[out] = b.requantize(tag, out, acc, multipliers, limit, DType.INT8, out_scale, out_axis)
            return
        wide = b.requantize(tag, out, acc, multipliers, limit, DType.INT32, out_scale, out_axis)
        stored.append(b.emit(f"{tag}.byte", Op.WIDE_BYTE, (wide,), b.name(f"{out}.{part}"), {"part": part}))
    joined = b.emit(f"{node.name}.join", Op.JOIN_WIDE, tuple(stored), b.name(f"{out}.w"), {},
                    QuantParams((out_scale,)))
    b.real[out] = b.dequantize(out, joined, out)


def _matmul(b: Builder, node: Node) -> bool:
    """A product of two activations per head (``(H, M, K)`` by ``(H, K, N)``, static: what
    legalize makes of attention's): int8 × int8 → int32 in the scale ``s_a·s_b``, then
    ``Requantize`` to the output's scale.  Any other MatMul is a float island."""
    if any(v in b.source.constants for v in node.inputs):
        return _linear(b, node)
    if _zero_points(b, node):
        return False
    a, w = (b.source.types[v] for v in node.inputs)
    if a.ndim != 3 or w.ndim != 3 or not all(isinstance(d, int) for d in (*a.shape, *w.shape)):
        return False
    out = node.outputs[0]
    acc_scale, out_scale = b.scale(node.inputs[0]) * b.scale(node.inputs[1]), b.scale(out)
    bound = INT8_LIMIT * INT8_LIMIT * int(a.shape[-1])
    acc = b.emit(node.name, Op.MATMUL, (b.as_int8(node.inputs[0]), b.as_int8(node.inputs[1])),
                 b.name(f"{out}.acc"), {}, QuantParams((acc_scale,)))
    b.int8[out] = b.requantize(node.name, out, acc, np.array([acc_scale / out_scale]), bound, DType.INT8,
                               out_scale, axis=-1)
    return True


def _wide_add(b: Builder, node: Node) -> bool:
    """An Add with a 16-bit sum (``activation_bits``, a residual stream a LayerNorm reads):
    each operand — a constant, int8, 16-bit, or made in float and quantized to 16 bits at
    its own scale — as int32 in the sum's 16-bit scale, the int32 Add, a clip to the wide
    range."""
    if _zero_points(b, node):
        return False
    out = node.outputs[0]
    out_scale = wide_scale(b.scale(out), b.mode)
    operands = []
    for index, value in enumerate(node.inputs):
        if value in b.source.constants:
            q = np.rint(b.source.constants[value].astype(np.float64) / out_scale)
            if np.abs(q).max(initial=0) >= INT32_LIMIT:
                return False
            operands.append(b.constant(f"{value}.q32", q.astype(np.int32), QuantParams((out_scale,))))
            continue
        if value in b.wide or (value not in b.int8 and value not in b.source.inputs):
            own, source, limit = wide_scale(b.scale(value), b.mode), b.as_wide(value), WIDE_MAX + 1
        else:
            own, source, limit = b.scale(value), b.as_int8(value), INT8_LIMIT
        operands.append(b.requantize(f"{node.name}.in{index}", value, source, np.array([own / out_scale]), limit,
                                     DType.INT32, out_scale))
    total = b.emit(node.name, Op.ADD, tuple(operands), b.name(f"{out}.sum"), {}, QuantParams((out_scale,)))
    b.wide[out] = b.emit(f"{node.name}.saturate", Op.CLIP, (total,), b.name(f"{out}.q16"),
                         {"min": WIDE_RANGE[0], "max": WIDE_RANGE[1]}, QuantParams((out_scale,)))
    return True


def _softmax_reads(b: Builder, value: str) -> bool:
    """Only Softmaxes read ``value``, directly or through more masks added to it."""
    readers = b.readers.get(value, [])
    return value not in b.source.outputs and bool(readers) and all(
        r.op is Op.SOFTMAX or (r.op is Op.ADD and _softmax_reads(b, r.outputs[0])) for r in readers)


def _masked_scores(b: Builder, node: Node) -> bool:
    """An Add only Softmaxes read (directly or through more masks), of int8 scores — or
    scores already masked — and a mask (a constant, or a value made in float, as an
    attention mask of -3.4e38 from an index input): the int32 sum in the scores' scale, the
    mask saturated at ±2**30 (``Quantize`` with ``bits=32``), and the sum too where another
    mask is added to it.  The integer Softmax's table of an int32 input runs until its
    entries round to 0, so a masked position weighs 0, as in float, and the scores keep
    their int8 step, which one int8 or 16-bit scale spanning both the mask and the scores
    would lose."""
    out = node.outputs[0]
    if not _softmax_reads(b, out):
        return False
    scores = [v for v in node.inputs if v in b.int8 or v in b.scores]
    if len(scores) != 1 or any(v in b.wide for v in node.inputs):
        return False
    x = scores[0]
    if b.zero_point(x) or b.zero_point(out):
        return False  # (scores with a zero point: Add's own rule)
    mask = node.inputs[1 - node.inputs.index(x)]
    masked = _masked(b, x)
    if masked is not None:
        widened, scale = masked
    else:
        scale = b.scale(x)
        widened = b.requantize(f"{node.name}.in{node.inputs.index(x)}", x, b.as_int8(x), np.array([1.0]),
                               INT8_LIMIT, DType.INT32, scale)
    if mask in b.source.constants:
        q = np.clip(np.rint(b.source.constants[mask].astype(np.float64) / scale), *SATURATED_RANGE)
        mask_q = b.constant(f"{mask}.q32", q.astype(np.int32), QuantParams((scale,)))
    else:
        mask_q = b.emit(f"{mask}.quantize32", Op.QUANTIZE, (b.as_real(mask),), b.name(f"{mask}.q32"),
                        {"scale": scale, "bits": 32}, QuantParams((scale,)))
    operands = (widened, mask_q) if node.inputs[0] == x else (mask_q, widened)
    total = b.emit(node.name, Op.ADD, operands, b.name(f"{out}.sum"), {}, QuantParams((scale,)))
    if any(r.op is Op.ADD for r in b.readers.get(out, [])):  # another mask comes
        total = b.emit(f"{node.name}.saturate", Op.CLIP, (total,), b.name(f"{out}.sat"),
                       {"min": SATURATED_RANGE[0], "max": SATURATED_RANGE[1]}, QuantParams((scale,)))
    b.scores[out] = total
    return True


def _masked(b: Builder, value: str) -> tuple[str, float] | None:
    """The int32 masked scores ``_masked_scores`` made of ``value``, and their scale; None if
    it made none."""
    made = b.scores.get(value)
    quant = None if made is None else b.types[made].quant
    return None if made is None or quant is None else (made, quant.scale[0])


def _add(b: Builder, node: Node) -> bool:
    if activation_bits(node)[1] == 16:
        return _wide_add(b, node)
    if _masked_scores(b, node):
        return True
    if any(v not in b.source.constants and v not in b.int8 for v in node.inputs):
        return False  # an operand made in float (a float island's result): the sum stays float
    out = node.outputs[0]
    out_scale, zero_out = b.scale(out), b.zero_point(out)
    # each operand in the sum's scale; the zero points' constant, zp_out - Σ zp_i·M_i codes,
    # added to the first activation's product before its rounding (one ALU ADD, which the
    # drain unit takes as a stage): docs/DECISIONS.md, "Zero points on non-negative activations"
    constant = zero_out - sum(b.zero_point(v) * b.scale(v) / out_scale for v in node.inputs
                              if v not in b.source.constants)
    operands = []
    for index, value in enumerate(node.inputs):
        if value in b.source.constants:
            q = np.rint(b.source.constants[value].astype(np.float64) / out_scale)
            if np.abs(q).max(initial=0) >= INT32_LIMIT:
                raise OutOfRange(PASS_NAME, f"node {node.label}: constant {value!r} does not fit "
                                           "int32 in the output's scale")
            operands.append(b.constant(f"{value}.q32", q.astype(np.int32), QuantParams((out_scale,))))
            continue
        made = b.requantize(f"{node.name}.in{index}", value, b.as_int8(value), np.array([b.scale(value) / out_scale]),
                            INT8_LIMIT, DType.INT32, out_scale, add=constant)
        constant = 0.0
        b.types[made] = b.types[made].with_quant(QuantParams((out_scale,)))
        operands.append(made)
    total = b.emit(node.name, Op.ADD, tuple(operands), b.name(f"{out}.sum"), {},
                   QuantParams((out_scale,)))
    b.int8[out] = b.emit(f"{node.name}.saturate", Op.CLIP, (total,), b.name(f"{out}.q"),
                         {"min": INT8_MIN, "max": INT8_MAX}, QuantParams((out_scale,), b.zero_point(out)))
    return True


def _integer_source(b: Builder, value: str) -> bool:
    """``value`` has (or, a graph input, can have) an int8 version: an integer kernel may read it."""
    return value not in b.source.constants and (value in b.int8 or value in b.source.inputs)


def _table(b: Builder, node: Node) -> bool:
    """An element-wise function of an int8 value as the table of its 256 codes: int8 in the
    output's scale, and int32 in its wide scale for a reader with a 16-bit input."""
    x = node.inputs[0]
    extra = [b.source.constants.get(v) for v in node.inputs[1:]]  # (PRelu's slope)
    if not _integer_source(b, x) or any(c is None or np.unique(c).size != 1 for c in extra):
        return False  # a function of one input (and of constants of one value: a single PRelu slope)
    function = op_def(node.op).float_ref
    if function is None:
        return False
    codes = np.arange(INT8_MIN, INT8_MAX + 1, dtype=np.float64) - b.zero_point(x)
    constants = [np.asarray(c).reshape(-1)[:1].astype(np.float32) for c in extra if c is not None]
    values = function([(codes * b.scale(x)).astype(np.float32), *constants], node.attrs).astype(np.float64)
    return _emit_table(b, node, x, values)


def _emit_table(b: Builder, node: Node, x: str, values: np.ndarray) -> bool:
    """``node``'s output as the table of ``values`` (its float value at each of ``x``'s 256
    codes): int8 in the output's scale, int32 in its wide scale where a 16-bit reader wants it."""
    out = node.outputs[0]
    if not np.all(np.isfinite(values)):
        return False
    source = b.as_int8(x)
    wide, narrow = _wants_wide(b, out)
    for dtype, bounds, scale in ((DType.INT8, (INT8_MIN, INT8_MAX), b.scale(out)),
                                 (DType.INT32, WIDE_RANGE, wide_scale(b.scale(out), b.mode))):
        if (dtype is DType.INT8 and not narrow and wide) or (dtype is DType.INT32 and not wide):
            continue
        zero_point = b.zero_point(out) if dtype is DType.INT8 else 0
        table = tuple(int(v) for v in np.clip(np.rint(values / scale) + zero_point, *bounds))
        made = b.emit(f"{node.name}" if dtype is DType.INT8 else f"{node.name}.wide", Op.TABLE, (source,),
                      b.name(f"{out}.q" if dtype is DType.INT8 else f"{out}.q16"),
                      {"table": table, "out_dtype": dtype, "of": node.op.value}, QuantParams((scale,), zero_point))
        (b.int8 if dtype is DType.INT8 else b.wide)[out] = made
    return True


def _prelu(b: Builder, node: Node) -> bool:
    """PRelu of an int8 value: with one slope (torch's ``nn.PReLU()``) the table of its codes;
    with positive slopes per channel its halves, ``relu(x)`` and ``min(x, 0)``, each
    requantized to int32 in the output's scale (the negative half per channel, by its
    slope), added and saturated — Add's integer form.  Other slopes: a float island."""
    if _zero_points(b, node):
        return False
    if _table(b, node):
        return True
    x, out = node.inputs[0], node.outputs[0]
    slope = b.source.constants.get(node.inputs[1])
    data = b.source.types[x]
    channels = data.shape[1] if data.ndim >= 2 else None
    per_channel = (channels,) + (1,) * (data.ndim - 2)
    if slope is None or not _integer_source(b, x) or not isinstance(channels, int) or slope.size != channels \
            or slope.ndim < data.ndim - 1 or tuple(slope.shape[slope.ndim - len(per_channel):]) != per_channel \
            or slope.reshape(-1).min() <= 0:
        return False  # (a slope along another axis than the channels', or not positive)
    scale, out_scale = b.scale(x), b.scale(out)
    source = b.as_int8(x)
    positive = b.emit(f"{node.name}.positive", Op.RELU, (source,), b.name(f"{out}.positive"), {},
                      QuantParams((scale,)))
    negative = b.emit(f"{node.name}.negative", Op.CLIP, (source,), b.name(f"{out}.negative"),
                      {"min": INT8_MIN, "max": 0}, QuantParams((scale,)))
    halves = (b.requantize(f"{node.name}.positive", f"{out}.positive", positive, np.array([scale / out_scale]),
                           INT8_LIMIT, DType.INT32, out_scale, axis=-1),
              b.requantize(f"{node.name}.negative", f"{out}.negative", negative,
                           slope.reshape(-1).astype(np.float64) * scale / out_scale, INT8_LIMIT, DType.INT32,
                           out_scale, axis=1))
    total = b.emit(node.name, Op.ADD, halves, b.name(f"{out}.sum"), {}, QuantParams((out_scale,)))
    b.int8[out] = b.emit(f"{node.name}.saturate", Op.CLIP, (total,), b.name(f"{out}.q"),
                         {"min": INT8_MIN, "max": INT8_MAX}, QuantParams((out_scale,)))
    return True


def _is_gate(b: Builder, node: Node) -> bool:
    """Whether a Mul of two activations scales a feature map by a gate broadcast over its
    space (squeeze-and-excitation's ``(N, C, 1, 1)``): the int8 product holds the model's
    accuracy there (MobileNetV3-small: cosine 0.982 against 0.981 in float); an element-wise
    product such as SiLU's ``x·sigmoid(x)`` stays float, as int8 loses there (EfficientNet-B0:
    0.929 against 0.969)."""
    shapes = [b.source.types[v].shape for v in node.inputs]
    out = b.source.types[node.outputs[0]].shape
    return len(out) > 2 and any(len(s) == len(out) and s != out and all(d == 1 for d in s[2:]) for s in shapes)


def _scale_by(b: Builder, node: Node) -> bool:
    """Div or Mul of an int8 value by a positive scalar constant: a requantization.  A Mul
    of two int8 activations (a squeeze-and-excitation gate times its feature map, SiLU's
    ``x·sigmoid(x)``) is their int32 product in the scale ``s_a·s_b``, requantized."""
    if _zero_points(b, node):
        return False
    x, c = node.inputs
    if node.op is Op.MUL and x in b.source.constants:
        x, c = c, x
    if node.op is Op.MUL and all(v in b.int8 for v in node.inputs):
        if _wants_wide(b, node.outputs[0])[0] or not _is_gate(b, node) or any(v in b.real for v in node.inputs):
            return False  # a float product (an operand made in float stays so; docs/DECISIONS.md)
        out = node.outputs[0]
        acc_scale = b.scale(x) * b.scale(c)
        product = b.emit(node.name, Op.MUL, (b.int8[x], b.int8[c]), b.name(f"{out}.acc"), {},
                         QuantParams((acc_scale,)))
        b.int8[out] = b.requantize(f"{node.name}", out, product, np.array([acc_scale / b.scale(out)]),
                                   INT8_LIMIT * INT8_LIMIT, DType.INT8, b.scale(out), axis=-1)
        return True
    constant = b.source.constants.get(c)
    if constant is None or constant.size != 1 or not _integer_source(b, x) or float(constant.reshape(())) <= 0:
        return False
    factor = float(constant.reshape(()))
    factor = 1.0 / factor if node.op is Op.DIV else factor
    out = node.outputs[0]
    multiplier = b.scale(x) * factor / b.scale(out)
    if b.mode is RequantMode.POW2 and multiplier != 2.0 ** round(math.log2(multiplier)):
        return False  # shifts only: a factor that is not a power of two stays a float island
    b.int8[out] = b.requantize(node.name, out, b.as_int8(x), np.array([b.scale(x) * factor / b.scale(out)]),
                               INT8_LIMIT, DType.INT8, b.scale(out), axis=-1)
    return True


def _softmax(b: Builder, node: Node) -> bool:
    """Softmax of an int8 value, or of masked int32 scores (``_masked_scores``): the integer
    kernel (``softmax_int``) in the output's scale; an int32 input's exp table runs until
    its entries round to 0."""
    if _zero_points(b, node):
        return False
    x, out = node.inputs[0], node.outputs[0]
    masked = _masked(b, x)
    if masked is not None:
        source, scale = masked
        # 2**15·exp(-d·s) < 1/2 from d = ln(2**16)/s on
        length = math.ceil(math.log(1 << (EXP_BITS + 1)) / scale) + 1
        if length > SOFTMAX_TABLE_MAX:
            return False
    elif _integer_source(b, x):
        source, scale, length = b.as_int8(x), b.scale(x), TABLE_SIZE
    else:
        return False
    table = tuple(int(v) for v in np.rint((1 << EXP_BITS) * np.exp(-np.arange(length) * scale)))
    multiplier = int(round((1 << SOFTMAX_FRACTION) / b.scale(out)))
    b.int8[out] = b.emit(node.name, Op.SOFTMAX, (source,), b.name(f"{out}.q"),
                         {"axis": int_attr(node.attrs, "axis", -1), "exp_table": table, "multiplier": multiplier},
                         QuantParams((b.scale(out),)))
    return True


def _layer_norm(b: Builder, node: Node) -> bool:
    """LayerNormalization of an int8 or 16-bit value over its last axis, with constant scale
    and bias: the integer kernel (``layer_norm_int``) in the output's scale — int8 for the
    products that read it, 16-bit for a 16-bit residual sum that does."""
    if _zero_points(b, node):
        return False
    x, out = node.inputs[0], node.outputs[0]
    data = b.source.types[x]
    wide = x in b.wide
    if not (wide or _integer_source(b, x)) or any(v not in b.source.constants for v in node.inputs[1:]) \
            or int_attr(node.attrs, "axis", -1) % data.ndim != data.ndim - 1 or not isinstance(data.shape[-1], int):
        return False
    channels = int(data.shape[-1])
    scale_values = np.broadcast_to(b.source.constants[node.inputs[1]].astype(np.float64), (channels,))
    bias = np.broadcast_to(b.source.constants[node.inputs[2]].astype(np.float64), (channels,)) \
        if len(node.inputs) > 2 else np.zeros(channels)
    if max(np.abs(scale_values).max(), np.abs(bias).max()) * (1 << LAYER_NORM_FRACTION) / \
            wide_scale(b.scale(out), b.mode) >= 1 << 40:
        return False  # an output scale so fine the fixed-point gain would not fit: float
    in_scale = wide_scale(b.scale(x), b.mode) if wide else b.scale(x)
    root = 0 if wide else ROOT_FRACTION
    epsilon = int(round((1 << 2 * root) * channels * channels * float_attr(node.attrs, "epsilon", 1e-5)
                        / in_scale ** 2))
    sums, narrow = _wants_wide(b, out)  # a 16-bit residual sum reads the 16-bit output
    for dtype, scale in ((DType.INT8, b.scale(out)), (DType.INT32, wide_scale(b.scale(out), b.mode))):
        if (dtype is DType.INT8 and not narrow and sums) or (dtype is DType.INT32 and not sums):
            continue
        unit = (1 << LAYER_NORM_FRACTION) / scale
        gain, offset = np.rint(scale_values * unit).astype(np.int64), np.rint(bias * unit).astype(np.int64)
        name = b.name(f"{out}.q" if dtype is DType.INT8 else f"{out}.q16")
        made = b.emit(node.name if dtype is DType.INT8 else f"{node.name}.wide", Op.LAYER_NORM,
                      (b.wide[x] if wide else b.as_int8(x),), name,
                      {"axis": -1, "gain": tuple(int(v) for v in gain), "offset": tuple(int(v) for v in offset),
                       "epsilon_q": epsilon, "out_dtype": dtype}, QuantParams((scale,)))
        (b.int8 if dtype is DType.INT8 else b.wide)[out] = made
    return True


def _reduce(b: Builder, node: Node) -> bool:
    """ReduceMean, ReduceSum (axes as an attribute) or GlobalAveragePool of an int8 value: the
    int32 sum, then a requantization by ``s_in / (count · s_out)`` (``s_in / s_out`` for a
    sum) to int8 — the mean in its own calibrated scale (an SE block's pooled values are a
    few codes of the input's)."""
    x, out = node.inputs[0], node.outputs[0]
    data = b.source.types[x]
    if len(node.inputs) != 1 or not _integer_source(b, x):
        return False
    attrs: dict[str, object] = dict(node.attrs)
    if node.op is Op.GLOBAL_AVERAGE_POOL:  # the mean over every dimension after the channels
        attrs = {"axes": tuple(range(2, data.ndim)), "keepdims": 1}
    axes = attrs.get("axes")
    axes = tuple(range(data.ndim)) if axes is None else axes
    if not isinstance(axes, tuple) or not all(isinstance(a, int) for a in axes):
        return False
    sizes = [data.shape[int(a)] for a in axes]
    if not all(isinstance(d, int) for d in sizes):  # (a free batch is not reduced)
        return False
    reduced = math.prod(int(d) for d in sizes)
    count = 1 if node.op is Op.REDUCE_SUM else reduced
    total = b.emit(f"{node.name}.sum", Op.REDUCE_SUM, (b.as_int8(x),), b.name(f"{out}.sum"), attrs)
    zero_in = b.zero_point(x)  # Σ(q - zp) = Σq - zp·n
    bound = (INT8_LIMIT + abs(zero_in)) * reduced
    b.int8[out] = b.requantize(node.name, out, total, np.array([b.scale(x) / (count * b.scale(out))]), bound,
                               DType.INT8, b.scale(out), axis=-1, offset=-zero_in * reduced,
                               zero_point=b.zero_point(out))
    return True


def _concat(b: Builder, node: Node) -> bool:
    """Concat of int8 activations: each input requantized to the output's scale (none where
    the scales agree), the codes joined.  A constant or float input: a float island."""
    if _zero_points(b, node):
        return False
    if any(v in b.source.constants or not _integer_source(b, v) for v in node.inputs):
        return False
    out = node.outputs[0]
    scale = b.scale(out)
    parts = []
    for index, value in enumerate(node.inputs):
        source = b.as_int8(value)
        parts.append(source if b.scale(value) == scale else b.requantize(
            f"{node.name}.in{index}", value, source, np.array([b.scale(value) / scale]), INT8_LIMIT, DType.INT8,
            scale, axis=-1))
    b.int8[out] = b.emit(node.name, Op.CONCAT, tuple(parts), b.name(f"{out}.q"), dict(node.attrs),
                         QuantParams((scale,)))
    return True


#: The rewrite of each quantization rule (an op's ``OpDef.quantize``).
BY_RULE: dict[QuantRule, Rule] = {
    QuantRule.PRODUCT: _linear, QuantRule.MATMUL: _matmul, QuantRule.ADD: _add, QuantRule.CLIP: _clip,
    QuantRule.MOVE: _same_op, QuantRule.PICK: _same_op, QuantRule.SAME: _same_op, QuantRule.TABLE: _table,
    QuantRule.SCALE_BY: _scale_by, QuantRule.SOFTMAX: _softmax, QuantRule.LAYER_NORM: _layer_norm,
    QuantRule.REDUCE: _reduce, QuantRule.CONCAT: _concat, QuantRule.PRELU: _prelu,
}
_RULES: dict[Op, Rule] = {op: BY_RULE[d.quantize] for op, d in REGISTRY.items() if d.quantize is not None}


def quantize(graph: Graph, mode: RequantMode) -> Graph:
    """The integer graph of calibrated ``graph`` (module docstring)."""
    rules = EXACT_RULES if mode is RequantMode.EXACT else _RULES
    island = exact_island if mode is RequantMode.EXACT else float_island
    b = Builder(graph, mode)
    notes: list[str] = []  # the nodes whose numbers the integer graph cannot hold
    for node in graph.nodes:
        if node.op in (Op.QUANTIZE, Op.DEQUANTIZE, Op.REQUANTIZE):
            raise PassError(PASS_NAME, f"node {node.label} is already an integer-graph op")
        if node.op is Op.ONNX_REFERENCE or any(graph.types[v].dtype is not DType.FLOAT32 for v in node.inputs
                                                if v not in graph.constants):
            float_island(b, node)  # ONNX's reference kernel, or reads an index tensor (token ids, a mask)
            continue
        rule = rules.get(node.op)
        point = b.checkpoint()
        try:
            done = rule is not None and rule(b, node)
        except OutOfRange as exc:
            if mode is RequantMode.EXACT:
                raise  # (a QDQ model's own numbers: its integer graph or none)
            b.restore(point)  # its numbers do not fit the integer graph: the node runs in float
            notes.append(f"node {node.label} runs in float on the CPU: {str(exc).split(': ', 2)[-1]}")
            done = False
        if not done:
            island(b, node)
    for name in graph.outputs:
        b.as_real(name)
    result = Graph(graph.name, graph.inputs, graph.outputs, tuple(b.nodes), b.constants, b.types,
                   notes=graph.notes + tuple(notes))
    return infer_shapes(result)
