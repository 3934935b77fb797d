"""The docs/WORKLOADS.md tables as data: values, sizes, name lookup, random operands."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

from naive_models import CONFIGS
from openvta.compiler.layout import (
    pack_bias,
    pack_data,
    pack_kernel,
    pack_matrix_data,
    pack_matrix_weight,
)
from openvta.compiler.reference import conv2d_nchw
from openvta.compiler.workloads import (
    DENSE,
    RESNET18,
    Conv2dWorkload,
    DenseWorkload,
    UnknownWorkloadError,
    random_inputs,
    workload,
)

# Typed in from docs/WORKLOADS.md, "ResNet-18 conv2d layers", as the independent copy to check.
SPEC_ROWS = """
| C1 | 224 | 3 | 64 | 7 | 3 | 2 |
| C2 | 56 | 64 | 64 | 3 | 1 | 1 |
| C3 | 56 | 64 | 128 | 3 | 1 | 2 |
| C4 | 56 | 64 | 128 | 1 | 0 | 2 |
| C5 | 28 | 128 | 128 | 3 | 1 | 1 |
| C6 | 28 | 128 | 256 | 3 | 1 | 2 |
| C7 | 28 | 128 | 256 | 1 | 0 | 2 |
| C8 | 14 | 256 | 256 | 3 | 1 | 1 |
| C9 | 14 | 256 | 512 | 3 | 1 | 2 |
| C10 | 14 | 256 | 512 | 1 | 0 | 2 |
| C11 | 7 | 512 | 512 | 3 | 1 | 1 |
"""
SPEC = [[cell.strip() for cell in line.strip("| ").split("|")]
        for line in SPEC_ROWS.strip().splitlines()]
OUT_HW = {"C1": 112, "C2": 56, "C3": 28, "C4": 28, "C5": 28, "C6": 14, "C7": 14,
          "C8": 14, "C9": 7, "C10": 7, "C11": 7}


def test_resnet18_table_is_the_spec() -> None:
    assert list(RESNET18) == [row[0] for row in SPEC]
    for name, *numbers in SPEC:
        wl = RESNET18[name]
        fields = (wl.hw, wl.in_channels, wl.out_channels, wl.kernel, wl.pad, wl.stride)
        assert (wl.name, fields, wl.batch) == (name, tuple(map(int, numbers)), 1)


@pytest.mark.parametrize("name", list(OUT_HW))
def test_out_hw_and_ops(name: str) -> None:
    wl = RESNET18[name]
    assert wl.out_hw == OUT_HW[name]
    # The output size agrees with the golden conv2d (one channel keeps it cheap).
    probe = conv2d_nchw(np.zeros((1, 1, wl.hw, wl.hw), np.int8),
                        np.zeros((1, 1, wl.kernel, wl.kernel), np.int8), wl.stride, wl.pad)
    assert probe.shape[2:] == (wl.out_hw, wl.out_hw)
    assert wl.out_shape == (1, wl.out_channels, wl.out_hw, wl.out_hw)
    macs = wl.out_hw * wl.out_hw * wl.kernel * wl.kernel * wl.out_channels * wl.in_channels
    assert wl.ops == 2 * macs


def test_ops_examples() -> None:
    assert RESNET18["C2"].ops == 2 * 56 * 56 * 3 * 3 * 64 * 64
    assert RESNET18["C1"].ops == 2 * 112 * 112 * 7 * 7 * 64 * 3
    assert dataclasses.replace(RESNET18["C2"], batch=4).ops == 4 * RESNET18["C2"].ops


def test_dense_table() -> None:
    assert [(d.batch, d.in_features, d.out_features) for d in DENSE] == [(128, 128, 128),
                                                                         (1, 16, 16)]
    assert [d.ops for d in DENSE] == [2 * 128**3, 2 * 16 * 16]
    assert DENSE[1].name == "dense_1x16x16"


def test_workloads_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RESNET18["C2"].hw = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        DENSE[0].batch = 1


@pytest.mark.parametrize("name", ["C5", "resnet18.C5"])
def test_workload_lookup(name: str) -> None:
    assert workload(name) is RESNET18["C5"]


VALID = "C1, C2, C3, C4, C5, C6, C7, C8, C9, C10, C11"


@pytest.mark.parametrize("name", ["C12", "c5", "resnet18.C0", "resnet50.C5", ""])
def test_unknown_workload(name: str) -> None:
    message = (rf"^workload must be one of {VALID} \(optionally prefixed 'resnet18\.'\), "
               rf"not '{name}'$")
    with pytest.raises(KeyError, match=message):
        workload(name)
    with pytest.raises(ValueError, match=message):
        workload(name)
    assert issubclass(UnknownWorkloadError, KeyError)


def test_workload_name_type() -> None:
    with pytest.raises(TypeError, match=r"^workload name must be a string, not 5$"):
        workload(5)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Conv2dWorkload("X", 0, 1, 1, 1, 0, 1),
     r"^conv2d workload 'X' hw must be a positive integer, not 0$"),
    (lambda: Conv2dWorkload("X", 4, 1, 1, 1, -1, 1),
     r"^conv2d workload 'X' pad must be a non-negative integer, not -1$"),
    (lambda: Conv2dWorkload("X", 4, 1, 1, 1, 0, True),
     r"^conv2d workload 'X' stride must be a positive integer, not True$"),
    (lambda: Conv2dWorkload("X", 4, 1, 1, 7, 1, 1),
     r"^conv2d workload 'X' kernel must fit the padded data \(6\), not 7$"),
    (lambda: DenseWorkload(1, 0, 4),
     r"^dense workload in_features must be a positive integer, not 0$"),
])
def test_workload_validation(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


# -- random operands ------------------------------------------------------------------------


def test_random_inputs_conv() -> None:
    ops = random_inputs("resnet18.C11", seed=0)
    assert set(ops) == {"data", "weight", "bias"}
    wl = RESNET18["C11"]
    expected = {"data": (wl.data_shape, np.int8, -128, 128),
                "weight": (wl.weight_shape, np.int8, -128, 128),
                "bias": ((512,), np.int32, -2**14, 2**14)}
    for key, (shape, dtype, low, high) in expected.items():
        array = ops[key]
        assert array.shape == shape and array.dtype == dtype, key
        assert low <= array.min() and array.max() < high, key
    assert wl.data_shape == (1, 512, 7, 7) and wl.weight_shape == (512, 512, 3, 3)
    # Wide enough a draw to reach close to both ends of each range.
    assert ops["weight"].min() == -128 and ops["weight"].max() == 127
    assert ops["bias"].min() < -2**14 + 100 and ops["bias"].max() > 2**14 - 100


def test_random_inputs_are_seeded() -> None:
    first, again, other = (random_inputs(RESNET18["C4"], s) for s in (3, 3, 4))
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])
    assert not np.array_equal(first["data"], other["data"])


@pytest.mark.parametrize("cfg_name", list(CONFIGS))
def test_random_inputs_packed(cfg_name: str) -> None:
    cfg = CONFIGS[cfg_name]
    conv = random_inputs(Conv2dWorkload("small", 5, 3, 17, 3, 1, 2, batch=3), 1, cfg)
    np.testing.assert_array_equal(conv["packed_data"], pack_data(conv["data"], cfg))
    np.testing.assert_array_equal(conv["packed_weight"], pack_kernel(conv["weight"], cfg))
    np.testing.assert_array_equal(conv["packed_bias"], pack_bias(conv["bias"], cfg))
    fc = random_inputs(DENSE[1], 1, cfg)
    assert fc["data"].shape == (1, 16) and fc["weight"].shape == (16, 16)
    np.testing.assert_array_equal(fc["packed_data"], pack_matrix_data(fc["data"], cfg))
    np.testing.assert_array_equal(fc["packed_weight"], pack_matrix_weight(fc["weight"], cfg))
    np.testing.assert_array_equal(fc["packed_bias"], pack_bias(fc["bias"], cfg))


def test_random_inputs_rejects_other_objects() -> None:
    with pytest.raises(TypeError, match=r"^workload must be a Conv2dWorkload or DenseWorkload, "
                                        r"not \(1, 2\)$"):
        random_inputs((1, 2), 0)
