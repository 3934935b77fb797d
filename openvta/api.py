"""The facade: ``openvta.compile`` an operator into a program, ``openvta.simulate`` it.

>>> import numpy as np, openvta
>>> program = openvta.compile("dense", batch=1, in_features=16, out_features=16,
...                           config="tiny", seed=0)
>>> result = openvta.simulate(program, backend="functional")
>>> result["out"].shape, result["out"].dtype
((1, 16), dtype('int8'))
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from openvta.compiler.layout import pack_by_layout, unpack_by_layout
from openvta.compiler.limits import MAX_INSNS
from openvta.compiler.ops import OPERATORS, operator_spec
from openvta.compiler.ops.common import Operator, as_operand
from openvta.compiler.pipeline import Progress
from openvta.isa import Config, Machine, RunReport, parse_machine
from openvta.runtime import Device, Program, Role, load_program

__all__ = ["compile", "simulate", "operator", "random_operands", "Simulated", "OPERATORS"]


def operator(name: str, *, config: str | Config | Machine = "default", layer: str | None = None,
             records: str | os.PathLike[str] | None = None, **params: Any) -> Operator:
    """The scheduled operator ``name`` of the registry (``conv2d``, ``dense``, ``elementwise``).

    Parameters
    ----------
    name :
        a key of :data:`OPERATORS` (``openvta.compiler.ops.REGISTRY``).
    config :
        the machine it is scheduled for: a preset name, a machine's text
        (:func:`~openvta.isa.parse_machine`: ``"ulx3s"``, ``"small:alu_ii=2"``), a
        :class:`~openvta.isa.Machine` or a :class:`~openvta.isa.Config` (its
        configuration is what the schedule depends on).
    layer :
        a named shape of the operator: ``"resnet18.C5"`` (conv2d, docs/WORKLOADS.md's ResNet-18
        layers) or ``"dense_128x128x128"`` (dense).  A layer fixes the shape parameters
        (conv2d: ``n``, ``ci``, ``co``, ``hw``, ``kernel``, ``pad``, ``stride``), so giving
        one of them too is an error; schedule and requantization parameters (``vthreads``,
        ``shift``, …) may be given with it.
    records :
        a tuning log (docs/TUNING.md): schedule the operator with the best plan found there
        for its kernel; without one, keep the planner's choice and warn (a
        :class:`~openvta.tune.records.TuningNote`).
    params :
        the operator's parameters (``openvta.compiler.ops.REGISTRY[name].params``).

    Raises
    ------
    ValueError
        for an unknown operator or layer, a shape parameter given with ``layer``, a
        parameter outside its range (``"conv2d shift must be an integer in 0..31 or None,
        not 99"``), or (``RecordError``) a records file that is missing or malformed.
    TypeError
        for a parameter the operator does not have, a required one missing, or a schedule
        parameter (``plan``, ``vthreads``, ``block``) given with ``records``.
    """
    spec = operator_spec(name)
    config = parse_machine(config).config
    op = spec.operator(config, layer=layer, **params)
    if records is None:
        return op
    from openvta.tune.knobs import knobs_of
    from openvta.tune.records import TuningNote, best_plans, kernel_key, plan_kwargs

    fixed = [key for key in knobs_of(name).keywords if key in params]
    if fixed:
        raise TypeError(f"{name} takes records= or the schedule ({', '.join(fixed)}), not both")
    key = kernel_key(op)
    plan = best_plans(records).get(key)
    if plan is None:
        warnings.warn(f"{records} has no valid record for {key}: the default plan is used",
                      TuningNote, stacklevel=2)
        op.notes["tuning"] = "default plan (no record)"
        return op
    tuned = spec.operator(config, layer=layer, **params, **plan_kwargs(name, plan))
    tuned.notes["tuning"] = f"tuned plan from {records}"
    return tuned


def random_operands(op: Operator, seed: int) -> dict[str, np.ndarray]:
    """Random logical inputs for ``op`` drawn with ``seed`` (its registry entry's generator)."""
    return operator_spec(op.name).random_operands(op, seed)


def compile(op: str | Operator, *, inputs: Mapping[str, ArrayLike] | None = None,  # noqa: A001
            seed: int | None = None, progress: Progress | None = None,
            max_insns: int | None = MAX_INSNS, records: str | os.PathLike[str] | None = None,
            **params: Any) -> Program:
    """Compile an operator into a program file's contents.

    Parameters
    ----------
    op :
        an :class:`Operator`, or a name for :func:`operator` (with its ``params``).
    inputs :
        logical input arrays by symbol name (``data``, ``weight``, ``bias``); integers
        that fit each symbol's dtype (int8, int32).  Inputs not given are zeros.
    seed :
        without ``inputs``: embed random benchmark operands drawn with this seed
        (int8 data and weights, int32 bias in [-2**14, 2**14), as docs/WORKLOADS.md).
    progress, max_insns :
        as :func:`openvta.compiler.pipeline.build`: ``progress(what, done, total)`` before
        each pass and during code generation; the most instructions allowed.
    records :
        with an operator name: a tuning log whose best plan for the kernel schedules it
        (see :func:`operator`).
    params :
        with an operator name, its parameters and ``config``, as :func:`operator` takes
        them; the program records a ``config`` that is a machine with more than its
        configuration (a lean build, other counters or memory: :meth:`Program.on`), and the
        cycle and rtl back ends run it on that machine.

    Raises
    ------
    TypeError
        for ``params`` given with an :class:`Operator`, and as :func:`operator`.
    ValueError
        as :func:`operator`, for inputs that do not fit (see ``Operator.build``), and
        (``LoweringError``) for a program too large for DRAM or ``max_insns``.
    """
    if isinstance(op, Operator):
        if params or records is not None:
            given = [*params, *(["records"] if records is not None else [])]
            raise TypeError(f"compile takes operator parameters with an operator name, not with "
                            f"an Operator ({', '.join(given)})")
        operator_, machine = op, Machine(op.cfg)
    else:
        machine = parse_machine(params.pop("config", "default"))
        operator_ = operator(op, records=records, config=machine, **params)
    if inputs is None and seed is not None:
        inputs = random_operands(operator_, seed)
    return operator_.build(inputs, progress=progress, max_insns=max_insns).on(machine)


class NoSuchOutputError(KeyError):
    """An output name that the program does not have; the message names those it has."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Simulated(Mapping[str, np.ndarray]):
    """Outputs by symbol name (logical layout), with the back end's counters and report."""

    def __init__(self, outputs: dict[str, np.ndarray], counters: dict[str, int], report: RunReport | None) -> None:
        self.outputs = outputs
        self.counters = counters
        self.report = report

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.outputs[name]
        except KeyError:
            raise NoSuchOutputError(f"the program has no output {name!r}; its outputs: "
                                    f"{', '.join(self.outputs) or 'none'}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.outputs)

    def __len__(self) -> int:
        return len(self.outputs)


def simulate(program: Program | str | os.PathLike[str], inputs: Mapping[str, ArrayLike] | None = None,
             *, backend: str = "functional", **options: Any) -> Simulated:
    """Run ``program`` (with ``inputs`` written into its DRAM first) and unpack its outputs.

    Parameters
    ----------
    program :
        a :class:`~openvta.runtime.Program`, or the path of a program file.
    inputs :
        logical arrays by symbol name, integers that fit each symbol's dtype.

    Raises
    ------
    ValueError, TypeError
        for an input of another shape, of non-integers or of values outside its dtype.
    """
    if not isinstance(program, Program):
        program = load_program(program)
    program = Program(program.config, program.dram.copy(), program.insn_addr, program.insn_count,
                      dict(program.symbols), program.machine)
    for name, array in (inputs or {}).items():
        symbol = program.symbol(name)
        shaped = symbol.logical_shape is not None and bool(symbol.layout)
        value = as_operand(name, array, symbol.logical_shape if shaped else None, symbol.dtype)
        if shaped:
            value = pack_by_layout(value, symbol.layout, program.config)
        program.write(name, value)
    result = Device(backend, **options).run(program)
    outputs = {}
    for name, symbol in program.symbols.items():
        if symbol.role is not Role.OUTPUT:
            continue
        packed = program.read(name, result.dram)
        if symbol.logical_shape is not None and symbol.layout:
            packed = unpack_by_layout(packed, symbol.layout, symbol.logical_shape)
        outputs[name] = packed
    return Simulated(outputs, result.counters, result.report)
