"""The facade: ``openvta.compile`` an operator into a program, ``openvta.simulate`` it.

>>> import numpy as np, openvta
>>> program = openvta.compile("dense", batch=1, in_features=16, out_features=16,
...                           config="tiny", seed=0)
>>> result = openvta.simulate(program, backend="functional")
>>> result["out"].shape, result["out"].dtype
((1, 16), dtype('int8'))
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from openvta.compiler.layout import pack_by_layout, unpack_by_layout
from openvta.compiler.ops.common import Operator
from openvta.compiler.ops.conv2d import conv2d
from openvta.compiler.ops.dense import dense, elementwise
from openvta.compiler.workloads import Conv2dWorkload, DenseWorkload, random_inputs, workload
from openvta.isa import Config, preset
from openvta.runtime import Device, Program

__all__ = ["compile", "simulate", "operator", "Simulated", "OPERATORS"]

OPERATORS = {"conv2d": conv2d, "dense": dense, "elementwise": elementwise}


def _config(config: str | Config) -> Config:
    return config if isinstance(config, Config) else preset(config)


def operator(name: str, *, config: str | Config = "default", **params: Any) -> Operator:
    """The scheduled operator ``name`` (``conv2d``, ``dense``, ``elementwise``), or a ResNet-18
    layer given as ``layer="resnet18.C5"`` with ``name="conv2d"``."""
    cfg = _config(config)
    layer = params.pop("layer", None)
    if layer is not None:
        wl = workload(layer)
        params = {"ci": wl.in_channels, "co": wl.out_channels, "hw": wl.hw, "kernel": wl.kernel,
                  "pad": wl.pad, "stride": wl.stride, "n": wl.batch, **params}
        name = "conv2d"
    try:
        factory = OPERATORS[name]
    except KeyError:
        raise ValueError(f"operator must be one of {', '.join(OPERATORS)}, not {name!r}") from None
    return factory(cfg, **params)  # type: ignore[operator]


def compile(op: str | Operator, *, inputs: Mapping[str, np.ndarray] | None = None,  # noqa: A001
            seed: int | None = None, **params: Any) -> Program:
    """Compile an operator into a program file's contents.

    Parameters
    ----------
    op :
        an :class:`Operator`, or a name for :func:`operator` (with its ``params``).
    inputs :
        logical input arrays by symbol name (``data``, ``weight``, ``bias``).
    seed :
        without ``inputs``: embed random benchmark operands drawn with this seed
        (int8 data and weights, int32 bias in [-2**14, 2**14), as WORKLOADS.md).
    """
    operator_ = op if isinstance(op, Operator) else operator(op, **params)
    if inputs is None and seed is not None:
        inputs = _random(operator_, seed)
    return operator_.build(dict(inputs or {}))


def _random(op: Operator, seed: int) -> dict[str, np.ndarray]:
    shapes = op.logical_shapes
    if op.name == "conv2d":
        n, ci, hw, _ = shapes["data"]
        co, _, k, _ = shapes["weight"]
        wl: Conv2dWorkload | DenseWorkload = Conv2dWorkload("custom", hw, ci, co, k, 0, 1, n)
    elif op.name == "dense":
        wl = DenseWorkload(shapes["data"][0], shapes["data"][1], shapes["weight"][0])
    else:
        rng = np.random.default_rng(seed)
        return {name: rng.integers(-(1 << 20), 1 << 20, shape, dtype=np.int32)
                for name, shape in shapes.items() if name != "out"}
    arrays = random_inputs(wl, seed)
    return {name: arrays[name] for name in op.inputs}


class Simulated(Mapping[str, np.ndarray]):
    """Outputs by symbol name (logical layout), with the back end's counters and report."""

    def __init__(self, outputs: dict[str, np.ndarray], counters: dict[str, int], report: Any) -> None:
        self.outputs = outputs
        self.counters = counters
        self.report = report

    def __getitem__(self, name: str) -> np.ndarray:
        return self.outputs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.outputs)

    def __len__(self) -> int:
        return len(self.outputs)


def simulate(program: Program, inputs: Mapping[str, np.ndarray] | None = None, *,
             backend: str = "functional", **options: Any) -> Simulated:
    """Run ``program`` (with ``inputs`` written into its DRAM first) and unpack its outputs."""
    program = Program(program.config, program.dram.copy(), program.insn_addr, program.insn_count,
                      dict(program.symbols))
    for name, array in (inputs or {}).items():
        symbol = program.symbol(name)
        value = np.asarray(array)
        if symbol.logical_shape is not None and symbol.layout:
            if value.shape != symbol.logical_shape:
                raise ValueError(f"input {name!r} must have shape {symbol.logical_shape}, "
                                 f"not {value.shape}")
            value = pack_by_layout(value, symbol.layout, program.config)
        program.write(name, value)
    result = Device(backend, **options).run(program)
    outputs = {}
    for name, symbol in program.symbols.items():
        if symbol.role != "output":
            continue
        packed = program.read(name, result.dram)
        if symbol.logical_shape is not None and symbol.layout:
            packed = unpack_by_layout(packed, symbol.layout, symbol.logical_shape)
        outputs[name] = packed
    return Simulated(outputs, result.counters, result.report)
