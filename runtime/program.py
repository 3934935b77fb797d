"""The program file (docs/PROGRAM.md): compile once, run on any back end.

A :class:`Program` is a DRAM image, where its instructions start, how many there
are, the configuration and named symbols.  It is saved as a NumPy ``.npz``
archive; :func:`load_program` rejects a malformed file with a :class:`ProgramError`
naming what is wrong, before anything runs.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from collections.abc import Callable
from typing import Any, BinaryIO, Union

import numpy as np

from openvta.isa import (INSN_BYTES, STORE_MODULE_TYPES, Config, ConfigError, Format, Instruction, Machine, MemoryType,
                         Opcode, RunReport, decode_stream, layouts_of)
from openvta.isa.instructions import words_from_bytes

from .npz import read_npz
from .roles import HOST_ROLES, ROLES, Role

__all__ = [
    "PROGRAM_FORMAT",
    "RESULT_FORMAT",
    "Program",
    "ProgramError",
    "Result",
    "Symbol",
    "load_program",
    "load_result",
    "Progress",
    "DTYPES",
    "ROLES",
    "HOST_ROLES",
    "Role",
]

PROGRAM_FORMAT = "openvta-program/1"
RESULT_FORMAT = "openvta-result/1"
DTYPES = {"int8": np.int8, "uint8": np.uint8, "int32": np.int32, "uint32": np.uint32}
_KEYS = ("format", "config", "dram", "insn_addr", "insn_count", "symbols")

PathLike = Union[str, Path]

#: ``progress(what, done, total)``: how far a long run is (``what`` is ``"instructions"``
#: or ``"cycles"``, or a phase such as a Verilator build, with ``done = 0, total = None``).
Progress = Callable[[str, int, int | None], None]


class ProgramError(ValueError):
    """A program (or result) file that is malformed."""


@dataclass(frozen=True)
class Symbol:
    """A named tensor in DRAM: ``shape`` and ``dtype`` as stored, little-endian."""

    addr: int
    shape: tuple[int, ...]
    dtype: str
    layout: str = ""
    role: Role = Role.SCRATCH
    #: the unpacked tensor's shape, for tiled layouts (optional; written when known)
    logical_shape: tuple[int, ...] | None = None
    #: the bytes of the logical tensor its operator must move at least once: every element
    #: it really reads (a 1×1 stride-2 conv2d reads a quarter of its input) or writes, not
    #: the padding of tiled layouts (optional; written by the compiler's operators).  The
    #: cycle report's ideal roofline (:meth:`Program.compulsory_bytes`) adds them up.
    used_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"symbol role must be one of {', '.join(ROLES)}, not {self.role!r}")
        object.__setattr__(self, "role", Role(self.role))  # a str of a role's value becomes the role

    def with_logical_shape(self, shape: tuple[int, ...]) -> Symbol:
        return replace(self, logical_shape=tuple(shape))

    def with_used_bytes(self, used_bytes: int) -> Symbol:
        return replace(self, used_bytes=int(used_bytes))

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(DTYPES[self.dtype]).itemsize

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "addr": self.addr,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "layout": self.layout,
            "role": self.role.value,
        }
        if self.logical_shape is not None:
            out["logical_shape"] = list(self.logical_shape)
        if self.used_bytes is not None:
            out["used_bytes"] = self.used_bytes
        return out

    @classmethod
    def from_json(cls, name: str, value: Any) -> Symbol:
        if not isinstance(value, dict):
            raise ProgramError(f"symbol {name!r} must be a JSON object, not {value!r}")
        missing = [k for k in ("addr", "shape", "dtype") if k not in value]
        if missing:
            raise ProgramError(f"symbol {name!r} lacks {', '.join(missing)}")
        addr, shape, dtype = value["addr"], value["shape"], value["dtype"]
        if not isinstance(addr, int) or isinstance(addr, bool) or addr < 0:
            raise ProgramError(f"symbol {name!r} addr must be a non-negative integer, not {addr!r}")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise ProgramError(
                f"symbol {name!r} shape must be a list of non-negative integers, not {shape!r}"
            )
        if dtype not in DTYPES:
            raise ProgramError(
                f"symbol {name!r} dtype must be one of {', '.join(DTYPES)}, not {dtype!r}"
            )
        role = value.get("role", "scratch")
        if role not in ROLES:
            raise ProgramError(f"symbol {name!r} role must be one of {', '.join(ROLES)}, not {role!r}")
        layout = value.get("layout", "")
        if not isinstance(layout, str):
            raise ProgramError(f"symbol {name!r} layout must be a string, not {layout!r}")
        logical = value.get("logical_shape")
        if logical is not None and not (isinstance(logical, list) and all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in logical)):
            raise ProgramError(f"symbol {name!r} logical_shape must be a list of non-negative "
                               f"integers, not {logical!r}")
        used = value.get("used_bytes")
        if used is not None and (not isinstance(used, int) or isinstance(used, bool) or used < 0):
            raise ProgramError(f"symbol {name!r} used_bytes must be a non-negative integer, "
                               f"not {used!r}")
        return cls(addr, tuple(shape), dtype, layout, Role(role),
                   None if logical is None else tuple(logical), used)


def _read_array(dram: np.ndarray, symbol: Symbol) -> np.ndarray:
    dtype = np.dtype(DTYPES[symbol.dtype]).newbyteorder("<")
    raw = dram[symbol.addr : symbol.addr + symbol.nbytes]
    return raw.view(dtype).astype(DTYPES[symbol.dtype]).reshape(symbol.shape)


@dataclass
class Program:
    """A compiled program: DRAM image, instruction location, configuration, symbols, and
    the machine it was compiled for when that is more than its configuration
    (:class:`~openvta.isa.Machine`: a lean build, other counters, another memory), which
    the cycle and rtl back ends then run it on."""

    config: Config
    dram: np.ndarray
    insn_addr: int
    insn_count: int
    symbols: dict[str, Symbol] = field(default_factory=dict)
    #: the machine (its config is ``config``); None: the plain machine of ``config``
    machine: Machine | None = None

    def __post_init__(self) -> None:
        self.validate()

    # -- checks ---------------------------------------------------------------------
    def validate(self) -> None:
        """Raise :class:`ProgramError` unless the image holds everything it names."""
        if not isinstance(self.config, Config):
            raise ProgramError(f"config must be a Config, not {type(self.config).__name__}")
        if self.machine is not None:
            if not isinstance(self.machine, Machine):
                raise ProgramError(f"machine must be a Machine, not {type(self.machine).__name__}")
            if self.machine.config != self.config:
                raise ProgramError(f"the program's machine ({self.machine.spec}) has another configuration "
                                   f"than the program's ({self.config.name})")
        dram = self.dram
        if not isinstance(dram, np.ndarray) or dram.dtype != np.uint8 or dram.ndim != 1:
            desc = f"{dram.dtype}{list(dram.shape)}" if isinstance(dram, np.ndarray) else repr(dram)
            raise ProgramError(f"dram must be a one-dimensional uint8 array, not {desc}")
        size = len(dram)
        if self.insn_addr < 0 or self.insn_addr % INSN_BYTES:
            raise ProgramError(
                f"insn_addr must be a multiple of {INSN_BYTES}, not {self.insn_addr}"
            )
        if self.insn_addr >= size:
            raise ProgramError(f"insn_addr {self.insn_addr} is past the DRAM image ({size} bytes)")
        if self.insn_count < 1:
            raise ProgramError(f"insn_count must be at least 1, not {self.insn_count}")
        end = self.insn_addr + self.insn_count * INSN_BYTES
        if end > size:
            raise ProgramError(
                f"instructions run past the DRAM image: {self.insn_count} instructions at "
                f"{self.insn_addr} end at byte {end}, the image has {size} bytes"
            )
        if not self.config.has_drain:
            self._check_no_drain()
        for name, symbol in self.symbols.items():
            if symbol.addr + symbol.nbytes > size:
                raise ProgramError(
                    f"symbol {name!r} ({symbol.nbytes} bytes at {symbol.addr}) lies outside "
                    f"the DRAM image ({size} bytes)"
                )
            if symbol.used_bytes is not None and symbol.used_bytes > symbol.nbytes:
                raise ProgramError(f"symbol {name!r} used_bytes must be at most its "
                                   f"{symbol.nbytes} bytes, not {symbol.used_bytes}")

    def _check_no_drain(self) -> None:
        """Refuse machine v2's instructions (LOAD EPI/EPI_8BIT, STORE ACC) in a program for a
        machine without a drain unit, naming the first."""
        fields = layouts_of(self.config)[Format.MEM]
        word0 = self.words()[:, 0]
        opcode = (word0 >> np.uint64(fields.field("opcode").shift)) & np.uint64(fields.field("opcode").mask)
        mtype = (word0 >> np.uint64(fields.field("memory_type").shift)) & np.uint64(fields.field("memory_type").mask)
        load, store = opcode == Opcode.LOAD, opcode == Opcode.STORE
        v2 = (load & np.isin(mtype, STORE_MODULE_TYPES)) | (store & (mtype == MemoryType.ACC))
        if v2.any():
            index = int(np.flatnonzero(v2)[0])
            what = f"{'LOAD' if load[index] else 'STORE'} {MemoryType(int(mtype[index])).name}"
            raise ProgramError(f"instruction {index}: {what} is an instruction of machine v2 (the drain "
                               f"unit), which configuration {self.config.name!r} does not have")

    # -- views ----------------------------------------------------------------------
    @property
    def target(self) -> Machine:
        """The machine this program runs on: the one it records, else its configuration's."""
        return self.machine if self.machine is not None else Machine(self.config)

    def on(self, machine: Machine) -> Program:
        """This program recording ``machine`` (whose configuration must be this program's):
        a machine that is its configuration alone is not recorded."""
        if machine.config != self.config:
            raise ProgramError(f"machine {machine.spec} has another configuration than the program's "
                               f"({self.config.name})")
        return replace(self, machine=None if machine.is_plain else machine)

    def words(self) -> np.ndarray:
        """The instructions as ``(insn_count, 2)`` uint64 words."""
        raw = self.dram[self.insn_addr : self.insn_addr + self.insn_count * INSN_BYTES]
        return words_from_bytes(raw)

    def instructions(self) -> list[Instruction]:
        return decode_stream(self.words(), self.config)

    def read(self, name: str, dram: np.ndarray | None = None) -> np.ndarray:
        """Symbol ``name`` as a numpy array of its shape, from ``dram`` (default: the image)."""
        return _read_array(self.dram if dram is None else dram, self.symbol(name))

    def symbol(self, name: str) -> Symbol:
        """The symbol called ``name`` (``KeyError`` naming the known ones otherwise)."""
        try:
            return self.symbols[name]
        except KeyError:
            known = ", ".join(sorted(self.symbols)) or "none"
            raise KeyError(f"program has no symbol {name!r} (symbols: {known})") from None

    def compulsory_bytes(self) -> tuple[int, int] | None:
        """``(read, write)``: the DRAM bytes any schedule of this program must move.

        The ``used_bytes`` of the input, weight and bias symbols (read) and of the output
        symbols (written); None if there are none, or unless every one of them carries
        ``used_bytes`` (a program built by hand, or written before the field existed).  Scratch tensors are not
        counted: an ideal schedule keeps them on chip.

        Examples
        --------
        >>> import openvta
        >>> op = openvta.operator("conv2d", config="tiny", n=1, ci=4, co=4, hw=8, kernel=1,
        ...                       stride=2, bias=False)
        >>> op.build().compulsory_bytes()       # a quarter of the input, the weights; the output
        (80, 64)
        """
        host = [s for s in self.symbols.values() if s.role is not Role.SCRATCH]
        if not host or any(s.used_bytes is None for s in host):
            return None
        read = sum(s.used_bytes or 0 for s in host if s.role in HOST_ROLES)
        return read, sum(s.used_bytes or 0 for s in host if s.role is Role.OUTPUT)

    def write(self, name: str, value: np.ndarray) -> None:
        """Overwrite symbol ``name`` in the image (shape must match)."""
        symbol = self.symbol(name)
        array = np.asarray(value)
        if array.shape != symbol.shape:
            raise ValueError(f"symbol {name!r} has shape {symbol.shape}, not {array.shape}")
        data = array.astype(np.dtype(DTYPES[symbol.dtype]).newbyteorder("<"))
        self.dram[symbol.addr : symbol.addr + symbol.nbytes] = np.frombuffer(data.tobytes(), np.uint8)

    # -- files ----------------------------------------------------------------------
    def save(self, path: PathLike | BinaryIO) -> None:
        """Write the program file to exactly ``path`` (or into a binary file object); the
        ``machine`` entry only when the program records one."""
        extra = {} if self.machine is None else {"machine": np.array(self.machine.to_json())}
        _savez(
            path,
            format=np.array(PROGRAM_FORMAT),
            config=np.array(self.config.to_json()),
            dram=self.dram,
            insn_addr=np.array(self.insn_addr, dtype=np.uint64),
            insn_count=np.array(self.insn_count, dtype=np.uint64),
            symbols=np.array(json.dumps({k: s.to_json() for k, s in self.symbols.items()})),
            **extra,
        )

    @classmethod
    def load(cls, path: PathLike | BinaryIO) -> Program:
        entries = read_npz(path, "program", "an openvta program", ProgramError)
        _check_format(entries, PROGRAM_FORMAT, "program")
        missing = [k for k in _KEYS if k not in entries]
        if missing:
            raise ProgramError(f"program file lacks the entries {', '.join(missing)}")
        try:
            config = Config.from_json(_string(entries, "config"))
        except ConfigError as exc:
            raise ProgramError(f"program config is invalid: {exc}") from None
        symbols_text = _string(entries, "symbols")
        try:
            raw_symbols = json.loads(symbols_text)
        except json.JSONDecodeError as exc:
            raise ProgramError(f"program symbols are not valid JSON: {exc}") from None
        if not isinstance(raw_symbols, dict):
            raise ProgramError("program symbols must be a JSON object of name → symbol")
        symbols = {name: Symbol.from_json(name, v) for name, v in raw_symbols.items()}
        machine = None
        if "machine" in entries:
            try:
                machine = Machine.from_json(_string(entries, "machine"))
            except ConfigError as exc:
                raise ProgramError(f"program machine is invalid: {exc}") from None
        return cls(
            config=config,
            dram=entries["dram"],
            insn_addr=_integer(entries, "insn_addr"),
            insn_count=_integer(entries, "insn_count"),
            symbols=symbols,
            machine=machine,
        )


