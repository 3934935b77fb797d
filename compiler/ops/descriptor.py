"""What an accelerator operator is: one :class:`OperatorDescriptor`, written in one file.

An operator's file (``compiler/ops/<name>.py``) ends with ``DESCRIPTOR``, the one value
that says everything the layers above need to know of it:

- for users (``openvta.operator``, ``openvta compile <name>``): its parameters
  (:class:`~.params.Param`), factory, numpy reference, random operands and named layers;
- for the tuner and for tuned plans (``openvta.tune``, kernel keys): its
  :class:`PlanSpace` — the knobs of its schedule and their domain for a shape, why a choice
  is refused (the planner's own checks), the planner's own choice, how knobs become the
  factory's keywords, and its cost features;
- for the graph level: its matcher, which reads a graph node as plain data
  (:class:`Anchor`: the ONNX op type, its attributes, the shapes, dtypes and constness of
  its inputs — never ``openvta.graph`` types, so the compiler imports only ``isa`` and
  ``runtime``) and answers with the factory's parameters or why it cannot.

The registry (:mod:`.registry`) finds each descriptor from its :class:`OperatorKind`
member; the kernel keys, the tuner's spaces and features and the graph's accelerator
predicates are loops over descriptors.  Adding an operator is one file and one member.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, is_dataclass
from enum import Enum
from typing import Any

import numpy as np

from openvta.isa import Config, preset

from ..epilogue import Epilogue
from ..ir import LoweringError
from .common import Operator
from .params import Param

__all__ = ["Anchor", "Knob", "Knobs", "OperatorDescriptor", "OperatorKind", "PlanSpace", "default_knobs",
           "plan_knobs"]

Knobs = dict[str, Any]
#: What a matcher says of a graph node it could compute: the factory's parameters and a note
#: for the node's placement (``"int8 conv2d 3x3/1, 64->64 channels"``), or why it cannot.
Matched = tuple[dict[str, Any], str] | str


class OperatorKind(Enum):
    """Every accelerator operator, by the name of its file in ``compiler/ops/``."""

    CONV2D = "conv2d"
    DENSE = "dense"
    ELEMENTWISE = "elementwise"
    DEPTHWISE_CONV2D = "depthwise_conv2d"
    BATCH_MATMUL = "batch_matmul"


@dataclass(frozen=True)
class Knob:
    """One knob: its name and its values, in the order of its digit of a configuration's id."""

    name: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Anchor:
    """A graph node as the compiler's matchers see it: plain data, no graph types.

    Members
    -------
    op :
        the ONNX op type (``"Conv"``, ``"Gemm"``, ``"MatMul"``).
    attrs :
        its attributes as the graph normalized them (Conv ``strides`` (2), ``pads`` (4),
        ``group``; Gemm ``alpha``, ``beta``, ``transA``, ``transB``).
    shapes, dtypes :
        per input, its static shape and its dtype name (``"int8"``, ``"int32"``, ``"float32"``).
    constant :
        per input, whether it is a constant of the graph (a weight) rather than an activation.
    batched :
        per input, whether its first dimension is the graph's batch, which the executor cuts
        into runs of ``cfg.BATCH`` samples (its size in ``shapes`` is then 1); a static first
        dimension (a transformer's tokens, flattened to rows) is not.  Empty: every one is.
    """

    op: str
    attrs: Mapping[str, Any]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    constant: tuple[bool, ...]
    batched: tuple[bool, ...] = ()


def _fields(plan: object) -> Knobs:
    if not is_dataclass(plan) or isinstance(plan, type):
        raise TypeError(f"a plan must be a dataclass instance, not {plan!r}")
    return asdict(plan)


def default_knobs(planner: Callable[[], object]) -> Knobs | None:
    """The knobs of the plan ``planner()`` picks (a plan dataclass), or None when it finds none."""
    try:
        return _fields(planner())
    except LoweringError:
        return None


def plan_knobs(plan_type: type) -> Callable[[Operator], Knobs | None]:
    """``of_operator`` for an operator whose plan is a ``plan_type`` dataclass: its fields."""
    def of_operator(op: Operator) -> Knobs | None:
        if not isinstance(op.plan, plan_type):
            raise TypeError(f"{op.name}'s plan must be a {plan_type.__name__}, not {op.plan!r}")
        return _fields(op.plan)

    return of_operator


