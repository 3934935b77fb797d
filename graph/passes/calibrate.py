"""Pass: calibrate — run the float graph on samples and give every activation an int8 scale.

Each float value (graph inputs and node outputs) gets ``QuantParams`` on its type:

- an op whose registry ``scale_rule`` is ``PRESERVE`` (ReLU, clip, pooling, reshapes)
  gives its output its input's scale, so the integer op needs no rescaling;
- every other value is scaled from its calibrated range (min/max of its finite values over all samples;
  an infinite one, as a mask of -inf, is past any range and saturates):
  ``max(|min|, |max|)``, except that a value read only by ReLUs (or clips with a
  non-negative lower bound), and not a graph output, needs only its positive part —
  the negative part is clamped to zero anyway — which doubles the resolution of the
  int8 code.

Scales are ``range / 127``, rounded up to a power of two in ``pow2`` mode.

With a ``precision`` other than ``int8`` (mixed precision, docs/DECISIONS.md), each Conv
or Gemm with constant weights whose input or output loses more than the threshold at
int8 — its SQNR at its int8 step, :func:`~openvta.graph.quantization.int8_sqnr` of the
tensor's mean square over the samples, below the threshold — gets the attribute
``activation_bits``: ``(input bits, output bits)``, each 8 or 16.  The quantize pass computes those in int8 passes.

In
``exact`` mode nothing is calibrated: every float activation must already carry the
scale and zero point of the QDQ model it was imported from.

Preconditions: a float graph; at least one calibration feed, checked (``feeds``).
Postconditions: the same graph, every float activation typed with a per-tensor scale.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from openvta.isa import INT8_MAX, INT8_MIN

from ..errors import PassError
from ..execute import execute
from ..ir import DType, Graph, Node, Op, Precision, QuantParams, RequantMode, TensorType
from ..ops.base import QuantRule, ScaleRule, float_attr
from ..registry import QUANT_OPS, op_def
from ..quantization import activation_bits, choose_scale, int8_sqnr
from ..ranges import BINS, clip_range
from ..sensitivity import wide_values

#: An Add's operands whose ranges differ by more than this keep the sum in float: one 16-bit
#: scale cannot hold both.
WIDE_ADD_SPAN = 1 << 8

__all__ = ["calibrate", "observed_ranges"]

_PASS = "calibrate"


def observed_ranges(graph: Graph, feeds: Sequence[Mapping[str, np.ndarray]]
                    ) -> dict[str, tuple[float, float]]:
    """Value name → (min, max) over every feed, for every float input and node output."""
    return _observed(graph, feeds)[0]


def _observed(graph: Graph, feeds: Sequence[Mapping[str, np.ndarray]]
              ) -> tuple[dict[str, tuple[float, float]], dict[str, float]]:
    """:func:`observed_ranges`, and each value's mean square over every feed."""
    ranges: dict[str, tuple[float, float]] = {}
    sums: dict[str, tuple[float, int]] = {}

    def observe(name: str, value: np.ndarray) -> None:
        if value.dtype.kind != "f" or value.size == 0:
            return
        low, high = float(value.min()), float(value.max())
        if not math.isfinite(low) or not math.isfinite(high):  # a mask of -inf: its finite values
            value = value[np.isfinite(value)]
            if not value.size:  # nothing finite in this sample: no range from it
                ranges.setdefault(name, (0.0, 0.0))
                return
            low, high = float(value.min()), float(value.max())
        old = ranges.get(name, (low, high))
        ranges[name] = (min(old[0], low), max(old[1], high))
        square, count = sums.get(name, (0.0, 0))
        flat = value.astype(np.float64).ravel()
        sums[name] = (square + float(flat @ flat), count + flat.size)

    for feed in feeds:
        execute(graph, feed, observe)
    return ranges, {name: square / count for name, (square, count) in sums.items() if count}


def _positive_only(users: list[Node]) -> float | None:
    """The upper clamp if every user zeroes negative values (ReLU, clip at ≥ 0), else None."""
    if not users:
        return None
    top = 0.0
    for node in users:
        if node.op is Op.RELU:
            top = np.inf
        elif node.op is Op.CLIP and float_attr(node.attrs, "min", -np.inf) >= 0:
            top = max(top, float_attr(node.attrs, "max", np.inf))
        else:
            return None
    return top


def _range(name: str, observed: tuple[float, float], users: list[Node]) -> float:
    low, high = observed
    top = _positive_only(users)
    if top is not None:
        return max(min(high, top), 0.0)
    return max(abs(low), abs(high))


def _model_params(graph: Graph) -> Graph:
    for name in list(graph.inputs) + [n.outputs[0] for n in graph.nodes]:
        if graph.types[name].dtype is DType.FLOAT32 and graph.types[name].quant is None:
            raise PassError(_PASS, f"value {name!r} has no scale in the model; the exact mode "
                                   "needs a QDQ model quantizing every activation")
    return graph


