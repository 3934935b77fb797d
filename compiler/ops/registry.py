"""The operator registry: every operator's descriptor once, found from its kind.

Each member of :class:`~.descriptor.OperatorKind` names a file of this package whose
``DESCRIPTOR`` is that operator's :class:`~.descriptor.OperatorDescriptor`; the registry
imports them in the enum's order and checks, at import, that each is there and complete.
``openvta.operator`` and ``openvta.compile`` look operators up here, ``openvta compile``
builds one sub-command per entry with an option per parameter, the kernel keys, the tuner
and the graph's accelerator predicates loop over it, and ``tests/compiler/test_registry.py``
gives every entry the same tests — so adding an operator is one file and one enum member.

>>> from openvta.compiler.ops import REGISTRY
>>> list(REGISTRY)[:3]
['conv2d', 'dense', 'elementwise']
>>> op = REGISTRY["dense"].operator("tiny", layer="dense_1x16x16", vthreads=2)
>>> op.logical_shapes["weight"], op.params["vthreads"]
((16, 16), 2)
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from types import MappingProxyType
from typing import Any

from openvta.isa import Config

from .descriptor import Anchor, OperatorDescriptor, OperatorKind

__all__ = ["OperatorSpec", "REGISTRY", "OPERATORS", "RegistryError", "match_anchor", "operator_spec"]

#: The former name of :class:`OperatorDescriptor`.
OperatorSpec = OperatorDescriptor


class RegistryError(ImportError):
    """An operator's file that does not hold a complete descriptor of its kind."""


def _descriptor(kind: OperatorKind) -> OperatorDescriptor:
    try:
        module = import_module(f"{__package__}.{kind.value}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.{kind.value}":
            raise
        raise RegistryError(f"operator {kind.name} needs its file compiler/ops/{kind.value}.py") from None
    found = getattr(module, "DESCRIPTOR", None)
    if not isinstance(found, OperatorDescriptor):
        raise RegistryError(f"compiler/ops/{kind.value}.py must define DESCRIPTOR, an OperatorDescriptor, "
                            f"not {found!r:.60}")
    if found.kind is not kind:
        raise RegistryError(f"compiler/ops/{kind.value}.py's DESCRIPTOR must be of kind {kind.name}, "
                            f"not {found.kind.name}")
    knobs = set(found.plans.names)
    params = {p.name for p in found.params}
    if not set(found.plans.keywords) <= params:
        raise RegistryError(f"{kind.value}'s plan keywords must be parameters of its factory, not "
                            f"{', '.join(sorted(set(found.plans.keywords) - params))}")
    if not knobs:
        raise RegistryError(f"{kind.value}'s plan space must name at least one knob")
    return found


#: Every operator by name, in the order of :class:`OperatorKind`.
REGISTRY: Mapping[str, OperatorDescriptor] = MappingProxyType(
    {kind.value: _descriptor(kind) for kind in OperatorKind})
OPERATORS = REGISTRY


def operator_spec(name: str | OperatorKind) -> OperatorDescriptor:
    """The registered operator ``name`` (or kind).

    Raises
    ------
    ValueError
        ``"operator must be one of conv2d, dense, elementwise, not 'pool'"``.
    """
    if isinstance(name, OperatorKind):
        name = name.value
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"operator must be one of {', '.join(REGISTRY)}, not {name!r}") from None


def match_anchor(anchor: Anchor, cfg: Config) -> tuple[OperatorDescriptor, dict[str, Any], str] | str:
    """The first operator whose matcher computes ``anchor``: its descriptor, the factory's
    parameters and the placement note; or why none does (the first refusal of a matcher for
    that op type, else that no operator computes it)."""
    refusals = []
    for descriptor in REGISTRY.values():
        if descriptor.match is None:
            continue
        found = descriptor.match(anchor, cfg)
        if isinstance(found, tuple):
            return descriptor, found[0], found[1]
        if found is not None:
            refusals.append(found)
    return refusals[0] if refusals else f"no accelerator operator computes {anchor.op}"
