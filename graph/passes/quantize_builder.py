"""The quantize pass's builder of the integer graph, shared by its rules (``quantize``) and
its ``exact`` mode's rules (``quantize_exact``).

:class:`Builder` holds the integer graph under construction: each float value's int8
version (quantized on first use) and float version (dequantized on first use), the
constants, and the nodes emitted so far.  A :data:`Rule` rewrites one float node with it
(False: not in the form it handles), :func:`float_island` keeps a node in float.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from openvta.isa import INT32_LIMIT

from ..errors import OpError, OutOfRange, PassError
from ..ir import Attrs, DType, Graph, Node, Op, Precision, QuantParams, RequantMode, TensorType
from ..quantization import requant_params, wide_scale
from ..rewrite import fresh
from .infer_shapes import infer_node

__all__ = ["PASS_NAME", "Builder", "Rule", "channel_axis", "float_island"]

#: The pass's name in its errors.
PASS_NAME = "quantize"


class Builder:
    """The integer graph under construction (local to one run of the pass)."""

    def __init__(self, graph: Graph, mode: RequantMode) -> None:
        self.source, self.mode = graph, mode
        self.readers = graph.consumers()  # the source graph's, worked out once
        self.nodes: list[Node] = []
        self.types = {name: graph.types[name] for name in graph.inputs}
        self.constants: dict[str, np.ndarray] = {}
        self.used = graph.names() - {n.name for n in graph.nodes}  # value names
        self.node_names: set[str] = set()
        self.int8: dict[str, str] = {}
        self.wide: dict[str, str] = {}  # a value's 16-bit version (int32), made by its producer
        self.scores: dict[str, str] = {}  # a Softmax's masked scores: int32, the scores' scale
        self.real: dict[str, str] = {name: name for name in graph.inputs}
        self.dequantized: dict[str, str] = {}  # exact mode: graph inputs on their int8 grid

    #: The maps a rule adds to (in insertion order), which :meth:`restore` rolls back.
    _GROWING = ("types", "constants", "int8", "wide", "scores", "real", "dequantized")

    def checkpoint(self) -> tuple[int, ...]:
        """Where the graph under construction stands: what :meth:`restore` returns to."""
        return (len(self.nodes), *(len(getattr(self, field)) for field in self._GROWING))

    def restore(self, point: tuple[int, ...]) -> None:
        """Undo what was emitted after ``point`` (a rule that raised half way); names it took
        stay taken."""
        del self.nodes[point[0]:]
        for field, length in zip(self._GROWING, point[1:]):
            entries: dict = getattr(self, field)
            for key in list(entries)[length:]:
                del entries[key]

    def name(self, base: str) -> str:
        chosen = fresh(base, self.used)
        self.used.add(chosen)
        return chosen

    def constant(self, base: str, array: np.ndarray, quant: QuantParams | None = None) -> str:
        name = self.name(base)
        self.constants[name] = array
        self.types[name] = TensorType(array.shape, DType.of(array.dtype), quant)
        return name

    def emit(self, name: str, op: Op, inputs: tuple[str, ...], out: str,
             attrs: dict[str, object] | None = None, quant: QuantParams | None = None,
             precision: Precision | None = None) -> str:
        node_name = fresh(name, self.node_names)
        self.node_names.add(node_name)
        node = Node(node_name, op, inputs, (out,), Attrs(attrs or {}), precision=precision)
        try:
            self.types[out] = infer_node(node, self.types).with_quant(quant)
        except OpError as exc:
            raise PassError(PASS_NAME, f"node {node.label}: {exc}") from None
        self.nodes.append(node)
        return out

    def scale(self, value: str) -> float:
        quant = self.source.types[value].quant
        if quant is None:
            raise PassError(PASS_NAME, f"value {value!r} has no calibrated scale; run calibrate first")
        return quant.scale[0]

    def zero_point(self, value: str) -> int:
        """The int8 zero point of ``value`` (0 unless a QDQ model gave one)."""
        quant = self.source.types[value].quant
        return quant.zero_point if quant is not None else 0

    def as_int8(self, value: str) -> str:
        """The int8 version of float value ``value`` (quantized on first use)."""
        if value not in self.int8:
            if value in self.source.constants:
                raise PassError(PASS_NAME, f"constant {value!r} used as an activation cannot be "
                                           "quantized; canonicalize folds such nodes")
            scale, zero_point = self.scale(value), self.zero_point(value)
            attrs: dict[str, object] = {"scale": scale}
            if zero_point:
                attrs["zero_point"] = zero_point
            out = self.name(f"{value}.q")
            self.int8[value] = self.emit(f"{value}.quantize", Op.QUANTIZE, (self.real[value],),
                                         out, attrs, QuantParams((scale,), zero_point))
        return self.int8[value]

    def as_wide(self, value: str) -> str:
        """The 16-bit version of ``value`` (int32, its wide scale): its producer's, or quantized
        from its float version on first use."""
        if value not in self.wide:
            scale = wide_scale(self.scale(value), self.mode)
            self.wide[value] = self.emit(f"{value}.quantize16", Op.QUANTIZE, (self.as_real(value),),
                                         self.name(f"{value}.q16"), {"scale": scale, "bits": 16},
                                         QuantParams((scale,)))
        return self.wide[value]

    def as_real(self, value: str) -> str:
        """The float version of ``value``, named ``value`` (dequantized on first use)."""
        if value in self.source.constants:
            if value not in self.constants:
                self.constants[value] = np.asarray(self.source.constants[value])
                self.types[value] = self.source.types[value]
            return value
        if value not in self.real:
            made = self.int8.get(value) or self.wide.get(value) or self.scores[value]
            self.real[value] = self.dequantize(value, made, value)
        return self.real[value]

    def dequantize(self, value: str, q: str, out: str) -> str:
        """Emit ``out = Dequantize(q)`` with ``q``'s scale and zero point."""
        quant = self.types[q].quant
        if quant is None:
            raise PassError(PASS_NAME, f"int8 value {q!r} has no scale")
        attrs: dict[str, object] = {"scale": quant.scale}
        if quant.zero_point:
            attrs["zero_point"] = quant.zero_point
        return self.emit(f"{value}.dequantize", Op.DEQUANTIZE, (q,), out, attrs)

    def requantize(self, base: str, value: str, src: str, multipliers: np.ndarray, bound: int,
                   out_dtype: DType, out_scale: float, axis: int = 1, offset: int = 0,
                   zero_point: int = 0, add: float = 0.0) -> str:
        """Requantize ``src`` (node ``base``.requantize) into ``value``.q or ``value``.r:
        ``src + offset`` (``bound``: the most ``|src + offset|`` can be) rescaled by
        ``multipliers``, plus ``add`` (output codes, rounded to the rescaling's own precision:
        the product's ``2**-post_shift``), plus ``zero_point``, the output's."""
        try:
            params = requant_params(self.mode, multipliers, bound)
        except ValueError as exc:
            raise OutOfRange(PASS_NAME, f"node {base!r}: {exc}") from None
        attrs: dict[str, object] = {"mode": self.mode, "pre_shift": params.pre_shift,
                                    "multiplier": params.multiplier, "post_shift": params.post_shift,
                                    "axis": axis, "out_dtype": out_dtype}
        if offset:
            attrs["offset"] = offset
        if add and len(params.post_shift) == 1 and params.post_shift[0] >= 0:
            product_offset = int(round(add * (1 << params.post_shift[0])))
            if abs(product_offset) >= INT32_LIMIT // 2:
                raise OutOfRange(PASS_NAME, f"node {base!r}: its zero points' offset does not fit int32")
            attrs["product_offset"] = product_offset
        elif add:
            zero_point += int(round(add))  # (a left shift or per-channel shifts: whole codes)
        if zero_point:
            attrs["zero_point"] = zero_point
        out = self.name(f"{value}.q" if out_dtype is DType.INT8 else f"{value}.r")
        return self.emit(f"{base}.requantize", Op.REQUANTIZE, (src,), out, attrs,
                         QuantParams((out_scale,), zero_point))


#: A rule rewrites one float node into the builder; False when it does not apply.
Rule = Callable[[Builder, Node], bool]


def float_island(b: Builder, node: Node) -> bool:
    """Keep ``node`` in float between the Dequantize of its inputs and its own output."""
    inputs = tuple(b.as_real(v) for v in node.inputs)
    out = node.outputs[0]
    b.emit(node.name, node.op, inputs, out, dict(node.attrs))
    b.real[out] = out
    return True


def channel_axis(node: Node) -> tuple[int, int]:
    """(output-channel axis of the weights, channel axis of the output)."""
    if node.op is Op.CONV:
        return 0, 1
    if node.op is Op.GEMM:
        return (0 if node.attrs.get("transB", 0) else 1), 1
    return 1, -1
