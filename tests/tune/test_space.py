"""Schedule spaces: ids, validity reasons, the planners' choices, errors."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

import openvta
from openvta import tune
from openvta.compiler.ops import REGISTRY
from openvta.compiler.ops.conv2d import Conv2dPlan, check_conv2d_plan
from openvta.isa import preset

SMALL_CONV: dict[str, Any] = {"hw": 8, "ci": 16, "co": 16, "kernel": 3, "pad": 1}


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_registry_operator_has_a_space_whose_ids_round_trip(name: str) -> None:
    space = tune.space(name, config="tiny", **REGISTRY[name].example)
    values = [knob.values for knob in space.knobs]
    combos = [dict(zip([k.name for k in space.knobs], combo)) for combo in itertools.product(*values)]
    assert len(space) == len(combos)
    ids = sorted(space.index_of(knobs) for knobs in combos)
    assert ids == list(range(len(space)))
    for index in range(len(space)):
        assert space.index_of(space.get(index)) == index


def test_the_first_knob_is_the_fastest_digit() -> None:
    space = tune.space("dense", layer="dense_1x16x16", config="tiny")
    assert [(k.name, k.values) for k in space.knobs] == [
        ("nb", (1,)), ("ob", (1, 2, 4)), ("kb", (1, 2, 4)), ("vthreads", (1, 2, 3, 4))]
    assert space.get(0) == {"nb": 1, "ob": 1, "kb": 1, "vthreads": 1}
    assert space.get(1) == {"nb": 1, "ob": 2, "kb": 1, "vthreads": 1}
    assert space.get(3) == {"nb": 1, "ob": 1, "kb": 2, "vthreads": 1}
    assert space.get(9) == {"nb": 1, "ob": 1, "kb": 1, "vthreads": 2}


def test_tile_sizes_include_non_divisors_and_steps_divide() -> None:
    space = tune.space("conv2d", layer="resnet18.C5", config="default")
    knobs = {k.name: k.values for k in space.knobs}
    assert knobs["yb"] == (1, 2, 3, 4, 5, 6, 7, 10, 14, 28)  # 28 rows: 3, 5, 6 leave tail tiles
    assert knobs["icb"] == (1, 2, 4, 8)
    assert knobs["vthreads"] == (1, 2, 3, 4) and knobs["split"] == ("co", "y")


def test_valid_count_and_reasons_agree_with_check_on_every_configuration() -> None:
    space = tune.space("conv2d", config="tiny", **SMALL_CONV)
    reasons = [space.check(i) for i in range(len(space))]
    assert space.valid_count() == sum(not r for r in reasons) == len(space.valid_indices())
    expected: dict[str, int] = {}
    for found in reasons:
        for kind in {r.split(":")[0] for r in found}:
            expected[kind] = expected.get(kind, 0) + 1
    assert space.invalid_reasons() == expected
    assert set(expected) == {"thread split", "duplicate", "inp buffer overflow", "wgt buffer overflow",
                             "acc buffer overflow"}


def test_the_reasons_are_the_planners_own() -> None:
    space = tune.space("conv2d", config="tiny", **SMALL_CONV)
    cfg = preset("tiny")
    for index in range(0, len(space), 7):
        knobs = space.get(index)
        if knobs["vthreads"] == 1 and knobs["split"] == "y":
            assert space.check(index)[0] == "duplicate: one thread splits nothing (the same as split=co)"
            continue
        assert space.check(index) == check_conv2d_plan(cfg, 1, 16, 16, 8, 3, 1, 1, Conv2dPlan(**knobs),
                                                       epilogue=openvta.operator("conv2d", config="tiny",
                                                                                 **SMALL_CONV).epilogue)


def test_a_refused_configuration_says_why() -> None:
    space = tune.space("conv2d", config="tiny", **SMALL_CONV)
    index = space.index_of({"cob": 4, "yb": 8, "xb": 8, "icb": 4, "vthreads": 2, "split": "co"})
    assert space.check(index) == [
        "thread split: 2 threads must divide the whole tiles of co (4 in tiles of 4)",
        "inp buffer overflow: 2 threads × 400 = 800 entries > 256",
        "wgt buffer overflow: 2 threads × 144 = 288 entries > 256",
        "acc buffer overflow: 2 threads × 260 = 520 entries > 256"]


def test_a_kernel_with_too_many_micro_ops_is_refused() -> None:
    space = tune.space("conv2d", layer="resnet18.C2", config="tiny")
    index = space.index_of({"cob": 8, "yb": 8, "xb": 8, "icb": 8, "vthreads": 1, "split": "co"})
    # the two largest loops fold into the instruction; 8 × 8 × 3 × 3 micro-ops remain
    assert space.check(index)[-1] == "micro-op buffer: 576 micro-ops > 256 (half the buffer)"


@pytest.mark.parametrize("name", list(REGISTRY))
def test_the_default_configuration_is_the_planners_choice(name: str) -> None:
    space = tune.space(name, config="tiny", **REGISTRY[name].example)
    op = openvta.operator(name, config="tiny", **REGISTRY[name].example)
    index = space.default_index()
    assert index is not None and not space.check(index)
    assert space.operator_for(index).plan == op.plan
    if name == "elementwise":
        assert space.get(index)["block"] == 3  # every channel tile in one step


def test_the_elementwise_space_has_block_and_threads() -> None:
    space = tune.space("elementwise", batch=2, channels=64, shift=4, config="tiny")
    assert [(k.name, k.values) for k in space.knobs] == [("block", (1, 2, 4, 8, 16)), ("vthreads", (1, 2, 3, 4))]
    assert space.valid_count() == 12
    assert space.invalid_reasons() == {"thread split": 8}


def test_the_kernel_key_names_operator_shape_epilogue_and_hardware() -> None:
    space = tune.space("conv2d", layer="resnet18.C5", config="default", shift=6)
    assert space.kernel.startswith("conv2d(n=1, ci=128, co=128, hw=28, kernel=3, pad=1, stride=1; "
                                   "SHR 6, ADD bias[c], MIN 127, MAX 0) on v2@")  # default is v2, by its own name
    assert space.kernel == tune.kernel_key(openvta.operator("conv2d", layer="resnet18.C5", shift=6))


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: tune.space("pool"), ValueError, rf"^operator must be one of {', '.join(REGISTRY)}, not 'pool'$"),
    (lambda: tune.space("conv2d", layer="resnet18.C5", vthreads=2), ValueError,
     r"^vthreads is a knob of the conv2d space, not a parameter \(knobs set vthreads, plan\)$"),
    (lambda: tune.space("elementwise", batch=1, channels=4, shift=1, block=1), ValueError,
     r"^block is a knob of the elementwise space, not a parameter \(knobs set block, vthreads\)$"),
    (lambda: tune.space("conv2d", layer="resnet18.C5", epilogue=object()), ValueError,
     r"^tune.space takes no epilogue \(records hold JSON parameters\), not <object object at .*>$"),
    (lambda: tune.space("conv2d", layer="resnet18.C5", hw=3), ValueError,
     r"^layer resnet18.C5 fixes n, ci, co, hw, kernel, pad, stride; give either layer= or the shape, "
     r"not both \(hw=3\)$"),
    (lambda: tune.space("conv2d", hw=8), TypeError, r"^conv2d needs ci, co, kernel \(or layer=, one of .*\)$"),
    (lambda: tune.space("conv2d", layer="resnet18.C5", shift=99), ValueError,
     r"^conv2d shift must be an integer in 0\.\.31 or None, not 99$"),
    (lambda: tune.space("conv2d", layer="resnet18.C5", colour=1), TypeError,
     r"^conv2d has no parameter 'colour' \(parameters: .*\)$"),
    (lambda: tune.space("elementwise", layer="x", batch=1), ValueError,
     r"^elementwise has no named layers, not 'x'$"),
])
def test_space_errors_are_one_line(call: Callable[[], object], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def test_ids_and_knobs_out_of_range_are_refused() -> None:
    space = tune.space("dense", layer="dense_1x16x16", config="tiny")
    with pytest.raises(ValueError, match=r"^configuration id must be an integer in 0\.\.35, not 36$"):
        space.get(36)
    with pytest.raises(ValueError, match=r"^configuration id must be an integer in 0\.\.35, not True$"):
        space.get(True)
    with pytest.raises(ValueError, match=r"^knob ob must be one of 1, 2, 4, not 3$"):
        space.index_of({"nb": 1, "ob": 3, "kb": 1, "vthreads": 1})
    with pytest.raises(ValueError, match=r"^a configuration of dense sets exactly the knobs nb, ob, kb, "
                                         r"vthreads, not nb$"):
        space.index_of({"nb": 1})


def test_an_operator_without_knobs_is_named() -> None:
    from openvta.tune.knobs import knobs_of

    with pytest.raises(ValueError, match=rf"^tune has no knobs for operator 'pool' \(operators: "
                                         rf"{', '.join(REGISTRY)}\)$"):
        knobs_of("pool")


def test_a_space_without_a_valid_configuration_cannot_be_tuned() -> None:
    space = tune.space("conv2d", config="tiny", hw=17, ci=4, co=4, kernel=17)  # 17 × 17 > 256 entries
    assert space.valid_count() == 0 and space.default_index() is None
    with pytest.raises(tune.TuneError, match=r"^no configuration of conv2d\(.*\) on tiny@[0-9a-f]{8} is valid: "
                                             r"\{'inp buffer overflow': 8, 'wgt buffer overflow': 8, "
                                             r"'thread split': 6, 'duplicate': 1\}$"):
        tune.tune(space)