def calibrate(graph: Graph, feeds: Sequence[Mapping[str, np.ndarray]],
              mode: RequantMode, wide_below: float | None = None,
              method: tuple[str, float | None] = ("minmax", None), budget: float | None = None,
              costs: Mapping[str, int] | None = None, zero_points: bool = False) -> Graph:
    """The graph with int8 scales on its float activations and, with ``wide_below`` (an
    SQNR in dB, :func:`~openvta.graph.quantization.parse_precision`), the activation bits
    of its products (module docstring); ``method``: the calibration method
    (:func:`~openvta.graph.ranges.parse_calibration_method`); with ``budget`` (``precision="auto"``),
    the activation bits chosen by measured sensitivity within that many times the all-int8
    model's cycles (``costs``: each product's, by node name; MACs without them;
    :mod:`~openvta.graph.sensitivity`); with ``zero_points``, the non-negative activations
    whose producer and every reader can take it the zero point -128 (:func:`_zero_point_values`)."""
    if not feeds:
        raise PassError(_PASS, "needs at least one calibration feed, not none")
    for node in graph.nodes:
        if node.op in QUANT_OPS:
            raise PassError(_PASS, f"node {node.label} belongs to a quantized graph; calibrate "
                                   "runs on the float graph")
    if mode is RequantMode.EXACT:
        return _model_params(graph)
    ranges, power = _observed(graph, feeds)
    users, producers = graph.consumers(), graph.producers()
    shared = _concat_sources(graph, users, producers, ranges)
    # (with zero points, before the ranges are clipped: a value with 255 steps clips less)
    eligible = _zero_point_values(graph, ranges, shared) if zero_points else {}
    if method[0] != "minmax":
        ranges = _clipped(graph, feeds, ranges, users, method, eligible)
    types = dict(graph.types)
    order = list(graph.inputs) + [n.outputs[0] for n in graph.nodes]
    spans: dict[str, float] = {}  # a value whose scale is chosen from its range: the range
    for name in order:
        if types[name].dtype is not DType.FLOAT32:
            continue
        producer = producers.get(name)
        quant: QuantParams | None
        if producer is not None and op_def(producer.op).scale_rule is ScaleRule.PRESERVE \
                and types[producer.inputs[0]].quant is not None:
            quant = types[producer.inputs[0]].quant
        elif name in ranges:
            readers = users.get(name, []) if name not in graph.outputs else []
            observed = ranges[shared[name]] if shared.get(name) in ranges else ranges[name]
            spans[name] = _range(name, observed, readers)
            quant = QuantParams((choose_scale(spans[name], mode),))
        else:
            raise PassError(_PASS, f"value {name!r} was never computed on the calibration data")
        types[name] = types[name].with_quant(quant)
    # the types with the zero points every 8-bit product allows: what the mixed precision's
    # choices measure; the zero points again once the 16-bit values are known (they have none)
    narrow = _with_zero_points(types, eligible, spans, mode)
    if wide_below is None and budget is None:
        return graph.replace(types=narrow)
    consumers = graph.consumers()
    if budget is not None:
        wide = wide_values(graph.replace(types=narrow), feeds, budget, costs)
        loses: Callable[[str], bool] = wide.__contains__
    else:
        assert wide_below is not None
        threshold = wide_below

        def loses(value: str) -> bool:
            quant = narrow[value].quant
            return quant is not None and value in power and int8_sqnr(power[value], quant.scale[0]) < threshold

    calibrated = graph.replace(types=types, nodes=tuple(_with_bits(n, graph, types, loses, consumers)
                                                        for n in graph.nodes))
    if not eligible:
        return calibrated
    again = _zero_point_values(calibrated, ranges, shared)  # (16-bit products' values: none)
    kept = {value: origin for value, origin in eligible.items() if value in again}
    return calibrated.replace(types=_with_zero_points(types, kept, spans, mode))


#: The ops a value with a zero point passes through (each output takes its input's scale and
#: zero point): their int8 forms move, compare or clip codes, and -128 stays the code of 0.0.
ZERO_POINT_MEMBERS = frozenset({Op.RELU, Op.CLIP, Op.IDENTITY, Op.DROPOUT, Op.MAX_POOL, Op.FLATTEN, Op.RESHAPE,
                                Op.SLICE, Op.TRANSPOSE, Op.UNSQUEEZE, Op.SQUEEZE, Op.EXPAND})
#: The quantization rules whose integer forms read and write an int8 value with a zero point.
ZERO_POINT_RULES = frozenset({QuantRule.PRODUCT, QuantRule.ADD, QuantRule.REDUCE, QuantRule.TABLE})