@dataclass(frozen=True)
class PlanSpace:
    """An operator's schedule as knobs, for tuned plans and the tuner.

    Members
    -------
    names :
        the knob names a plan sets, in order.
    keywords :
        the factory keywords the knobs set (``plan`` and ``vthreads``, ``block`` …); they are
        not parameters of a tuning space.
    knobs :
        ``knobs(cfg, params) -> (Knob, ...)``: the domain of each knob for the operator's
        parameters (shape and tail).
    check :
        ``check(cfg, params, knobs) -> ["<kind>: <detail>", ...]``: why a choice is refused
        (the planner's own checks); empty if it fits.
    default :
        ``default(cfg, params) -> knobs`` of the planner's own choice (one thread), or None
        when it finds none.
    kwargs :
        ``kwargs(knobs) -> {keyword: value}`` for the factory.
    of_operator :
        ``of_operator(op) -> knobs``: the knobs of a built operator's schedule, or None when
        the factory chose them itself (nothing to check).
    features :
        ``features(cfg, params, knobs) -> {name: value}``: the cost model's features of a
        choice, the same names in the same order for every choice, ``"roofline"`` (the
        bound in cycles) among them.
    """

    names: tuple[str, ...]
    keywords: tuple[str, ...]
    knobs: Callable[[Config, Mapping[str, Any]], tuple[Knob, ...]]
    check: Callable[[Config, Mapping[str, Any], Knobs], list[str]]
    default: Callable[[Config, Mapping[str, Any]], Knobs | None]
    kwargs: Callable[[Mapping[str, Any]], dict[str, Any]]
    of_operator: Callable[[Operator], Knobs | None]
    features: Callable[[Config, Mapping[str, Any], Mapping[str, Any]], dict[str, float]]


