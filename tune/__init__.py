"""Auto-tuning: schedule spaces, measurement jobs, executors, records, a cost model and search.

>>> from openvta import tune
>>> space = tune.space("dense", layer="dense_1x16x16", config="tiny")
>>> len(space), space.valid_count()
(36, 18)

See docs/TUNING.md: :func:`space` lists an operator's knobs with a reason for every refused
configuration, :func:`tune` measures configurations on a back end through
``runtime.Device`` and writes JSON-lines records, :func:`best_plans` reads the best plan
per kernel back (``openvta.compile(..., records=)``), :func:`tune_model` tunes every kernel of
a model into one log (``openvta.compile_model(..., records=)``).
"""

from .executors import ExecutorError, SerialExecutor, open_executor
from .knobs import KNOBS, Knob
from .measure import MeasureJob, Outcome, run_job
from .records import Record, RecordError, TuningNote, best_plans, kernel_key, plan_kwargs, read_records
from .search import TUNERS
from .space import Space, space
from .tune_model import KernelTuning, ModelTuning, kernel_space, tune_model
from .tuner import TuneError, TuneResult, tune

__all__ = ["KNOBS", "TUNERS", "ExecutorError", "KernelTuning", "Knob", "MeasureJob", "ModelTuning", "Outcome",
           "Record", "RecordError", "SerialExecutor", "Space", "TuneError", "TuneResult", "TuningNote", "best_plans",
           "kernel_key", "kernel_space", "open_executor", "plan_kwargs", "read_records", "run_job", "space", "tune",
           "tune_model"]
