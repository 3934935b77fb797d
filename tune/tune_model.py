"""``tune_model``: tune every accelerator kernel of a model into one log.

The model is compiled (default plans), each accelerator group's compiler kernel taken —
a conv2d or dense with its fused epilogue: bias, requantization, ReLU, residual add —
and the distinct ones (by kernel key: the same shape, epilogue and hardware are one
kernel) tuned one after the other with :func:`~openvta.tune.tuner.tune`, every record
appended to one log.  ``openvta.compile_model(..., records=log)`` then builds each
kernel with its best plan.

A kernel's schedule space is made from the operator itself (:func:`kernel_space`): its
parameters with the fused :class:`~openvta.compiler.Epilogue` as it is.  A record's
``params`` hold that epilogue as JSON (:meth:`Epilogue.to_json`); measurement draws random
operands for the epilogue's channel vectors and tensor operands too and checks the
output against the operator's numpy reference, so a tuned plan of a graph kernel is
checked like any other.

>>> from openvta.compiler import AluStage, Epilogue, TensorOperand, conv2d
>>> from openvta.isa import AluOp, preset
>>> residual = Epilogue((AluStage(AluOp.ADD, TensorOperand("res0")), AluStage(AluOp.MAX, 0)))
>>> op = conv2d(preset("tiny"), ci=8, co=8, hw=4, kernel=3, pad=1, epilogue=residual)
>>> space = kernel_space(op)
>>> space.kernel == kernel_key(op), len(space), space.valid_count()
(True, 288, 90)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from openvta.compiler.kernel_key import kernel_key
from openvta.compiler.ops.common import Operator
from openvta.graph.compiled_model import CompiledModel
from openvta.graph.passes.match_kernels import group_kernels
from openvta.graph.pipeline import compile_model
from openvta.isa import Config

from .executors import open_executor
from .knobs import knobs_of
from .space import Space
from .tuner import TuneError, TuneResult, tune

__all__ = ["KernelTuning", "ModelTuning", "kernel_space", "model_kernels", "tune_model"]

#: ``progress(what, done, total)``, as :data:`openvta.runtime.Progress`.
Progress = Callable[[str, int, "int | None"], None]


def kernel_space(op: Operator) -> Space:
    """The schedule space of a scheduled operator (a graph kernel with a fused epilogue too):
    every parameter of ``op`` but the knobs, on ``op.cfg``."""
    keywords = knobs_of(op.name).keywords
    return Space(op.name, {name: value for name, value in op.params.items() if name not in keywords}, op.cfg)


def model_kernels(model: CompiledModel) -> dict[str, tuple[Operator, tuple[str, ...]]]:
    """Kernel key → the operator (default plan) and the names of the model's kernels with
    that key, in execution order."""
    kernels: dict[str, tuple[Operator, tuple[str, ...]]] = {}
    for match in group_kernels(model.graph, model.config).values():
        op = match.build(model.config)
        key = kernel_key(op)
        held = kernels.get(key)
        kernels[key] = (op, (match.name,)) if held is None else (held[0], held[1] + (match.name,))
    return kernels


@dataclass(frozen=True)
class KernelTuning:
    """One distinct kernel of a model, tuned.

    Members
    -------
    key :
        its kernel key.
    names :
        the model's kernels (fused groups, node names joined by ``+``) that are this kernel.
    result :
        the tuning run (:class:`~openvta.tune.tuner.TuneResult`).
    seconds :
        wall time of the run.
    """

    key: str
    names: tuple[str, ...]
    result: TuneResult
    seconds: float = field(default=0.0, compare=False)

    @property
    def default_cycles(self) -> int | None:
        """Cycles of the planner's own plan (None if it was not measured without an error)."""
        default = self.result.default
        return default.cycles if default is not None and default.ok else None

    @property
    def tuned_cycles(self) -> int:
        """Cycles of the best configuration found."""
        return self.result.best().measured_cycles

    @property
    def knobs(self) -> dict[str, Any]:
        return dict(self.result.best().knobs)