def _savez(path: PathLike | BinaryIO, **entries: np.ndarray) -> None:
    # np.savez appends ".npz" to a name without it; writing through a handle does not.
    if isinstance(path, (str, Path)):
        with open(path, "wb") as handle:
            np.savez(handle, allow_pickle=False, **entries)
    else:
        np.savez(path, allow_pickle=False, **entries)


def _check_format(entries: dict[str, np.ndarray], expected: str, what: str) -> None:
    if "format" not in entries:
        raise ProgramError(f"{what} file has no 'format' entry (expected {expected!r})")
    found = _string(entries, "format")
    if found != expected:
        raise ProgramError(f"{what} file format must be {expected!r}, not {found!r}")


def _string(entries: dict[str, np.ndarray], key: str) -> str:
    value = entries[key]
    if value.ndim != 0 or value.dtype.kind != "U":
        raise ProgramError(f"entry {key!r} must be a string, not {value.dtype}{list(value.shape)}")
    return str(value)


def _integer(entries: dict[str, np.ndarray], key: str) -> int:
    value = entries[key]
    if value.ndim != 0 or value.dtype.kind not in "iu":
        raise ProgramError(f"entry {key!r} must be an integer, not {value.dtype}{list(value.shape)}")
    return int(value)


def load_program(path: PathLike | BinaryIO) -> Program:
    """Read and validate a program file.

    Raises
    ------
    ProgramError
        naming what is wrong with the file.
    """
    return Program.load(path)


