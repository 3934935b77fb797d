"""Operators with default schedules (conv2d, dense, element-wise) and their registry.

:data:`REGISTRY` (also :data:`OPERATORS`) maps each operator's name to its
:class:`OperatorSpec`: factory, parameter table, numpy reference, random operands.
"""

from .params import REQUIRED, Param
from .registry import OPERATORS, REGISTRY, OperatorSpec, operator_spec

__all__ = ["OPERATORS", "REGISTRY", "REQUIRED", "OperatorSpec", "Param", "operator_spec"]
