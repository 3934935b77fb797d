"""The Examples in the compiler's docstrings (and the facade's) run and print what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import openvta.compiler

MODULES = sorted(
    [info.name for info in pkgutil.walk_packages(openvta.compiler.__path__, "openvta.compiler.")]
    + ["openvta.api", "openvta.blocked_gemm"])


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    failures, _ = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failures == 0