@dataclass(frozen=True)
class OperatorDescriptor:
    """One accelerator operator (module docstring).

    Parameters
    ----------
    kind :
        its :class:`OperatorKind` member; ``kind.value`` is its name
        (``openvta.operator(name)``, ``openvta compile <name>``).
    summary :
        one line: what it computes.
    factory :
        ``factory(cfg, **params) -> Operator``: declares and schedules it.
    params :
        its parameter table, one :class:`~.params.Param` per keyword of ``factory``.
    reference :
        ``reference(inputs, params) -> ndarray``: the expected logical output, in numpy,
        for logical integer inputs and every parameter (``Operator.params``).
    random_operands :
        ``random_operands(op, seed) -> {symbol: array}``: random logical inputs for a
        built operator, the benchmark's distribution for conv2d and dense (docs/WORKLOADS.md).
    epilogue :
        ``epilogue(params) -> Epilogue``: the whole epilogue the factory computes for
        ``params`` (``params["epilogue"]`` may be an :class:`Epilogue` or its JSON form).
    plans :
        its :class:`PlanSpace`.
    match :
        ``match(anchor, cfg) -> (params, note) | reason | None``: for a graph node of an op
        type it computes, the factory's parameters (shape and ``bias``; the epilogue is the
        graph's) and a note for the node's placement, or why it cannot; None for another op
        type.  None for an operator no graph node maps onto.
    layers :
        named shapes (``"resnet18.C5"``) accepted as ``layer=``.
    layer :
        ``layer(name) -> {param: value}``: a named shape's parameters (it raises
        :class:`~openvta.compiler.workloads.UnknownWorkloadError` naming the layers).
    example :
        a small valid parameter set (on ``tiny``): the docs' and the tests' starting point.
    """

    kind: OperatorKind
    summary: str
    factory: Callable[..., Operator]
    params: tuple[Param, ...]
    reference: Callable[[Mapping[str, np.ndarray], Mapping[str, Any]], np.ndarray]
    random_operands: Callable[[Operator, int], dict[str, np.ndarray]]
    epilogue: Callable[[Mapping[str, Any]], Epilogue]
    plans: PlanSpace
    match: Callable[[Anchor, Config], Matched | None] | None = None
    layers: tuple[str, ...] = ()
    layer: Callable[[str], dict[str, int]] | None = None
    example: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.kind.value

    def param(self, name: str) -> Param:
        """The parameter ``name``.

        Raises
        ------
        TypeError
            naming the parameters, if there is none of that name.
        """
        for param in self.params:
            if param.name == name:
                return param
        raise TypeError(f"{self.name} has no parameter {name!r} "
                        f"(parameters: {', '.join(p.name for p in self.params)})")

    @property
    def shape_params(self) -> tuple[str, ...]:
        """The parameters a named layer fixes."""
        return tuple(p.name for p in self.params if p.shape)

    def operator(self, config: str | Config = "default", *, layer: str | None = None,
                 **params: Any) -> Operator:
        """The scheduled operator for ``config`` and ``params`` (or a named ``layer``).

        A layer fixes the shape parameters (:attr:`shape_params`); the others (shift,
        vthreads, …) may still be given.

        Raises
        ------
        TypeError
            for a parameter the operator does not have.
        ValueError
            for a shape parameter given with ``layer``, an unknown layer, or a bad value.
        """
        cfg = config if isinstance(config, Config) else preset(config)
        return self.factory(cfg, **self.resolve(layer, params))

    def resolve(self, layer: str | None, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` with the shape of ``layer`` filled in, every required one present.

        Raises
        ------
        TypeError
            for a parameter the operator does not have, or a required one missing.
        ValueError
            for an unknown layer or a shape parameter given with ``layer``.
        """
        for name in params:
            self.param(name)
        if layer is not None:
            if self.layer is None:
                raise ValueError(f"{self.name} has no named layers, not {layer!r}")
            shape = self.layer(layer)
            fixed = [name for name in params if name in shape]
            if fixed:
                given = ", ".join(f"{name}={params[name]!r}" for name in fixed)
                raise ValueError(f"layer {layer} fixes {', '.join(shape)}; give either layer= or "
                                 f"the shape, not both ({given})")
            params = {**shape, **params}
        missing = [p.name for p in self.params if p.required and p.name not in params]
        if missing:
            raise TypeError(f"{self.name} needs {', '.join(missing)}"
                            + (f" (or layer=, one of {', '.join(self.layers)})" if self.layers else ""))
        return dict(params)

    def plan_kwargs(self, knobs: Mapping[str, Any]) -> dict[str, Any]:
        """The factory keywords that apply ``knobs`` (whether the plan fits is the factory's
        planner's to say: :meth:`plan_refusals`).

        Raises
        ------
        ValueError
            ``"a dense plan sets exactly the knobs nb, ob, kb, vthreads, not nb, ob"``.
        """
        names = self.plans.names
        if not isinstance(knobs, Mapping) or set(knobs) != set(names):
            given = ", ".join(map(str, knobs)) if isinstance(knobs, Mapping) else repr(knobs)
            raise ValueError(f"a {self.name} plan sets exactly the knobs {', '.join(names)}, not {given or 'none'}")
        return self.plans.kwargs(knobs)

    def default_plan(self, cfg: Config, params: Mapping[str, Any]) -> Knobs | None:
        """The knobs of the default schedule of the operator of ``params`` (the factory's
        keywords but the knobs'; those not given have their defaults):
        :attr:`PlanSpace.default`'s choice when :attr:`PlanSpace.check` takes it, else None —
        the planner finds none, or only a plan with a tail tile on the threads' axis, which
        only its fallback allows.  With None the factory plans itself (``factory(cfg,
        **params)``) and, when nothing fits, says why.

        >>> from openvta.compiler.ops import REGISTRY
        >>> REGISTRY["dense"].default_plan(preset("tiny"), {"batch": 1, "in_features": 16, "out_features": 16})
        {'nb': 1, 'ob': 4, 'kb': 4, 'vthreads': 1}
        """
        full = {p.name: p.default for p in self.params if not p.required and p.name not in self.plans.keywords}
        full.update(params)
        knobs = self.plans.default(cfg, full)
        if knobs is None or self.plans.check(cfg, full, knobs):
            return None
        return knobs

    def plan_refusals(self, op: Operator) -> list[str]:
        """Why the planner refuses ``op``'s schedule (``"<kind>: <detail>"`` each; empty: it
        fits, or the factory chose it itself)."""
        knobs = self.plans.of_operator(op)
        return [] if knobs is None else self.plans.check(op.cfg, op.params, knobs)
