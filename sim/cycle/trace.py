"""Exports of a cycle-model run: a Chrome/Perfetto trace and a matplotlib timeline.

The trace has one lane per unit (fetch, load, compute, store), one slice per
instruction, and a flow arrow for every dependency token from the instruction that
pushed it to the one that popped it.  Times are in microseconds at the nominal clock.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from openvta.isa import MemInsn, MemoryType, Opcode, Timing, Unit

from ..functional.machine import Machine
from .records import InsnRecord, TokenRecord

if TYPE_CHECKING:
    import simpy

__all__ = ["TraceSource", "chrome_trace", "write_chrome_trace", "write_timeline", "insn_kind"]


class TraceSource(Protocol):
    """What a trace is drawn from: a finished run of :class:`~openvta.sim.cycle.TraceSource`."""

    records: list[InsnRecord]
    token_records: list[TokenRecord]
    machine: Machine
    timing: Timing
    env: simpy.Environment


LANES = tuple(Unit)
COLOURS = {
    "LOAD INP": "#4e79a7", "LOAD WGT": "#76b7b2", "LOAD UOP": "#bab0ac", "LOAD ACC": "#9c755f",
    "LOAD EPI": "#edc948", "GEMM": "#e15759", "ALU": "#f28e2b", "STORE": "#59a14f", "STORE ACC": "#8cd17d",
    "sync": "#d3d3d3",
    "FINISH": "#000000", "fetch": "#b07aa1",
}


def insn_kind(model: TraceSource, index: int) -> str:
    """A short category for an instruction: ``LOAD INP``, ``GEMM``, ``sync``… (machine v2: ``LOAD
    EPI`` and the draining ``STORE ACC``)."""
    insn = model.machine.insns[index]
    if isinstance(insn, MemInsn):
        if insn.x_size == 0:
            return "sync"
        if insn.opcode == Opcode.STORE:
            return "STORE ACC" if insn.memory_type == MemoryType.ACC else "STORE"
        name = insn.memory_type.name
        return f"LOAD {name.removesuffix('_8BIT')}"
    return insn.opcode.name


def chrome_trace(model: TraceSource) -> dict[str, Any]:
    """The run as a Chrome trace-event JSON object (open it in ui.perfetto.dev)."""
    scale = 1.0 / model.timing.clock_mhz  # cycles → microseconds
    lane = {name: tid for tid, name in enumerate(LANES)}
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "openvta"}},
    ]
    for name, tid in lane.items():
        events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": name.value}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": tid,
                       "args": {"sort_index": tid}})
    module_of_insn: dict[int, Unit] = {}
    for record in model.records:
        module_of_insn[record.index] = record.module
        name = "fetch" if record.module is Unit.FETCH else insn_kind(model, record.index)
        args = ({"instructions": record.label} if record.module is Unit.FETCH else
                {"index": record.index, "instruction": model.machine.describe(record.index)})
        events.append({
            "name": name, "cat": record.module.value, "ph": "X", "pid": 0, "tid": lane[record.module],
            "ts": record.start * scale, "dur": max(record.end - record.start, 1) * scale,
            "args": args,
        })
    for token in model.token_records:
        pusher = module_of_insn.get(token.push_insn, Unit.COMPUTE)
        popper = module_of_insn.get(token.pop_insn, Unit.COMPUTE)
        common = {"name": f"token {token.queue.label}", "cat": "token", "pid": 0, "id": token.flow}
        events.append({**common, "ph": "s", "tid": lane[pusher], "ts": (token.push_time - 0.5) * scale})
        events.append({**common, "ph": "f", "bp": "e", "tid": lane[popper],
                       "ts": (token.pop_time + 0.5) * scale})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"cycles": int(model.env.now), "clock_mhz": model.timing.clock_mhz}}


def write_chrome_trace(model: TraceSource, path: str | Path) -> None:
    Path(path).write_text(json.dumps(chrome_trace(model)))


def write_timeline(model: TraceSource, path: str | Path, title: str = "") -> None:
    """A PNG of the four lanes, one bar per instruction, coloured by kind."""
    # a Figure of its own (not pyplot): the caller's backend and figures stay untouched
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    figure = Figure(figsize=(12, 3.2))
    axes = figure.subplots()
    used = set()
    for record in model.records:
        kind = "fetch" if record.module is Unit.FETCH else insn_kind(model, record.index)
        used.add(kind)
        y = len(LANES) - 1 - LANES.index(record.module)
        axes.broken_barh([(record.start, max(record.end - record.start, 1))], (y - 0.4, 0.8),
                         facecolors=COLOURS[kind], edgecolor="none")
    axes.set_yticks(range(len(LANES)), [unit.value for unit in reversed(LANES)])
    axes.set_xlabel("cycle")
    axes.set_xlim(0, max(int(model.env.now), 1))
    axes.set_title(title or f"{int(model.env.now)} cycles")
    axes.legend(handles=[Patch(color=COLOURS[k], label=k) for k in COLOURS if k in used],
                loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=len(used), fontsize="small",
                frameon=False)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
