"""CompiledModel.run: the digits CNN and a residual block on every preset and back end, equal to
model.reference bit for bit, with the cycle report; random placements; the model file keeps
the programs; every error is one line."""

from __future__ import annotations

from typing import Any

import io
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from board_model import ModelBoard
from graphs import residual_graph
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openvta.graph.errors import ExecutionError, ModelError
from openvta.graph.ir import Device
from openvta.graph.compiled_model import CompiledModel, ModelOutputs, load_model
from openvta.graph.pipeline import compile_model as compile_graph
from openvta.sim.cycle import simulate_cycles

DIGITS = Path(__file__).resolve().parents[2] / "examples" / "digits"
sys.path.insert(0, str(DIGITS))
from digits_data import load_split  # noqa: E402

MODEL = DIGITS / "digits.onnx"
PRESETS = ("tiny", "small", "default")


def compile_model(*args: Any, **kwargs: Any) -> CompiledModel:
    """The graph level's ``compile_model`` with symmetric activations: these tests reason about
    the integer graph's ReLU nodes and kernel names (at the default zero points a ReLU is the
    requantization's clip, no node of its own; tests/graph/test_zero_points.py)."""
    return compile_graph(*args, **{"activations": "symmetric", **kwargs})


@pytest.fixture(scope="module")
def split() -> tuple[np.ndarray, ...]:
    return load_split()


@pytest.fixture(scope="module")
def digits(split) -> dict[str, CompiledModel]:
    return {name: compile_model(MODEL, split[0], config=name) for name in PRESETS}


def _check(out: ModelOutputs, expected: dict[str, np.ndarray], timed: str | None) -> None:
    """Outputs equal to ``expected``; cycles per kernel (``timed="kernels"``: a back end that
    times every instruction), per region only (``"regions"``: one that counts), or none."""
    assert set(out) == set(expected)
    for name, value in expected.items():
        assert out[name].dtype == np.float32 and np.array_equal(out[name], value), name
    accel = [k for k in out.report.kernels if k.placement is Device.ACCEL]
    assert accel
    if timed == "kernels":
        cycles = [k.cycles or 0 for k in accel]
        assert out.report.cycles == sum(cycles) and min(cycles) > 0
        assert all(0 < (k.utilization or 0) <= 1 for k in accel)
        return
    assert all(k.cycles is None and k.utilization is None and k.ideal_cycles is None for k in accel)
    if timed == "regions":
        assert out.report.cycles == sum(r.cycles or 0 for r in out.report.regions) > 0
    else:
        assert out.report.cycles is None


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("backend", ["functional", "cycle"])
def test_digits_run_equals_the_reference(digits, split, preset: str, backend: str) -> None:
    model, x = digits[preset], split[2][:30]
    assert [k.operator for r in model.graph.regions for k in r.kernels] == ["conv2d", "conv2d", "dense"]
    out = model.run(x, backend=backend)
    _check(out, model.reference(x), "kernels" if backend == "cycle" else None)
    names = [k.name for k in out.report.kernels if k.placement is Device.ACCEL]
    assert names == ["conv1+conv1.requantize+relu1", "conv2+conv2.requantize+relu2", "fc+fc.requantize"]


def test_pow2_and_batches_of_any_size(split) -> None:
    model = compile_model(MODEL, split[0][:128], config="tiny", quantize="pow2")
    for count in (0, 1, 5):
        x = split[2][:count]
        _check(model.run(x, backend="cycle"), model.reference(x), "kernels" if count > 0 else None)


@pytest.mark.rtl
@pytest.mark.slow
def test_digits_on_the_rtl(digits, split) -> None:
    model, x = digits["tiny"], split[2][:3]
    out = model.run(x, backend="rtl")
    _check(out, model.reference(x), "regions")
    modelled = model.run(x, backend="cycle").report.cycles
    assert abs(out.report.cycles - modelled) <= 0.1 * modelled  # the model is calibrated on it


def test_digits_on_a_board_over_the_uart_bridge(digits, split) -> None:
    """The board back end against a Python model of the board running the cycle model: the
    report holds what the board's counters read, per region, and no figure of the cycle
    model's own (per-kernel cycles, utilization, the ideal bound) stands in for the rest."""
    model, x = digits["tiny"], split[2][:3]
    port = ModelBoard(model.config, mem_bytes=1 << 16, finish_after=1,
                      run=simulate_cycles)
    out = model.run(x, backend="board", port=port)
    _check(out, model.reference(x), "regions")
    assert port.starts == 2 * len(x)  # one program run per region and sample
    modelled = model.run(x, backend="cycle").report
    assert out.report.cycles == modelled.cycles
    assert [(r.backend, r.runs, dict(r.counters)) for r in out.report.regions] == [
        ("board", r.runs, dict(r.counters)) for r in modelled.regions]
    text = out.report.format()
    assert "measured by the board back end, per region" in text
    assert "where the time goes: accelerator compute and memory not timed per instruction" in text
    rows = text.splitlines()[1:1 + len(out.report.kernels)]
    accel = [row for row in rows if " accel " in f"{row} "]
    assert len(accel) == 3  # no cycles, utilization, ideal, bound or DRAM cell in their rows
    assert all(row.split()[-1] == "accel" for row in accel)


