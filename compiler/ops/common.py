"""What every operator shares: the compiled-operator record and the epilogue's operands.

Every operator ends the same way: an :class:`~openvta.compiler.epilogue.Epilogue` of
ALU stages computed in place in the accumulator, then the int8 output is stored.  The
benchmark operators' ``>> shift``, ``+ bias``, ``clip(0, 127)`` (docs/WORKLOADS.md) is the
epilogue of their ``shift``, ``bias`` and ``clip`` parameters (:func:`operator_epilogue`),
followed by the stages of their ``epilogue`` parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from openvta.isa import INT8_MAX, INT8_MIN, Config, Format, layouts_of
from openvta.runtime import Program, Role

from .. import te
from ..epilogue import IMM_FIELD, ChannelOperand, Epilogue
from ..layout import bias_layout
from ..limits import MAX_INSNS, check_dram
from ..pipeline import Progress, build
from ..schedule import Schedule
from ..lower import PAD_VALUES
from ..workloads import BIAS_BITS

__all__ = ["IMM_FIELD", "MAX_PAD", "Operator", "acc_operands", "as_operand", "benchmark_operands", "buffer_refusals",
           "check_pad_value", "check_tensors", "divisors", "epilogue_operands", "operator_epilogue", "out_size",
           "pad_value_param", "padded_data", "params_epilogue", "schedule_conv_tiles", "thread_split_refusals"]

# The memory fields below have the same widths in every configuration (docs/ISA.md §2).
_MEM = layouts_of(Config())[Format.MEM]
#: The most zero rows or columns one DMA adds on a side (the pad fields of LOAD).
MAX_PAD = min(_MEM.field(name).high for name in ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1"))


@dataclass
class Operator:
    """A declared and scheduled operator, ready to compile.

    Members
    -------
    inputs :
        symbol name → placeholder (``data``, ``weight``, ``bias``).
    output :
        the output tensor (symbol ``out``).
    layouts, roles :
        per symbol, the packed layout name and the role recorded in the program file.
    pack :
        logical numpy inputs (NCHW, OIHW, (O,)) → packed arrays, per symbol.
    unpack :
        the packed output → the logical output.
    reference_fn :
        ``reference_fn(inputs, params)``: the registry's numpy reference of the operator
        (see :meth:`reference`).
    params :
        the factory's parameters, every one (defaults included), by name.
    epilogue :
        the whole epilogue the output is computed with (parameters and ``epilogue``).
    used_elems :
        per input, the elements of its logical tensor the operator really reads, when
        fewer than all of them (a strided conv2d skips rows and columns); see
        :meth:`used_bytes`.
    """

    name: str
    cfg: Config
    schedule: Schedule
    inputs: dict[str, te.Tensor]
    output: te.Tensor
    layouts: dict[str, str]
    roles: dict[str, Role]
    pack: Callable[[str, np.ndarray], np.ndarray]
    unpack: Callable[[np.ndarray], np.ndarray]
    reference_fn: Callable[[Mapping[str, np.ndarray], Mapping[str, Any]], np.ndarray]
    logical_shapes: dict[str, tuple[int, ...]]
    ops: int
    params: dict[str, Any] = field(default_factory=dict)
    plan: object = None
    notes: dict[str, object] = field(default_factory=dict)
    epilogue: Epilogue = field(default_factory=Epilogue)
    used_elems: dict[str, int] = field(default_factory=dict)

    def used_bytes(self, name: str) -> int:
        """The bytes of symbol ``name`` any schedule must move at least once: the input
        elements the operator really reads (:attr:`used_elems`, else all of them), every
        weight, bias and output element — logical elements, not the padding of layouts."""
        dtype = self.output.dtype if name == "out" else self.inputs[name].dtype
        elems = self.used_elems.get(name, int(np.prod(self.logical_shapes[name], dtype=np.int64)))
        return elems * np.dtype(dtype).itemsize

    @property
    def compulsory_bytes(self) -> int:
        """DRAM bytes any schedule must move: :meth:`used_bytes` of every symbol, added up.

        The cycle report's ideal roofline reads them from the program's symbols
        (:meth:`openvta.runtime.Program.compulsory_bytes`).

        Examples
        --------
        >>> from openvta.compiler import conv2d
        >>> from openvta.isa import preset
        >>> op = conv2d(preset("tiny"), ci=4, co=4, hw=8, kernel=1, stride=2, bias=False)
        >>> op.used_bytes("data"), op.used_bytes("weight"), op.used_bytes("out")
        (64, 16, 64)
        >>> op.compulsory_bytes
        144
        """
        return sum(self.used_bytes(name) for name in self.logical_shapes)

    def operands(self, inputs: Mapping[str, ArrayLike] | None) -> dict[str, np.ndarray]:
        """``inputs`` checked and converted: known names, logical shapes, integers that fit
        each symbol's dtype (array-likes such as lists are accepted).

        Raises
        ------
        ValueError
            naming an unknown input, a wrong shape, or values outside the dtype's range.
        TypeError
            for a non-integer array (floats are refused even when integral).
        """
        inputs = inputs or {}
        unknown = set(inputs) - set(self.inputs)
        if unknown:
            raise ValueError(f"{self.name} has no input {sorted(unknown)[0]!r} "
                             f"(inputs: {', '.join(self.inputs)})")
        return {name: as_operand(name, inputs[name], self.logical_shapes[name], self.inputs[name].dtype)
                for name in self.inputs if name in inputs}

    def reference(self, inputs: Mapping[str, ArrayLike]) -> np.ndarray:
        """The expected logical output for ``inputs`` (missing ones are zeros, as in :meth:`build`)."""
        arrays = self.operands(inputs)
        for name, tensor in self.inputs.items():
            if name not in arrays:
                arrays[name] = np.zeros(self.logical_shapes[name], tensor.dtype)
        return self.reference_fn(arrays, self.params)

    def build(self, inputs: Mapping[str, ArrayLike] | None = None, *,
              progress: Progress | None = None, max_insns: int | None = MAX_INSNS) -> Program:
        """The program, with ``inputs`` (logical arrays, by symbol name) in its DRAM image.

        Inputs not given are zeros.  ``progress`` and ``max_insns`` are those of
        :func:`~openvta.compiler.pipeline.build`.
        """
        arrays = self.operands(inputs)
        symbols = {}
        for name, tensor in self.inputs.items():
            data = self.pack(name, arrays[name]) if name in arrays else None
            symbols[tensor] = (self.roles[name], self.layouts[name], data)
        symbols[self.output] = (Role.OUTPUT, self.layouts["out"], None)
        program = build(self.schedule, self.cfg, symbols, progress=progress, max_insns=max_insns)
        for name, shape in self.logical_shapes.items():
            symbol = program.symbols[name].with_logical_shape(shape)
            program.symbols[name] = symbol.with_used_bytes(self.used_bytes(name))
        return program


def as_operand(name: str, value: ArrayLike, shape: tuple[int, ...] | None, dtype: str) -> np.ndarray:
    """``value`` as an array of ``dtype`` after checking that it holds integers that fit it.

    Raises
    ------
    TypeError
        if ``value`` is not an array of integers.
    ValueError
        for a shape other than ``shape`` (unless None), or values outside ``dtype``'s range:
        ``"input 'data' holds values in [-1280, 1270], outside int8's [-128, 127]"``.
    """
    try:
        array = np.asarray(value)
    except ValueError as exc:  # a ragged nesting of lists
        raise ValueError(f"input {name!r} must be a rectangular array of integers ({exc})") from None
    if array.dtype.kind not in "iu":
        raise TypeError(f"input {name!r} must be an array of integers, not of {array.dtype}")
    if shape is not None and array.shape != shape:
        raise ValueError(f"input {name!r} must have shape {shape}, not {array.shape}")
    info = np.iinfo(dtype)
    if array.size:
        low, high = int(array.min()), int(array.max())
        if low < info.min or high > info.max:
            raise ValueError(f"input {name!r} holds values in [{low}, {high}], outside {dtype}'s "
                             f"[{info.min}, {info.max}]")
    return array.astype(dtype)


def check_tensors(owner: str, cfg: Config, tensors: Sequence[te.Tensor]) -> None:
    """Refuse, before any planning, an operator whose tensors cannot fit the DRAM address space."""
    check_dram(owner, cfg, [(t.name, t.shape, t.dtype) for t in tensors])


def benchmark_operands(op: Operator, seed: int) -> dict[str, np.ndarray]:
    """Random operands as docs/WORKLOADS.md's benchmarks draw them, from ``default_rng(seed)``.

    int8 inputs uniform in [-128, 128), int32 inputs (the bias) in [-2**14, 2**14), drawn
    in input order (``data``, ``weight``, ``bias``): the operands of
    :func:`~openvta.compiler.workloads.random_inputs` for the same shapes and seed.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for name, tensor in op.inputs.items():
        shape = op.logical_shapes[name]
        if tensor.dtype == "int8":
            out[name] = rng.integers(INT8_MIN, INT8_MAX + 1, shape, dtype=np.int8)
        else:
            out[name] = rng.integers(-(1 << BIAS_BITS), 1 << BIAS_BITS, shape, dtype=np.int32)
    return out


