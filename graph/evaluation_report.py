"""The JSON report of a model's evaluation on a dataset, written as it goes so that a run resumes.

The report is plain JSON::

    {"format": "openvta-evaluation-1",
     "model": {"file": "digits.ovta", "sha256": "..."},
     "dataset": {"source": "x.npz", "samples": 360, "fingerprint": "sha256:..."},
     "options": {"metric": "top1", "backend": "cycle", "batch_size": 1, "chunk_size": 32,
                 "preprocess": null},
     "chunks": [{"index": 0, "start": 0, "stop": 32, "int8": [1.0, ...], "float": [1.0, ...],
                 "cycles": 123456}, ...],
     "result": {"samples": 360, "int8": 0.9833, "float": 0.9861, "cycles": 1388880,
                "cycles_per_sample": 3858.0}}

``chunks`` holds every chunk finished so far, in order, with its per-sample values
(``float`` is null for ``cosine``, whose reference the float model is; ``cycles`` null on a
back end that counts none); ``result`` appears when every chunk is there.  A run given an
existing report takes the chunks it holds and computes only the others, provided the
report is of the same run: the same model (a SHA-256 over the model file's entries, so
two saves of one model agree), the same samples (:meth:`Samples.fingerprint
<openvta.graph.datasets.Samples.fingerprint>`) and the same options; otherwise it stops
with a one-line :class:`EvaluationError` saying what differs.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["REPORT_FORMAT", "ChunkResult", "EvaluationError", "RunKey", "model_digest", "read_report",
           "write_report"]

REPORT_FORMAT = "openvta-evaluation-1"


class EvaluationError(ValueError):
    """An evaluation that cannot start or finish as asked; the message is one line."""


@dataclass(frozen=True)
class ChunkResult:
    """What one chunk of samples measured: per-sample values of each model, and the cycles."""

    index: int
    start: int
    stop: int
    int8_values: tuple[float, ...]
    float_values: tuple[float, ...] | None
    cycles: int | None

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "start": self.start, "stop": self.stop, "int8": list(self.int8_values),
                "float": None if self.float_values is None else list(self.float_values), "cycles": self.cycles}

    @staticmethod
    def from_json(data: dict[str, Any]) -> ChunkResult:
        values = data["float"]
        return ChunkResult(int(data["index"]), int(data["start"]), int(data["stop"]),
                           tuple(float(v) for v in data["int8"]),
                           None if values is None else tuple(float(v) for v in values),
                           None if data["cycles"] is None else int(data["cycles"]))


@dataclass(frozen=True)
class RunKey:
    """What makes two evaluations the same run (module docstring)."""

    model_sha256: str
    fingerprint: str
    samples: int
    options: dict[str, Any]


def model_digest(data: bytes) -> str:
    """SHA-256 over a model file's entries (name, dtype, shape, bytes), not its zip metadata."""
    digest = hashlib.sha256()
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        for name in sorted(archive.files):
            array = archive[name]
            digest.update(f"{name}:{array.dtype.str}:{array.shape}\0".encode())
            digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def read_report(path: str | os.PathLike[str], key: RunKey) -> dict[int, ChunkResult]:
    """The chunks of the report at ``path`` (none if there is no file), if it is of run ``key``."""
    where = f"report {str(path)!r}"
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise EvaluationError(f"{where} cannot be read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != REPORT_FORMAT:
            raise ValueError(f"its format is not {REPORT_FORMAT!r}")
        found = RunKey(data["model"]["sha256"], data["dataset"]["fingerprint"], int(data["dataset"]["samples"]),
                       data["options"])
        chunks = [ChunkResult.from_json(c) for c in data["chunks"]]
    except (ValueError, KeyError, TypeError) as exc:
        reason = f"lacks {exc.args[0]!r}" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
        raise EvaluationError(f"{where} is not an evaluation report ({reason}); give another report "
                              "file or remove it") from None
    differs = _difference(found, key)
    if differs:
        raise EvaluationError(f"{where} is of another run ({differs}); give another report file or remove it "
                              "to start again")
    return {c.index: c for c in chunks}


def _difference(found: RunKey, key: RunKey) -> str:
    if found.model_sha256 != key.model_sha256:
        return "another model"
    if found.samples != key.samples:
        return f"another dataset: {found.samples} samples there, {key.samples} here"
    if found.fingerprint != key.fingerprint:
        return "another dataset: the same number of samples, other contents"
    names = sorted(set(found.options) | set(key.options))
    changed = [f"{n} {found.options.get(n)!r} there, {key.options.get(n)!r} here"
               for n in names if found.options.get(n) != key.options.get(n)]
    return "other options: " + "; ".join(changed) if changed else ""


def write_report(path: str | os.PathLike[str], key: RunKey, model_file: str | None, source: str,
                 chunks: dict[int, ChunkResult], result: dict[str, Any] | None) -> None:
    """Write the report (to a temporary file first, then renamed: never half a report)."""
    data = {"format": REPORT_FORMAT,
            "model": {"file": model_file, "sha256": key.model_sha256},
            "dataset": {"source": source, "samples": key.samples, "fingerprint": key.fingerprint},
            "options": key.options,
            "chunks": [chunks[i].to_json() for i in sorted(chunks)]}
    if result is not None:
        data["result"] = result
    target = Path(path)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(_layout(data))
    temporary.replace(target)


def _layout(data: dict[str, Any]) -> str:
    """``data`` as JSON with one line per entry and per chunk."""
    lines = []
    for name, value in data.items():
        if name == "chunks":
            rows = ",\n".join("  " + json.dumps(chunk) for chunk in value)
            lines.append(f' "chunks": [\n{rows}\n ]' if rows else ' "chunks": []')
        else:
            lines.append(f" {json.dumps(name)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"