@dataclass
class Result:
    """What a back end returns: the final DRAM image, the performance counters, the report.

    ``symbols`` are the program's (:meth:`openvta.runtime.Device.run` fills them in), so
    a result file read back on its own still knows where each tensor lies.
    """

    dram: np.ndarray
    counters: dict[str, int]
    report: RunReport | None = None
    symbols: dict[str, Symbol] = field(default_factory=dict)

    def save(self, path: PathLike | BinaryIO) -> None:
        """Write the result file to exactly ``path`` (or into a binary file object)."""
        _savez(
            path,
            format=np.array(RESULT_FORMAT),
            dram=self.dram,
            counters=np.array(json.dumps({str(k): int(v) for k, v in self.counters.items()})),
            symbols=np.array(json.dumps({k: s.to_json() for k, s in self.symbols.items()})),
        )

    def read(self, name: str) -> np.ndarray:
        """Symbol ``name`` in this result's DRAM, in its stored shape and layout.

        Examples
        --------
        >>> from openvta.isa import preset
        >>> from openvta.runtime import Device, ProgramBuilder
        >>> b = ProgramBuilder(preset("tiny"))
        >>> y = b.tensor("y", shape=(2,), dtype="int8", role="output")
        >>> Device("functional").run(b.finish()).read("y")
        array([0, 0], dtype=int8)
        """
        try:
            symbol = self.symbols[name]
        except KeyError:
            known = ", ".join(sorted(self.symbols)) or "none"
            raise KeyError(f"result has no symbol {name!r} (symbols: {known})") from None
        if symbol.addr + symbol.nbytes > len(self.dram):
            raise ProgramError(f"symbol {name!r} ({symbol.nbytes} bytes at {symbol.addr}) lies "
                               f"outside the result's DRAM image ({len(self.dram)} bytes)")
        return _read_array(self.dram, symbol)


