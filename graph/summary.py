"""A per-node table of a compiled graph: op, placement and why, fused group, MACs, bytes.

Sizes and MACs are per image (the symbolic batch set to 1).

Examples
--------
>>> from openvta.graph.ir import DType, Graph, Node, Op, TensorType
>>> t = TensorType(("N", 4), DType.FLOAT32)
>>> g = Graph("g", ("x",), ("y",), (Node("r", Op.RELU, ("x",), ("y",)),), {}, {"x": t, "y": t})
>>> print(summary_text(g, "float"))
model g (float): 1 nodes in 0 fused groups, 0 on the accelerator; 0 MACs per image
group  node  op    placement  MACs  out B  param B  reason
    -  r     Relu  -             0     16        0  -
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import Device, Graph, Op
from .kernel import PlanSource
from .registry import op_def

__all__ = ["NodeSummary", "fallback_line", "kernel_plans", "plans_line", "summarize", "summary_text"]


@dataclass(frozen=True)
class NodeSummary:
    """One row of the summary."""

    name: str
    op: str
    device: Device | None
    reason: str
    group: int | None
    macs: int
    out_bytes: int
    param_bytes: int
    wide: bool = False  # one int8 pass of a product with a 16-bit activation (mixed precision)


def summarize(graph: Graph) -> list[NodeSummary]:
    """One :class:`NodeSummary` per node, in graph order."""
    rows = []
    notes = kernel_plans(graph)
    for node in graph.nodes:
        inputs = [graph.types[v] for v in node.inputs]
        output = graph.types[node.outputs[0]]
        macs = op_def(node.op).macs(inputs, output, node.attrs)
        passes = node.precision.passes if node.precision is not None else 1  # a product's MACs counted once
        macs //= passes
        params = sum(graph.types[v].nbytes() for v in node.inputs if v in graph.constants)
        placement = node.placement
        rows.append(NodeSummary(node.name, node.op_name,
                                placement.device if placement else None,
                                _reason(placement.reason, notes.get(node.name)) if placement else "-", node.group, macs,
                                output.nbytes(), params, passes > 1))
    return rows


def _reason(reason: str, note: str | None) -> str:
    return reason if note is None else f"{reason}; {note}"


def kernel_plans(graph: Graph) -> dict[str, str]:
    """Anchor node → which plan its kernel has (:attr:`~openvta.graph.kernel.KernelMatch.plan_note`),
    for a graph compiled with tuned plans; empty otherwise."""
    return {k.anchor: k.plan_note for k in graph.kernels.values() if k.plan_note is not None}


def plans_line(graph: Graph) -> str | None:
    """``"plans: 18 kernels tuned from records, 2 default (no record: 1, refused: 1)"``, or
    None for a graph compiled without tuned plans."""
    sources = [k.tuning for k in graph.kernels.values() if k.tuning is not None]
    if not sources:
        return None
    tuned = sources.count(PlanSource.TUNED)
    missing = sources.count(PlanSource.NO_RECORD)
    refused = sources.count(PlanSource.REFUSED)
    return (f"plans: {tuned} kernel{'s' if tuned != 1 else ''} tuned from records, {missing + refused} default "
            f"(no record: {missing}, refused: {refused})")


def macs_share(rows: list[NodeSummary]) -> str | None:
    """``"MACs: 94.7 % on the accelerator (int8), 5.3 % on the CPU (float: MatMul)"`` for a
    placed graph with MACs; None otherwise."""
    total = sum(r.macs for r in rows)
    if not total or not any(r.device is not None for r in rows):
        return None
    accel = sum(r.macs for r in rows if r.device is Device.ACCEL)
    cpu_ops = sorted({r.op for r in rows if r.macs and r.device is not Device.ACCEL})
    cpu = f"{(total - accel) / total:.1%} on the CPU (float: {', '.join(cpu_ops)})" if cpu_ops else "none on the CPU"
    wide = sum(r.macs for r in rows if r.device is Device.ACCEL and r.wide)
    if not wide:
        return f"MACs: {accel / total:.1%} on the accelerator (int8 products), {cpu}"
    return (f"MACs: {accel / total:.1%} on the accelerator ({(accel - wide) / total:.1%} int8 products, "
            f"{wide / total:.1%} with a 16-bit activation in int8 passes), {cpu}")


def fallback_line(graph: Graph) -> str | None:
    """``"CPU fallback: 3 nodes on ONNX's reference kernels (ReduceMax, TopK)"``, or None
    when every node has an openvta kernel."""
    ops = [n.op_name for n in graph.nodes if n.op is Op.ONNX_REFERENCE]
    if not ops:
        return None
    return (f"CPU fallback: {len(ops)} node{'s' if len(ops) != 1 else ''} on ONNX's reference kernels "
            f"({', '.join(sorted(set(ops)))})")


def _header(graph: Graph, rows: list[NodeSummary], detail: str) -> list[str]:
    groups = {r.group for r in rows if r.group is not None}
    accel = {r.group for r in rows if r.device is Device.ACCEL}
    lines = [f"model {graph.name} ({detail}): {len(rows)} nodes in {len(groups)} fused groups, "
             f"{len(accel)} on the accelerator; {sum(r.macs for r in rows):,} MACs per image"]
    share = macs_share(rows)
    if share:
        lines.append(share)
    fallback = fallback_line(graph)
    if fallback:
        lines.append(fallback)
    if graph.memory is not None:
        m = graph.memory
        lines.append(f"arena {m.arena_bytes:,} bytes with reuse, {m.no_reuse_bytes:,} without "
                     f"({len(m.sizes)} tensors, batch {m.batch}, {m.alignment}-byte aligned)")
    for r in graph.regions:
        program = f"one program of {r.program.insn_count:,} instructions" if r.program else "no program"
        count = len(r.kernels)
        lines.append(f"region {r.index} (group{'s' if count > 1 else ''} "
                     f"{', '.join(map(str, r.groups))}): {count} kernel{'s' if count > 1 else ''} in "
                     f"{program}; accelerator arena {r.arena_bytes:,} bytes with reuse, "
                     f"{r.no_reuse_bytes:,} without")
    lines += [f"note: {note}" for note in graph.notes]
    plans = plans_line(graph)
    return lines + ([plans] if plans else [])


def summary_text(graph: Graph, detail: str) -> str:
    """The summary as text: a header, then one aligned row per node."""
    rows = summarize(graph)
    table = [("group", "node", "op", "placement", "MACs", "out B", "param B", "reason")]
    for r in rows:
        table.append(("-" if r.group is None else str(r.group), r.name, r.op,
                      r.device.value if r.device else "-", f"{r.macs:,}", f"{r.out_bytes:,}",
                      f"{r.param_bytes:,}", r.reason))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    right = {0, 4, 5, 6}
    lines = _header(graph, rows, detail)
    for row in table:
        cells = [cell.rjust(w) if i in right else cell.ljust(w)
                 for i, (cell, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