def _zero_point_values(graph: Graph, ranges: Mapping[str, tuple[float, float]], shared: Mapping[str, str]
                       ) -> dict[str, str]:
    """The activations that take the zero point -128 (docs/DECISIONS.md, "Zero points on
    non-negative activations"): each non-negative value whose scale is its own (its range's,
    or its positive part's where only ReLUs read it), with the values that take its scale
    (ReLU, max pooling, reshapes), where its producer and every reader compute with a zero
    point.  Their 256 codes span ``[0, range]``, where a symmetric int8 value's 128
    non-negative ones do.

    A product (Conv, Gemm with 8-bit activations) folds its input's zero point into its
    bias (``128·Σw``) and pads with -128; an Add, a pooled mean, a table take it in their
    requantization; a float island dequantizes it.  Any other producer or reader (a Concat,
    a Mul, attention's products, an average pool, a 16-bit value) keeps the group symmetric."""
    users, producers = graph.consumers(), graph.producers()
    members: dict[str, list[str]] = {}  # a value whose scale is its own → the values that share it
    root: dict[str, str] = {}
    for name in list(graph.inputs) + [n.outputs[0] for n in graph.nodes]:
        if graph.types[name].dtype is not DType.FLOAT32 or name not in ranges:
            continue
        producer = producers.get(name)
        if producer is not None and op_def(producer.op).scale_rule is ScaleRule.PRESERVE \
                and producer.inputs[0] in root:
            root[name] = root[producer.inputs[0]]
        else:
            root[name] = name
        members.setdefault(root[name], []).append(name)
    chosen: dict[str, str] = {}  # value → its group's root
    for origin, group in members.items():
        readers = users.get(origin, []) if origin not in graph.outputs else []
        non_negative = _positive_only(readers) is not None or ranges[origin][0] >= 0
        if non_negative and origin not in shared and _makes_zero_point(producers.get(origin)) \
                and all(_reads_zero_point(reader, value, group) for value in group for reader in users.get(value, [])):
            chosen.update(dict.fromkeys(group, origin))
    return chosen


def _with_zero_points(types: Mapping[str, TensorType], values: Mapping[str, str], spans: Mapping[str, float],
                      mode: RequantMode) -> dict[str, TensorType]:
    """``types`` with the zero point -128 on ``values`` (value → the root whose scale it
    takes), each group's scale its root's range over 255 steps."""
    out = dict(types)
    for value, origin in values.items():
        scale = choose_scale(spans[origin] * INT8_MAX / (INT8_MAX - INT8_MIN), mode)
        out[value] = out[value].with_quant(QuantParams((scale,), INT8_MIN))
    return out


def _makes_zero_point(producer: Node | None) -> bool:
    """Whether the int8 value ``producer`` makes may have a zero point: a graph input's
    Quantize, a float island's, an 8-bit product's or sum's, a pooled mean's or a table's."""
    if producer is None:
        return True
    rule = op_def(producer.op).quantize
    if rule is None:
        return True  # (a float island: its output's Quantize takes the zero point)
    return rule in ZERO_POINT_RULES and activation_bits(producer) == (8, 8)


def _reads_zero_point(reader: Node, value: str, group: list[str]) -> bool:
    """Whether ``reader`` computes with ``value``'s zero point (see :func:`_zero_point_values`)."""
    if reader.op in ZERO_POINT_MEMBERS and reader.outputs[0] in group:
        return True
    rule = op_def(reader.op).quantize
    if rule is None:
        return True  # a float island: the Dequantize before it subtracts the zero point
    if rule is QuantRule.PRODUCT:
        return reader.inputs[0] == value and value not in reader.inputs[1:] and activation_bits(reader)[0] == 8
    if rule is QuantRule.ADD:
        return activation_bits(reader)[1] == 8
    return rule in (QuantRule.REDUCE, QuantRule.TABLE)


