"""The Examples in the graph level's docstrings run and print what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import openvta.graph

MODULES = sorted(info.name for info in pkgutil.walk_packages(openvta.graph.__path__, "openvta.graph."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    failures, _ = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failures == 0
