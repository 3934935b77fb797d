"""ONNX's whole node test suite (``benchmarks/onnx_node_suite.py``'s harness: the 1,876 cases
whose name has no "training", ONNX's tolerance) through openvta: what runs gives ONNX's
expected outputs, nothing gives a wrong answer, every refusal is one line, and the counts
are those docs/FIGURES.md gives."""

from __future__ import annotations

import importlib.util
import re
import warnings
from collections import Counter
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
#: openvta's counts on onnx 1.23.2 (the pinned version): passed, wrong, refused, timed out.
COUNTS = {"passed": 1730, "wrong": 0, "refused": 146, "timeout": 0}


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("onnx_node_suite", ROOT / "benchmarks" / "onnx_node_suite.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, str]]:
    from onnx.backend.test.case.node import collect_testcases

    suite = _harness()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = sorted((c for c in collect_testcases() if "training" not in c.name), key=lambda c: c.name)
    def data(case: object) -> list:
        return [([suite._value(v) for v in inputs], [suite._value(v) for v in outputs])
                for inputs, outputs in getattr(case, "data_sets", None) or ()]

    return {c.name: suite.run_case("openvta", c, data(c), suite.TIMEOUT) for c in cases}


def test_the_node_suite_runs_at_least_nine_cases_in_ten_and_none_wrong(results: dict[str, dict[str, str]]) -> None:
    counts = Counter(r["status"] for r in results.values())
    assert len(results) == 1876
    assert {status: counts[status] for status in COUNTS} == COUNTS, \
        [(name, r["message"]) for name, r in results.items() if r["status"] == "wrong"]
    assert COUNTS["passed"] >= 0.9 * len(results)


def test_every_refusal_is_one_line_naming_what(results: dict[str, dict[str, str]]) -> None:
    for name, r in results.items():
        if r["status"] == "refused":
            assert "\n" not in r["message"] and len(r["message"]) < 400, name
            assert r["message"].split(":")[0] in ("ModelError", "ExecutionError"), (name, r["message"])


def test_the_figures_page_gives_these_counts() -> None:
    text = (ROOT / "docs" / "FIGURES.md").read_text()
    row = re.search(r"^\| openvta \| ([\d,]+) \| ([\d.]+) % \| (\d+) \| (\d+) \|", text, re.MULTILINE)
    assert row is not None, "docs/FIGURES.md has no openvta row in the node suite's table"
    assert (int(row[1].replace(",", "")), int(row[3]), int(row[4])) == (
        COUNTS["passed"], COUNTS["wrong"], COUNTS["refused"])
