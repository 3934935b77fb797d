"""The reference workloads of docs/WORKLOADS.md as data: ResNet-18's conv2d layers and dense shapes.

These are the yardstick for the compiler's schedules, the cycle model's utilization
figures and the benchmarks.  :func:`random_inputs` draws the benchmark operands:
int8 data and weights in [-128, 128) and an int32 bias in [-2**14, 2**14).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

from openvta.isa import INT8_LIMIT, INT8_MIN, Config

from .layout import pack_bias, pack_data, pack_kernel, pack_matrix_data, pack_matrix_weight

__all__ = ["DENSE", "RESNET18", "Conv2dWorkload", "DenseWorkload", "UnknownWorkloadError",
           "random_inputs", "workload"]

#: The bias range of the benchmark layers (docs/WORKLOADS.md): [-2**14, 2**14).
BIAS_BITS = 14


class UnknownWorkloadError(KeyError, ValueError):
    """A workload name that is not in the tables; a ``KeyError`` and a ``ValueError``."""

    def __str__(self) -> str:
        # KeyError would print the repr of its message, quotes and all.
        return str(self.args[0]) if self.args else ""


def _check_positive(owner: str, field: str, value: object, low: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        kind = "a positive integer" if low == 1 else "a non-negative integer"
        raise ValueError(f"{owner} {field} must be {kind}, not {value!r}")


@dataclass(frozen=True)
class Conv2dWorkload:
    """One conv2d layer: square data and kernel, the same pad and stride in H and W.

    Parameters
    ----------
    name :
        the table's name, e.g. ``"C5"``.
    hw :
        data height = width.
    in_channels, out_channels :
        IC and OC.
    kernel :
        kernel height = width.
    pad, stride :
        zero padding on each side, and the stride.
    batch :
        N.

    Raises
    ------
    ValueError
        for a non-positive size (negative pad), or a kernel larger than the padded data.

    Examples
    --------
    >>> c2 = RESNET18["C2"]
    >>> c2.out_hw, c2.ops
    (56, 231211008)
    """

    name: str
    hw: int
    in_channels: int
    out_channels: int
    kernel: int
    pad: int
    stride: int
    batch: int = 1

    def __post_init__(self) -> None:
        owner = f"conv2d workload {self.name!r}"
        for field in ("hw", "in_channels", "out_channels", "kernel", "stride", "batch"):
            _check_positive(owner, field, getattr(self, field))
        _check_positive(owner, "pad", self.pad, low=0)
        if self.kernel > self.hw + 2 * self.pad:
            raise ValueError(
                f"{owner} kernel must fit the padded data ({self.hw + 2 * self.pad}), "
                f"not {self.kernel!r}"
            )

    @property
    def out_hw(self) -> int:
        """Output height = width: ``(hw + 2*pad - kernel) // stride + 1``."""
        return (self.hw + 2 * self.pad - self.kernel) // self.stride + 1

    @property
    def ops(self) -> int:
        """Work as docs/WORKLOADS.md counts it: ``2·N·OH·OW·KH·KW·OC·IC``."""
        return (2 * self.batch * self.out_hw**2 * self.kernel**2
                * self.out_channels * self.in_channels)

    @property
    def data_shape(self) -> tuple[int, int, int, int]:
        """``(N, IC, H, W)``."""
        return (self.batch, self.in_channels, self.hw, self.hw)

    @property
    def weight_shape(self) -> tuple[int, int, int, int]:
        """``(OC, IC, KH, KW)``."""
        return (self.out_channels, self.in_channels, self.kernel, self.kernel)

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        """``(N, OC, OH, OW)``."""
        return (self.batch, self.out_channels, self.out_hw, self.out_hw)


@dataclass(frozen=True)
class DenseWorkload:
    """One dense (fully connected) layer ``(N, I) @ (O, I)ᵀ``.

    Examples
    --------
    >>> DENSE[0].ops
    4194304
    """

    batch: int
    in_features: int
    out_features: int

    def __post_init__(self) -> None:
        for field in ("batch", "in_features", "out_features"):
            _check_positive("dense workload", field, getattr(self, field))

    @property
    def name(self) -> str:
        """``"dense_{N}x{I}x{O}"``."""
        return f"dense_{self.batch}x{self.in_features}x{self.out_features}"

    @property
    def ops(self) -> int:
        """``2·N·I·O``."""
        return 2 * self.batch * self.in_features * self.out_features

    @property
    def data_shape(self) -> tuple[int, int]:
        return (self.batch, self.in_features)

    @property
    def weight_shape(self) -> tuple[int, int]:
        return (self.out_features, self.in_features)

    @property
    def out_shape(self) -> tuple[int, int]:
        return (self.batch, self.out_features)


