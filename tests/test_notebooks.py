"""The notebooks run top to bottom, and their key outputs say what the docs claim."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).parent.parent / "notebooks"


def _execute(name: str, workdir: Path) -> str:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(notebook, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(workdir)}}).execute()
    text = []
    images = 0
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            text.append(output.get("text", ""))
            data = output.get("data", {})
            text.append(data.get("text/plain", ""))
            images += "image/png" in data
    return "\n".join(text) + f"\n[{images} images]"


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_committed_with_outputs(path: Path) -> None:
    """They read without running: every code cell was executed, figures are saved."""
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(cell.execution_count for cell in code), \
        f"{path.name} is committed unexecuted: run `make notebooks`"
    outputs = [out for cell in code for out in cell.get("outputs", [])]
    assert not [out for out in outputs if out.get("output_type") == "error"]
    assert any("image/png" in out.get("data", {}) for out in outputs)


def test_latency_hiding(tmp_path: Path) -> None:
    out = _execute("latency_hiding.ipynb", tmp_path)
    assert "utilization rises with latency hiding: True" in out
    assert "every layer gains from latency hiding: True" in out
    assert "v2 beats vta on every layer and thread count: True" in out  # the default, machine v2, beside VTA's
    assert "[3 images]" in out  # two timelines and the utilization bars
    assert (tmp_path / "timeline_C8_2.png").read_bytes()[:4] == b"\x89PNG"


def test_roofline(tmp_path: Path) -> None:
    out = _execute("roofline.ipynb", tmp_path)
    assert "no layer exceeds its roofline: True" in out
    assert "a wider bus never makes the network slower: True" in out
    assert "on v2 no layer exceeds its roofline: True" in out
    assert "v2 closer to the roofline on every layer: True" in out
    assert "[2 images]" in out


def test_resnet18(tmp_path: Path) -> None:
    out = _execute("resnet18.ipynb", tmp_path)
    assert "equal to the integer reference: True" in out
    assert "accelerator cycles = " in out and "where the time goes:" in out
    assert "every layer at 75 % or more with either thread count: True" in out  # machine v2, the default
    assert "no kernel exceeds its roofline: True" in out
    assert "the region's program alone takes as many cycles as its kernels in the network run: True" in out
    assert "vta equal to the integer reference: True" in out and "v2 takes fewer cycles: True" in out
    assert "[4 images]" in out  # utilization bars, roofline, kernel timeline, module timeline
    assert (tmp_path / "timeline_resnet18.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.rtl
def test_rtl_vs_model(tmp_path: Path) -> None:
    out = _execute("rtl_vs_model.ipynb", tmp_path)
    assert "every program's final DRAM equals the functional simulator's" in out
    largest = float(out.split("largest cycle-count error: ")[1].split("%")[0])
    assert largest <= 5.0
