"""The wheel's package map (setup.py): every package folder of the tree is in it, and the
demo's data is found where a wheel or a clone puts it, or named when it is missing.

CI builds and installs the wheel itself (.ci/run, .ci/smoke.py); these tests keep the map
from drifting between such runs.
"""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType
from pathlib import Path

import pytest

import openvta.demo

ROOT = Path(__file__).resolve().parents[1]


def _setup_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("openvta_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not __main__: the map, without running setup()
    return module


def test_every_package_folder_is_shipped() -> None:
    setup = _setup_module()
    shipped = set(setup.packages())
    for package, folder in setup.LAYERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            name = ".".join([package, *relative.parts])
            assert name in shipped, f"{init.parent} holds a package that the wheel leaves out"


def test_the_demos_data_is_declared() -> None:
    setup = _setup_module()
    assert "openvta.examples.digits" in setup.packages()
    assert setup.DATA["openvta.examples.digits"] == ["*.onnx"]
    assert (openvta.demo.digits_folder() / "digits.onnx").is_file()


def test_a_missing_example_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openvta.demo, "__file__", str(tmp_path / "openvta" / "demo.py"))
    with pytest.raises(FileNotFoundError, match=r"^the digits example is not installed: no "
                       rf"digits.onnx in {re.escape(str(tmp_path))}/openvta/examples/digits nor "
                       rf"{re.escape(str(tmp_path))}/examples/digits$"):
        openvta.demo.digits_folder()
