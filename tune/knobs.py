"""The knobs of each operator's schedule, as data: one :class:`OperatorKnobs` per registry entry.

Read from each operator's descriptor (:class:`openvta.compiler.ops.PlanSpace`, in the
operator's own file): which knobs its schedule has and which values each may take for a
given shape (tile sizes — every ``ceil(n / count)``, divisors and non-divisors, since a
tile may leave a smaller tail tile —, the input-channel step, 1 to :data:`MAX_VTHREADS`
virtual threads and the axis they split), why a choice is refused (the planners' own
checks), the planner's own choice, and how a choice becomes the factory's keywords.
Adding an operator to the tuner is adding it to the registry.

The loop order of the tiles is not a knob: every tile loads its own inputs and weights
(nothing is reused from the tile before), so the order changes no instruction's cost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from openvta.compiler.epilogue import Epilogue
from openvta.compiler.ops import REGISTRY, Knob, OperatorDescriptor, operator_spec
from openvta.compiler.ops.costs import MAX_VTHREADS
from openvta.isa import Config

__all__ = ["MAX_VTHREADS", "Knob", "OperatorKnobs", "KNOBS", "knobs_of", "epilogue_of"]

Knobs = dict[str, Any]


@dataclass(frozen=True)
class OperatorKnobs:
    """How the tuner sees one operator's schedule (its descriptor's plan space).

    Parameters
    ----------
    knobs :
        ``knobs(cfg, params) -> (Knob, ...)`` for the operator's parameters (shape and tail).
    check :
        ``check(cfg, params, knobs) -> ["<kind>: <detail>", ...]``: why a choice is refused.
    default :
        ``default(cfg, params) -> knobs`` of the operator's own planner (one thread), or None
        when the planner finds none.
    factory_kwargs :
        ``factory_kwargs(knobs) -> {keyword: value}`` for the registry's factory.
    keywords :
        the factory keywords the knobs set (they are not parameters of a space).
    """

    knobs: Callable[[Config, Mapping[str, Any]], tuple[Knob, ...]]
    check: Callable[[Config, Mapping[str, Any], Knobs], list[str]]
    default: Callable[[Config, Mapping[str, Any]], Knobs | None]
    factory_kwargs: Callable[[Knobs], dict[str, Any]]
    keywords: tuple[str, ...]

    @classmethod
    def of(cls, descriptor: OperatorDescriptor) -> OperatorKnobs:
        plans = descriptor.plans
        return cls(plans.knobs, plans.check, plans.default, descriptor.plan_kwargs, plans.keywords)


#: The tuner's view of every operator of the registry, by name.
KNOBS: Mapping[str, OperatorKnobs] = MappingProxyType(
    {name: OperatorKnobs.of(descriptor) for name, descriptor in REGISTRY.items()})


def epilogue_of(operator: str, params: Mapping[str, Any]) -> Epilogue:
    """The whole epilogue the operator computes for ``params`` (as its factory builds it);
    ``params["epilogue"]`` may be an :class:`Epilogue` or its JSON form, as records hold it."""
    return operator_spec(operator).epilogue(params)


def knobs_of(operator: str) -> OperatorKnobs:
    """The knob table of ``operator``.

    Raises
    ------
    ValueError
        ``"tune has no knobs for operator 'pool' (operators: conv2d, dense, elementwise)"``.
    """
    try:
        return KNOBS[operator]
    except (KeyError, TypeError):
        raise ValueError(f"tune has no knobs for operator {operator!r} "
                         f"(operators: {', '.join(KNOBS)})") from None
