"""Pass: pack layouts — the accelerator regions, with every tensor's packed layout.

Each run of consecutive accelerator groups becomes a :class:`~openvta.graph.regions.Region`
(one program).  Its kernels are the groups' compiler operators, as match kernels built them
(:func:`~openvta.graph.passes.match_kernels.group_kernels`), and every tensor they bind is
one :class:`~openvta.graph.regions.RegionTensor` in the layout the operator declares for
that symbol — the compiler's operators are the one truth on layouts:

- activations in ``NCHW{B}n{BI}c`` (conv2d data, outputs and residual operands; channels
  zero-padded to whole blocks) or ``NC{B}n{BI}c`` (dense); an activation is packed only
  where it enters the region (role ``input``: a value computed on the CPU or a graph
  input) and unpacked only where it leaves (``output``: read by a later CPU group or a
  graph output); between the kernels of one region it stays packed in DRAM (``scratch``),
  one kernel's ``NCHW{B}n{BO}c`` output being the next one's input;
- weights in ``OIHW{BO}o{BI}i`` or ``OI{BO}o{BI}i`` (role ``weight``), biases and the
  epilogues' per-channel vectors in ``C{B}n{BO}c`` (role ``bias``): constants, packed
  once at compile time into the region's program by ``lower``.

Logical shapes are those of ``cfg.BATCH`` samples: a region's program runs once per
``cfg.BATCH`` samples of a batch (the executor packs each slice).

Preconditions: every accelerator group is one kernel (match kernels).
Postconditions: ``graph.regions`` holds one region per run of accelerator groups, without
offsets (plan memory) or program (lower); the nodes do not change.
"""

from __future__ import annotations

from openvta.compiler import Operator
from openvta.isa import Config

from ..errors import PassError
from ..ir import DType, Graph
from ..group_match import KernelMatch
from ..regions import Region, RegionKernel, RegionTensor, Role, accelerator_runs
from .match_kernels import group_kernels

__all__ = ["pack_layouts"]

_PASS = "pack layouts"


def _role(symbol: str, op: Operator, value: str | None, graph: Graph, written: set[str],
          outside: set[str]) -> Role:
    if symbol == "weight" and op.roles.get(symbol) is not Role.INPUT:  # (batch_matmul's is an activation)
        return Role.WEIGHT
    if op.roles.get(symbol) is Role.BIAS:
        return Role.BIAS
    if value not in written:
        return Role.INPUT
    return Role.OUTPUT if value in outside else Role.SCRATCH


def _read_outside(graph: Graph, groups: set[int]) -> set[str]:
    """Values read by a node outside ``groups``, or returned by the graph."""
    outside = set(graph.outputs)
    for node in graph.nodes:
        if node.group not in groups:
            outside.update(node.inputs)
    return outside


def _region(index: int, graph: Graph, cfg: Config, matches: list[KernelMatch]) -> Region:
    written = {m.bind["out"] for m in matches}
    outside = _read_outside(graph, {m.group for m in matches})
    known = set(graph.types)
    tensors: dict[str, RegionTensor] = {}
    kernels = []
    for match in matches:
        op = match.build(cfg)
        for symbol, name in match.bind.items():
            dtype = op.output.dtype if symbol == "out" else op.inputs[symbol].dtype
            value = name if name in known else None
            tensor = RegionTensor(name, op.layouts[symbol], op.logical_shapes[symbol], DType(dtype),
                                  _role(symbol, op, value, graph, written, outside), value)
            found = tensors.setdefault(name, tensor)
            if (found.layout, found.shape, found.dtype) != (tensor.layout, tensor.shape, tensor.dtype):
                raise PassError(_PASS, f"region {index}: {name!r} is bound as {tensor.dtype.value} "
                                       f"{tensor.shape} in {tensor.layout} by kernel {match.name!r} "
                                       f"and as {found.dtype.value} {found.shape} in {found.layout} "
                                       "before")
        kernels.append(RegionKernel(match.name, match.group, match.operator, match.bind,
                                    op.epilogue.describe(), match.macs))
    order = sorted(tensors.values(), key=lambda t: list(Role).index(t.role))
    return Region(index, tuple(kernels), tuple(order))


def pack_layouts(graph: Graph, cfg: Config) -> Graph:
    """``graph`` with its accelerator regions (module docstring)."""
    matches = group_kernels(graph, cfg)
    regions = [_region(index, graph, cfg, [matches[g] for g in run])
               for index, run in enumerate(accelerator_runs(graph))]
    return graph.replace(regions=tuple(regions))
