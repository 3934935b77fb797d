"""Where jobs run: any ``concurrent.futures.Executor``, or one named by a string.

* ``"serial"``: in this process, one after the other (:class:`SerialExecutor`);
* ``"local"`` or ``"local:N"``: ``N`` worker processes (default: one per core), started
  with ``spawn`` so that no thread of this process is forked;
* ``"dask://host:port"``: the workers of a Dask distributed scheduler, through
  ``distributed.Client(...).get_executor()`` (``pip install openvta[tune]``).

The tuner's measurements (``openvta.tune``), the design-space exploration and a model's
evaluation on a dataset (``openvta.graph.evaluate``) all run their jobs here: jobs are
plain values and module-level functions, so every executor can pickle them.  The naming
lives in the runtime, below the graph level and the tuner, so that both can use it.

>>> with open_executor("serial") as pool:
...     pool.submit(pow, 2, 10).result()
1024
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import BrokenExecutor, Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

__all__ = ["DASK_TIMEOUT_S", "ExecutorError", "SerialExecutor", "check_executor", "executor_slots",
           "open_executor", "worker_lost"]

#: Seconds to wait for a Dask scheduler before giving up on its address.
DASK_TIMEOUT_S = 10

#: What a Dask future raises when the worker running its job was lost (the scheduler
#: gave the task up); a local pool's is ``concurrent.futures.BrokenExecutor``.
LOST_WORKER_ERRORS = ("KilledWorker", "CommClosedError")


class ExecutorError(ValueError):
    """An executor that cannot be named or reached; the message is one line."""


class SerialExecutor(Executor):
    """Runs each job when it is submitted, in this process: the reference for the others."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to whoever reads the future, as any executor does
            future.set_exception(exc)
        return future


def _local_workers(spec: str) -> int:
    _, _, count = spec.partition(":")
    if not count:
        return os.cpu_count() or 1
    if not count.isdigit() or int(count) < 1:
        raise ExecutorError(f"executor local:N needs a positive number of workers, not {count!r}")
    return int(count)


@contextmanager
def _dask(address: str, timeout_s: float) -> Iterator[Executor]:
    try:
        from distributed import Client
    except ImportError:
        raise ExecutorError(f"executor {address} needs dask[distributed] "
                            "(pip install 'openvta[tune]')") from None
    target = "tcp://" + address.removeprefix("dask://")
    try:
        client = Client(target, timeout=f"{timeout_s}s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ExecutorError(f"cannot reach the Dask scheduler at {target}: {reason}") from None
    try:
        yield client.get_executor()
    finally:
        client.close()


def check_executor(executor: str | Executor) -> None:
    """Refuse an executor that cannot be named, before any work (reaching one is checked
    when it is opened): :class:`ExecutorError`, with the message of :func:`open_executor`."""
    if isinstance(executor, Executor) or executor == "serial":
        return
    if not isinstance(executor, str):
        raise ExecutorError(_EXPECTED + f", not {executor!r}")
    if executor == "local" or executor.startswith("local:"):
        _local_workers(executor)
    elif not (executor.startswith("dask://") and len(executor) > len("dask://")):
        raise ExecutorError(_EXPECTED + f", not {executor!r}")


def executor_slots(executor: str | Executor) -> int | None:
    """How many jobs ``executor`` runs at once, where its name says (``serial``: 1,
    ``local:N``: N); None for a Dask scheduler or an ``Executor`` object."""
    check_executor(executor)
    if isinstance(executor, Executor) or executor.startswith("dask://"):
        return None
    return 1 if executor == "serial" else _local_workers(executor)


def worker_lost(exc: BaseException) -> bool:
    """Whether ``exc``, raised by a future, says the worker running the job was lost (a
    local pool broken by a process that died, Dask's ``KilledWorker``), not that the job
    failed."""
    return isinstance(exc, BrokenExecutor) or type(exc).__name__ in LOST_WORKER_ERRORS


@contextmanager
def open_executor(executor: str | Executor, *, timeout_s: float = DASK_TIMEOUT_S) -> Iterator[Executor]:
    """The executor ``executor`` names (or ``executor`` itself), shut down after use if opened here.

    Raises
    ------
    ExecutorError
        ``"executor must be 'serial', 'local[:N]', 'dask://host:port' or a
        concurrent.futures.Executor, not 'gpu'"``; for a bad worker count; for a Dask
        address that does not answer within ``timeout_s`` or without Dask installed.
    """
    check_executor(executor)
    if isinstance(executor, Executor):
        yield executor
    elif executor == "serial":
        yield SerialExecutor()
    elif executor.startswith("local"):
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(_local_workers(executor), mp_context=context) as pool:
            yield pool
    else:
        with _dask(executor, timeout_s) as pool:
            yield pool


_EXPECTED = "executor must be 'serial', 'local[:N]', 'dask://host:port' or a concurrent.futures.Executor"
