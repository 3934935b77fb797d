"""ONNX's own node test cases run by openvta, side by side with onnx.reference and onnxruntime.

What it measures: how many of ONNX's node test cases (``onnx.backend.test.case.node.
collect_testcases()``, onnx 1.23.2 as pinned: every case whose name has no ``training``,
1,876 cases) each runner computes correctly, through one harness:

- ``openvta``: ``openvta.graph.onnx_backend.OpenvtaBackend`` (an ``onnx.backend.base.Backend``
  over openvta's float path): ``OpenvtaBackend.prepare(model).run(inputs)``;
- ``reference``: ``onnx.reference.ReferenceEvaluator(model).run(None, feeds)``;
- ``onnxruntime``: ``onnxruntime.InferenceSession(model.SerializeToString(),
  providers=["CPUExecutionProvider"]).run(None, feeds)``

(``feeds``: the case's inputs by the names of the graph's inputs that are not initializers).

Run it (about 20 s; the three runners one after the other)::

    .venv/bin/python benchmarks/onnx_node_suite.py [--runner openvta|reference|onnxruntime ...]
        [--json FILE] [--filter SUBSTRING] [--quiet] [--timeout SECONDS]

Definitions:

- Inputs and expected outputs: a ``TensorProto`` (how a case holds the narrow types: float16,
  bfloat16, the float8s, int4...) through ``onnx.numpy_helper.to_array``; a numpy array as
  is and a numpy scalar (Clip's bounds...) as a 0-d array, as ONNX's test data files
  (``input_0.pb``) hold it (onnxruntime refuses a scalar feed: fed raw, all 80 such cases
  are refused and onnxruntime passes 1,524; as arrays, 61 of them pass); a list (a sequence)
  element by element; ``None`` (an empty optional) as is.
- A case *passed* when its model was prepared and run on every data set of the case and
  every output equals the expected one: the same number of outputs; a sequence the same
  length and equal element by element; a tensor of the same dtype and shape, and values
  equal as ``np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-7)`` says (NaN equals
  NaN), both compared as ``tests/graph/test_onnx_backend.py``'s ``_expected`` does (the
  narrow float types as float64).  Strings are compared exactly, and any of numpy's string
  arrays (object, ``<U``, ``S``) is ONNX's one STRING type, the same dtype (as ONNX's own
  backend test runner does not compare the dtype of an expected object array).
- *wrong*: it ran, but an output (its value, dtype, shape, or the outputs' count) differs.
- *refused*: preparing or running raised; the message keeps the exception's type and the
  first line of its message.
- *timeout*: the case (prepare and every run) took longer than the per-case limit
  (``--timeout``, 20 s), as ``signal.setitimer`` interrupts it; native code (onnxruntime's
  kernels) is interrupted only once it returns to Python.

The six Bernoulli cases draw random numbers: a runner passes one only by chance.

Output: a table on stdout (runner | passed | % of total | wrong | refused | timeout) and the
time each runner took; then (without ``--quiet``) openvta's refusals grouped by reason (the
message with quoted names and numbers normalized) and the list of its wrong answers.  ``--json FILE``
writes every result, ``{case: {runner: {"status": ..., "message": ...}}}``.  A progress line
goes to stderr when stderr is a terminal (not with ``--quiet``).
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from onnx import ModelProto, TensorProto, numpy_helper

RTOL = 1e-3
ATOL = 1e-7
#: The per-case limit in seconds (prepare and every data set's run).
TIMEOUT = 20.0
#: numpy's kinds of string arrays (object, bytes, str): ONNX's one STRING type, a dtype alike.
STRING_KINDS = "OSU"
STATUSES = ("passed", "wrong", "refused", "timeout")
RUNNERS = ("openvta", "reference", "onnxruntime")
#: How many of openvta's refusal reasons the report lists.
TOP_REASONS = 25
#: A reason is printed cut to this many characters (grouped by its whole text).
REASON_WIDTH = 160

Run = Callable[[list[Any]], list[Any]]


# -- the runners: each prepares a model and returns a function of the inputs (a list in the
# -- order of the graph's inputs) to the outputs (a list in the graph's output order).

def _input_names(model: ModelProto) -> list[str]:
    initializers = {init.name for init in model.graph.initializer}
    return [value.name for value in model.graph.input if value.name not in initializers]


def prepare_openvta(model: ModelProto) -> Run:
    from openvta.graph.onnx_backend import OpenvtaBackend

    rep = OpenvtaBackend.prepare(model)
    return lambda inputs: list(rep.run(inputs))


def prepare_reference(model: ModelProto) -> Run:
    from onnx.reference import ReferenceEvaluator

    session = ReferenceEvaluator(model)
    names = _input_names(model)
    return lambda inputs: list(session.run(None, dict(zip(names, inputs))))


def prepare_onnxruntime(model: ModelProto) -> Run:
    import onnxruntime

    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = _input_names(model)
    return lambda inputs: list(session.run(None, dict(zip(names, inputs))))


PREPARE: dict[str, Callable[[ModelProto], Run]] = {
    "openvta": prepare_openvta, "reference": prepare_reference, "onnxruntime": prepare_onnxruntime}


# -- values and their comparison

def _value(value: Any) -> Any:
    """An input or expected output as the runners see it: a ``TensorProto`` through
    ``to_array``, a list (a sequence) element by element, ``None`` as is, else an array."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [_value(v) for v in value]
    if isinstance(value, TensorProto):
        return numpy_helper.to_array(value)
    return np.asarray(value)


