"""``tune``: measure a space's configurations in batches, as a tuner picks them, into a log.

The operator's own plan is measured first (the baseline, and the cycle budget: a
configuration slower than ``budget`` times it is stopped and recorded as a timeout);
then each batch the tuner proposes is measured on the executor, its records appended to
the log in the batch's order, and the tuner updated.  A configuration already in the log
(same kernel, back end, versions and knobs) is read back, not measured again, so a
resumed run measures only what is new and a finished one measures nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np

from openvta.isa import Config
from openvta.runtime import backends

from .executors import open_executor
from .features import features, roofline_cycles, target
from .measure import MeasureJob, Outcome, run_job
from .records import FORMAT_VERSION, OPENVTA_VERSION, Record, append_records, read_records
from .search import make_tuner
from .space import Space

__all__ = ["TuneError", "TuneResult", "tune"]

#: ``progress(what, done, total)``, as :data:`openvta.runtime.Progress`.
Progress = Callable[[str, int, "int | None"], None]


class TuneError(ValueError):
    """A tuning run that cannot start or found nothing valid; the message is one line."""


@dataclass
class TuneResult:
    """The records of one tuning run, in trial order.

    Members
    -------
    space :
        what was tuned.
    records :
        one per trial, the operator's own plan first (read from the log or measured).
    jobs :
        how many configurations were measured (the rest came from the log).
    """

    space: Space
    records: list[Record] = field(default_factory=list)
    jobs: int = 0

    @property
    def default(self) -> Record | None:
        """The record of the operator's own plan, if it has one."""
        index = self.space.default_index()
        return next((r for r in self.records if r.index == index), None)

    def best(self) -> Record:
        """The fastest configuration with the right answer (ties: the lowest id): its
        ``knobs``, ``cycles`` and ``utilization``.

        Raises
        ------
        TuneError
            when no trial was measured without an error.
        """
        ok = [r for r in self.records if r.ok]
        if not ok:
            kinds = sorted({r.error["kind"] for r in self.records if r.error})
            raise TuneError(f"no configuration of {self.space.kernel} was measured without an error "
                            f"({len(self.records)} trials; {', '.join(kinds) or 'none measured'})")
        return min(ok, key=lambda r: (r.cycles, r.index))

    def errors(self) -> dict[str, int]:
        """Trials per kind of error."""
        out: dict[str, int] = {}
        for record in self.records:
            if record.error:
                out[record.error["kind"]] = out.get(record.error["kind"], 0) + 1
        return out


def _key(space: Space, backend: str, knobs: dict[str, object]) -> tuple[str, str, int, str, str]:
    return (space.kernel, backend, FORMAT_VERSION, OPENVTA_VERSION, json.dumps(knobs, sort_keys=True))


def _transfer(space: Space, paths: Iterable[str | os.PathLike[str]]) -> tuple[np.ndarray, np.ndarray] | None:
    """Features and targets of the right-answer records of ``paths`` for the same operator
    and hardware (other shapes too)."""
    x, y = [], []
    hardware = space.cfg.to_dict()
    for path in paths:
        for r in read_records(path):
            if r.ok and r.operator == space.operator and r.hardware == hardware:
                cfg = Config.from_dict(r.hardware)
                x.append(features(r.operator, cfg, r.params, r.knobs))
                y.append(target(r.measured_cycles, roofline_cycles(r.operator, cfg, r.params, r.knobs)))
    return (np.stack(x), np.asarray(y)) if x else None


