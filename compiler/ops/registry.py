"""The operator registry: every operator once, for the API, the command line and the tests.

Each :class:`OperatorSpec` holds an operator's factory, the table of its parameters
(:class:`~.params.Param`: name, type, default, help, range, command-line flag), its
numpy reference, how to draw random benchmark operands for it, and its named layers.
``openvta.operator`` and ``openvta.compile`` look operators up here, ``openvta compile``
builds one sub-command per entry with an option per parameter, and
``tests/compiler/test_registry.py`` gives every entry the same tests — so adding an
operator is adding an entry.

>>> from openvta.compiler.ops import REGISTRY
>>> list(REGISTRY)
['conv2d', 'dense', 'elementwise']
>>> op = REGISTRY["dense"].operator("tiny", layer="dense_1x16x16", vthreads=2)
>>> op.logical_shapes["weight"], op.params["vthreads"]
((16, 16), 2)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from openvta.isa import Config, preset

from ..workloads import DENSE, RESNET18
from .common import Operator, benchmark_operands
from .conv2d import CONV2D_PARAMS, conv2d, conv2d_layer, conv2d_reference
from .dense import DENSE_PARAMS, dense, dense_layer, dense_reference
from .elementwise import ELEMENTWISE_PARAMS, elementwise, elementwise_operands, elementwise_reference
from .params import Param

__all__ = ["OperatorSpec", "REGISTRY", "OPERATORS", "operator_spec"]


@dataclass(frozen=True)
class OperatorSpec:
    """One registered operator.

    Parameters
    ----------
    name :
        the operator's name (``openvta.operator(name)``, ``openvta compile <name>``).
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
    layers :
        named shapes (``"resnet18.C5"``) accepted as ``layer=``.
    layer :
        ``layer(name) -> {param: value}``: a named shape's parameters (it raises
        :class:`~openvta.compiler.workloads.UnknownWorkloadError` naming the layers).
    example :
        a small valid parameter set (on ``tiny``): the docs' and the tests' starting point.
    """

    name: str
    summary: str
    factory: Callable[..., Operator]
    params: tuple[Param, ...]
    reference: Callable[[Mapping[str, np.ndarray], Mapping[str, Any]], np.ndarray]
    random_operands: Callable[[Operator, int], dict[str, np.ndarray]]
    layers: tuple[str, ...] = ()
    layer: Callable[[str], dict[str, int]] | None = None
    example: Mapping[str, Any] = field(default_factory=dict)

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


_SPECS = (
    OperatorSpec(
        name="conv2d",
        summary="clip((conv2d(data, weight) >> shift) + bias, 0, 127) as int8 (NCHW, OIHW)",
        factory=conv2d, params=CONV2D_PARAMS, reference=conv2d_reference,
        random_operands=benchmark_operands,
        layers=tuple(f"resnet18.{name}" for name in RESNET18), layer=conv2d_layer,
        example={"hw": 8, "ci": 8, "co": 8, "kernel": 3, "pad": 1}),
    OperatorSpec(
        name="dense",
        summary="clip((data · weightᵀ >> shift) + bias, 0, 127) as int8 ((N, I), (O, I))",
        factory=dense, params=DENSE_PARAMS, reference=dense_reference,
        random_operands=benchmark_operands,
        layers=tuple(wl.name for wl in DENSE), layer=dense_layer,
        example={"batch": 2, "in_features": 20, "out_features": 12}),
    OperatorSpec(
        name="elementwise",
        summary="clip((data >> shift) + bias, low, high) as int8 on int32 (N, C) accumulators",
        factory=elementwise, params=ELEMENTWISE_PARAMS, reference=elementwise_reference,
        random_operands=elementwise_operands,
        example={"batch": 2, "channels": 12, "shift": 4, "bias": True, "relu": True}),
)

#: Every operator by name, in registration order.
REGISTRY: Mapping[str, OperatorSpec] = MappingProxyType({spec.name: spec for spec in _SPECS})
OPERATORS = REGISTRY


def operator_spec(name: str) -> OperatorSpec:
    """The registered operator ``name``.

    Raises
    ------
    ValueError
        ``"operator must be one of conv2d, dense, elementwise, not 'pool'"``.
    """
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"operator must be one of {', '.join(REGISTRY)}, not {name!r}") from None
