"""Where measurement jobs run: any ``concurrent.futures.Executor``, or one named by a string
(``"serial"``, ``"local[:N]"``, ``"dask://host:port"``).

The naming is :mod:`openvta.runtime.executors`, shared with the graph level's evaluation
of a model on a dataset; this module keeps the tuner's names for it.  Jobs are
:class:`~.measure.MeasureJob` values and :func:`~.measure.run_job` a module-level
function, so every executor can pickle them; results are read back in submission order,
so records do not depend on which worker finished first.
"""

from __future__ import annotations

from openvta.runtime.executors import (
    DASK_TIMEOUT_S,
    ExecutorError,
    SerialExecutor,
    check_executor,
    executor_slots,
    open_executor,
    worker_lost,
)

__all__ = ["DASK_TIMEOUT_S", "ExecutorError", "SerialExecutor", "check_executor", "executor_slots",
           "open_executor", "worker_lost"]
