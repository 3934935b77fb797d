"""Tuning records: one JSON object per line, one line per measured configuration.

A record holds what was measured (the operator, its parameters, the hardware
configuration, the back end, the knobs and their id in the space) and what came of
it: cycles and GEMM utilization, or an error (its kind and one line).  A record's key
is ``(kernel, backend, version, openvta, knobs)``; :func:`kernel_key`
(:mod:`openvta.compiler.kernel_key`, re-exported here) names the kernel
— the operator, its shape, its whole epilogue and the hardware — so that a log tuned
once serves every later compile of that kernel (``openvta.compile(..., records=)``)
and a resumed run re-measures nothing.  Records are plain JSON, never pickle
(docs/TUNING.md describes the format).

>>> from openvta.compiler.ops import REGISTRY
>>> op = REGISTRY["dense"].operator("tiny", layer="dense_1x16x16")
>>> kernel_key(op)
'dense(batch=1, in_features=16, out_features=16; SHR 8, ADD bias[c], MIN 127, MAX 0) on tiny@...'
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from importlib import metadata
from pathlib import Path
from typing import Any

# one definition of kernel keys and plan keywords, in the compiler: the graph level applies
# tuned plans without importing the tuner (re-exported here for the tuner's users)
from openvta.compiler.kernel_key import hardware_name, kernel_key, kernel_key_of, plan_kwargs

__all__ = ["FORMAT_VERSION", "OPENVTA_VERSION", "Record", "RecordError", "TuningNote", "best_plans", "hardware_name",
           "kernel_key", "kernel_key_of", "plan_kwargs", "read_records", "append_records"]

#: The version of the record format; records of another version are not read back.
FORMAT_VERSION = 1


def _openvta_version() -> str:
    try:
        return metadata.version("openvta")
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown"


#: The openvta version that wrote a record: measurements of another version are redone.
OPENVTA_VERSION = _openvta_version()


class RecordError(ValueError):
    """A records file that cannot be read: the message names the file and the line."""


class TuningNote(UserWarning):
    """A tuning log without a record for the kernel being compiled: the default plan is used."""


@dataclass(frozen=True)
class Record:
    """One measured configuration (one line of a log).

    Members
    -------
    kernel :
        :func:`kernel_key` of the operator.
    operator, params :
        the registry name and the factory's parameters but the knobs (JSON values).
    hardware :
        the :class:`~openvta.isa.Config` as its JSON object.
    backend :
        where it ran (``cycle``, ``rtl``, ``board``).
    knobs, index :
        the configuration and its id in the space (mixed radix, first knob fastest).
    cycles, utilization :
        the measurement (None with an error).
    error :
        None, or ``{"kind": ..., "message": ...}``: a configuration refused when lowered
        (``micro-op buffer``, ``instruction budget``, ``DMA pattern``, ``lowering``), a
        ``timeout`` (past the cycle budget), a ``wrong answer`` or a ``run error``.
    """

    kernel: str
    operator: str
    params: dict[str, Any]
    hardware: dict[str, Any]
    backend: str
    knobs: dict[str, Any]
    index: int
    cycles: int | None
    utilization: float | None
    error: dict[str, str] | None
    version: int = FORMAT_VERSION
    openvta: str = OPENVTA_VERSION

    @property
    def ok(self) -> bool:
        """Measured, with the right answer."""
        return self.error is None and self.cycles is not None

    @property
    def measured_cycles(self) -> int:
        """The cycles of a record that is :attr:`ok`.

        Raises
        ------
        ValueError
            for a record that was not measured with the right answer.
        """
        if self.error is not None or self.cycles is None:
            raise ValueError(f"record {self.index} of {self.kernel!r} has no cycles (it is not ok)")
        return self.cycles

    @property
    def key(self) -> tuple[str, str, int, str, str]:
        return (self.kernel, self.backend, self.version, self.openvta, json.dumps(self.knobs, sort_keys=True))

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Record:
        """Parse one line; raises ``ValueError`` naming what is wrong with it."""
        value = json.loads(text)
        if not isinstance(value, dict):
            raise ValueError(f"a record is a JSON object, not {type(value).__name__}")
        names = [f.name for f in fields(cls)]
        missing = [name for name in names if name not in value]
        if missing:
            raise ValueError(f"a record needs {', '.join(missing)}")
        extra = sorted(set(value) - set(names))
        if extra:
            raise ValueError(f"a record has no field {extra[0]!r}")
        for name in ("params", "hardware", "knobs"):
            if not isinstance(value[name], dict):
                raise ValueError(f"a record's {name} is a JSON object, not {type(value[name]).__name__}")
        params = {k: tuple(v) if isinstance(v, list) else v for k, v in value["params"].items()}
        return cls(**{**value, "params": params})


def read_records(path: str | os.PathLike[str], *, missing_ok: bool = False) -> list[Record]:
    """Every record of the log at ``path`` (blank lines skipped).

    Raises
    ------
    RecordError
        ``"c5.jsonl line 3: not a tuning record (a record needs cycles)"``, or
        ``"records file c5.jsonl does not exist"`` (unless ``missing_ok``: then no records).
    """
    file = Path(path)
    if not file.exists():
        if missing_ok:
            return []
        raise RecordError(f"records file {path} does not exist")
    out = []
    with open(file, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                out.append(Record.from_json(line))
            except (ValueError, TypeError) as exc:
                reason = str(exc).splitlines()[0]
                raise RecordError(f"{path} line {number}: not a tuning record ({reason})") from None
    return out


def append_records(path: str | os.PathLike[str], records: Iterable[Record]) -> None:
    """Append ``records`` to the log at ``path`` (created with its folder if need be)."""
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    with open(file, "a", encoding="utf-8") as handle:
        for record in records:
            handle.write(record.to_json() + "\n")


def best_plans(path: str | os.PathLike[str], *, backend: str | None = None) -> dict[str, dict[str, Any]]:
    """The best plan per kernel of the log at ``path``, as plain data.

    Parameters
    ----------
    backend :
        only records measured there; None: any back end.

    Returns
    -------
    dict
        ``{kernel_key: knobs}``: for each kernel, the knobs of its fewest-cycle record
        with the right answer (ties: the lowest id), among records of this format and
        openvta version.  :func:`plan_kwargs` turns knobs into the factory's keywords.

    Raises
    ------
    RecordError
        for a missing file or a malformed line.
    """
    best: dict[str, Record] = {}
    for record in read_records(path):
        if not record.ok or record.version != FORMAT_VERSION or record.openvta != OPENVTA_VERSION:
            continue
        if backend is not None and record.backend != backend:
            continue
        held = best.get(record.kernel)
        if held is None or (record.cycles, record.index) < (held.cycles, held.index):
            best[record.kernel] = record
    return {kernel: dict(record.knobs) for kernel, record in best.items()}
