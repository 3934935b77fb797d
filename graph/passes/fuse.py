"""Pass: fuse — group nodes into kernels, decided by pattern kinds (TVM Relay's FuseOps).

Walking the graph in order, a node joins the group of one of its producers when

- both are on the same device;
- every value the group makes is read only inside the group or by this node, and none
  is a graph output (so the group has one way out, and merging cannot make a cycle);
- the kinds allow it: an element-wise or broadcast node follows any group but an
  opaque one (so a conv or dense — out-element-wise-fusable — takes its bias,
  requantization, clip, ReLU and residual add, whichever operand of the add it makes: a
  producer group with an anchor is joined before one without); an injective or reduction node follows
  only a group of element-wise, broadcast or injective nodes; an
  out-element-wise-fusable or opaque node always starts a group.

An element-wise or broadcast node also absorbs the groups of its other producers when
they hold only element-wise or broadcast nodes and feed only it: the requantization of
a residual input joins the conv group of the Add.  When such a producer group has an
anchor of its own (the downsample conv of a residual block), the element-wise nodes at
its end that only feed this node and start from an int8 value move over instead: that
group then ends on an int8 value a kernel can store, and the int32 rescaling runs in the
kernel of the Add, which loads the int8 value.  An accelerator group that ends up
with no conv or dense to anchor it moves to the CPU.  Groups are then numbered in an
order that respects their dependencies and the nodes sorted group by group.

Preconditions: every node has a placement (partition).
Postconditions: every node has a group; a group's nodes are contiguous, on one device;
an accelerator group has exactly one out-element-wise-fusable anchor.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import PassError
from ..ir import DType, Device, Graph, Node, Placement
from ..ops.base import PatternKind
from ..registry import op_def

__all__ = ["fuse", "fusable"]

_PASS = "fuse"
_ANCHOR = PatternKind.OUT_ELEMWISE_FUSABLE


def fusable(group: PatternKind, node: PatternKind) -> bool:
    """Whether a node of kind ``node`` may follow a group whose largest kind is ``group``.

    >>> fusable(PatternKind.OUT_ELEMWISE_FUSABLE, PatternKind.ELEMWISE)
    True
    >>> fusable(PatternKind.OUT_ELEMWISE_FUSABLE, PatternKind.INJECTIVE)
    False
    """
    if node <= PatternKind.BROADCAST:
        return group is not PatternKind.OPAQUE
    if node in (PatternKind.INJECTIVE, PatternKind.REDUCTION):
        return group <= PatternKind.INJECTIVE
    return False


class _Groups:
    """Groups under construction (local to one run of the pass)."""

    def __init__(self, graph: Graph) -> None:
        self.consumers, self.producers = graph.consumers(), graph.producers()
        self.types = graph.types
        self.outputs = set(graph.outputs)
        self.group_of: dict[str, int] = {}
        self.members: dict[int, list[Node]] = {}
        self.kind: dict[int, PatternKind] = {}
        self.next_id = 0

    def device(self, gid: int) -> Device:
        placement = self.members[gid][0].placement
        assert placement is not None  # a node joins a group only once its placement is checked
        return placement.device

    def feeds_only(self, gid: int, node: Node) -> bool:
        for member in self.members[gid]:
            for value in member.outputs:
                if value in self.outputs:
                    return False
                for user in self.consumers.get(value, []):
                    if user.name != node.name and self.group_of.get(user.name) != gid:
                        return False
        return True

    def add(self, node: Node, gid: int | None) -> int:
        kind = op_def(node.op).kind
        if gid is None:
            gid, self.next_id = self.next_id, self.next_id + 1
            self.members[gid], self.kind[gid] = [], kind
        self.members[gid].append(node)
        self.kind[gid] = max(self.kind[gid], kind)
        self.group_of[node.name] = gid
        return gid

    def merge(self, source: int, target: int) -> None:
        for member in self.members.pop(source):
            self.group_of[member.name] = target
            self.members[target].append(member)
        self.kind[target] = max(self.kind[target], self.kind.pop(source))

    def int8_tail(self, gid: int, node: Node) -> list[Node]:
        """The element-wise nodes ending group ``gid`` that only feed ``node`` and start
        from an int8 value of the group (empty when there is no such run)."""
        tail: list[Node] = []
        reader = node
        while True:
            inside = [v for v in reader.inputs if v in self.producers
                      and self.group_of[self.producers[v].name] == gid]
            if len(inside) != 1:
                return []
            if self.types[inside[0]].dtype is DType.INT8:  # a value a kernel can store
                return tail
            member = self.producers[inside[0]]
            users = {u.name for v in member.outputs for u in self.consumers.get(v, [])}
            if op_def(member.op).kind > PatternKind.BROADCAST or users != {reader.name} \
                    or any(v in self.outputs for v in member.outputs):
                return []
            tail.append(member)
            reader = member

    def move(self, nodes: list[Node], target: int) -> None:
        for member in nodes:
            gid = self.group_of[member.name]
            self.members[gid] = [m for m in self.members[gid] if m.name != member.name]
            self.members[target].append(member)
            self.group_of[member.name] = target

    def producer_groups(self, node: Node) -> list[int]:
        found = [self.group_of[self.producers[v].name] for v in node.inputs if v in self.producers]
        return list(dict.fromkeys(found))


def _group_nodes(graph: Graph) -> _Groups:
    groups = _Groups(graph)
    for node in graph.nodes:
        if node.placement is None:
            raise PassError(_PASS, f"node {node.label} has no placement; run partition first")
        kind, device = op_def(node.op).kind, node.placement.device
        candidates = [gid for gid in groups.producer_groups(node)
                      if groups.device(gid) is device and fusable(groups.kind[gid], kind)
                      and groups.feeds_only(gid, node)]
        # a conv's or dense's group first, whichever operand it makes (torchvision's
        # MobileNetV2 adds the block's input first, the projection second)
        target = next((gid for gid in candidates if groups.kind[gid] is _ANCHOR), next(iter(candidates), None))
        target = groups.add(node, target)
        if kind > PatternKind.BROADCAST:
            continue
        for gid in groups.producer_groups(node):
            if gid == target or groups.device(gid) is not device:
                continue
            if groups.kind[gid] <= PatternKind.BROADCAST and groups.feeds_only(gid, node):
                groups.merge(gid, target)
            elif groups.kind[gid] is _ANCHOR and groups.kind[target] is _ANCHOR:
                groups.move(groups.int8_tail(gid, node), target)
    return groups


def _order(graph: Graph, groups: _Groups) -> list[int]:
    """Group ids in a dependency order (ties: the group whose first node comes first)."""
    position = {node.name: index for index, node in enumerate(graph.nodes)}
    first = {gid: min(position[m.name] for m in members) for gid, members in groups.members.items()}
    needs = {gid: {groups.group_of[groups.producers[v].name] for m in members for v in m.inputs
                   if v in groups.producers} - {gid} for gid, members in groups.members.items()}
    order: list[int] = []
    while needs:
        ready = [gid for gid, deps in needs.items() if not deps]
        gid = min(ready, key=first.__getitem__)
        order.append(gid)
        del needs[gid]
        for deps in needs.values():
            deps.discard(gid)
    return order


def _placed(node: Node, anchored: bool) -> Placement | None:
    if anchored or node.placement is None or node.placement.device is Device.CPU:
        return node.placement
    return Placement(Device.CPU, "no conv or dense in its fused group to run with")


def fuse(graph: Graph) -> Graph:
    """``graph`` with fused groups (module docstring)."""
    groups = _group_nodes(graph)
    position = {node.name: index for index, node in enumerate(graph.nodes)}
    nodes: list[Node] = []
    for number, gid in enumerate(_order(graph, groups)):
        members = sorted(groups.members[gid], key=lambda n: position[n.name])
        anchored = any(op_def(m.op).kind is _ANCHOR for m in members)
        nodes.extend(replace(m, group=number, placement=_placed(m, anchored)) for m in members)
    return graph.replace(nodes=tuple(nodes))