def _copy(value: Any) -> Any:
    """A fresh copy of the inputs (the runners share them; none may change another's)."""
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value.copy() if isinstance(value, np.ndarray) else value


def _expected(array: np.ndarray) -> np.ndarray:
    """A tensor as compared (tests/graph/test_onnx_backend.py's ``_expected``): bool, integer
    and float (and complex) as they are, the narrow types (ml_dtypes' bfloat16, float8s,
    int4...) as float64."""
    return array if array.dtype.kind in "biufc" else array.astype(np.float64)


def _kind(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return f"a sequence of {len(value)}"
    return f"{type(value).__name__}"


def _differ(got: Any, want: Any) -> str | None:
    """How ``got`` differs from the expected ``want`` (None when it does not)."""
    if want is None or isinstance(want, list):
        if want is None:
            return None if got is None else f"got {_kind(got)}, expected None (an empty optional)"
        if not isinstance(got, (list, tuple)):
            return f"got {_kind(got)}, expected {_kind(want)}"
        if len(got) != len(want):
            return f"a sequence of {len(got)}, expected {len(want)}"
        for j, (g, w) in enumerate(zip(got, want)):
            diff = _differ(g, w)
            if diff is not None:
                return f"[{j}]: {diff}"
        return None
    if got is None or isinstance(got, (list, tuple)):
        return f"got {_kind(got)}, expected a tensor"
    got = _value(got)
    strings = got.dtype.kind in STRING_KINDS and want.dtype.kind in STRING_KINDS
    if got.dtype != want.dtype and not strings:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if strings:
        return None if np.array_equal(got.astype(object), want.astype(object)) else "strings differ"
    try:
        np.testing.assert_allclose(_expected(got), _expected(want), rtol=RTOL, atol=ATOL)
    except AssertionError as exc:
        return "values differ: " + _summary(str(exc))
    return None


def _summary(message: str) -> str:
    """``assert_allclose``'s message without its header and its arrays."""
    lines = []
    for line in (line.strip() for line in message.splitlines()):
        if line.startswith(("ACTUAL", "DESIRED")):
            break
        if line and not line.startswith("Not equal to tolerance"):
            lines.append(line.rstrip(":."))
    return "; ".join(lines)


def compare(got: list[Any], want: list[Any], names: list[str]) -> str | None:
    """How the outputs ``got`` differ from the expected ones (None when they do not)."""
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        diff = _differ(g, w)
        if diff is not None:
            name = names[i] if i < len(names) else "?"
            return f"output {i} {name!r}: {diff}"
    return None


# -- running a case

class CaseTimeout(BaseException):
    """The per-case limit passed (a BaseException, so that no ``except Exception`` swallows it)."""


def _alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout


@contextmanager
def _limit(seconds: float) -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def run_case(runner: str, case: Any, data: list[tuple[list[Any], list[Any]]], timeout: float) -> dict[str, str]:
    """One case on one runner: ``{"status", "message"}``."""
    names = [value.name for value in case.model.graph.output]
    try:
        with _limit(timeout), warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            try:
                run = PREPARE[runner](case.model)
                results = [run(_copy(inputs)) for inputs, _ in data]
            except CaseTimeout:
                raise
            except Exception as exc:  # noqa: BLE001 - every refusal is a result
                return {"status": "refused", "message": _first_line(exc)}
    except CaseTimeout:
        return {"status": "timeout", "message": f"more than {timeout:g} s"}
    for k, ((_, want), got) in enumerate(zip(data, results)):
        try:
            diff = compare(got, want, names)
        except Exception as exc:  # noqa: BLE001 - outputs the comparison cannot read are wrong
            diff = f"outputs not comparable: {_first_line(exc)}"
        if diff is not None:
            return {"status": "wrong", "message": diff if len(data) == 1 else f"data set {k}: {diff}"}
    return {"status": "passed", "message": ""}


# -- reporting

_QUOTED = re.compile(r"""(?<!\w)'[^'\n]*'(?!\w)|(?<!\w)"[^"\n]*"(?!\w)""")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w])")
_NUMBERS = re.compile(r"([(\[])N(?:, N)*,?([)\]])")