class _Run:
    """One tuning run's state: the log's records by key, this run's trials, the executor."""

    def __init__(self, space: Space, backend: str, log: str | os.PathLike[str] | None, pool: Executor,
                 options: dict[str, object]) -> None:
        self.space, self.backend, self.log, self.pool, self.options = space, backend, log, pool, options
        self.known = {r.key: r for r in (read_records(log, missing_ok=True) if log else [])}
        self.result = TuneResult(space)
        self.budget: int | None = None

    def measure(self, indices: Sequence[int]) -> list[Record]:
        """Records of ``indices``: from the log, or measured on the executor in one go."""
        knobs = [self.space.get(i) for i in indices]
        keys = [_key(self.space, self.backend, k) for k in knobs]
        futures = {}
        for k, key in zip(knobs, keys):
            if key not in self.known and key not in futures:
                job = MeasureJob(self.space.operator, self.space.params, self.space.cfg.to_dict(), k,
                                 self.backend, self.budget, options=self.options)
                futures[key] = self.pool.submit(run_job, job)
        new = []
        for index, k, key in zip(indices, knobs, keys):
            if key in futures and key not in self.known:
                outcome: Outcome = futures[key].result()
                self.known[key] = Record(self.space.kernel, self.space.operator, self.space.params,
                                         self.space.cfg.to_dict(), self.backend, k, index, outcome.cycles,
                                         outcome.utilization, outcome.error)
                new.append(self.known[key])
        if self.log and new:
            append_records(self.log, new)
        self.result.jobs += len(futures)
        records = [self.known[key] for key in keys]
        self.result.records += records
        return records

    def cost(self, record: Record) -> float | None:
        """What the tuner learns of a record: its cycles, the budget for a timeout, else nothing."""
        if record.ok:
            return float(record.measured_cycles)
        if record.error and record.error["kind"] == "timeout" and self.budget:
            return float(self.budget)
        return None


def tune(space: Space, trials: int = 200, *, tuner: str = "xgb", executor: str | Executor = "serial",
         log: str | os.PathLike[str] | None = None, seed: int = 0, backend: str = "cycle",
         batch_size: int = 8, budget: float = 2.0, model: str = "auto",
         transfer: Sequence[str | os.PathLike[str]] = (), progress: Progress | None = None,
         backend_options: dict[str, object] | None = None) -> TuneResult:
    """Measure up to ``trials`` valid configurations of ``space`` (see the module docstring).

    Parameters
    ----------
    tuner :
        ``xgb``, ``anneal``, ``random`` or ``grid`` (:mod:`openvta.tune.search`).
    executor :
        ``"serial"``, ``"local[:N]"``, ``"dask://host:port"`` or any ``concurrent.futures.Executor``.
    log :
        the JSON-lines records file: read first (resume), appended to.
    seed :
        the search's seed: the same seed writes the same records.
    backend, backend_options :
        where to measure (``cycle``; ``rtl`` and ``board`` too) and its options.
    batch_size :
        configurations per batch (the cost model is refitted after each).
    budget :
        the cycle budget, as a multiple of the operator's own plan's cycles.
    model :
        the ``xgb`` tuner's cost model: ``auto`` (XGBoost if installed, else numpy), ``xgb``, ``numpy``.
    transfer :
        logs of other shapes of the operator, to train the cost model from the start.
    progress :
        ``progress(what, done, total)`` after each batch (``what`` carries the best so far).

    Raises
    ------
    TuneError, ValueError
        for a bad argument (one line each), a space without a valid configuration.
    """
    _check_args(trials, batch_size, budget, backend)
    if not space.valid_count():
        raise TuneError(f"no configuration of {space.kernel} is valid: {space.invalid_reasons()}")
    with open_executor(executor) as pool:
        run = _Run(space, backend, log, pool, dict(backend_options or {}))
        search = make_tuner(tuner, space, seed=seed, trials=trials, model=model,
                            transfer=_transfer(space, transfer) if tuner == "xgb" else None)
        default = space.default_index()
        if default is not None:
            first = run.measure([default])
            search.update([default], [run.cost(first[0])])
            if first[0].ok:
                run.budget = int(budget * first[0].measured_cycles)
        while len(run.result.records) < trials:
            batch = search.next_batch(min(batch_size, trials - len(run.result.records)))
            if not batch:
                break
            records = run.measure(batch)
            search.update(batch, [run.cost(r) for r in records],
                          {i for i, r in zip(batch, records) if r.error and r.error["kind"] == "timeout"})
            if progress is not None:
                best = min((r.cycles for r in run.result.records if r.cycles is not None), default=None)
                what = f"trials, best {best:,} cycles" if best is not None else "trials"
                progress(what, len(run.result.records), trials)
    return run.result


def _check_args(trials: int, batch_size: int, budget: float, backend: str) -> None:
    for name, value in (("trials", trials), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TuneError(f"{name} must be a positive integer, not {value!r}")
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 1:
        raise TuneError(f"budget must be a number greater than 1 (times the default plan's cycles), "
                        f"not {budget!r}")
    if backend not in backends():
        raise TuneError(f"backend must be one of {', '.join(backends())}, not {backend!r}")
