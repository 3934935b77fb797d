"""The cost model's features: the bytes each module moves equal the run's counters."""

from __future__ import annotations

import numpy as np
import pytest

import openvta
from openvta import tune
from openvta.tune.features import named_features, features, roofline_cycles, target

#: shapes across the edges: 1×1, padding, stride 2 (a strided 1×1 loads only its rows), batch 2
SHAPES = [("conv2d", {"hw": 8, "ci": 16, "co": 16, "kernel": 1}),
          ("conv2d", {"hw": 8, "ci": 16, "co": 16, "kernel": 3, "pad": 1}),
          ("conv2d", {"hw": 9, "ci": 8, "co": 12, "kernel": 3, "pad": 2, "stride": 2}),
          ("conv2d", {"hw": 8, "ci": 8, "co": 8, "kernel": 1, "stride": 2}),
          ("conv2d", {"n": 2, "hw": 7, "ci": 8, "co": 8, "kernel": 2, "pad": 1}),
          ("dense", {"batch": 3, "in_features": 20, "out_features": 28}),
          ("dense", {"batch": 4, "in_features": 64, "out_features": 64})]
COUNTERS = {"inp_bytes": "inp_load_bytes", "wgt_bytes": "wgt_load_bytes", "acc_bytes": "acc_load_bytes",
            "out_bytes": "out_store_bytes"}


@pytest.mark.parametrize(("name", "params"), SHAPES)
def test_the_bytes_per_module_are_those_the_program_moves(name: str, params: dict[str, int]) -> None:
    space = tune.space(name, config="tiny", **params)
    for index in space.valid_indices()[::37][:6]:
        op = space.operator_for(index)
        counters = openvta.simulate(op.build(), backend="functional").counters
        named = named_features(name, space.cfg, space.params, space.get(index))
        assert {key: named[key] for key in COUNTERS} == {key: counters[c] for key, c in COUNTERS.items()}, \
            space.get(index)


def test_every_configuration_has_the_same_features_and_a_positive_roofline() -> None:
    space = tune.space("conv2d", config="tiny", hw=8, ci=16, co=16, kernel=3, pad=1)
    vectors = [features("conv2d", space.cfg, space.params, space.get(i)) for i in space.valid_indices()]
    assert len({v.shape for v in vectors}) == 1 and all(np.isfinite(v).all() for v in vectors)
    bound = roofline_cycles("conv2d", space.cfg, space.params, space.get(space.valid_indices()[0]))
    assert bound >= 1 and target(2 * bound, bound) == pytest.approx(np.log(2))


@pytest.mark.parametrize(("name", "params"), SHAPES[:4] + SHAPES[5:6])
def test_the_roofline_counts_the_epilogue_and_bounds_the_cycles(name: str, params: dict[str, int]) -> None:
    """The compute module runs GEMM and ALU one after the other: the bound adds the epilogue's
    ALU cycles (a lower bound of the run's) to the MACs at the peak rate."""
    space = tune.space(name, config="tiny", **params)
    cfg = space.cfg
    for index in space.valid_indices()[::53][:3]:
        op = space.operator_for(index)
        report = openvta.simulate(op.build(), backend="cycle").report
        assert report is not None
        named = named_features(name, cfg, space.params, space.get(index))
        assert 0 < named["alu_cycles"] <= report.counters["alu_busy_cycles"]
        compute = named["macs"] / (cfg.BATCH * cfg.BLOCK_IN * cfg.BLOCK_OUT) + named["alu_cycles"]
        assert named["roofline"] == max(compute, named["bytes"] / cfg.bus_bytes, 1.0) <= report.cycles
