"""Operators with default schedules (conv2d, dense, element-wise), their descriptors and registry.

Each operator is one file holding one :class:`OperatorDescriptor` (:mod:`.descriptor`);
:data:`REGISTRY` (also :data:`OPERATORS`) maps each operator's name to it.
"""

from .descriptor import Anchor, Knob, OperatorDescriptor, OperatorKind, PlanSpace
from .params import REQUIRED, Param
from .registry import OPERATORS, REGISTRY, OperatorSpec, RegistryError, match_anchor, operator_spec

__all__ = ["OPERATORS", "REGISTRY", "REQUIRED", "Anchor", "Knob", "OperatorDescriptor", "OperatorKind",
           "OperatorSpec", "Param", "PlanSpace", "RegistryError", "match_anchor", "operator_spec"]