def operator_epilogue(owner: str, shift: int | None, bias: bool, clip: tuple[int, int] | None,
                      epilogue: Epilogue | None) -> Epilogue:
    """The whole epilogue of an operator: ``shift``, ``bias`` (channel operand ``bias``) and
    ``clip`` as stages (:meth:`Epilogue.from_params`), then ``epilogue``'s stages.

    Raises
    ------
    ValueError
        ``"<owner> epilogue operand name 'bias' must name one operand, …"`` when a name of
        ``epilogue`` stands for another operand than the same name of the parameters.
    """
    try:
        return Epilogue.from_params(shift, "bias" if bias else None, clip) + (epilogue or Epilogue())
    except ValueError as exc:
        raise ValueError(f"{owner} {exc}") from None


def epilogue_operands(cfg: Config, epilogue: Epilogue, channels: int, out_shape: tuple[int, ...],
                      out_layout: str) -> tuple[dict[str, str], dict[str, Role], dict[str, tuple[int, ...]]]:
    """Layouts, roles and logical shapes of ``epilogue``'s operands: a channel operand is a
    ``bias`` of ``(channels,)`` in ``C{B}n{BO}c``, a tensor operand an ``input`` of the
    output's shape and layout."""
    layouts, roles, shapes = {}, {}, {}
    for name, operand in epilogue.operands().items():
        channel = isinstance(operand, ChannelOperand)
        layouts[name] = bias_layout(cfg) if channel else out_layout
        roles[name] = Role.BIAS if channel else Role.INPUT
        shapes[name] = (channels,) if channel else out_shape
    return layouts, roles, shapes


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def tile_sizes(n: int) -> list[int]:
    """The tile sizes worth trying for a loop of ``n``: for each number of tiles the
    smallest size that covers the loop (``ceil(n / count)``; the divisors are among them).
    A size that does not divide ``n`` leaves a smaller tail tile.

    Examples
    --------
    >>> tile_sizes(7)
    [1, 2, 3, 4, 7]
    """
    return sorted({-(-n // count) for count in range(1, n + 1)})


def params_epilogue(owner: str) -> Callable[[Mapping[str, Any]], Epilogue]:
    """``epilogue(params)``: the whole epilogue the factory ``owner`` computes for its ``shift``,
    ``bias``, ``clip`` and ``epilogue`` parameters (``epilogue`` may be its JSON form, as
    tuning records hold it)."""
    def epilogue(params: Mapping[str, Any]) -> Epilogue:
        extra = params["epilogue"]
        if extra is not None and not isinstance(extra, Epilogue):
            extra = Epilogue.from_json(extra)
        return operator_epilogue(owner, params["shift"], params["bias"], params["clip"], extra)

    return epilogue


def out_size(size: int, kernel: int, pad: int, stride: int) -> int:
    """Outputs of a convolution along an axis of ``size`` inputs (rows or columns).

    >>> out_size(56, 3, 1, 2)
    28
    """
    return (size + 2 * pad - kernel) // stride + 1


def check_window(name: str, hw: int, w: int | None, kernel: int, pad: int) -> tuple[int | None, int]:
    """A convolution's width as its kernel key holds it (None when the data is square) and as
    a size; raises ValueError, naming ``name``, for a kernel larger than the padded height or
    width, or a pad not smaller than the kernel.

    >>> check_window("conv2d", 8, 8, 3, 1)
    (None, 8)
    """
    w = None if w == hw else w  # one kernel key for one kernel
    width = hw if w is None else w
    for axis, size in (("hw", hw), ("w", width)):
        if kernel > size + 2 * pad:
            raise ValueError(f"{name} kernel must fit the padded input ({axis} + 2*pad = {size} + 2*{pad} = "
                             f"{size + 2 * pad}), not {kernel}")
    if pad >= kernel:
        raise ValueError(f"{name} pad must be less than the kernel ({kernel}), not {pad}")
    return w, width


def check_pad_value(name: str, value: int | None) -> int:
    """``value`` (None: 0) if the DMA can pad with it; raises ValueError naming ``name``."""
    value = 0 if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or value not in PAD_VALUES:
        raise ValueError(f"{name} pad_value must be 0 or {INT8_MIN} (what the DMA pads with), not {value!r}")
    return value


def pad_value_param(attrs: Mapping[str, Any]) -> dict[str, int]:
    """A matched int8 Conv's ``pad_value`` parameter (its data's zero point is -128), where the
    node's attribute is not 0."""
    value = int(attrs.get("pad_value", 0))
    return {"pad_value": value} if value else {}


def padded_data(data: te.Tensor, pad: int, value: int = 0) -> te.Tensor:
    """``data`` (``(N/B, C/BI, H, W, B, BI)``) padded by ``pad`` on each side with ``value`` (0,
    or -128: LOAD INP's ``pad_min``): a stage the schedule inlines into the input cache, so that
    the DMA pads rows and columns itself."""
    if not pad:
        return data
    n_t, c_t, height, width, b, bi = data.shape
    return te.compute(
        (n_t, c_t, height + 2 * pad, width + 2 * pad, b, bi),
        lambda i, c, y, x, j, k: te.select(
            (te.less_equal(pad, y), te.less(y, height + pad), te.less_equal(pad, x),
             te.less(x, width + pad)), data[i, c, y - pad, x - pad, j, k], value),
        "data_pad")


def schedule_conv_tiles(s: Schedule, out: te.Tensor, acc: te.Tensor, cob: int, yb: int, xb: int, vthreads: int,
                        split: str) -> te.IterVar:
    """Tile a convolution's ``out`` ``(N, CO, OH, OW, B, BO)`` into ``cob`` channel blocks × ``yb``
    rows × ``xb`` columns, the threads splitting the channel (``split == "co"``) or row tiles,
    the output stored by DMA and ``acc`` computed at the tile's loop, which it returns."""
    i, o, y, x, j, m = s[out].axis
    o_o, o_i = s[out].split(o, factor=cob)
    y_o, y_i = s[out].split(y, factor=yb)
    x_o, x_i = s[out].split(x, factor=xb)
    s[out].reorder(i, o_o, y_o, x_o, o_i, y_i, x_i, j, m)
    if vthreads > 1:
        thread, _ = s[out].split(o_o if split == "co" else y_o, nparts=vthreads)
        s[out].reorder(thread, i)
        s[out].vthread(thread)
    s[out].pragma(o_i, "dma_copy")
    s[acc].set_scope("acc")
    s[acc].compute_at(s[out], x_o)
    return x_o


def acc_operands(epilogue: Epilogue | None) -> tuple[int, int]:
    """(output-shaped tiles, channel vectors) an epilogue keeps in the accumulator per tile (at
    least one vector: room for a bias when ``epilogue`` is None)."""
    if epilogue is None:
        return 1, 1
    return 1 + len(epilogue.tensor_operands), max(1, len(epilogue.channel_operands))


def thread_split_refusals(threads: int, tiles: str, extent: int, size: int, uneven: bool) -> list[str]:
    """The planners' thread-split check: the threads divide the whole ``tiles`` of size ``size`` of
    a loop of ``extent`` (no tail tile), or with ``uneven`` its tiles, the last thread taking
    the tail tile; ``tiles`` names them in the reason (``"tiles of co"``, ``"output tiles"``)."""
    if threads <= 1:
        return []
    count = -(-extent // size) if uneven else extent // size
    if count % threads or (not uneven and extent % size):
        return [f"thread split: {threads} threads must divide the {'' if uneven else 'whole '}{tiles} "
                f"({extent} in tiles of {size})"]
    return []


def buffer_refusals(needs: Mapping[str, tuple[int, int]], threads: int) -> list[str]:
    """One ``"<buffer> buffer overflow: …"`` per buffer whose ``(entries, depth)`` in ``needs`` the
    ``threads`` (each with its own slice) overflow."""
    return [f"{buffer} buffer overflow: {threads} thread{'s' * (threads > 1)} × {entries} "
            f"= {entries * threads} entries > {depth}"
            for buffer, (entries, depth) in needs.items() if entries * threads > depth]
