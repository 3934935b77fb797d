"""A compiled model measured on a dataset: a metric for the int8 and the float model, and cycles.

:func:`evaluate` (through ``CompiledModel.evaluate``) opens the dataset
(:mod:`openvta.graph.datasets`), splits its samples into chunks of ``chunk_size`` and runs
each chunk as a job (:class:`ChunkJob`, plain values; :func:`run_chunk`, a module-level
function) on an executor (:mod:`openvta.runtime.executors`: ``"serial"``, ``"local:N"``,
``"dask://host:port"`` or any ``concurrent.futures.Executor``).  A job carries the model
file's bytes, loaded once per worker process; it runs its samples in batches of
``batch_size`` on the back end (the int8 model, with its cycles where the back end counts
them) and through ``float_reference`` (the float model), and returns the metric's value
for each sample (:mod:`openvta.graph.metrics`).

The per-sample values are kept in sample order and every figure is computed from them,
so a run on any executor, or one resumed from its report
(:mod:`openvta.graph.evaluation_report`), gives the serial run's figures exactly.  A
chunk whose worker dies (a local pool broken by a process that exited, Dask's
``KilledWorker``) runs once more, alone; lost a second time, the evaluation stops with a
one-line :class:`EvaluationError` naming the chunk.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, BrokenExecutor, Executor, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from openvta.runtime.executors import check_executor, executor_slots, open_executor, worker_lost

from .datasets import ArrayChunk, DatasetLike, ImageChunk, ImageSamples, Preprocess, Samples, open_dataset
from .evaluation_report import ChunkResult, EvaluationError, RunKey, model_digest, read_report, write_report
from .ir import Graph
from .metrics import Metric, against_float, metric_name, needs_labels, resolve_metric, sample_values

__all__ = ["ChunkJob", "Evaluation", "EvaluationError", "Model", "evaluate", "run_chunk"]

#: Samples per chunk when none is given (rounded up to a multiple of the batch size).
DEFAULT_CHUNK_SAMPLES = 32
#: The report is rewritten at most this often while chunks finish (and always at the end).
SAVE_INTERVAL_S = 1.0


class Model(Protocol):
    """What an evaluation runs: a ``CompiledModel`` (typed here by what is used of it, as this
    module sits below ``compiled_model``, whose ``evaluate`` calls it)."""

    @property
    def graph(self) -> Graph: ...

    @property
    def inputs(self) -> tuple[str, ...]: ...

    @property
    def outputs(self) -> tuple[str, ...]: ...

    def run(self, x: Any, backend: str = "functional") -> Any: ...

    def float_reference(self, x: Any) -> dict[str, np.ndarray]: ...


@dataclass(frozen=True)
class Evaluation:
    """What :func:`evaluate` measured: per-sample values, and the figures made from them.

    Two evaluations compare equal when their values and cycles are equal, whichever
    executor ran them and however many chunks came from a report.
    """

    metric: str
    backend: str
    #: the int8 model's value for each sample, in order
    int8_values: tuple[float, ...]
    #: the float model's (None for ``cosine``: the float model is its reference)
    float_values: tuple[float, ...] | None
    #: the accelerator's cycles over every sample (None where the back end counts none)
    cycles: int | None
    reused_chunks: int = field(default=0, compare=False)
    #: the chunks that ran again after their worker was lost
    retried_chunks: tuple[int, ...] = field(default=(), compare=False)

    @property
    def samples(self) -> int:
        return len(self.int8_values)

    @property
    def int8_score(self) -> float:
        """The mean of :attr:`int8_values` (correctly rounded, whatever the order)."""
        return math.fsum(self.int8_values) / self.samples

    @property
    def float_score(self) -> float | None:
        return None if self.float_values is None else math.fsum(self.float_values) / self.samples

    @property
    def cycles_per_sample(self) -> float | None:
        return None if self.cycles is None else self.cycles / self.samples

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "int8": self.int8_score, "float": self.float_score,
                "cycles": self.cycles, "cycles_per_sample": self.cycles_per_sample}


@dataclass(frozen=True)
class ChunkJob:
    """One chunk of samples to measure, as values any executor can pickle."""

    index: int
    start: int
    stop: int
    model: bytes
    model_sha256: str
    #: a module-level function making the model of its file's bytes (``load_model_bytes``)
    load: Callable[[bytes], Model]
    chunk: ArrayChunk | ImageChunk
    metric: Metric
    backend: str
    batch_size: int


#: Models loaded from a job's bytes in this process, by digest (one at a time).
_LOADED: dict[str, Model] = {}


def _loaded(job: ChunkJob) -> Model:
    model = _LOADED.get(job.model_sha256)
    if model is None:
        model = job.load(job.model)
        _LOADED.clear()
        _LOADED[job.model_sha256] = model
    return model


def run_chunk(job: ChunkJob) -> ChunkResult:
    """Measure ``job``'s samples (here, or on an executor's worker)."""
    model = _loaded(job)
    inputs, labels = job.chunk.load()
    count = job.stop - job.start
    int8: list[float] = []
    floats: list[float] = []
    cycles: int | None = 0
    for start in range(0, count, job.batch_size):
        feeds = {name: value[start:start + job.batch_size] for name, value in inputs.items()}
        batch_labels = None if labels is None else labels[start:start + job.batch_size]
        out = model.run(feeds, backend=job.backend)
        reference = model.float_reference(feeds)
        int8 += sample_values(job.metric, out.outputs, batch_labels, reference)
        if against_float(job.metric):
            floats += sample_values(job.metric, reference, batch_labels)
        cycles = None if cycles is None or out.report.cycles is None else cycles + out.report.cycles
    return ChunkResult(job.index, job.start, job.stop, tuple(int8),
                       tuple(floats) if against_float(job.metric) else None, cycles)


def evaluate(model: Model, model_file: bytes, load: Callable[[bytes], Model], dataset: DatasetLike, *,
             metric: Metric = "top1", backend: str = "functional", batch_size: int | None = None,
             executor: str | Executor = "serial", chunk_size: int | None = None, report: str | Path | None = None,
             limit: int | None = None, labels: str | Path | None = None, preprocess: Preprocess | None = None,
             progress: Callable[[str, int, int | None], None] | None = None,
             model_name: str | None = None) -> Evaluation:
    """Measure ``model`` on ``dataset`` (``CompiledModel.evaluate`` calls this with its own
    file's bytes, ``model_file``, and ``load``, which makes the model of them on a worker).

    Parameters
    ----------
    dataset :
        an ``.npz`` path, a folder of images (a path, or an ``ImageFolder`` with its
        preprocessing) or an iterable of ``(inputs, label)`` pairs
        (:mod:`openvta.graph.datasets`); ``labels`` and ``preprocess`` complete a path.
    metric :
        ``"top1"``, ``"top5"``, ``"cosine"``, a function ``(outputs, label) -> float`` or
        ``"module:function"`` (:mod:`openvta.graph.metrics`).
    backend :
        where the int8 model runs (``functional``, ``cycle``, …); the float model runs on
        the CPU (``float_reference``).
    batch_size :
        samples per run (default 1, or the model's fixed batch).
    executor :
        ``"serial"``, ``"local:N"``, ``"dask://host:port"`` or a ``concurrent.futures.Executor``.
    chunk_size :
        samples per job (default 32, rounded up to a multiple of ``batch_size``).
    report :
        a JSON file written as chunks finish, and resumed from if it exists
        (:mod:`openvta.graph.evaluation_report`).
    limit :
        the first ``limit`` samples only.
    progress :
        ``progress("samples", done, total)`` as chunks finish.
    model_name :
        how the report names the model (its file; None for a model object).

    Raises
    ------
    DatasetError, EvaluationError, ExecutorError, ValueError
        one line each: a dataset that cannot be read, a metric that needs labels on
        unlabelled samples, a report of another run, a chunk whose worker was lost twice,
        an unknown back end or executor, …
    """
    from openvta.runtime import backends

    if backend not in backends():
        raise ValueError(f"backend must be one of {', '.join(backends())}, not {backend!r}")
    metric = resolve_metric(metric)
    check_executor(executor)
    samples = open_dataset(dataset, model.graph, labels=labels, preprocess=preprocess, limit=limit)
    if needs_labels(metric) and samples.labels is None:
        raise EvaluationError(f"metric {metric} needs labels, and dataset {samples.description!r} has none "
                              "(an .npz's 'labels', a labels file, or (inputs, label) pairs); cosine needs none")
    _check_classes(model, samples, metric)
    batch = _batch_size(model, batch_size, samples.count)
    chunk = batch * math.ceil(DEFAULT_CHUNK_SAMPLES / batch) if chunk_size is None else chunk_size
    if not isinstance(chunk, int) or chunk < 1 or chunk % batch:
        raise ValueError(f"chunk size must be a positive multiple of the batch size ({batch}), not {chunk!r}")
    options = {"metric": metric_name(metric), "backend": backend, "batch_size": batch, "chunk_size": chunk,
               "preprocess": (samples.folder.preprocess.to_json() if isinstance(samples, ImageSamples) else None)}
    digest = model_digest(model_file)
    key = RunKey(digest, samples.fingerprint(), samples.count, options)
    recorder = _Recorder(read_report(report, key) if report is not None else {}, report, key, model_name,
                         samples.description, progress)
    jobs = [ChunkJob(i, start, min(start + chunk, samples.count), model_file, digest, load,
                     samples.chunk(start, min(start + chunk, samples.count)), metric, backend, batch)
            for i, start in enumerate(range(0, samples.count, chunk)) if i not in recorder.done]
    reused = len(recorder.done)
    _LOADED[digest] = model  # this process's chunks use the model object itself
    try:
        retried = _run_jobs(jobs, executor, recorder)
    finally:
        _LOADED.pop(digest, None)
        if jobs:
            recorder.save()
    evaluation = _assemble(recorder.done, options, reused, retried)
    recorder.save(evaluation.to_json())
    return evaluation


class _Recorder:
    """Keeps the finished chunks, says how far the run is, and rewrites the report at most
    every :data:`SAVE_INTERVAL_S` (and when asked: at the end, on an interruption)."""

    def __init__(self, done: dict[int, ChunkResult], report: str | Path | None, key: RunKey,
                 model_name: str | None, source: str,
                 progress: Callable[[str, int, int | None], None] | None) -> None:
        self.done, self.report, self.key = done, report, key
        self.model_name, self.source, self.progress = model_name, source, progress
        self.finished = sum(c.stop - c.start for c in done.values())
        self.saved = time.monotonic()
        if progress is not None:
            progress("samples", self.finished, key.samples)

    def __call__(self, result: ChunkResult) -> None:
        self.done[result.index] = result
        self.finished += result.stop - result.start
        if self.progress is not None:
            self.progress("samples", self.finished, self.key.samples)
        if time.monotonic() - self.saved >= SAVE_INTERVAL_S:
            self.save()

    def save(self, result: dict[str, Any] | None = None) -> None:
        if self.report is not None:
            write_report(self.report, self.key, self.model_name, self.source, self.done, result)
        self.saved = time.monotonic()


def _batch_size(model: Model, batch_size: int | None, count: int) -> int:
    fixed = {t.shape[0] for t in (model.graph.types[n] for n in model.inputs)
             if t.ndim and isinstance(t.shape[0], int)}
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch size must be a positive integer, not {batch_size!r}")
    if not fixed:
        return batch_size or 1
    (batch,) = fixed
    if batch_size is not None and batch_size != batch:
        raise ValueError(f"batch size must be {batch}, the model's fixed batch, not {batch_size}")
    if count % batch:
        raise ValueError(f"the dataset's {count} samples must be a multiple of the model's fixed batch ({batch})")
    return int(batch)


def _check_classes(model: Model, samples: Samples, metric: Metric) -> None:
    """Labels beyond the first output's classes, refused before any run (where the output's size is known)."""
    shape = model.graph.types[model.outputs[0]].shape
    if not needs_labels(metric) or samples.labels is None or not all(isinstance(d, int) for d in shape[1:]):
        return
    classes = math.prod(int(d) for d in shape[1:])
    if samples.labels.size and int(samples.labels.max()) >= classes:
        sample = int(np.argmax(samples.labels >= classes))
        raise EvaluationError(f"label {int(samples.labels[sample])} of sample {sample} is not a class of output "
                              f"{model.outputs[0]!r} ({classes} classes)")


def _run_jobs(jobs: list[ChunkJob], executor: str | Executor, record: Callable[[ChunkResult], None]) -> tuple[int, ...]:
    """Run ``jobs`` on ``executor``, ``record``-ing each result; those whose worker was lost run
    once more, one at a time in a fresh executor (a local pool broken by one process fails every
    job it held: one at a time, a job lost again is the one that kills its worker).  Returns the
    indices of the jobs run again."""
    slots = executor_slots(executor)
    window = len(jobs) if slots is None else 1 if slots == 1 else 2 * slots
    queue, lost = deque(jobs), []
    while queue:
        with open_executor(executor) as pool:
            lost += _run_window(pool, queue, max(window, 1), record)
    if not lost:
        return ()
    with open_executor(executor) as pool:
        for job in sorted(lost, key=lambda j: j.index):
            try:
                result = pool.submit(run_chunk, job).result()
            except BaseException as exc:
                if not worker_lost(exc):
                    raise
                detail = str(exc).splitlines()[0] if str(exc) else ""
                raise EvaluationError(f"chunk {job.index} (samples {job.start} to {job.stop - 1}) lost its worker "
                                      f"twice ({type(exc).__name__}: {detail})") from None
            record(result)
    return tuple(sorted(job.index for job in lost))


def _run_window(pool: Executor, queue: deque[ChunkJob], window: int,
                record: Callable[[ChunkResult], None]) -> list[ChunkJob]:
    """Keep up to ``window`` jobs of ``queue`` running on ``pool`` until it is empty or the pool
    breaks; returns the jobs whose worker was lost.  An interruption cancels the jobs not started."""
    pending: dict[Future[ChunkResult], ChunkJob] = {}
    lost: list[ChunkJob] = []
    broken = False
    try:
        while queue or pending:
            while queue and not broken and len(pending) < window:
                job = queue.popleft()
                try:
                    pending[pool.submit(run_chunk, job)] = job
                except BrokenExecutor:  # a pool broken by a lost worker refuses new jobs
                    lost.append(job)
                    broken = True
            if not pending:
                break
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=lambda f: pending[f].index):
                job = pending.pop(future)
                try:
                    result = future.result()
                except BaseException as exc:
                    if not worker_lost(exc):
                        raise
                    lost.append(job)
                    broken = broken or isinstance(exc, BrokenExecutor)
                    continue
                record(result)
            if broken and not pending:
                break
    except BaseException:
        for future in pending:
            future.cancel()
        raise
    return lost


def _assemble(done: dict[int, ChunkResult], options: dict[str, Any], reused: int,
              retried: tuple[int, ...]) -> Evaluation:
    chunks = [done[i] for i in sorted(done)]
    int8 = tuple(v for c in chunks for v in c.int8_values)
    floats = None if chunks[0].float_values is None else tuple(v for c in chunks for v in c.float_values or ())
    cycles = None if any(c.cycles is None for c in chunks) else sum(c.cycles or 0 for c in chunks)
    return Evaluation(options["metric"], options["backend"], int8, floats, cycles, reused, retried)
