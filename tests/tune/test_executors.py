"""Executors: local processes, a Dask cluster and any Executor write the serial run's records."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from openvta import tune
from openvta.tune.executors import SerialExecutor, open_executor

SPACE = tune.space("dense", config="tiny", batch=4, in_features=64, out_features=64)
RUN = {"trials": 12, "tuner": "xgb", "batch_size": 4, "seed": 5}


@pytest.fixture(scope="module")
def serial() -> list[tune.Record]:
    return tune.tune(SPACE, executor="serial", **RUN).records


def test_local_processes_write_the_serial_records(serial: list[tune.Record]) -> None:
    assert tune.tune(SPACE, executor="local:2", **RUN).records == serial


def test_a_dask_cluster_writes_the_serial_records(serial: list[tune.Record], dask_address: str) -> None:
    result = tune.tune(SPACE, executor=dask_address, **RUN)
    assert result.records == serial and result.jobs == 12


def test_any_executor_writes_the_serial_records(serial: list[tune.Record]) -> None:
    with ThreadPoolExecutor(3) as pool:
        assert tune.tune(SPACE, executor=pool, **RUN).records == serial


def test_the_serial_executor_hands_errors_to_the_future() -> None:
    future = SerialExecutor().submit(int, "x")
    with pytest.raises(ValueError, match=r"^invalid literal for int\(\) with base 10: 'x'$"):
        future.result()


def test_an_unreachable_dask_scheduler_is_one_error() -> None:
    pytest.importorskip("distributed", reason="dask[distributed] is the tune extra")
    with pytest.raises(tune.ExecutorError, match=r"^cannot reach the Dask scheduler at tcp://127\.0\.0\.1:9: .+$"):
        with open_executor("dask://127.0.0.1:9", timeout_s=1):
            pass


@pytest.mark.parametrize(("spec", "message"), [
    ("dask://", r"^executor must be .* not 'dask://'$"),
    ("local:two", r"^executor local:N needs a positive number of workers, not 'two'$"),
    (4, r"^executor must be 'serial', 'local\[:N\]', 'dask://host:port' or a concurrent\.futures\.Executor, "
        r"not 4$"),
])
def test_bad_executors_are_one_line_errors(spec: object, message: str) -> None:
    with pytest.raises(tune.ExecutorError, match=message):
        with open_executor(spec):
            pass


def test_dask_without_the_tune_extra_is_one_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)  # what an absent package looks like to import
    with pytest.raises(tune.ExecutorError, match=r"^executor dask://host:8786 needs dask\[distributed\] "
                                                 r"\(pip install 'openvta\[tune\]'\)$"):
        with open_executor("dask://host:8786"):
            pass