def reason(message: str) -> str:
    """A refusal's message with its quoted names and its numbers normalized: its reason."""
    text = _QUOTED.sub("'…'", message)
    text = _NUMBER.sub("N", text)
    return _NUMBERS.sub(r"\1…\2", text)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _progress(text: str) -> None:
    sys.stderr.write(f"\r\x1b[K{text}")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runner", action="append", choices=RUNNERS,
                        help="a runner to measure (repeatable; default: all three)")
    parser.add_argument("--json", metavar="FILE", help="write {case: {runner: {status, message}}} to FILE")
    parser.add_argument("--filter", metavar="SUBSTRING", help="only the cases whose name holds SUBSTRING")
    parser.add_argument("--quiet", action="store_true", help="only the table: no reasons, wrong list, progress")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help=f"per-case limit in seconds ({TIMEOUT:g})")
    args = parser.parse_args(argv)
    runners = list(dict.fromkeys(args.runner or RUNNERS))

    import onnx
    from onnx.backend.test.case.node import collect_testcases

    if "onnxruntime" in runners:
        import onnxruntime

        onnxruntime.set_default_logger_severity(4)  # its warnings and errors are results here
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = sorted((c for c in collect_testcases() if "training" not in c.name), key=lambda c: c.name)
    if args.filter:
        cases = [c for c in cases if args.filter in c.name]
    data = {c.name: [([_value(v) for v in inputs], [_value(v) for v in outputs])
                     for inputs, outputs in c.data_sets or ()] for c in cases}
    progress = sys.stderr.isatty() and not args.quiet

    results: dict[str, dict[str, dict[str, str]]] = {c.name: {} for c in cases}
    seconds: dict[str, float] = {}
    for runner in runners:
        start = time.perf_counter()
        for i, case in enumerate(cases):
            if progress:
                _progress(f"{runner}: {i + 1}/{len(cases)} {case.name}")
            results[case.name][runner] = run_case(runner, case, data[case.name], args.timeout)
        seconds[runner] = time.perf_counter() - start
        if progress:
            _progress("")

    total = len(cases)
    print(f"ONNX node test cases (onnx {onnx.__version__}, names without 'training'"
          f"{f', holding {args.filter!r}' if args.filter else ''}): {total}")
    header = ("runner", "passed", "% of total", "wrong", "refused", "timeout")
    rows = []
    for runner in runners:
        counts = Counter(results[c.name][runner]["status"] for c in cases)
        share = f"{100 * counts['passed'] / total:.1f}" if total else "-"
        rows.append((runner, str(counts["passed"]), share, *(str(counts[s]) for s in STATUSES[1:])))
    widths = [max(len(row[k]) for row in (header, *rows)) for k in range(len(header))]
    for row in (header, tuple("-" * w for w in widths), *rows):
        print(" | ".join(cell.ljust(w) if k == 0 else cell.rjust(w) for k, (cell, w) in enumerate(zip(row, widths))))
    print("time: " + ", ".join(f"{runner} {seconds[runner]:.1f} s" for runner in runners))

    if "openvta" in runners and not args.quiet:
        refused = [results[c.name]["openvta"]["message"] for c in cases
                   if results[c.name]["openvta"]["status"] == "refused"]
        reasons = Counter(reason(m) for m in refused)
        print(f"\nopenvta's refusals by reason ({_count(len(refused), 'case')}, {_count(len(reasons), 'reason')}; "
              f"the top {min(TOP_REASONS, len(reasons))}):")
        for text, count in reasons.most_common(TOP_REASONS):
            print(f"{count:6d}  {text if len(text) <= REASON_WIDTH else text[:REASON_WIDTH - 1] + '…'}")
        rest = reasons.most_common()[TOP_REASONS:]
        if rest:
            print(f"{sum(n for _, n in rest):6d}  ({len(rest)} other reasons)")
        wrong = [(c.name, results[c.name]["openvta"]["message"]) for c in cases
                 if results[c.name]["openvta"]["status"] == "wrong"]
        print(f"\nopenvta's wrong answers ({len(wrong)}):")
        for name, message in wrong:
            print(f"  {name}: {message}")
        timeouts = [c.name for c in cases if results[c.name]["openvta"]["status"] == "timeout"]
        if timeouts:
            print(f"\nopenvta's timeouts ({len(timeouts)}): {', '.join(timeouts)}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, ensure_ascii=False)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