Workload = Union[Conv2dWorkload, DenseWorkload]

# docs/WORKLOADS.md, "ResNet-18 conv2d layers": name, H=W, in ch, out ch, kernel, pad, stride.
_RESNET18_ROWS = (
    ("C1", 224, 3, 64, 7, 3, 2),
    ("C2", 56, 64, 64, 3, 1, 1),
    ("C3", 56, 64, 128, 3, 1, 2),
    ("C4", 56, 64, 128, 1, 0, 2),
    ("C5", 28, 128, 128, 3, 1, 1),
    ("C6", 28, 128, 256, 3, 1, 2),
    ("C7", 28, 128, 256, 1, 0, 2),
    ("C8", 14, 256, 256, 3, 1, 1),
    ("C9", 14, 256, 512, 3, 1, 2),
    ("C10", 14, 256, 512, 1, 0, 2),
    ("C11", 7, 512, 512, 3, 1, 1),
)

#: ResNet-18's conv2d layers C1–C11, batch 1 (C1 runs on the CPU in VTA's flow).
RESNET18: dict[str, Conv2dWorkload] = {row[0]: Conv2dWorkload(*row) for row in _RESNET18_ROWS}

#: docs/WORKLOADS.md's dense shapes: batch = in = out = 128, and 1×16×16.
DENSE: list[DenseWorkload] = [DenseWorkload(128, 128, 128), DenseWorkload(1, 16, 16)]

_PREFIX = "resnet18."


def workload(name: str) -> Conv2dWorkload:
    """The ResNet-18 layer named ``"C5"`` or ``"resnet18.C5"``.

    Raises
    ------
    TypeError
        if ``name`` is not a string.
    UnknownWorkloadError
        naming the valid layers, if there is no such layer.

    Examples
    --------
    >>> workload("resnet18.C4").stride
    2
    """
    if not isinstance(name, str):
        raise TypeError(f"workload name must be a string, not {name!r}")
    key = name[len(_PREFIX):] if name.startswith(_PREFIX) else name
    if key not in RESNET18:
        raise UnknownWorkloadError(
            f"workload must be one of {', '.join(RESNET18)} (optionally prefixed "
            f"{_PREFIX!r}), not {name!r}"
        )
    return RESNET18[key]


_workload_named = workload  # random_inputs' parameter shadows the function


def random_inputs(
    workload: Workload | str, seed: int, cfg: Config | None = None
) -> dict[str, np.ndarray]:
    """Random benchmark operands for ``workload`` from ``numpy.random.default_rng(seed)``.

    Parameters
    ----------
    workload :
        a workload, or a ResNet-18 layer name for :func:`workload`.
    seed :
        the generator's seed; data, weight and bias are drawn in that order.
    cfg :
        if given, the packed operands are returned too.

    Returns
    -------
    dict
        ``"data"`` int8 ``(N, IC, H, W)`` (dense: ``(N, I)``) and ``"weight"`` int8
        ``(OC, IC, KH, KW)`` (dense: ``(O, I)``), both in [-128, 128); ``"bias"`` int32
        ``(OC,)`` in [-2**14, 2**14).  With ``cfg``, also ``"packed_data"``,
        ``"packed_weight"`` and ``"packed_bias"`` in the :mod:`~openvta.compiler.layout`
        layouts.

    Examples
    --------
    >>> ops = random_inputs("C11", seed=0)
    >>> ops["data"].shape, ops["weight"].dtype, ops["bias"].shape
    ((1, 512, 7, 7), dtype('int8'), (512,))
    """
    wl = _workload_named(workload) if isinstance(workload, str) else workload
    if not isinstance(wl, (Conv2dWorkload, DenseWorkload)):
        raise TypeError(f"workload must be a Conv2dWorkload or DenseWorkload, not {wl!r}")
    rng = np.random.default_rng(seed)
    data = rng.integers(INT8_MIN, INT8_LIMIT, wl.data_shape, dtype=np.int8)
    weight = rng.integers(INT8_MIN, INT8_LIMIT, wl.weight_shape, dtype=np.int8)
    bias = rng.integers(-(1 << BIAS_BITS), 1 << BIAS_BITS, wl.weight_shape[0], dtype=np.int32)
    operands: dict[str, np.ndarray] = {"data": data, "weight": weight, "bias": bias}
    if cfg is not None:
        conv = isinstance(wl, Conv2dWorkload)
        operands["packed_data"] = (pack_data if conv else pack_matrix_data)(data, cfg)
        operands["packed_weight"] = (pack_kernel if conv else pack_matrix_weight)(weight, cfg)
        operands["packed_bias"] = pack_bias(bias, cfg)
    return operands