def test_a_board_that_counts_only_cycles_reports_only_cycles(digits, split) -> None:
    """An image built with ``--counters cycles``: its regions hold the cycles counter and
    nothing else, every other figure shows as missing, none as 0."""
    model, x = digits["tiny"], split[2][:1]
    port = ModelBoard(model.config, mem_bytes=1 << 16, finish_after=1, run=simulate_cycles,
                      counters="cycles")
    out = model.run(x, backend="board", port=port)
    assert [set(r.counters) for r in out.report.regions] == [{"cycles"}] * len(model.graph.regions)
    rows = out.report.format().splitlines()
    at = next(i for i, line in enumerate(rows) if line.startswith("measured by the board"))
    for line in rows[at + 2:at + 2 + len(model.graph.regions)]:
        assert line.split()[3:] == ["-"] * 6


def test_a_functional_run_reports_no_time(digits, split) -> None:
    model, x = digits["tiny"], split[2][:2]
    out = model.run(x, backend="functional")
    _check(out, model.reference(x), None)
    assert all(r.backend == "functional" and "cycles" not in r.counters and r.counters["macs"] > 0
               for r in out.report.regions)
    assert "total: accelerator cycles not counted on this back end" in out.report.format()


@pytest.mark.parametrize("preset", PRESETS)
def test_a_residual_block_runs_as_one_program(preset: str) -> None:
    x = np.random.default_rng(2).standard_normal((5, 16, 4, 4)).astype(np.float32)
    for mode in ("fixed", "pow2"):
        model = compile_model(residual_graph(), x, config=preset, quantize=mode)
        assert len(model.graph.regions) == 1 and len(model.graph.regions[0].kernels) == 3
        out = model.run(x, backend="cycle")
        _check(out, model.reference(x), "kernels")
        assert len(np.unique(out["y"])) > 10  # not saturated: the numbers matter


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_placements_of_accelerator_nodes_give_identical_outputs(digits, split, data) -> None:
    base = digits["small"]
    capable = [n.name for n in base.graph.nodes if n.placement.device is Device.ACCEL]
    forced = data.draw(st.lists(st.sampled_from(capable), unique=True))
    model = compile_model(MODEL, split[0], config="small", cpu_nodes=forced)
    x = split[2][:4]
    expected = base.reference(x)
    assert np.array_equal(model.reference(x)["logits"], expected["logits"])
    assert np.array_equal(model.run(x)["logits"], expected["logits"])




def test_run_errors(digits, split) -> None:
    model = digits["tiny"]
    with pytest.raises(ValueError, match=r"^backend must be one of .*cycle.*, not 'fpga'$"):
        model.run(split[2][:2], backend="fpga")
    with pytest.raises(ValueError, match=r"^input 'image' must have shape \(N, 1, 8, 8\), not "
                                         r"\(2, 1, 7, 7\)$"):
        model.run(np.zeros((2, 1, 7, 7), np.float32))
    with pytest.raises(ValueError, match=r"^input 'image' must hold floating-point values, not int8$"):
        model.run(np.zeros((2, 1, 8, 8), np.int8))
    with pytest.raises(ValueError, match=r"^input names must be the model's inputs \(image\), not "
                                         r"'x'$"):
        model.run({"x": split[2][:2]})
    with pytest.raises(ValueError, match=r"^max_cycles must be a positive integer, not 0$"):
        model.run(split[2][:2], backend="cycle", max_cycles=0)
    region = model.graph.regions[0]
    broken = CompiledModel(model.graph.replace(regions=(replace(region, program=None),
                                                        model.graph.regions[1])),
                           model.float_graph, model.config, model.mode)
    with pytest.raises(ExecutionError, match=r"^region 0 has no program; compile the model again$"):
        broken.run(split[2][:2])


def _saved(model: CompiledModel) -> dict[str, np.ndarray]:
    buffer = io.BytesIO()
    model.save(buffer)
    return dict(np.load(io.BytesIO(buffer.getvalue()), allow_pickle=False))


def _load(entries: dict[str, np.ndarray]) -> CompiledModel:
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **entries)
    buffer.seek(0)
    return load_model(buffer)


def test_the_model_file_keeps_the_programs(digits, split) -> None:
    model, x = digits["tiny"], split[2][:6]
    entries = _saved(model)
    assert {k for k in entries if k.endswith(".program")} == {"int.r0.program", "int.r1.program"}
    loaded = _load(entries)
    assert loaded.graph.dump() == model.graph.dump()
    assert np.array_equal(loaded.run(x, backend="cycle")["logits"], model.reference(x)["logits"])
    entries["int.r1.program"] = entries["int.r1.program"][:100]
    with pytest.raises(ModelError, match=r"^model file integer graph region 1 program is malformed: "
                                         r"program file is not an openvta program "
                                         r"\(a truncated or damaged npz archive\)$"):
        _load(entries)


def test_a_program_for_another_configuration_is_refused(digits) -> None:
    entries = _saved(digits["tiny"])
    entries["int.r0.program"] = _saved(digits["small"])["int.r0.program"]
    with pytest.raises(ModelError, match=r"^model file integer graph holds an invalid program: "
                                         r"region 0 program is for the small configuration, the "
                                         r"model for tiny$"):
        _load(entries)
    header = json.loads(str(entries["header"]))
    header["graphs"]["int"]["regions"][0]["kernel_starts"] = [0]
    entries["header"] = np.array(json.dumps(header))
    entries["int.r0.program"] = _saved(digits["tiny"])["int.r0.program"]
    with pytest.raises(ModelError, match=r"^model file integer graph holds an invalid program: "
                                         r"region 0 program must have one increasing instruction "
                                         r"start per kernel below \d+, not \[0\]$"):
        _load(entries)