def _clipped(graph: Graph, feeds: Sequence[Mapping[str, np.ndarray]], ranges: dict[str, tuple[float, float]],
             users: Mapping[str, list[Node]], method: tuple[str, float | None],
             zero_points: Mapping[str, str]) -> dict[str, tuple[float, float]]:
    """``ranges`` clipped by ``method`` (:mod:`~openvta.graph.ranges`; a value in
    ``zero_points`` on 255 steps, not 127), from a histogram of
    each value's magnitudes over the feeds: of its positive part where only its positive
    part is kept (:func:`_positive_only`), else of ``|x|``."""
    tops: dict[str, tuple[float, bool]] = {}
    for name, observed in ranges.items():
        readers = users.get(name, []) if name not in graph.outputs else []
        positive = _positive_only(readers) is not None
        tops[name] = (_range(name, observed, readers), positive)
    counts = {name: np.zeros(BINS, np.int64) for name, (top, _) in tops.items() if top > 0}

    def observe(name: str, value: np.ndarray) -> None:
        if name not in counts or value.dtype.kind != "f":
            return
        top, positive = tops[name]
        flat = value.ravel()
        flat = flat[np.isfinite(flat)]
        magnitude = np.maximum(flat, 0) if positive else np.abs(flat)
        index = np.minimum((magnitude.astype(np.float64) * (BINS / top)).astype(np.int64), BINS - 1)
        counts[name] += np.bincount(index, minlength=BINS)

    for feed in feeds:
        execute(graph, feed, observe)
    clipped = dict(ranges)
    for name, histogram in counts.items():
        clip = clip_range(histogram, tops[name][0], *method, steps=INT8_MAX - INT8_MIN if name in zero_points
                          else INT8_MAX)
        low, high = ranges[name]
        clipped[name] = (max(low, -clip), min(high, clip))
    return clipped


#: The least fraction of a Concat's range an input's must reach to take the Concat's scale
#: (at most one bit of its resolution given up; a narrower input keeps its own scale and is
#: requantized, as DenseNet's layers joined into a wide block are).
SHARED_CONCAT_RANGE = 0.5


def _concat_sources(graph: Graph, users: Mapping[str, list[Node]], producers: Mapping[str, Node],
                    ranges: Mapping[str, tuple[float, float]]) -> dict[str, str]:
    """Value → the Concat output whose range it takes: each Concat input, or the value its
    scale is preserved from (a Conv's output before its ReLU), when every value on the way is
    read by the next only and its range is at least :data:`SHARED_CONCAT_RANGE` of the
    Concat's.  A Concat's output range holds each input's, so the input keeps its values, and
    the int8 Concat joins codes of one scale with no requantization between (a second
    requantization in the producing kernel's epilogue otherwise: SqueezeNet's expand layers
    147,956 → 220,934 cycles each)."""

    def span(name: str) -> float:
        low, high = ranges.get(name, (0.0, 0.0))
        return max(abs(low), abs(high))

    shared: dict[str, str] = {}
    for node in graph.nodes:
        if node.op is not Op.CONCAT:
            continue
        for origin in node.inputs:
            if span(origin) < SHARED_CONCAT_RANGE * span(node.outputs[0]):
                continue
            while origin not in graph.outputs and origin not in graph.constants and len(users.get(origin, [])) == 1:
                maker = producers.get(origin)
                if maker is None or op_def(maker.op).scale_rule is not ScaleRule.PRESERVE \
                        or maker.inputs[0] in graph.constants:
                    shared[origin] = node.outputs[0]  # (where the scale is chosen; PRESERVE carries it on)
                    break
                origin = maker.inputs[0]
    return shared


def _wide_sum(node: Node, graph: Graph, types: Mapping[str, TensorType],
              consumers: Mapping[str, list[Node]]) -> Node:
    """An Add read by a LayerNormalization (a transformer's residual stream) has a 16-bit
    sum, so that the LayerNorm's integer kernel reads it at 16 bits; unless its operands'
    ranges differ by more than :data:`WIDE_ADD_SPAN` (one 16-bit scale cannot hold both)."""
    readers = consumers.get(node.outputs[0], [])
    if not readers or not all(n.op is Op.LAYER_NORM for n in readers):
        return node
    ranges = []
    for value in node.inputs:
        if value in graph.constants:
            ranges.append(float(np.abs(graph.constants[value]).max(initial=0.0)))
        else:
            quant = types[value].quant
            if quant is None:
                return node
            ranges.append(quant.scale[0] * 127)
    if min(ranges) > 0 and max(ranges) > WIDE_ADD_SPAN * min(ranges):
        return node
    return replace(node, precision=Precision(8, 16))


def _with_bits(node: Node, graph: Graph, types: Mapping[str, TensorType], loses: Callable[[str], bool],
               consumers: Mapping[str, list[Node]]) -> Node:
    """``node`` with its ``activation_bits`` if int8 ``loses`` its input or output (a Conv or
    Gemm with constant weights), else ``node``; an Add read by LayerNorms has a 16-bit sum
    (:func:`_wide_sum`)."""
    if node.op is Op.ADD:
        return _wide_sum(node, graph, types, consumers)
    if node.op not in (Op.CONV, Op.GEMM) or len(node.inputs) < 2 or node.inputs[1] not in graph.constants \
            or node.inputs[0] in graph.constants:
        return node

    bits = (16 if loses(node.inputs[0]) else 8, 16 if loses(node.outputs[0]) else 8)
    if bits == (8, 8):
        return node
    return replace(node, precision=Precision(*bits))
