"""Pass: match kernels — every accelerator group becomes one compiler kernel, or leaves.

Each fused group placed on the accelerator is matched to a compiler operator with an
epilogue (:func:`openvta.graph.group_match.match_group`), and the compiler builds and
lowers that operator, fused epilogue included: its planner is the authority on whether
the tiles and the epilogue's accumulator operands fit the buffers.  Whatever fails moves
to the CPU with the reason in its placement:

- the nodes a :class:`~openvta.graph.group_match.Mismatch` names (a stage that cannot be
  computed exactly, an int32 result, a node off the chain);
- for an operator the compiler refuses, the group's last residual Add (its tensor operand
  takes accumulator room), or the whole group when it has none.

The graph is then fused again (:func:`~openvta.graph.passes.fuse.fuse`) and matched again
(a group whose nodes are unchanged keeps its match: each set of nodes is matched, built and
lowered once), until every accelerator group matches: a node moved to the CPU may leave an
element-wise tail without its anchor, or an anchor without its requantization, and those
follow.  Each round moves at least one node, so the pass ends.

Each kernel is built with its operator's default plan (the descriptor's) and the build is
kept in its match (:attr:`~openvta.graph.kernel.KernelMatch.built`: the operator and its
lowered schedule), which pack layouts, lower and the executor read instead of building or
lowering it again.

Preconditions: a fused graph (every node has a placement and a group).
Postconditions: every accelerator group is one kernel that the compiler builds and lowers
for ``cfg``, kept in ``graph.kernels`` (group → :class:`~openvta.graph.kernel.KernelMatch`)
with its plan and its build; groups are renumbered by fusion.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from openvta.compiler import LoweringError
from openvta.isa import Config

from ..errors import PassError
from ..ir import Device, Graph, Node, Placement
from ..group_match import KernelMatch, Mismatch, match_group
from .fuse import fuse

__all__ = ["match_kernels", "accelerator_groups", "group_kernels"]

_PASS = "match kernels"


def accelerator_groups(graph: Graph) -> dict[int, list[Node]]:
    """Fused group → its nodes, for the groups placed on the accelerator, in group order."""
    groups: dict[int, list[Node]] = {}
    for node in graph.nodes:
        if node.group is None or node.placement is None:
            raise PassError(_PASS, f"node {node.label} has no group or placement; run fuse first")
        if node.placement.device is Device.ACCEL:
            groups.setdefault(node.group, []).append(node)
    return dict(sorted(groups.items()))


def _built(match: KernelMatch, names: tuple[str, ...], cfg: Config) -> KernelMatch | Mismatch:
    """``match`` built and lowered (:meth:`~openvta.graph.kernel.KernelMatch.lowered`), or, if
    the compiler refuses it, the nodes to move: its last residual Add (its tensor operand takes
    accumulator room), or the whole group when it has none."""
    try:
        return match.lowered(cfg)
    except LoweringError as exc:
        bias = "bias, then " if match.params["bias"] else ""
        reason = f"the fused {match.operator} ({bias}{match.epilogue.describe()}) does not lower: {exc}"
    except ValueError as exc:  # a parameter or the DRAM address space (ScheduleError too)
        reason = f"the compiler's {match.operator} refuses the fused kernel: {exc}"
    return Mismatch(match.adds[-1:] or names, reason)


#: Per set of nodes (their names), its built match or why it is none.
_Found = dict[tuple[str, ...], KernelMatch | Mismatch]


def _match(graph: Graph, nodes: list[Node], cfg: Config, found: _Found) -> KernelMatch | Mismatch:
    """The built match of group ``nodes``, once per set of nodes: a group that fusion rebuilt
    with the same nodes after a round keeps its match, renumbered."""
    key = tuple(n.name for n in nodes)
    if key not in found:
        match = match_group(graph, nodes, cfg)
        found[key] = match if isinstance(match, Mismatch) else _built(match, key, cfg)
    match = found[key]
    group = nodes[0].group if nodes[0].group is not None else -1
    return replace(match, group=group) if isinstance(match, KernelMatch) and match.group != group else match


def _failures(graph: Graph, cfg: Config, found: _Found) -> dict[str, str]:
    """Node name → why it moves to the CPU (empty when every group is a kernel)."""
    moves: dict[str, str] = {}
    for nodes in accelerator_groups(graph).values():
        match = _match(graph, nodes, cfg, found)
        if isinstance(match, Mismatch):
            moves.update(dict.fromkeys(match.nodes, match.reason))
    return moves


def group_kernels(graph: Graph, cfg: Config) -> dict[int, KernelMatch]:
    """Accelerator group → its kernel: ``graph.kernels``, as match kernels left them (built);
    a graph without them (a model file of format 1) is matched here, not built (``PassError``
    if a group is not one kernel)."""
    if graph.kernels:
        return dict(graph.kernels)
    kernels = {}
    for group, nodes in accelerator_groups(graph).items():
        found = match_group(graph, nodes, cfg)
        if isinstance(found, Mismatch):
            raise PassError(_PASS, f"group {group} ({nodes[0].label}, …) is not one kernel: "
                                   f"{found.reason}; run match kernels first")
        kernels[group] = found
    return kernels


def _moved(nodes: Sequence[Node], moves: dict[str, str]) -> tuple[Node, ...]:
    return tuple(replace(n, placement=Placement(Device.CPU, moves[n.name])) if n.name in moves else n
                 for n in nodes)


def match_kernels(graph: Graph, cfg: Config) -> Graph:
    """``graph`` with every accelerator group one compiler kernel, left in ``graph.kernels``
    (module docstring).  Each group is matched, built and lowered once, whatever the rounds."""
    found: _Found = {}
    while True:
        moves = _failures(graph, cfg, found)
        if not moves:
            kernels = {group: _match(graph, nodes, cfg, found) for group, nodes in accelerator_groups(graph).items()}
            return graph.replace(kernels=kernels)
        graph = fuse(graph.replace(nodes=_moved(graph.nodes, moves), kernels={}))