@dataclass(frozen=True)
class ModelTuning:
    """A model's kernels, tuned: the model as compiled with default plans, one
    :class:`KernelTuning` per distinct kernel in execution order, and the log."""

    model: CompiledModel
    kernels: tuple[KernelTuning, ...]
    log: str | os.PathLike[str] | None

    def format(self) -> str:
        """One row per kernel: its first name, how many share it, trials, default and tuned
        cycles, the speed-up, the tuned knobs; then the totals over the model's kernels."""
        rows = [("kernel", "x", "trials", "default", "tuned", "speed-up", "knobs")]
        default_sum = tuned_sum = 0
        for k in self.kernels:
            count, default = len(k.names), k.default_cycles
            default_sum += count * (default or 0)
            tuned_sum += count * k.tuned_cycles
            speed = f"{default / k.tuned_cycles:.3f}x" if default else "-"
            rows.append((_short(k.names[0]), str(count), str(len(k.result.records)),
                         f"{default:,}" if default else "-", f"{k.tuned_cycles:,}", speed,
                         " ".join(f"{name}={value}" for name, value in k.knobs.items())))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(w) if i in (0, 6) else cell.rjust(w)
                           for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in rows]
        if tuned_sum:
            lines.append(f"kernels alone: {default_sum:,} cycles with the default plans, {tuned_sum:,} tuned "
                         f"({default_sum / tuned_sum:.3f}x)")
        return "\n".join(lines)


def _short(name: str) -> str:
    first, *rest = name.split("+")
    return f"{first} +{len(rest)}" if rest else first


def tune_model(model: Any, calibration: Any = None, *, config: str | Config = "default",
               quantize: str = "fixed", cpu_ops: Collection[str] = (), cpu_nodes: Collection[str] = (),
               trials_per_kernel: int = 100, tuner: str = "xgb", executor: str | Executor = "serial",
               log: str | os.PathLike[str] | None = None, seed: int = 0, backend: str = "cycle",
               batch_size: int = 8, budget: float = 2.0, cost_model: str = "auto",
               transfer: Sequence[str | os.PathLike[str]] = (), progress: Progress | None = None,
               on_kernel: Callable[[KernelTuning, int, int], None] | None = None) -> ModelTuning:
    """Tune every distinct accelerator kernel of ``model`` (module docstring).

    Parameters
    ----------
    model, calibration, config, quantize, cpu_ops, cpu_nodes :
        what :func:`openvta.graph.pipeline.compile_model` takes; or ``model`` an already
        compiled :class:`~openvta.graph.compiled_model.CompiledModel` and no ``calibration``.
    trials_per_kernel :
        configurations per kernel, its default plan included.
    tuner, executor, log, seed, backend, batch_size, budget, transfer :
        as :func:`openvta.tune.tune`, for each kernel (one executor opened for all of them,
        one log appended to); ``cost_model`` is its ``model``.
    progress :
        ``progress(what, done, total)`` within each kernel, ``what`` naming the kernel.
    on_kernel :
        ``on_kernel(kernel, index, count)`` after each kernel is tuned.

    Raises
    ------
    TuneError
        for a compiled model given with calibration data or a model without calibration
        data, a model without accelerator kernels, and what :func:`~openvta.tune.tune` raises.
    """
    compiled = _compiled(model, calibration, config, quantize, cpu_ops, cpu_nodes)
    kernels = model_kernels(compiled)
    if not kernels:
        raise TuneError(f"model {compiled.graph.name} has no accelerator kernel to tune")
    done: list[KernelTuning] = []
    with open_executor(executor) as pool:
        for index, (key, (op, names)) in enumerate(kernels.items()):
            start = time.perf_counter()
            result = tune(kernel_space(op), trials_per_kernel, tuner=tuner, executor=pool, log=log, seed=seed,
                          backend=backend, batch_size=batch_size, budget=budget, model=cost_model,
                          transfer=transfer, progress=_within(progress, names[0], index, len(kernels)))
            done.append(KernelTuning(key, names, result, time.perf_counter() - start))
            if on_kernel is not None:
                on_kernel(done[-1], index, len(kernels))
    return ModelTuning(compiled, tuple(done), log)


def _compiled(model: Any, calibration: Any, config: str | Config, quantize: str, cpu_ops: Collection[str],
              cpu_nodes: Collection[str]) -> CompiledModel:
    if isinstance(model, CompiledModel):
        if calibration is not None:
            raise TuneError("tune_model takes calibration data with a model to compile, not with a "
                            "compiled model")
        return model
    if calibration is None:
        raise TuneError("tune_model needs calibration data to compile the model (or a compiled model)")
    return compile_model(model, calibration, config=config, quantize=quantize, cpu_ops=cpu_ops,
                         cpu_nodes=cpu_nodes)


def _within(progress: Progress | None, name: str, index: int, count: int) -> Progress | None:
    if progress is None:
        return None

    def report(what: str, done: int, total: int | None) -> None:
        progress(f"kernel {index + 1}/{count} {_short(name)}: {what}", done, total)

    return report
