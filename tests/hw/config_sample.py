"""A small, fixed sample of the configurations the ISA accepts, for the RTL's random tests.

The presets leave most of the space untested: a bus narrower or wider than an
element, a batch above one, buffers of a few dozen elements, queues of a few entries.
:func:`config_sample` draws configurations at random (seeded, so the sample and its
cached Verilator builds stay the same from run to run) from everything
:class:`~openvta.isa.Config` accepts, and keeps those that are cheap to simulate: a
GEMM core of at most :data:`MAX_MULTIPLIERS` multipliers, and buffers of
:data:`MIN_DEPTH` to 128 elements (``tests/programs.py`` needs at least 16 of each).
"""

from __future__ import annotations

import os
import random

from openvta.isa import Config, ConfigError
from openvta.isa.config import UOP_BYTES

__all__ = ["FULL_RTL", "NARROW_STORE", "SAMPLE", "config_sample", "describe"]

#: ``OPENVTA_FULL_RTL=1``: also the Verilator builds left out of ``make test`` for its 20
#: minutes (docs/RTL.md).
FULL_RTL = bool(os.environ.get("OPENVTA_FULL_RTL"))

MAX_MULTIPLIERS = 32
MIN_DEPTH = 16
SEED = 2024

#: The configuration of the issue: tiny's 1x4x4 GEMM on a 64-bit bus, so that an inp,
#: out or ACC_8BIT element (4 bytes) is half a beat.
NARROW_STORE = Config(LOG_BLOCK=2, LOG_UOP_BUFF_SIZE=11, LOG_INP_BUFF_SIZE=10,
                      LOG_WGT_BUFF_SIZE=12, LOG_ACC_BUFF_SIZE=12, CMD_QUEUE_DEPTH=16,
                      DEP_QUEUE_DEPTH=16, LOG_BUS_WIDTH=6)


def _log2(value: int) -> int:
    return value.bit_length() - 1


def _draw(rng: random.Random) -> Config:
    """One configuration: the GEMM shape and the bus anywhere in their ranges, each
    buffer 2**4 to 2**7 elements deep, queues of 1 to 16 entries."""
    log_batch, log_block = rng.randint(0, 4), rng.randint(1, 6)
    # element bytes (docs/ISA.md §1; checked against the Config's own below)
    elem = {"uop": UOP_BYTES, "inp": 1 << (log_batch + log_block),
            "wgt": 1 << (2 * log_block), "acc": 4 << (log_batch + log_block)}
    log_depth = {name: rng.randint(_log2(MIN_DEPTH), 7) for name in elem}
    cfg = Config(LOG_BATCH=log_batch, LOG_BLOCK=log_block,
                 **{f"LOG_{name.upper()}_BUFF_SIZE": log_depth[name] + _log2(size)
                    for name, size in elem.items()},
                 CMD_QUEUE_DEPTH=rng.choice([1, 2, 4, 16]),
                 DEP_QUEUE_DEPTH=rng.choice([1, 2, 4, 16]),
                 LOG_BUS_WIDTH=rng.randint(3, 10))
    for name, log in log_depth.items():
        assert getattr(cfg, f"{name}_depth") == 1 << log, (name, cfg)
    return cfg


def config_sample(count: int, seed: int = SEED) -> list[Config]:
    """``count`` different configurations, no two with the same bus width."""
    rng = random.Random(seed)
    sample: list[Config] = []
    while len(sample) < count:
        try:
            cfg = _draw(rng)
        except ConfigError:  # a field that does not fit: the ISA refuses it, so do we
            continue
        if cfg.macs_per_uop <= MAX_MULTIPLIERS and all(
                cfg.LOG_BUS_WIDTH != other.LOG_BUS_WIDTH for other in sample):
            sample.append(cfg)
    return sample


def describe(cfg: Config) -> str:
    """A short test id: ``b2x4-bus64-q4/2-d16/32/16/32`` (batch x block, bus bits, command
    and token queue depths, uop/inp/wgt/acc depths)."""
    return (f"b{cfg.BATCH}x{cfg.BLOCK_IN}-bus{cfg.bus_bytes * 8}"
            f"-q{cfg.CMD_QUEUE_DEPTH}/{cfg.DEP_QUEUE_DEPTH}"
            f"-d{cfg.uop_depth}/{cfg.inp_depth}/{cfg.wgt_depth}/{cfg.acc_depth}")


#: The sample the RTL tests draw from (each configuration is one Verilator build, cached).
SAMPLE = config_sample(3)
