"""A schedule space: every configuration of an operator's knobs, with an integer id each.

>>> from openvta import tune
>>> space = tune.space("dense", layer="dense_1x16x16", config="tiny")
>>> [(knob.name, knob.values) for knob in space.knobs]
[('nb', (1,)), ('ob', (1, 2, 4)), ('kb', (1, 2, 4)), ('vthreads', (1, 2, 3, 4))]
>>> len(space), space.valid_count()
(36, 18)
>>> space.get(5)
{'nb': 1, 'ob': 4, 'kb': 2, 'vthreads': 1}
>>> space.index_of({'nb': 1, 'ob': 4, 'kb': 2, 'vthreads': 1})
5
>>> space.invalid_reasons()
{'thread split': 18}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from functools import cached_property
from math import prod
from typing import Any

from openvta.compiler.ops import operator_spec
from openvta.compiler.ops.common import Operator
from openvta.compiler.ops.params import check_params
from openvta.isa import Config, preset

from .knobs import Knob, Knobs, OperatorKnobs, epilogue_of, knobs_of
from .records import kernel_key_of

__all__ = ["Space", "space"]


class Space:
    """The knobs of one operator's schedule for one shape and hardware configuration.

    A configuration's id is a mixed-radix number whose digits are the positions of its
    knob values, the first knob the fastest (AutoTVM's order).  :meth:`check` says why
    a configuration is refused; the tuner measures only configurations without a reason.

    Parameters
    ----------
    operator :
        a registry name.
    params :
        every parameter of the factory but the knobs (as :func:`space` completes them).
    cfg :
        the hardware configuration.
    """

    def __init__(self, operator: str, params: Mapping[str, Any], cfg: Config) -> None:
        self.operator = operator
        self.params = dict(params)
        self.cfg = cfg
        self.table: OperatorKnobs = knobs_of(operator)
        self.knobs: tuple[Knob, ...] = self.table.knobs(cfg, self.params)
        self.kernel = kernel_key_of(operator, self.params, epilogue_of(operator, self.params), cfg)

    def __len__(self) -> int:
        return prod(len(knob.values) for knob in self.knobs)

    def __repr__(self) -> str:
        return f"Space({self.kernel}: {len(self)} configurations)"

    def get(self, index: int) -> Knobs:
        """The knobs of configuration ``index``.

        Raises
        ------
        ValueError
            ``"configuration id must be an integer in 0..35, not 36"``.
        """
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self):
            raise ValueError(f"configuration id must be an integer in 0..{len(self) - 1}, not {index!r}")
        out = {}
        for knob in self.knobs:
            index, digit = divmod(index, len(knob.values))
            out[knob.name] = knob.values[digit]
        return out

    def index_of(self, knobs: Mapping[str, Any]) -> int:
        """The id of the configuration ``knobs``.

        Raises
        ------
        ValueError
            for a missing or unknown knob, or a value the knob does not take
            (``"knob cob must be one of 1, 2, 3, 4, 8, not 5"``).
        """
        names = [knob.name for knob in self.knobs]
        if set(knobs) != set(names):
            raise ValueError(f"a configuration of {self.operator} sets exactly the knobs {', '.join(names)}, "
                             f"not {', '.join(knobs) or 'none'}")
        index, radix = 0, 1
        for knob in self.knobs:
            value = knobs[knob.name]
            if value not in knob.values or isinstance(value, bool):
                raise ValueError(f"knob {knob.name} must be one of {', '.join(map(str, knob.values))}, "
                                 f"not {value!r}")
            index += knob.values.index(value) * radix
            radix *= len(knob.values)
        return index

    def check(self, index: int) -> list[str]:
        """Why configuration ``index`` is refused (``"<kind>: <detail>"`` each); empty if valid."""
        knobs = self.get(index)
        reasons = []
        if knobs.get("vthreads") == 1 and knobs.get("split", "co") != "co":
            reasons.append("duplicate: one thread splits nothing (the same as split=co)")
        # priming pushes one token per thread into each queue before anything pops
        if knobs["vthreads"] > self.cfg.DEP_QUEUE_DEPTH:
            reasons.append(f"token queue depth: {knobs['vthreads']} threads prime more tokens than a "
                           f"queue holds ({self.cfg.DEP_QUEUE_DEPTH})")
        return reasons + self.table.check(self.cfg, self.params, knobs)

    @cached_property
    def _scan(self) -> tuple[tuple[int, ...], dict[str, int]]:
        valid, reasons = [], Counter[str]()
        for index in range(len(self)):
            found = self.check(index)
            if not found:
                valid.append(index)
            reasons.update({reason.split(":")[0] for reason in found})
        return tuple(valid), dict(sorted(reasons.items(), key=lambda item: (-item[1], item[0])))

    def valid_indices(self) -> tuple[int, ...]:
        """The ids of every valid configuration, in increasing order."""
        return self._scan[0]

    def valid_count(self) -> int:
        return len(self._scan[0])

    def invalid_reasons(self) -> dict[str, int]:
        """Refused configurations per kind of reason, most frequent first (a configuration
        refused for two reasons counts under both)."""
        return dict(self._scan[1])

    def default_index(self) -> int | None:
        """The id of the operator's own planner's choice (one thread), or None if it has none."""
        return self._default

    @cached_property
    def _default(self) -> int | None:
        knobs = self.table.default(self.cfg, self.params)
        return None if knobs is None else self.index_of(knobs)

    def operator_for(self, index: int) -> Operator:
        """The scheduled operator with configuration ``index``."""
        kwargs = self.table.factory_kwargs(self.get(index))
        return operator_spec(self.operator).factory(self.cfg, **self.params, **kwargs)


def space(operator: str, *, layer: str | None = None, config: str | Config = "default",
          **params: Any) -> Space:
    """The schedule space of registry operator ``operator`` for a shape (``layer=`` or its
    shape parameters) and the other parameters (``shift``, ``bias``, ``clip``, …).

    Raises
    ------
    ValueError
        for an unknown operator or layer, a knob given as a parameter (``vthreads``,
        ``plan``, ``block``), an ``epilogue`` (records hold JSON parameters only), or a
        parameter outside its range.
    TypeError
        for a parameter the operator does not have, or a shape parameter missing.
    """
    spec = operator_spec(operator)
    cfg = config if isinstance(config, Config) else preset(config)
    knob_params = knobs_of(operator).keywords
    for name in params:
        spec.param(name)
        if name in knob_params:
            raise ValueError(f"{name} is a knob of the {operator} space, not a parameter "
                             f"(knobs set {', '.join(knob_params)})")
    if params.get("epilogue") is not None:
        raise ValueError(f"tune.space takes no epilogue (records hold JSON parameters), not "
                         f"{params['epilogue']!r}")
    params = spec.resolve(layer, params)
    full = {p.name: params.get(p.name, p.default) for p in spec.params if p.name not in knob_params}
    check_params(tuple(p for p in spec.params if p.name in full), operator, full)
    return Space(operator, full, cfg)
