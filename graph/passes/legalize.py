"""Pass: legalize a canonical float graph — what the accelerator needs before quantization.

After :func:`~openvta.graph.passes.canonicalize.canonicalize`, in order: a
BatchNormalization no Conv precedes as a 1×1 depthwise Conv (the per-channel affine the
accelerator's depthwise conv2d runs with its requantization); a grouped Conv the
accelerator's grouped mapping cannot take as a dense one with block-diagonal weights;
products in the forms the accelerator's ``dense`` and ``batch_matmul`` take, a Gemm with
``transB=1`` of a 2-D activation and a 3-D MatMul (``legalize_dense``); a few-channel Conv's
kernel windows packed into channels (``Im2Col``, then a 1×1 Conv) for the accelerator's
input block; then what nobody reads dropped.  What to rewrite for is one
:class:`LegalizeOptions`, derived from the configuration, the requantization mode and the
CPU placement (``LegalizeOptions.of``); the notes say which node was rewritten, and how.
Each rewrite is one function of the graph and the options, listed in :data:`STEPS`; the
graph pipeline runs each as its own step, verified after it.

The rewrites do not depend on where a node is placed but for ``keep`` (``cpu_nodes``: those
stay as they are) and ``cpu_ops`` naming Conv (no Conv is rewritten but a
BatchNormalization's), so that the integer results do not depend on the placement.

Preconditions: a canonical float graph with types.
Postconditions: the same function (up to float rounding of the new weights); every
MatMul of a 2-D activation by a constant matrix a Gemm with ``transB=1`` and no ``alpha``
or ``beta``; with ``grouped_block``, every grouped Conv not in ``keep`` either depthwise, or
of groups of ``c`` channels in and out with ``c`` dividing ``grouped_block``; with
``block_in``, no Conv not in ``keep`` with a kernel larger than 1×1 whose input channels
fill less than half of ``block_in``.

Examples
--------
>>> import numpy as np
>>> from openvta.graph.ir import Attrs, DType, Graph, Node, Op, TensorType
>>> conv = Node("c", Op.CONV, ("x", "w"), ("y",), Attrs({"group": 2, "kernel_shape": (1, 1)}))
>>> g = Graph("g", ("x",), ("y",), (conv,), {"w": np.ones((6, 3, 1, 1), np.float32)},
...           {"x": TensorType((1, 6, 4, 4), DType.FLOAT32), "w": TensorType((6, 3, 1, 1), DType.FLOAT32),
...            "y": TensorType((1, 6, 4, 4), DType.FLOAT32)})
>>> legal = legalize(g, LegalizeOptions(grouped_block=16))
>>> legal.constants[legal.nodes[0].inputs[1]].shape, legal.notes
((6, 6, 1, 1), ('node c: a convolution of 2 groups as a dense one with block-diagonal weights (2x its MACs)',))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ..ir import Attrs, DType, Graph, Node, Op, TensorType
from ..rewrite import add_constant, fresh, prune, with_constants
from .canonicalize import batch_norm_affine
from .infer_shapes import infer_shapes
from .legalize_dense import dense_as_gemm, flatten_dense, flatten_heads
from .legalize_options import LegalizeOptions

__all__ = ["LegalizeOptions", "legalize", "batch_norms_as_depthwise", "dense_groups", "flatten_dense",
           "flatten_heads", "dense_as_gemm", "pack_few_channels", "STEPS"]


def batch_norms_as_depthwise(graph: Graph, options: LegalizeOptions) -> Graph:
    """``graph`` with, if ``options.depthwise_batch_norms``, each BatchNormalization of 4-D
    data left after canonicalization (DenseNet's after each Concat) as the per-channel affine
    it is: a 1×1 depthwise Conv whose weight is the gain and bias the shift, which the
    accelerator's depthwise conv2d runs with its requantization (and the ReLU after it);
    the notes say which.  Whatever the placement (the Conv keeps the node's name)."""
    if not options.depthwise_batch_norms:
        return graph
    constants, used = dict(graph.constants), graph.names()
    nodes, notes = [], list(graph.notes)
    for node in graph.nodes:
        params = node.inputs[1:]
        if node.op is not Op.BATCH_NORM or graph.types[node.inputs[0]].ndim != 4 \
                or not all(v in constants for v in params):
            nodes.append(node)
            continue
        gain, shift = batch_norm_affine(node, constants)
        weight = add_constant(f"{node.name}.weight", gain.reshape(-1, 1, 1, 1), constants, used)
        bias = add_constant(f"{node.name}.bias", shift, constants, used)
        attrs = Attrs({"kernel_shape": (1, 1), "strides": (1, 1), "pads": (0, 0, 0, 0), "group": len(gain)})
        nodes.append(Node(node.name, Op.CONV, (node.inputs[0], weight, bias), node.outputs, attrs))
        notes.append(f"node {node.name}: a BatchNormalization as a 1x1 depthwise convolution (its per-channel "
                     "affine on the accelerator)")
    return with_constants(graph, nodes, constants, notes)


def dense_groups(graph: Graph, options: LegalizeOptions) -> Graph:
    """``graph`` with each grouped Conv with constant weights that the accelerator's grouped
    mapping cannot take as a dense one whose weights are block-diagonal: the accelerator's
    conv2d runs it, doing ``group`` times its MACs (the zero blocks); the notes say which.
    The grouped mapping (``depthwise_conv2d``) takes depthwise convolutions and groups of
    ``c`` channels in and out with ``c`` dividing ``options.grouped_block``; with
    ``grouped_block=None``, and for the nodes in ``options.keep``, every one stays grouped."""
    block = options.grouped_block
    if block is None:
        return graph
    constants, used = dict(graph.constants), graph.names()
    nodes, notes = [], list(graph.notes)
    for node in graph.nodes:
        group = node.attrs.get("group", 1) if node.op is Op.CONV else 1
        weight = constants.get(node.inputs[1]) if node.op is Op.CONV else None
        if weight is None or not isinstance(group, int) or group == 1 or node.name in options.keep \
                or (weight.shape[1] == 1 and weight.shape[0] == group) \
                or (weight.shape[0] == weight.shape[1] * group and block and block % weight.shape[1] == 0):
            nodes.append(node)
            continue
        out_g, in_g = weight.shape[0] // group, weight.shape[1]
        dense = np.zeros((weight.shape[0], in_g * group, *weight.shape[2:]), np.float32)
        for g in range(group):
            dense[g * out_g:(g + 1) * out_g, g * in_g:(g + 1) * in_g] = weight[g * out_g:(g + 1) * out_g]
        name = add_constant(f"{node.name}.weight", dense, constants, used)
        attrs = dict(node.attrs)
        attrs["group"] = 1
        nodes.append(replace(node, inputs=(node.inputs[0], name, *node.inputs[2:]), attrs=Attrs(attrs)))
        notes.append(f"node {node.name}: a convolution of {group} groups as a dense one with block-diagonal "
                     f"weights ({group}x its MACs)")
    return with_constants(graph, nodes, constants, notes)


def pack_few_channels(graph: Graph, options: LegalizeOptions) -> Graph:
    """``graph`` with each Conv whose input channels fill less than half of the GEMM's
    ``options.block_in``-lane input block (a stem's 3; not grouped, constant weights, a
    kernel larger than 1×1, not in ``options.keep``) as an ``Im2Col`` of its data — each
    output pixel's kernel window packed into ``C·KH·KW`` channels — and a 1×1 Conv of the
    reshaped weights, which fills the blocks; the notes say which.  ``block_in=None``: none."""
    if options.block_in is None:
        return graph
    graph = infer_shapes(graph)
    constants, used = dict(graph.constants), graph.names()
    types = dict(graph.types)
    nodes, notes = [], list(graph.notes)
    for node in graph.nodes:
        weight = constants.get(node.inputs[1]) if node.op is Op.CONV else None
        channels = graph.types[node.inputs[0]].shape[1] if weight is not None else 0
        if weight is None or node.name in options.keep or node.attrs.get("group", 1) != 1 \
                or not isinstance(channels, int) or 2 * channels >= options.block_in or weight.shape[2:] == (1, 1):
            nodes.append(node)
            continue
        out_ch, _, kh, kw = weight.shape
        cols = fresh(f"{node.inputs[0]}.{node.name}.cols", used)
        used.add(cols)
        name = add_constant(f"{node.name}.weight", weight.reshape(out_ch, -1, 1, 1), constants, used)
        types[name] = TensorType(constants[name].shape, DType.FLOAT32)
        strides, pads = node.attrs.get("strides", (1, 1)), node.attrs.get("pads", (0, 0, 0, 0))
        assert isinstance(strides, tuple) and isinstance(pads, tuple)  # (the converter's normal form)
        attrs = {"kernel_shape": (kh, kw), "strides": strides, "pads": pads}
        nodes.append(Node(fresh(f"{node.name}.im2col", used), Op.IM2COL, (node.inputs[0],), (cols,), Attrs(attrs)))
        one = {**dict(node.attrs), "kernel_shape": (1, 1), "strides": (1, 1), "pads": (0, 0, 0, 0)}
        nodes.append(replace(node, inputs=(cols, name, *node.inputs[2:]), attrs=Attrs(one)))
        notes.append(f"node {node.name}: its {channels} input channels' {kh}x{kw} windows packed into "
                     f"{channels * kh * kw} channels on the host (im2col), then a 1x1 convolution")
    return infer_shapes(graph.replace(nodes=tuple(nodes), constants=constants, types=types, notes=tuple(notes)))


#: The rewrites for the accelerator, in the order :func:`legalize` and the pipeline run them.
STEPS: tuple[Callable[[Graph, LegalizeOptions], Graph], ...] = (
    batch_norms_as_depthwise,  # a BatchNormalization left → a 1×1 depthwise Conv
    dense_groups,  # grouped Convs the grouped mapping cannot take → dense, block-diagonal weights
    flatten_dense,  # an N-D activation's MatMul by a matrix → Reshape, 2-D MatMul, Reshape
    flatten_heads,  # two activations' N-D MatMul → Reshapes, the 3-D MatMul per head, Reshape
    dense_as_gemm,  # MatMul (+ bias Add) / Gemm → Gemm, weights (out, in)
    pack_few_channels,  # a stem's windows into channels: Im2Col, then a 1×1 Conv
)


def legalize(graph: Graph, options: LegalizeOptions | None = None) -> Graph:
    """The legal float graph for ``options`` (see the module docstring): :data:`STEPS` in
    order, then what nobody reads dropped and every type inferred.  The default options
    rewrite only the products' forms (no configuration: no Conv, no BatchNormalization)."""
    options = options if options is not None else LegalizeOptions()
    for step in STEPS:
        graph = step(graph, options)
    return infer_shapes(prune(graph))
