"""The graph level's exceptions: each one line, naming what is wrong and where.

- :class:`ModelError` — a model the user brings (an ONNX file, a ``.ovta`` file) that
  cannot be read or uses something the graph level does not support.
- :class:`GraphError` — a graph that breaks an invariant of the IR (``Graph.verify``).
- :class:`PassError` — a graph pass that cannot do its work; names the pass, the node
  and the reason, like the compiler's ``LoweringError``.
- :class:`OpError` — raised by an op's shape inference or kernel; callers add the node.

All are ``ValueError`` subclasses: the model, the graph or the data handed in is wrong.

Examples
--------
>>> str(PassError("fuse", "node 'c1' (Conv) has no placement"))
"fuse: node 'c1' (Conv) has no placement"
"""

from __future__ import annotations

__all__ = ["ModelError", "GraphError", "PassError", "OutOfRange", "OpError", "ExecutionError"]


class ModelError(ValueError):
    """A model file or model object that cannot be imported or loaded."""


class GraphError(ValueError):
    """A graph that breaks an invariant of the IR (SSA, order, types)."""


class OpError(ValueError):
    """An op that cannot infer its output type or run on its inputs (no node named yet)."""


class PassError(ValueError):
    """A graph pass that cannot do its work: ``"<pass>: <reason>"``."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where


class OutOfRange(PassError):
    """A node's numbers that the integer graph cannot hold (a bias beyond int32 in its
    accumulator's scale, a requantization multiplier out of range): the quantize pass runs
    that node in float instead, and the summary says so."""


class ExecutionError(RuntimeError):
    """A compiled model that cannot run as asked (for example on a back end not yet wired)."""
