"""The Examples in the docstrings of ``openvta.tune`` run and print what they show
(tests/test_doctests.py covers the other layers)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["openvta.tune", "openvta.tune.executors", "openvta.tune.features", "openvta.tune.knobs",
           "openvta.tune.measure", "openvta.tune.model", "openvta.tune.records", "openvta.tune.search",
           "openvta.tune.space", "openvta.tune.tuner", "openvta.tune.tune_model", "openvta.tune_cli",
           "openvta.tune_model_cli"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    failures, _ = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failures == 0


def test_the_runner_finds_examples() -> None:
    found = sum(len(doctest.DocTestFinder().find(importlib.import_module(name))) for name in MODULES)
    assert found >= 4
