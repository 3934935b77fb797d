"""The drain-epilogue pass on machines without a drain unit: their epi buffer has no words,
so every block's descriptor is refused on its own and the pass returns its input."""

from __future__ import annotations

import pytest

from openvta.compiler import conv2d, dense
from openvta.compiler.passes.drain_epilogue import drain_epilogue
from openvta.compiler.pipeline import lower
from openvta.compiler.ir import Scope
from openvta.isa import preset


@pytest.mark.parametrize("name", ["vta", "small", "tiny"])
@pytest.mark.parametrize("make", [lambda cfg: conv2d(cfg, ci=32, co=32, hw=8, kernel=3, pad=1),
                                  lambda cfg: conv2d(cfg, ci=32, co=32, hw=8, kernel=3, pad=1, vthreads=2),
                                  lambda cfg: dense(cfg, batch=1, in_features=64, out_features=32),
                                  lambda cfg: dense(cfg, batch=1, in_features=64, out_features=32, shift=None,
                                                    bias=False, clip=None)],
                         ids=["conv2d", "conv2d_t2", "dense", "dense_no_epilogue"])
def test_the_pass_returns_its_input_without_a_drain_unit(name: str, make) -> None:
    """Even a GEMM without an epilogue (a descriptor of no stages) is left to the out buffer."""
    cfg = preset(name)
    assert cfg.epi_depth == 0
    lowered = lower(make(cfg).schedule, cfg)
    assert drain_epilogue(lowered) is lowered
    assert Scope.EPI not in lowered.slices and lowered.load_copies == lowered.acc_copies == 1
