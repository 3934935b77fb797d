"""The same tests for every registered operator: adding an operator to the registry adds them.

For each :class:`~openvta.compiler.ops.OperatorSpec`: random parameter sets (from each
parameter's ``sample`` range; random epilogues for an ``Epilogue`` parameter) either are
refused when the operator is declared, with a message naming it, or compile and match
the numpy reference exactly on the functional simulator (race checker on) and the cycle
model; every parameter's range is enforced
with its message; one small case runs on the RTL.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import openvta
import openvta.compiler
from openvta.compiler import LoweringError
from epilogue_strategies import epilogues
from openvta.compiler.epilogue import Epilogue
from openvta.compiler.ops import REGISTRY, OperatorSpec, Param
from openvta.compiler.ops.params import describe_params
from openvta.compiler.workloads import random_inputs
from openvta.isa import preset

SPECS = list(REGISTRY.values())
NAMES = list(REGISTRY)


def _value(param: Param) -> st.SearchStrategy:
    """Values of ``param`` for the tests: its sample range, None where accepted."""
    if param.kind is bool:
        values: st.SearchStrategy = st.booleans()
    elif param.kind is Epilogue:
        values = epilogues()
    elif param.sample is None:
        return st.just(param.default)
    elif param.kind is tuple:
        values = st.lists(st.integers(*param.sample), min_size=2, max_size=2).map(lambda v: tuple(sorted(v)))
    else:
        values = st.integers(*param.sample)
    return st.one_of(st.none(), values) if param.optional else values


@st.composite
def _case(draw: st.DrawFn, spec: OperatorSpec) -> tuple[str, dict]:
    config = draw(st.sampled_from(["tiny", "small", "default"]))
    return config, {p.name: draw(_value(p)) for p in spec.params
                    if p.sample is not None or p.kind in (bool, Epilogue)}


def _check_against_reference(spec: OperatorSpec, op: openvta.compiler.Operator, seed: int) -> None:
    inputs = spec.random_operands(op, seed)
    expected = op.reference(inputs)
    np.testing.assert_array_equal(spec.reference(inputs, op.params), expected)
    program = op.build(inputs)
    for backend in ("functional", "cycle"):
        np.testing.assert_array_equal(openvta.simulate(program, backend=backend)["out"], expected,
                                      err_msg=f"{backend} back end")


@pytest.mark.parametrize("name", NAMES)
def test_random_parameters_match_the_reference_on_every_simulator(name: str) -> None:
    spec = REGISTRY[name]

    @settings(max_examples=25, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
    @given(case=_case(spec), seed=st.integers(0, 2**16))
    def check(case: tuple[str, dict], seed: int) -> None:
        config, params = case
        note(f"{name}({params}) on {config}")
        try:
            op = spec.operator(config, **params)
        except ValueError as exc:  # a refusal names the operator
            assert re.match(rf"^(plan )?{name}\b", str(exc)), str(exc)
            assume(False)
        _check_against_reference(spec, op, seed)

    check()


@pytest.mark.parametrize("name", NAMES)
def test_the_example_matches_the_reference(name: str) -> None:
    spec = REGISTRY[name]
    _check_against_reference(spec, spec.operator("tiny", **spec.example), seed=1)


def _bad_values(param: Param) -> list[object]:
    if param.kind is bool:
        return [2, "yes"]
    if param.kind is tuple:
        low = -1 if param.low is None else param.low
        bad: list[object] = [(low + 1, low), (0,), "0,1"]
        if param.low is not None:
            bad.append((param.low - 1, 0))
        if param.high is not None:
            bad.append((0, param.high + 1))
        return bad
    if param.kind not in (int, object):  # a class: anything else is refused
        return ["SHR 1", 3]
    if param.kind is int:
        bad = [1.5, "8", True]
        if param.low is not None:
            bad.append(param.low - 1)
        if param.high is not None:
            bad.append(param.high + 1)
        if not param.optional:
            bad.append(None)
        return bad
    return []


_BAD = [(spec.name, param.name, value) for spec in SPECS for param in spec.params
        for value in _bad_values(param)]


@pytest.mark.parametrize(("name", "param", "value"), _BAD, ids=[f"{n}-{p}-{v!r}" for n, p, v in _BAD])
def test_a_bad_parameter_is_refused_naming_its_range(name: str, param: str, value: object) -> None:
    spec = REGISTRY[name]
    constraint = spec.param(param).constraint
    with pytest.raises(ValueError, match=rf"^{name} {param} must be {re.escape(constraint)}, "
                                         rf"not {re.escape(repr(value))}$"):
        spec.operator("tiny", **{**spec.example, param: value})


@pytest.mark.parametrize("name", NAMES)
def test_unknown_and_missing_parameters(name: str) -> None:
    spec = REGISTRY[name]
    with pytest.raises(TypeError, match=rf"^{name} has no parameter 'bogus' \(parameters: "
                                        rf"{', '.join(p.name for p in spec.params)}\)$"):
        spec.operator("tiny", **spec.example, bogus=1)
    required = [p.name for p in spec.params if p.required]
    with pytest.raises(TypeError, match=rf"^{name} needs {', '.join(required)}"):
        spec.operator("tiny")


@pytest.mark.parametrize("name", [s.name for s in SPECS if s.layers])
def test_a_layer_fixes_the_shape(name: str) -> None:
    spec = REGISTRY[name]
    layer = spec.layers[-1]
    assert spec.layer is not None
    shape = tuple(spec.layer(layer))
    # a layer gives every shape parameter but those whose default None means "as the others say"
    # (conv2d's w: square data)
    assert {p.name for p in spec.params if p.shape and p.name not in shape} <= \
        {p.name for p in spec.params if p.shape and p.optional and p.default is None}
    op = spec.operator("default", layer=layer, shift=4)
    assert op.params["shift"] == 4
    assert {k: op.params[k] for k in shape} == spec.layer(layer)
    with pytest.raises(ValueError, match=rf"^layer {re.escape(layer)} fixes {', '.join(shape)}; give "
                                         rf"either layer= or the shape, not both \({shape[0]}=3\)$"):
        spec.operator("default", layer=layer, **{shape[0]: 3})
    with pytest.raises(ValueError, match=r"must be one of"):
        spec.operator("default", layer="nope")


@pytest.mark.parametrize("name", NAMES)
def test_the_parameter_table(name: str) -> None:
    """Every parameter has a one-line help, its command-line options are distinct, and the
    factory is exported by openvta.compiler under the operator's name."""
    spec = REGISTRY[name]
    assert getattr(openvta.compiler, name) is spec.factory and name in openvta.compiler.__all__
    for param in spec.params:
        assert param.help and "\n" not in param.help, param.name
        assert param.default is not None or param.optional, param.name
    options = [p.option for p in spec.params if p.cli]
    assert len(options) == len(set(options))
    assert spec.summary and spec.example


