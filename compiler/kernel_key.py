"""Kernel keys and tuned plans as plain data: what a tuning record applies to, and how.

A **kernel key** names what a schedule applies to: the operator, its shape parameters,
its whole epilogue (:meth:`~openvta.compiler.Epilogue.describe`: shift, bias, clip and
every fused stage) and the hardware configuration (``preset@hash`` of every key).  Two
operators with the same key compute the same thing on the same machine, whatever their
schedule, so a plan tuned for one applies to the other.  A plan is the tuner's **knobs**
(``{"cob": 2, "yb": 7, ...}``, JSON values); :func:`plan_kwargs` turns them into the
factory's keywords.

Both live here, in the compiler, so that whoever applies tuned plans — the tuner's
records, the facade, the graph level's ``compile_model(plans=)``, which must not import
the tuner — computes the same strings from the one definition (docs/TUNING.md).

>>> from openvta.compiler.ops import REGISTRY
>>> op = REGISTRY["dense"].operator("tiny", layer="dense_1x16x16")
>>> kernel_key(op)
'dense(batch=1, in_features=16, out_features=16; SHR 8, ADD bias[c], MIN 127, MAX 0) on tiny@...'
>>> plan_kwargs("dense", {"nb": 1, "ob": 4, "kb": 2, "vthreads": 1})
{'vthreads': 1, 'plan': DensePlan(nb=1, ob=4, kb=2, vthreads=1)}
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from openvta.isa import Config

from .epilogue import Epilogue
from .ops.common import Operator
from .ops.registry import REGISTRY, operator_spec

__all__ = ["PLAN_KNOBS", "hardware_name", "kernel_key", "kernel_key_of", "plan_kwargs", "plan_refusals"]

#: The knob names of each operator's plan, by operator.
PLAN_KNOBS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {name: descriptor.plans.names for name, descriptor in REGISTRY.items()})


def hardware_name(cfg: Config) -> str:
    """``"vta@8e2becee"``: the preset name (or ``custom``) and a hash of every key."""
    digest = hashlib.sha256(json.dumps(cfg.to_dict(), sort_keys=True).encode()).hexdigest()
    return f"{cfg.name}@{digest[:8]}"


def kernel_key_of(operator: str, params: Mapping[str, Any], epilogue: Epilogue, cfg: Config) -> str:
    """The kernel key of ``operator`` with ``params`` (every shape parameter), its whole
    ``epilogue``, on ``cfg``: ``"conv2d(n=1, ci=64, …; SHR 8, ADD bias[c], …) on default@…"``.

    A shape parameter that is None (or not given) is left out: conv2d's ``w`` of square data,
    so that the keys of square kernels are those from before it existed."""
    spec = operator_spec(operator)
    shape = ", ".join(f"{name}={params[name]}" for name in spec.shape_params if params.get(name) is not None)
    return f"{operator}({shape}; {epilogue.describe()}) on {hardware_name(cfg)}"


def kernel_key(op: Operator) -> str:
    """The kernel key of a scheduled operator (a graph kernel with a fused epilogue too):
    its name, shape, whole epilogue and hardware — not its schedule."""
    return kernel_key_of(op.name, op.params, op.epilogue, op.cfg)


def plan_kwargs(operator: str, knobs: Mapping[str, Any]) -> dict[str, Any]:
    """The factory keywords that apply ``knobs``: ``plan=`` and ``vthreads=`` for conv2d and
    dense, ``block=`` and ``vthreads=`` for elementwise
    (:meth:`~openvta.compiler.ops.OperatorDescriptor.plan_kwargs`).

    Whether the plan fits is the factory's to say (its planner's checks).

    Raises
    ------
    ValueError
        ``"a tuned plan is for conv2d, dense or elementwise, not 'pool'"``, or ``"a dense
        plan sets exactly the knobs nb, ob, kb, vthreads, not nb, ob"``.
    """
    if operator not in REGISTRY:
        raise ValueError(f"a tuned plan is for {', '.join(REGISTRY)}, not {operator!r}")
    return REGISTRY[operator].plan_kwargs(knobs)


def plan_refusals(op: Operator) -> list[str]:
    """Why the planner refuses ``op``'s schedule (``"<kind>: <detail>"`` each; empty: it fits).

    The planners' own checks (each descriptor's :attr:`~openvta.compiler.ops.PlanSpace.check`):
    a factory takes a ``plan=`` as given, so whoever applies a plan from elsewhere (a tuning
    log) asks here.
    """
    if op.name not in REGISTRY:
        raise ValueError(f"a tuned plan is for {', '.join(REGISTRY)}, not {op.name!r}")
    return REGISTRY[op.name].plan_refusals(op)
