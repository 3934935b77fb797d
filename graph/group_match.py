"""A fused accelerator group as one compiler kernel: conv2d or dense with an epilogue.

An accelerator group is an anchor (Conv or Gemm) and the element-wise nodes fusion gave
it.  It runs as one operator of the compiler's registry when its nodes form a chain from
the anchor to the group's one output, each link an ALU stage on the int32 accumulator:

- the anchor's bias: ``ADD bias[c]`` (the operator's ``bias``);
- ``Requantize``: :func:`~openvta.compiler.requantize_stages` (``SHR``, ``MUL``, the
  rounding ``SHR``/``ADD``/``SHR``, ``MIN``/``MAX`` to int8), per tensor as immediates,
  per channel as channel vectors;
- ``Relu``: ``MAX 0``; ``Clip``: ``MIN high, MAX low``;
- ``WideByte``: ``MIN, MAX`` to the wide range, and for the high byte the rounding
  ``SHR 7, ADD 1, SHR 1`` (:func:`~openvta.isa.round_shift_steps`); STORE keeps the low
  8 bits — one byte of a wide (16-bit) result per kernel;
- ``Add`` of the chain's value and another operand: a
  :class:`~openvta.compiler.TensorOperand` loaded from the value outside the group the
  other operand starts from (int8 or int32), with the group's ``Requantize``/``Relu``/
  ``Clip`` nodes on the way as its own stages — the residual add with the requantization
  of its input.

A run of ``MIN``/``MAX`` immediates is one clamp and is emitted as at most ``MIN high, MAX
low`` (``MIN 127, MAX -128, MAX 0`` is ``MIN 127, MAX 0``): the same values, fewer ALU
instructions.

Exactly, or not at all: every stage computes what the node's integer reference computes,
wrapping at 32 bits like it.  The one difference, ``round_shift(2**31 - 1, 1)`` (the
ALU's ``ADD 1`` wraps), is excluded by bounding every value along the chain (an int8
input is at most 128 in magnitude, an accumulator ``128 * sum|w| + |bias|``); where the
bound does not exclude it, the Requantize is refused.  The group's result must be int8:
STORE writes only the int8 out buffer.  What cannot be matched is a :class:`Mismatch`
naming the nodes to move to the CPU and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from openvta.compiler import AluStage, ChannelOperand, Epilogue, TensorOperand, requantize_stages
from openvta.compiler.epilogue import IMM_FIELD
from openvta.isa import (INT8_LIMIT, INT8_MAX, INT8_MIN, INT8_RANGE, INT32_LIMIT, WIDE_BYTE_SHIFT, WIDE_MAX,
                        WIDE_MIN, AluOp, Config, round_shift_steps)

from .accel import match_node
from .kernel import DEFAULT_PLAN, NO_RECORD, TUNED_PLAN, KernelMatch, Plans
from .ir import DType, Graph, Node, Op
from .ops.base import PatternKind, int_attr, ints_attr
from .registry import op_def
from .rewrite import fresh

__all__ = ["KernelMatch", "Mismatch", "match_group", "Plans", "TUNED_PLAN", "DEFAULT_PLAN", "NO_RECORD"]

_CLAMPS = (AluOp.MIN, AluOp.MAX)


@dataclass(frozen=True)
class Mismatch:
    """Why a group is not one kernel, and the nodes that must go to the CPU for it."""

    nodes: tuple[str, ...]
    reason: str


class _Chain:
    """The stages of one group under construction (local to one match)."""

    def __init__(self, graph: Graph, nodes: Sequence[Node], anchor: Node) -> None:
        self.graph, self.anchor = graph, anchor
        self.members = {n.name: n for n in nodes}
        self.producers, self.consumers = graph.producers(), graph.consumers()
        self.used: set[str] = {anchor.name}
        self.adds: list[str] = []
        self.bind: dict[str, str] = {}
        self.vectors: dict[str, np.ndarray] = {}
        self.taken = graph.names()
        weight = graph.constants.get(anchor.inputs[1])
        # a constant weight's output channels; a product of two activations' columns
        self.channels = int(weight.shape[0]) if weight is not None else int(graph.types[anchor.outputs[0]].shape[-1])

    def inside(self, value: str) -> list[Node]:
        return [n for n in self.consumers.get(value, []) if n.name in self.members]

    def vector_names(self, vectors: Mapping[str, np.ndarray]) -> None:
        for symbol, array in vectors.items():
            name = fresh(f"{self.anchor.name}.{symbol}", self.taken)
            self.taken.add(name)
            self.bind[symbol] = name
            self.vectors[name] = array

    def stages(self, node: Node, limit: int, tag: str) -> tuple[list[AluStage], int] | Mismatch:
        """The stages of a Requantize, Relu or Clip node on values up to ``limit``."""
        if node.op is Op.RELU:
            return [AluStage(AluOp.MAX, 0)], limit
        if node.op is Op.CLIP:
            low, high = int_attr(node.attrs, "min", INT8_MIN), int_attr(node.attrs, "max", INT8_MAX)
            if IMM_FIELD.low <= low and high <= IMM_FIELD.high:
                return [AluStage(AluOp.MIN, high), AluStage(AluOp.MAX, low)], max(abs(low), abs(high))
            # bounds past the 16-bit immediate (a wide product's saturation): channel vectors
            self.vector_names({f"{tag}_min": np.full(self.channels, high, np.int32),
                               f"{tag}_max": np.full(self.channels, low, np.int32)})
            return [AluStage(AluOp.MIN, ChannelOperand(f"{tag}_min")),
                    AluStage(AluOp.MAX, ChannelOperand(f"{tag}_max"))], max(abs(low), abs(high))
        if node.op is Op.REQUANTIZE:
            return self.requantize(node, limit, tag)
        if node.op is Op.WIDE_BYTE:
            return _wide_byte(node.attrs["part"] == "high"), INT8_LIMIT
        return Mismatch((node.name,), f"{node.op.value} has no ALU stage in a fused kernel")

    def requantize(self, node: Node, limit: int, tag: str) -> tuple[list[AluStage], int] | Mismatch:
        pre, mult = int_attr(node.attrs, "pre_shift"), ints_attr(node.attrs, "multiplier")
        post, out = ints_attr(node.attrs, "post_shift"), node.attrs["out_dtype"]
        if max(len(mult), len(post)) > 1 and int_attr(node.attrs, "axis", 1) != 1:
            return Mismatch((node.name,), "a per-channel requantization along another axis than "
                                          "the channels")
        offset, zero_point = int_attr(node.attrs, "offset", 0), int_attr(node.attrs, "zero_point", 0)
        product_offset = int_attr(node.attrs, "product_offset", 0)
        if not IMM_FIELD.low <= offset <= IMM_FIELD.high:
            return Mismatch((node.name,), f"its input offset {offset} does not fit the ALU's immediate")
        first = [AluStage(AluOp.ADD, offset)] if offset else []
        limit += abs(offset)
        y_limit = -(-limit // (1 << pre)) * max(abs(m) for m in mult) + abs(product_offset)
        if 1 in post and y_limit >= INT32_LIMIT - 1:
            return Mismatch((node.name,), "its rounding shift by 1 could see 2**31 - 1, where the "
                                          "ALU's ADD 1 wraps and the reference does not")
        clip = INT8_RANGE if out is DType.INT8 else None
        try:
            stages, vectors = requantize_stages(pre, mult, post, channels=self.channels, prefix=tag,
                                                clip=None if zero_point else clip)
        except ValueError as exc:
            return Mismatch((node.name,), f"not expressible as ALU stages: {exc}")
        self.vector_names(vectors)
        stages = list(stages)
        if product_offset:  # after the MUL (or the pre-shift), before the rounding shift
            after = max((i + 1 for i, st in enumerate(stages) if st.op is AluOp.MUL), default=1 if pre else 0)
            operand: int | ChannelOperand = product_offset
            if not IMM_FIELD.low <= product_offset <= IMM_FIELD.high:  # (past the immediate: a channel vector)
                self.vector_names({f"{tag}_add": np.full(self.channels, product_offset, np.int32)})
                operand = ChannelOperand(f"{tag}_add")
            stages.insert(after, AluStage(AluOp.ADD, operand))
        rounding = [i for i, st in enumerate(stages) if st.op is AluOp.ADD and st.operand == 1]
        if zero_point and len(post) == 1 and post[0] >= 1 and rounding and y_limit + 2 * abs(zero_point) < INT32_LIMIT:
            # ((a + 1) >> 1) + zp == (a + 1 + 2·zp) >> 1: the zero point in the rounding ADD, no stage more
            stages[rounding[-1]] = AluStage(AluOp.ADD, 1 + 2 * zero_point)
            last = []
        else:
            last = [AluStage(AluOp.ADD, zero_point)] if zero_point else []
        if zero_point and clip is not None:
            last += [AluStage(AluOp.MIN, clip[1]), AluStage(AluOp.MAX, clip[0])]
        return first + stages + last, \
            INT8_LIMIT if out is DType.INT8 else _shifted(y_limit, post) + abs(zero_point)


def _wide_byte(high: bool) -> list[AluStage]:
    """A WideByte's stages: the clip to the wide range, the high byte's rounding shift."""
    stages = [AluStage(AluOp.MIN, WIDE_MAX), AluStage(AluOp.MAX, WIDE_MIN)]
    if high:
        first, add, last = round_shift_steps(WIDE_BYTE_SHIFT)
        stages += [AluStage(AluOp.SHR, first), AluStage(AluOp.ADD, add), AluStage(AluOp.SHR, last)]
    return stages


def _shifted(limit: int, post: tuple[int, ...]) -> int:
    worst = max((limit >> s) + 1 if s >= 1 else limit << -s for s in post)
    return min(worst, INT32_LIMIT)


def _anchor(graph: Graph, anchor: Node, cfg: Config) -> tuple[str, dict[str, int | bool]] | Mismatch:
    found = match_node(anchor, graph, cfg)
    if isinstance(found, str):
        return Mismatch((anchor.name,), f"{anchor.op.value} in this form has no compiler operator: {found}")
    return found.descriptor.name, found.params


def _accumulator_limit(graph: Graph, anchor: Node) -> int:
    if anchor.inputs[1] not in graph.constants:  # two int8 activations: |a·b| <= 128·128 per product
        inner = int(graph.types[anchor.inputs[0]].shape[-1])
        return min(INT8_LIMIT * INT8_LIMIT * inner, INT32_LIMIT)
    weight = graph.constants[anchor.inputs[1]].astype(np.int64)
    sums = np.abs(weight.reshape(weight.shape[0], -1)).sum(axis=1) * INT8_LIMIT
    if len(anchor.inputs) > 2:
        sums = sums + np.abs(graph.constants[anchor.inputs[2]].astype(np.int64))
    return min(int(sums.max()), INT32_LIMIT)


def _operand(chain: _Chain, add: Node, other: str, count: int) -> tuple[AluStage, int] | Mismatch:
    """The ADD stage of ``add`` taking ``other``: a tensor operand with its own stages."""
    side: list[Node] = []
    while other in chain.producers and chain.producers[other].name in chain.members:
        node = chain.producers[other]
        if node.op not in (Op.REQUANTIZE, Op.RELU, Op.CLIP) or len(chain.inside(other)) != 1:
            return Mismatch((add.name,), f"its operand {other!r} comes from {node.label}, which a "
                                         "tensor operand's stages cannot compute")
        side.append(node)
        other = node.inputs[0]
    dtype = chain.graph.types[other].dtype
    if dtype not in (DType.INT8, DType.INT32) or other in chain.graph.constants:
        return Mismatch((add.name,), f"its operand {other!r} must be an int8 or int32 activation")
    limit = INT8_LIMIT if dtype is DType.INT8 else INT32_LIMIT
    stages: list[AluStage] = []
    for index, node in enumerate(reversed(side)):
        found = chain.stages(node, limit, f"res{count}_rq{index}")
        if isinstance(found, Mismatch):
            return found
        stages += found[0]
        limit = found[1]
        chain.used.add(node.name)
    symbol = f"res{count}"
    chain.bind[symbol] = other
    operand = TensorOperand(symbol, dtype.value, tuple(_merged(stages)))
    return AluStage(AluOp.ADD, operand), limit


def _clamp(run: list[AluStage]) -> list[AluStage]:
    """A run of MIN/MAX immediates as ``MIN high, MAX low``.

    The run computes ``min(max(x, low), high)`` with ``low <= high`` at every step:
    ``MIN c`` makes ``(min(low, c), min(high, c))``, ``MAX c`` ``(max(low, c), max(high, c))``.
    """
    low, high = None, None
    for stage in run:
        c = int(stage.operand)
        if stage.op is AluOp.MIN:
            low, high = (None if low is None else min(low, c)), (c if high is None else min(high, c))
        else:
            low, high = (c if low is None else max(low, c)), (None if high is None else max(high, c))
    return ([AluStage(AluOp.MIN, high)] if high is not None else []) + \
        ([AluStage(AluOp.MAX, low)] if low is not None else [])


def _merged(stages: list[AluStage]) -> list[AluStage]:
    """``stages`` with every run of MIN/MAX immediates as one clamp (module docstring)."""
    out: list[AluStage] = []
    run: list[AluStage] = []
    for stage in stages:
        if stage.op in _CLAMPS and isinstance(stage.operand, int):
            run.append(stage)
            continue
        out += _clamp(run) + [stage]
        run = []
    return out + _clamp(run)


def _walk(chain: _Chain, limit: int) -> tuple[list[AluStage], Node] | Mismatch:
    """The main chain from the anchor: its stages and its last node."""
    stages: list[AluStage] = []
    last, value = chain.anchor, chain.anchor.outputs[0]
    while True:
        readers = chain.inside(value)
        if not readers:
            return stages, last
        node = readers[0]
        if len(readers) > 1 or (node.op is Op.ADD and node.inputs[0] == node.inputs[1]):
            return Mismatch(tuple(chain.members), f"value {value!r} is read twice in the group; a "
                                                  "kernel is one chain of stages")
        if node.op is Op.ADD:
            other = node.inputs[1] if node.inputs[0] == value else node.inputs[0]
            found = _operand(chain, node, other, len(chain.adds))
            chain.adds.append(node.name)
            if isinstance(found, Mismatch):
                return found
            stages.append(found[0])
            limit = min(limit + found[1], INT32_LIMIT)
        else:
            more = chain.stages(node, limit, f"rq{len(chain.used)}")
            if isinstance(more, Mismatch):
                return more
            stages += more[0]
            limit = more[1]
        chain.used.add(node.name)
        last, value = node, node.outputs[0]


def match_group(graph: Graph, nodes: Sequence[Node], cfg: Config) -> KernelMatch | Mismatch:
    """The kernel of accelerator group ``nodes`` (module docstring), or why there is none."""
    anchors = [n for n in nodes if op_def(n.op).kind is PatternKind.OUT_ELEMWISE_FUSABLE]
    if len(anchors) != 1:
        return Mismatch(tuple(n.name for n in nodes), f"a kernel needs one conv or dense, not "
                                                      f"{len(anchors)}")
    anchor = anchors[0]
    found = _anchor(graph, anchor, cfg)
    if isinstance(found, Mismatch):
        return found
    operator, params = found
    chain = _Chain(graph, nodes, anchor)
    walked = _walk(chain, _accumulator_limit(graph, anchor))
    if isinstance(walked, Mismatch):
        return walked
    stages, last = walked
    stray = [n.name for n in nodes if n.name not in chain.used]
    if stray:
        return Mismatch(tuple(stray), "not on the kernel's chain of stages")
    if last is anchor:
        return Mismatch((anchor.name,), "its int32 accumulator cannot leave the accelerator (STORE "
                                        "writes int8) and no Requantize follows it in its group")
    if graph.types[last.outputs[0]].dtype is not DType.INT8:
        return Mismatch((last.name,), "its int32 result cannot leave the accelerator (STORE writes "
                                      "int8)")
    bind = {"data": anchor.inputs[0], "weight": anchor.inputs[1], **chain.bind,
            "out": last.outputs[0]}
    if params["bias"]:
        bind["bias"] = anchor.inputs[2]
    macs = op_def(anchor.op).macs([graph.types[v] for v in anchor.inputs],
                                  graph.types[anchor.outputs[0]], anchor.attrs)
    return KernelMatch(nodes[0].group if nodes[0].group is not None else -1,
                       "+".join(n.name for n in nodes), operator, MappingProxyType(params),
                       Epilogue(tuple(_merged(stages))), MappingProxyType(bind),
                       MappingProxyType(chain.vectors), macs, tuple(chain.adds), anchor.name)
