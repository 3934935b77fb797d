"""The parts of a multi-kernel program: its tensors in the DRAM arena and its kernels.

:mod:`.program` builds a program from them and :mod:`.program_check` checks them; both
import them from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from openvta.runtime import Role, roles
from openvta.runtime.program import ROLES

from .layout import packed_shape
from .lower import Lowered
from .ops.common import Operator, as_operand

__all__ = ["Kernel", "ProgramTensor", "HOST_ROLES", "TENSOR_DTYPES"]

#: Roles of tensors whose contents come from the host (data given, or written before a run):
#: the runtime's, in the order of :class:`~openvta.runtime.roles.Role` (for messages).
HOST_ROLES: tuple[roles.Role, ...] = tuple(role for role in roles.Role if role in roles.HOST_ROLES)
#: The dtypes a program tensor may have.
TENSOR_DTYPES = ("int8", "int32")


@dataclass(frozen=True, eq=False)
class ProgramTensor:
    """A tensor of the program's DRAM arena.

    Parameters
    ----------
    name :
        its name in the program (a symbol of the program file).
    offset :
        its first byte in the arena, a multiple of the configuration's DRAM alignment.
    dtype :
        ``"int8"`` or ``"int32"``.
    layout :
        its packed layout (``NCHW1n16c``, ``OIHW16o16i``, ``C1n16c``, ``NC1n16c``…).
    shape :
        its logical shape (``NCHW``, ``OIHW``, ``(C,)``, ``(N, C)``).
    role :
        ``input``, ``weight`` or ``bias`` (supplied by the host: as ``data`` here, or
        written before a run), ``output`` (read by the host after the run) or ``scratch``.
    data :
        constant logical contents (input, weight and bias tensors only).

    Raises
    ------
    ValueError
        for a field outside what it accepts, naming the tensor.
    """

    name: str
    offset: int
    dtype: str
    layout: str
    shape: tuple[int, ...]
    role: Role | str = Role.SCRATCH
    data: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name.startswith("__"):
            raise ValueError(f"a tensor name must be a non-empty string not starting with '__', not {self.name!r}")
        if isinstance(self.offset, bool) or not isinstance(self.offset, (int, np.integer)) or self.offset < 0:
            raise ValueError(f"tensor {self.name!r} offset must be a non-negative integer, not {self.offset!r}")
        if self.dtype not in TENSOR_DTYPES:
            raise ValueError(f"tensor {self.name!r} dtype must be one of {', '.join(TENSOR_DTYPES)}, "
                             f"not {self.dtype!r}")
        if self.role not in ROLES:
            raise ValueError(f"tensor {self.name!r} role must be one of {', '.join(ROLES)}, not {self.role!r}")
        object.__setattr__(self, "role", Role(self.role))
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        try:
            packed_shape(self.layout, self.shape)
        except ValueError as exc:
            raise ValueError(f"tensor {self.name!r}: {exc}") from None
        if self.data is not None:
            if self.role not in HOST_ROLES:
                raise ValueError(f"tensor {self.name!r} has data, so its role must be one of "
                                 f"{', '.join(HOST_ROLES)}, not {str(self.role)!r}")
            array = as_operand(self.name, self.data, self.shape, self.dtype)
            array.flags.writeable = False
            object.__setattr__(self, "data", array)

    @property
    def packed_shape(self) -> tuple[int, ...]:
        return packed_shape(self.layout, self.shape)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.packed_shape)) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True, eq=False)
class Kernel:
    """One operator of the program and the program tensor bound to each of its symbols.

    Parameters
    ----------
    operator :
        a scheduled operator (``openvta.operator(...)``, ``conv2d(cfg, ...)``…).
    bind :
        symbol (``data``, ``weight``, ``bias``, each epilogue operand, ``out``) → tensor name.
    name :
        for messages and progress; the operator's name if empty.
    lowered :
        the operator's schedule already lowered (``lower(operator.schedule, operator.cfg)``),
        by a caller that lowered it to check it: the program is built from it and lowering,
        which is deterministic, is not run again; None: the program lowers it.
    """

    operator: Operator
    bind: Mapping[str, str]
    name: str = ""
    lowered: Lowered | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.operator, Operator):
            raise TypeError(f"a kernel's operator must be an Operator, not {type(self.operator).__name__}")
        if self.lowered is not None:
            if not isinstance(self.lowered, Lowered) or self.lowered.output is not self.operator.output:
                raise TypeError(f"a kernel's lowered schedule must be its operator's (a Lowered of its output "
                                f"tensor), not {type(self.lowered).__name__}")
            if self.lowered.cfg != self.operator.cfg:
                raise ValueError(f"a kernel's lowered schedule must be for its operator's configuration "
                                 f"{self.operator.cfg.name!r}, not {self.lowered.cfg.name!r}")
        object.__setattr__(self, "bind", MappingProxyType(dict(self.bind)))
        if not self.name:
            object.__setattr__(self, "name", self.operator.name)