def test_the_table_must_describe_exactly_the_factorys_keywords() -> None:
    def factory(cfg: object, *, size: int, depth: int = 2) -> None: ...

    with pytest.raises(TypeError, match=r"^factory's parameter table must describe exactly its "
                                        r"keywords \(undescribed: \['depth'\], unknown: \['width'\]\)$"):
        describe_params(factory, Param("size", "the size"), Param("width", "the width"))
    size, depth = describe_params(factory, Param("size", "the size"), Param("depth", "d", low=1))
    assert (size.required, size.kind, depth.default, depth.constraint) == (True, int, 2, "a positive integer")


def test_benchmark_operands_are_the_workloads_operands() -> None:
    """``openvta compile --seed`` draws what ``workloads.random_inputs`` draws."""
    op = openvta.operator("conv2d", layer="resnet18.C11")
    drawn = REGISTRY["conv2d"].random_operands(op, 3)
    expected = random_inputs("C11", seed=3)
    assert all(np.array_equal(drawn[k], expected[k]) for k in ("data", "weight", "bias"))


def test_optional_parameters_accept_none_and_defaults_come_from_the_signature() -> None:
    spec = REGISTRY["conv2d"]
    assert spec.param("shift").default == 8 and spec.param("clip").default == (0, 127)
    op = spec.operator("tiny", **spec.example, shift=None, clip=None)
    assert (op.params["shift"], op.params["clip"]) == (None, None)
    assert replace(spec.param("shift"), optional=False).constraint == "an integer in 0..31"


@pytest.mark.parametrize("config", ["tiny", "small", "default", "v2"])
@pytest.mark.parametrize("name", NAMES)
def test_the_default_plan_is_the_plan_spaces_and_fits(name: str, config: str) -> None:
    """The default plan of a kernel (the graph level's) is its plan space's choice, which its
    checks take; without machine v2's drain it is the factory's own (one thread)."""
    spec, cfg = REGISTRY[name], preset(config)
    knobs = spec.default_plan(cfg, spec.example)
    full = spec.resolve(None, spec.example)
    assert knobs is not None and knobs == spec.plans.default(cfg, spec.operator(cfg, **full).params)
    op = spec.operator(cfg, **full, **spec.plan_kwargs(knobs))
    assert spec.plan_refusals(op) == [] and spec.plans.of_operator(op) == knobs
    own = spec.plans.of_operator(spec.operator(cfg, **full))
    if not cfg.has_drain and own is not None:
        assert knobs == own


def test_a_default_plan_the_checks_refuse_leaves_the_factory_to_plan() -> None:
    spec = REGISTRY["conv2d"]
    refusing = replace(spec, plans=replace(spec.plans, check=lambda cfg, params, knobs: ["thread split: uneven"]))
    assert refusing.default_plan(preset("tiny"), spec.example) is None
    huge = {"ci": 4, "co": 4, "hw": 24, "kernel": 24}  # one 24x24 window overflows tiny's inp and wgt buffers
    assert spec.default_plan(preset("tiny"), huge) is None
    with pytest.raises(LoweringError, match=r"^plan conv2d: no tiling of this conv2d fits the buffers with 1 "
                                            r"virtual thread: inp buffer overflow: "):
        spec.operator("tiny", **huge)


@pytest.mark.rtl
@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_the_example_on_the_rtl(name: str) -> None:
    spec = REGISTRY[name]
    op = spec.operator(preset("tiny"), **spec.example)
    inputs = spec.random_operands(op, 2)
    result = openvta.simulate(op.build(inputs), backend="rtl")
    np.testing.assert_array_equal(result["out"], op.reference(inputs))
