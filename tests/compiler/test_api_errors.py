"""What used to give a silent wrong answer or an unrelated exception now gives a clear error."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import openvta
from openvta.compiler import LoweringError, elementwise
from openvta.compiler.limits import DRAM_LIMIT_BYTES
from openvta.isa import preset

TINY = preset("tiny")
CONV: dict[str, Any] = dict(ci=8, co=8, hw=8, kernel=3, pad=1, config="tiny")


def _conv_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = rng.integers(-128, 128, (1, 8, 8, 8), dtype=np.int8)
    data.flat[:2] = (-128, 127)  # the full int8 range, whatever the draw
    return {"data": data, "weight": rng.integers(-128, 128, (8, 8, 3, 3), dtype=np.int8),
            "bias": rng.integers(-100, 100, (8,), dtype=np.int32)}


@pytest.mark.parametrize("shift", [32, 40, 63, 64, 99, -1])
def test_a_shift_the_alu_cannot_do_is_refused(shift: int) -> None:
    """SHR takes a signed 6-bit amount: 32..63 would shift left, numpy would not."""
    with pytest.raises(ValueError, match=rf"^conv2d shift must be an integer in 0\.\.31 or None, "
                                         rf"not {shift}$"):
        openvta.operator("conv2d", **CONV, shift=shift)
    with pytest.raises(ValueError, match=rf"^dense shift must be an integer in 0\.\.31 or None, not {shift}$"):
        openvta.compile("dense", batch=1, in_features=4, out_features=4, shift=shift)


@pytest.mark.parametrize("shift", [0, 1, 30, 31])
def test_every_accepted_shift_agrees_with_the_reference_at_the_int32_extremes(shift: int) -> None:
    op = elementwise(TINY, batch=2, channels=4, shift=shift)
    extremes = np.array([[-(2**31), -(2**31) + 1, -1, 0], [1, 2**30, 2**31 - 2, 2**31 - 1]], np.int32)
    out = openvta.simulate(op.build({"data": extremes}))["out"]
    np.testing.assert_array_equal(out, op.reference({"data": extremes}))


def test_inputs_outside_the_dtype_are_refused_not_wrapped() -> None:
    op = openvta.operator("conv2d", **CONV)
    inputs = _conv_inputs()
    wide = inputs["data"].astype(np.int32) * 10
    message = r"^input 'data' holds values in \[-1280, 1270\], outside int8's \[-128, 127\]$"
    with pytest.raises(ValueError, match=message):
        op.build({**inputs, "data": wide})
    with pytest.raises(ValueError, match=message):
        op.reference({**inputs, "data": wide})
    with pytest.raises(ValueError, match=r"^input 'data' holds values in \[0, 255\], outside int8's"):
        op.build({**inputs, "data": inputs["data"].view(np.uint8)})
    program = op.build(inputs)
    with pytest.raises(ValueError, match=message):
        openvta.simulate(program, {"data": wide})
    with pytest.raises(ValueError, match=r"^input 'bias' holds values in \[0, 2147483648\], outside "
                                         r"int32's \[-2147483648, 2147483647\]$"):
        op.build({**inputs, "bias": np.array([2**31] + [0] * 7, np.int64)})


def test_inputs_that_fit_are_accepted_in_any_integer_dtype_or_as_lists() -> None:
    op = openvta.operator("conv2d", **CONV)
    inputs = _conv_inputs()
    expected = op.reference(inputs)
    converted = {"data": inputs["data"].astype(np.int64), "weight": inputs["weight"].astype(np.int16),
                 "bias": inputs["bias"].tolist()}
    np.testing.assert_array_equal(op.reference(converted), expected)
    np.testing.assert_array_equal(openvta.simulate(op.build(converted))["out"], expected)
    small = np.abs(inputs["data"].astype(np.int16)).clip(0, 127).astype(np.uint8)
    np.testing.assert_array_equal(openvta.simulate(op.build({**inputs, "data": small}))["out"],
                                  op.reference({**inputs, "data": small.astype(np.int8)}))


def test_non_integer_inputs_are_refused() -> None:
    op = openvta.operator("conv2d", **CONV)
    inputs = _conv_inputs()
    with pytest.raises(TypeError, match=r"^input 'data' must be an array of integers, not of float64$"):
        op.build({**inputs, "data": inputs["data"].astype(np.float64)})
    with pytest.raises(TypeError, match=r"^input 'bias' must be an array of integers, not of <U1$"):
        op.reference({**inputs, "bias": list("abcdefgh")})
    with pytest.raises(ValueError, match=r"^input 'bias' must be a rectangular array of integers"):
        op.build({**inputs, "bias": [[1, 2], [3]]})
    with pytest.raises(ValueError, match=r"^input 'bias' must have shape \(8,\), not \(7,\)$"):
        op.build({**inputs, "bias": [0] * 7})


def test_simulate_takes_a_path_and_names_the_outputs(tmp_path) -> None:
    op = openvta.operator("conv2d", **CONV)
    inputs = _conv_inputs()
    path = tmp_path / "t.npz"
    op.build(inputs).save(path)
    for program in (path, str(path)):
        result = openvta.simulate(program)
        np.testing.assert_array_equal(result["out"], op.reference(inputs))
    with pytest.raises(KeyError) as info:
        result["nope"]
    assert re.match(r"^the program has no output 'nope'; its outputs: out$", str(info.value))


def test_a_layer_and_its_shape_are_not_both_given() -> None:
    with pytest.raises(ValueError, match=r"^layer resnet18\.C5 fixes n, ci, co, hw, kernel, pad, stride; "
                                         r"give either layer= or the shape, not both \(hw=8\)$"):
        openvta.operator("conv2d", layer="resnet18.C5", hw=8)
    op = openvta.operator("conv2d", layer="resnet18.C5", vthreads=2, shift=6, config="small")
    assert (op.params["hw"], op.params["vthreads"], op.params["shift"]) == (28, 2, 6)
    with pytest.raises(ValueError, match=r"^workload must be one of C1, .* not 'resnet18\.C99'$"):
        openvta.operator("conv2d", layer="resnet18.C99")
    with pytest.raises(ValueError, match=r"^elementwise has no named layers, not 'resnet18\.C5'$"):
        openvta.operator("elementwise", layer="resnet18.C5")


def test_a_kernel_larger_than_the_padded_input() -> None:
    with pytest.raises(ValueError, match=r"^conv2d kernel must fit the padded input "
                                         r"\(hw \+ 2\*pad = 2 \+ 2\*0 = 2\), not 5$"):
        openvta.operator("conv2d", hw=2, ci=4, co=4, kernel=5)
    with pytest.raises(ValueError, match=r"^conv2d pad must be less than the kernel \(3\), not 3$"):
        openvta.operator("conv2d", hw=4, ci=4, co=4, kernel=3, pad=3)


def test_tensors_that_cannot_fit_dram_are_refused_before_planning() -> None:
    with pytest.raises(LoweringError, match=rf"^conv2d: the program needs at least 4297328640 bytes of "
                                            rf"DRAM \(data 2\.0 GiB, weight 2\.2 MiB, bias 2\.0 KiB, out "
                                            rf"2\.0 GiB\), more than the {DRAM_LIMIT_BYTES} bytes "
                                            rf"\(4\.0 GiB\) that 32-bit DRAM addresses reach$"):
        openvta.operator("conv2d", hw=2048, ci=512, co=512, kernel=3, pad=1)
    with pytest.raises(LoweringError, match=r"^dense: the program needs at least \d+ bytes of DRAM"):
        openvta.operator("dense", batch=1 << 16, in_features=1 << 16, out_features=16)


def test_a_program_of_too_many_instructions_is_refused_before_code_generation() -> None:
    op = openvta.operator("conv2d", hw=32, ci=8, co=8, kernel=3, pad=1, config="tiny")
    with pytest.raises(LoweringError, match=r"^check size: the program would have at least \d+ "
                                            r"instructions, more than max_insns=100; use a smaller shape "
                                            r"or larger tiles, or raise max_insns$"):
        op.build(max_insns=100)
    with pytest.raises(LoweringError, match=r"max_insns=100;"):
        openvta.compile(op, max_insns=100)
    assert op.build(max_insns=None).insn_count > 100


def test_compile_reports_progress_pass_by_pass_then_through_codegen() -> None:
    calls: list[tuple[str, int, int | None]] = []
    program = openvta.compile("conv2d", **CONV, vthreads=2, seed=0,
                              progress=lambda *call: calls.append(call))
    passes = [c for c in calls if c[0] != "codegen"]
    assert [c[0] for c in passes] == ["lower_schedule", *(step.name for step in openvta.compiler.PASSES)]
    assert [c[1] for c in passes] == list(range(len(passes))) and {c[2] for c in passes} == {len(passes)}
    codegen = [c for c in calls if c[0] == "codegen"]
    done = [c[1] for c in codegen]
    total = codegen[0][2]
    assert done[0] == 0 and done[-1] == total and done == sorted(done) and len(codegen) <= 1002
    assert calls[: len(passes)] == passes and 0 < total <= program.insn_count


def test_compile_takes_parameters_only_with_a_name() -> None:
    op = openvta.operator("conv2d", **CONV)
    with pytest.raises(TypeError, match=r"^compile takes operator parameters with an operator name, "
                                        r"not with an Operator \(vthreads\)$"):
        openvta.compile(op, vthreads=2)
