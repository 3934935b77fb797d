"""The knobs of each operator's schedule, as data: one :class:`OperatorKnobs` per registry entry.

An entry says which knobs the operator's schedule has and which values each may take
for a given shape (tile sizes — every ``ceil(n / count)``, divisors and non-divisors,
since a tile may leave a smaller tail tile —, the input-channel step, 1 to
:data:`MAX_VTHREADS` virtual threads and the axis they split), why a choice is refused
(the planners' own checks: :func:`~openvta.compiler.ops.conv2d.check_conv2d_plan`,
:func:`~openvta.compiler.ops.dense.check_dense_plan`,
:func:`~openvta.compiler.ops.elementwise.check_elementwise_block`), the planner's own
choice, and how a choice becomes the factory's keywords.  Adding an operator to the
tuner is adding an entry to :data:`KNOBS`.

The loop order of the tiles is not a knob: every tile loads its own inputs and weights
(nothing is reused from the tile before), so the order changes no instruction's cost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from openvta.compiler.epilogue import Epilogue
from openvta.compiler.ir import LoweringError
from openvta.compiler.kernel_key import plan_kwargs
from openvta.compiler.ops.common import divisors, operator_epilogue, tile_sizes
from openvta.compiler.ops.conv2d import Conv2dPlan, check_conv2d_plan, plan_conv2d
from openvta.compiler.ops.dense import DensePlan, check_dense_plan, plan_dense
from openvta.compiler.ops.elementwise import RELU_CLIP, check_elementwise_block
from openvta.isa import Config

__all__ = ["MAX_VTHREADS", "Knob", "OperatorKnobs", "KNOBS", "knobs_of", "epilogue_of"]

#: The most virtual threads a space offers (VTA's latency hiding rarely gains past 2–4).
MAX_VTHREADS = 4
_THREADS = tuple(range(1, MAX_VTHREADS + 1))

Knobs = dict[str, Any]


@dataclass(frozen=True)
class Knob:
    """One knob: its name and its values, in the order of its digit of a configuration's id."""

    name: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class OperatorKnobs:
    """How the tuner sees one operator's schedule.

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


def _tiles(n: int, block: int) -> int:
    return -(-n // block)


def epilogue_of(operator: str, params: Mapping[str, Any]) -> Epilogue:
    """The whole epilogue the operator computes for ``params`` (as its factory builds it);
    ``params["epilogue"]`` may be an :class:`Epilogue` or its JSON form, as records hold it."""
    if operator == "elementwise":
        clip = RELU_CLIP if params["relu"] else params["clip"]
        return Epilogue.from_params(params["shift"], "bias" if params["bias"] else None, clip)
    extra = params["epilogue"]
    if extra is not None and not isinstance(extra, Epilogue):
        extra = Epilogue.from_json(extra)
    return operator_epilogue(operator, params["shift"], params["bias"], params["clip"], extra)


# -- conv2d -------------------------------------------------------------------------------------


def conv2d_dims(cfg: Config, params: Mapping[str, Any]) -> dict[str, int]:
    """Tile counts of a conv2d: batch, input and output channel blocks, output rows."""
    oh = (params["hw"] + 2 * params["pad"] - params["kernel"]) // params["stride"] + 1
    return {"n_t": _tiles(params["n"], cfg.BATCH), "ci_t": _tiles(params["ci"], cfg.BLOCK_IN),
            "co_t": _tiles(params["co"], cfg.BLOCK_OUT), "oh": oh}


def _conv2d_knobs(cfg: Config, params: Mapping[str, Any]) -> tuple[Knob, ...]:
    dims = conv2d_dims(cfg, params)
    return (Knob("cob", tuple(tile_sizes(dims["co_t"]))), Knob("yb", tuple(tile_sizes(dims["oh"]))),
            Knob("xb", tuple(tile_sizes(dims["oh"]))), Knob("icb", tuple(divisors(dims["ci_t"]))),
            Knob("vthreads", _THREADS), Knob("split", ("co", "y")))


def _conv2d_args(cfg: Config, params: Mapping[str, Any]) -> tuple[Any, ...]:
    p = params
    return (cfg, _tiles(p["n"], cfg.BATCH), p["ci"], p["co"], p["hw"], p["kernel"], p["pad"], p["stride"])


def _conv2d_check(cfg: Config, params: Mapping[str, Any], knobs: Knobs) -> list[str]:
    return check_conv2d_plan(*_conv2d_args(cfg, params), Conv2dPlan(**knobs),
                             epilogue=epilogue_of("conv2d", params))


def _conv2d_default(cfg: Config, params: Mapping[str, Any]) -> Knobs | None:
    try:
        plan = plan_conv2d(*_conv2d_args(cfg, params), epilogue=epilogue_of("conv2d", params))
    except LoweringError:
        return None
    return {"cob": plan.cob, "yb": plan.yb, "xb": plan.xb, "icb": plan.icb, "vthreads": plan.vthreads,
            "split": plan.split}


# -- dense --------------------------------------------------------------------------------------


def dense_dims(cfg: Config, params: Mapping[str, Any]) -> dict[str, int]:
    """Tile counts of a dense layer: batch, input and output blocks."""
    return {"n_t": _tiles(params["batch"], cfg.BATCH), "i_t": _tiles(params["in_features"], cfg.BLOCK_IN),
            "o_t": _tiles(params["out_features"], cfg.BLOCK_OUT)}


def _dense_knobs(cfg: Config, params: Mapping[str, Any]) -> tuple[Knob, ...]:
    dims = dense_dims(cfg, params)
    return (Knob("nb", tuple(tile_sizes(dims["n_t"]))), Knob("ob", tuple(tile_sizes(dims["o_t"]))),
            Knob("kb", tuple(divisors(dims["i_t"]))), Knob("vthreads", _THREADS))


def _dense_check(cfg: Config, params: Mapping[str, Any], knobs: Knobs) -> list[str]:
    dims = dense_dims(cfg, params)
    return check_dense_plan(cfg, dims["n_t"], dims["i_t"], dims["o_t"], DensePlan(**knobs),
                            epilogue=epilogue_of("dense", params))


def _dense_default(cfg: Config, params: Mapping[str, Any]) -> Knobs | None:
    dims = dense_dims(cfg, params)
    try:
        plan = plan_dense(cfg, dims["n_t"], dims["i_t"], dims["o_t"], epilogue=epilogue_of("dense", params))
    except LoweringError:
        return None
    return {"nb": plan.nb, "ob": plan.ob, "kb": plan.kb, "vthreads": plan.vthreads}


# -- elementwise --------------------------------------------------------------------------------


def elementwise_dims(cfg: Config, params: Mapping[str, Any]) -> dict[str, int]:
    """Tile counts of an element-wise operator: batch and channel tiles."""
    return {"n_t": _tiles(params["batch"], cfg.BATCH), "c_t": _tiles(params["channels"], cfg.BLOCK_OUT)}


def _elementwise_knobs(cfg: Config, params: Mapping[str, Any]) -> tuple[Knob, ...]:
    return (Knob("block", tuple(divisors(elementwise_dims(cfg, params)["c_t"]))), Knob("vthreads", _THREADS))


def _elementwise_check(cfg: Config, params: Mapping[str, Any], knobs: Knobs) -> list[str]:
    dims = elementwise_dims(cfg, params)
    return check_elementwise_block(cfg, dims["n_t"], dims["c_t"], knobs["block"], knobs["vthreads"])


def _elementwise_default(cfg: Config, params: Mapping[str, Any]) -> Knobs | None:
    dims = elementwise_dims(cfg, params)
    fits = [d for d in divisors(dims["c_t"]) if not check_elementwise_block(cfg, dims["n_t"], dims["c_t"], d, 1)]
    return {"block": max(fits), "vthreads": 1} if fits else None


#: The tuner's view of every operator of the registry, by name.
KNOBS: Mapping[str, OperatorKnobs] = MappingProxyType({
    "conv2d": OperatorKnobs(_conv2d_knobs, _conv2d_check, _conv2d_default,
                            lambda k: plan_kwargs("conv2d", k), ("vthreads", "plan")),
    "dense": OperatorKnobs(_dense_knobs, _dense_check, _dense_default,
                           lambda k: plan_kwargs("dense", k), ("vthreads", "plan")),
    "elementwise": OperatorKnobs(_elementwise_knobs, _elementwise_check, _elementwise_default,
                                 lambda k: plan_kwargs("elementwise", k), ("block", "vthreads")),
})


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
