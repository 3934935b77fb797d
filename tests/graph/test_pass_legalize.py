"""legalize: a BatchNormalization as a depthwise Conv, grouped Convs dense, products in the
accelerator's forms (a canonical Gemm), a stem's windows packed into channels, each for its
configuration; its steps, one pipeline step each."""

from __future__ import annotations

import numpy as np
import pytest
from graphs import RNG, build, node

from openvta.graph.execute import execute
from openvta.graph.ir import Graph, Op, RequantMode
from openvta.graph.passes.canonicalize import canonicalize
from openvta.graph.passes.legalize import (STEPS, LegalizeOptions, batch_norms_as_depthwise, dense_groups, legalize,
                                           pack_few_channels)
from openvta.graph.pipeline import FLOAT_STAGE, PASSES, CompileOptions
from openvta.graph.verify import verify_graph
from openvta.isa import preset


def _same_function(before: Graph, after: Graph, x: np.ndarray) -> None:
    expected, got = execute(before, {"x": x}), execute(after, {"x": x})
    for name in before.outputs:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5)


def _conv(channels: int, out: int, group: int = 1, kernel: int = 3, name: str = "c") -> Graph:
    weight = RNG.standard_normal((out, channels // group, kernel, kernel)).astype(np.float32)
    return build([node(name, Op.CONV, ("x", "w"), "y", group=group, pads=(1, 1, 1, 1), kernel_shape=(kernel, kernel))],
                 {"x": (2, channels, 6, 6)}, ("y",), {"w": weight})


def _x(graph: Graph) -> np.ndarray:
    shape = graph.types["x"].shape
    assert all(isinstance(d, int) for d in shape)
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("config", ["tiny", "small", "default"])
@pytest.mark.parametrize("mode", list(RequantMode))
@pytest.mark.parametrize("cpu_ops", [frozenset(), frozenset({Op.CONV}), frozenset({Op.GEMM})])
def test_options_follow_the_configuration_mode_and_placement(config: str, mode: RequantMode,
                                                             cpu_ops: frozenset[Op]) -> None:
    cfg = preset(config)
    options = LegalizeOptions.of(cfg, mode, cpu_ops, {"n1"})
    convs_on_cpu, exact = Op.CONV in cpu_ops, mode is RequantMode.EXACT
    assert options.block_in == (None if convs_on_cpu or exact else cfg.BLOCK_IN)
    assert options.grouped_block == (None if convs_on_cpu else cfg.BLOCK_IN)
    assert options.keep == {"n1"} and options.depthwise_batch_norms is not exact
    assert CompileOptions(cfg, mode, cpu_ops, (), frozenset({"n1"})).legalization == options


@pytest.mark.parametrize(("channels", "group", "dense"), [
    (6, 2, True),  # groups of 3 channels: 3 does not divide 16
    (8, 2, False),  # groups of 4: the grouped mapping's
    (8, 8, False),  # depthwise
    (2, 2, False),  # depthwise, 2 channels
    (48, 3, False),  # groups of 16: the block itself
    (40, 2, True),  # groups of 20
])
def test_a_grouped_conv_is_dense_where_the_grouped_mapping_cannot_take_it(channels: int, group: int,
                                                                          dense: bool) -> None:
    g = _conv(channels, channels, group)
    legal = verify_graph(legalize(g, LegalizeOptions(grouped_block=16)))
    (conv,) = legal.nodes
    assert conv.attrs["group"] == (1 if dense else group)
    assert legal.constants[conv.inputs[1]].shape[1] == (channels if dense else channels // group)
    assert len(legal.notes) == dense
    if dense:
        assert legal.notes == (f"node c: a convolution of {group} groups as a dense one with block-diagonal "
                               f"weights ({group}x its MACs)",)
    _same_function(g, legal, _x(g))


@pytest.mark.parametrize("options", [LegalizeOptions(), LegalizeOptions(grouped_block=16, keep=frozenset({"c"})),
                                     LegalizeOptions(grouped_block=0)])
def test_grouped_convs_stay_without_a_block_or_when_kept_and_depthwise_always(options: LegalizeOptions) -> None:
    g, depthwise = _conv(6, 6, 2), _conv(6, 6, 6)
    assert dense_groups(g, options).nodes[0].attrs["group"] == (1 if options.grouped_block == 0 else 2)
    assert dense_groups(depthwise, options).nodes[0].attrs["group"] == 6


@pytest.mark.parametrize(("channels", "kernel", "block_in", "packed"), [
    (3, 3, 16, True), (1, 3, 4, True), (7, 3, 16, True),  # fewer than half the lanes
    (8, 3, 16, False), (2, 3, 4, False),  # half or more
    (3, 1, 16, False),  # a 1×1 kernel has no window to pack
])
def test_a_few_channel_conv_is_packed_into_channels(channels: int, kernel: int, block_in: int, packed: bool) -> None:
    g = _conv(channels, 5, kernel=kernel)
    legal = verify_graph(legalize(g, LegalizeOptions(block_in=block_in)))
    assert [n.op for n in legal.nodes] == ([Op.IM2COL, Op.CONV] if packed else [Op.CONV])
    if packed:
        im2col, conv = legal.nodes
        assert conv.name == "c" and conv.attrs["kernel_shape"] == (1, 1) and conv.attrs["pads"] == (0, 0, 0, 0)
        assert legal.types[im2col.outputs[0]].shape[1] == channels * kernel * kernel
        assert legal.notes == (f"node c: its {channels} input channels' {kernel}x{kernel} windows packed into "
                               f"{channels * kernel * kernel} channels on the host (im2col), then a 1x1 convolution",)
    _same_function(g, legal, _x(g))


def test_a_stem_stays_without_a_block_or_when_kept() -> None:
    g = _conv(3, 5)
    assert pack_few_channels(g, LegalizeOptions()) is g
    assert pack_few_channels(g, LegalizeOptions(block_in=16, keep=frozenset({"c"}))).nodes == g.nodes


def test_matmul_and_bias_add_become_a_canonical_gemm() -> None:
    consts = {"w": RNG.standard_normal((5, 3)).astype(np.float32),
              "b": RNG.standard_normal(3).astype(np.float32)}
    g = build([node("mm", Op.MATMUL, ("x", "w"), "m"), node("add", Op.ADD, ("m", "b"), "y")],
              {"x": ("N", 5)}, ("y",), consts)
    s = verify_graph(legalize(g))
    (gemm,) = s.nodes
    assert gemm.op is Op.GEMM and gemm.outputs == ("y",) and gemm.attrs["transB"] == 1
    assert s.constants[gemm.inputs[1]].shape == (3, 5)
    _same_function(g, s, RNG.standard_normal((4, 5)).astype(np.float32))


def test_gemm_alpha_beta_and_transposition_fold_into_constants() -> None:
    consts = {"w": RNG.standard_normal((5, 3)).astype(np.float32),
              "c": RNG.standard_normal((1, 3)).astype(np.float32)}
    g = build([node("g", Op.GEMM, ("x", "w", "c"), "y", alpha=0.5, beta=2.0)],
              {"x": ("N", 5)}, ("y",), consts)
    s = verify_graph(legalize(g))
    (gemm,) = s.nodes
    assert dict(gemm.attrs) == {"transB": 1}
    assert s.constants[gemm.inputs[2]].shape == (3,)
    _same_function(g, s, RNG.standard_normal((4, 5)).astype(np.float32))


def _batch_norm(name: str = "bn") -> Graph:
    c = 4
    consts = {"g": RNG.uniform(0.5, 2, c).astype(np.float32), "beta": RNG.standard_normal(c).astype(np.float32),
              "m": RNG.standard_normal(c).astype(np.float32), "v": RNG.uniform(0.1, 2, c).astype(np.float32)}
    return build([node("r", Op.RELU, ("x",), "a"), node(name, Op.BATCH_NORM, ("a", "g", "beta", "m", "v"), "y")],
                 {"x": (2, c, 3, 3)}, ("y",), consts)


def test_a_batch_norm_no_conv_precedes_is_a_depthwise_conv() -> None:
    g = _batch_norm()
    legal = verify_graph(legalize(g, LegalizeOptions(depthwise_batch_norms=True)))
    relu, conv = legal.nodes
    assert (conv.name, conv.op, conv.attrs["group"], conv.attrs["kernel_shape"]) == ("bn", Op.CONV, 4, (1, 1))
    assert legal.notes == ("node bn: a BatchNormalization as a 1x1 depthwise convolution (its per-channel affine "
                           "on the accelerator)",)
    _same_function(g, legal, _x(g))
    assert batch_norms_as_depthwise(g, LegalizeOptions()) is g


def test_legalize_runs_its_steps_in_order_keeping_the_notes_in_order() -> None:
    """A BatchNormalization made a depthwise Conv is left grouped (depthwise) and unpacked
    (1×1); a grouped stem is made dense first, then packed."""
    g = _conv(2, 6, group=2)
    legal = verify_graph(legalize(g, LegalizeOptions(block_in=16, grouped_block=16)))
    assert [n.op for n in legal.nodes] == [Op.IM2COL, Op.CONV]  # (groups of 1 channel in, 3 out: not depthwise)
    assert [note.split(":")[0] for note in legal.notes] == ["node c", "node c"] and "groups" in legal.notes[0]
    _same_function(g, legal, _x(g))
    bn = legalize(_batch_norm(), LegalizeOptions(block_in=16, grouped_block=16, depthwise_batch_norms=True))
    assert [n.op for n in bn.nodes] == [Op.RELU, Op.CONV] and len(bn.notes) == 1


def test_each_step_is_a_named_pipeline_step_after_canonicalize() -> None:
    names = [name for name, _ in PASSES]
    steps = [name for name in names if name.startswith("legalize: ")]
    assert steps == [f"legalize: {step.__name__.replace('_', ' ')}" for step in STEPS] + ["legalize: drop unread"]
    assert names[names.index(steps[0]):names.index(steps[-1]) + 1] == steps
    assert names[names.index(steps[0]) - 1].startswith("canonicalize: ")
    assert steps[-1] == FLOAT_STAGE and names[names.index(FLOAT_STAGE) + 1] == "correct biases"


@pytest.mark.parametrize("mode", [RequantMode.FIXED, RequantMode.EXACT])
def test_the_pipelines_float_steps_are_canonicalize_then_legalize(mode: RequantMode) -> None:
    """Step by step, verified after each, the pipeline's float graph is ``legalize`` of
    ``canonicalize`` (no value both drop here: what nobody reads is dropped once)."""
    c = 6
    consts = {"w": RNG.standard_normal((c, 3, 3, 3)).astype(np.float32), "k": np.full((c, 1, 1), 2.0, np.float32),
              "w2": RNG.standard_normal((c, 3, 1, 1)).astype(np.float32),
              **{k: RNG.uniform(0.5, 1.5, c).astype(np.float32) for k in ("g", "beta", "m", "v")}}
    g = build([node("i", Op.IDENTITY, ("x",), "xi"), node("stem", Op.CONV, ("xi", "w"), "s", pads=(1, 1, 1, 1)),
               node("scale", Op.MUL, ("s", "k"), "sk"), node("relu", Op.RELU, ("sk",), "r"),
               node("bn", Op.BATCH_NORM, ("r", "g", "beta", "m", "v"), "n"),
               node("grouped", Op.CONV, ("n", "w2"), "y", group=2)], {"x": (1, 3, 5, 5)}, ("y",), consts)
    options = CompileOptions(preset("default"), mode, frozenset(), ())
    graph, names = g, [name for name, _ in PASSES]
    for _, step in PASSES[names.index("infer shapes") + 1:names.index(FLOAT_STAGE) + 1]:
        graph = verify_graph(step(graph, options))
    expected = legalize(canonicalize(g), options.legalization)
    assert graph.nodes == expected.nodes and graph.notes == expected.notes
    assert graph.constants.keys() == expected.constants.keys() and graph.types == expected.types
    assert all(np.array_equal(graph.constants[k], expected.constants[k]) for k in graph.constants)
    assert [n.op for n in graph.nodes] == ([Op.IM2COL] if mode is RequantMode.FIXED else []) + \
        [Op.CONV, Op.RELU] + ([Op.CONV] if mode is RequantMode.FIXED else [Op.BATCH_NORM]) + [Op.CONV]
    _same_function(g, graph, _x(g))