def load_result(path: PathLike | BinaryIO) -> Result:
    """Read a result file (:meth:`Result.save`); a malformed one raises :class:`ProgramError`."""
    entries = read_npz(path, "result", "an openvta result", ProgramError)
    _check_format(entries, RESULT_FORMAT, "result")
    for key in ("dram", "counters"):
        if key not in entries:
            raise ProgramError(f"result file lacks the entry {key!r}")
    try:
        counters = json.loads(_string(entries, "counters"))
    except json.JSONDecodeError as exc:
        raise ProgramError(f"result counters are not valid JSON: {exc}") from None
    if not isinstance(counters, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in counters.values()
    ):
        raise ProgramError("result counters must be a JSON object of name → integer")
    symbols: dict[str, Symbol] = {}
    if "symbols" in entries:  # result files written before symbols were kept have none
        try:
            raw = json.loads(_string(entries, "symbols"))
        except json.JSONDecodeError as exc:
            raise ProgramError(f"result symbols are not valid JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise ProgramError("result symbols must be a JSON object of name → symbol")
        symbols = {name: Symbol.from_json(name, v) for name, v in raw.items()}
    return Result(dram=entries["dram"], counters=counters, symbols=symbols)


def program_bytes(program: Program) -> bytes:
    """The program file as bytes (handy for tests and for sending to a board)."""
    buffer = io.BytesIO()
    program.save(buffer)
    return buffer.getvalue()
