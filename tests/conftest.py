"""Shared fixtures: the named presets, a Dask cluster, and the test helpers on the import path."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from openvta.isa import PRESETS, Config  # noqa: E402
from ort_probe import probe  # noqa: E402


def pytest_report_header(config: pytest.Config) -> str:
    """The CPU's answer to onnxruntime's int8 probe: its comparisons run or are skipped."""
    found = probe()
    return "onnxruntime: not installed" if found is None else found.describe()

PRESET_NAMES = ("tiny", "small", "default")


@pytest.fixture(params=PRESET_NAMES)
def cfg(request: pytest.FixtureRequest) -> Config:
    """Each named preset in turn."""
    return PRESETS[request.param]


@pytest.fixture(scope="module")
def dask_address() -> Iterator[str]:
    """A Dask LocalCluster of two single-threaded worker processes, as ``dask://host:port``."""
    distributed = pytest.importorskip("distributed", reason="dask[distributed] is the tune extra")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        yield "dask://" + cluster.scheduler_address.removeprefix("tcp://")
