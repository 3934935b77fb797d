"""The runtime: program files, DRAM layout, the program builder and devices."""

from openvta.isa.report import RunReport

from .builder import BuildError, ProgramBuilder, UopKernel, UopLoop
from .device import Backend, BackendError, Device, Progress, backends, register_backend
from .dram import DramAllocator, ceil_div, pack_acc, pack_inp, pack_wgt, unpack_out
from .program import (
    PROGRAM_FORMAT,
    RESULT_FORMAT,
    Program,
    ProgramError,
    Result,
    Role,
    Symbol,
    load_program,
    load_result,
)
from .roles import HOST_ROLES, ROLES

__all__ = [
    "Backend", "BackendError", "HOST_ROLES", "ROLES", "BuildError", "Device", "DramAllocator", "PROGRAM_FORMAT",
    "Program", "ProgramBuilder", "ProgramError", "Progress", "RESULT_FORMAT", "Result", "Role", "RunReport", "Symbol",
    "UopKernel", "UopLoop", "backends", "ceil_div", "load_program", "load_result",
    "pack_acc", "pack_inp", "pack_wgt", "register_backend", "unpack_out",
]
