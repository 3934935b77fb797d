"""The Examples in every docstring of the package run and print what they show.

One runner for all layers (``openvta.hw`` only where importing needs no RTL tools).
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import openvta

PACKAGES = ("isa", "runtime", "sim", "compiler", "graph", "tune")
MODULES = sorted(
    [info.name for package in PACKAGES
     for info in pkgutil.walk_packages(importlib.import_module(f"openvta.{package}").__path__,
                                       f"openvta.{package}.")]
    + ["openvta.api", "openvta.blocked_gemm", "openvta.progress", "openvta.tune", "openvta.tune_cli",
       "openvta.tune_model_cli"])


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    failures, _ = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failures == 0


def test_the_runner_finds_examples() -> None:
    found = sum(len(doctest.DocTestFinder().find(importlib.import_module(name))) for name in MODULES)
    assert found > 50 and openvta.__version__
