"""What the operators' cost features share: the roofline bound and the common features.

Each operator's descriptor computes its features from a plan the way its lowering emits
it (tile counts, reduction steps, DRAM bytes per module, micro-ops, instructions,
occupancy), because the tuner scores thousands of choices per batch and lowering one takes
tens of milliseconds; :func:`common_features` adds what every operator has: bytes, MACs,
the epilogue's ALU cycles, arithmetic intensity and the roofline bound — the compute
module's cycles (the MACs at the peak rate *plus* the epilogue's ALU cycles: the compute
module runs the GEMM and the ALU micro-ops one after the other) or the bytes at the bus
rate, whichever is slower (docs/TUNING.md).
"""

from __future__ import annotations

from openvta.isa import Config

__all__ = ["INT32_BYTES", "MAX_VTHREADS", "THREADS", "common_features", "loaded_lines", "tiles"]

INT32_BYTES = 4
#: The most virtual threads a tuning space offers (VTA's latency hiding rarely gains past 2–4).
MAX_VTHREADS = 4
#: The thread counts a tuning space offers.
THREADS = tuple(range(1, MAX_VTHREADS + 1))


def tiles(n: int, size: int) -> int:
    """Tiles of ``size`` that cover ``n`` (the last may be a smaller tail tile)."""
    return -(-n // size)


def common_features(cfg: Config, macs: float, alu: float, moved: dict[str, float], insns: float, threads: int,
                    occupancy: dict[str, float]) -> dict[str, float]:
    """The features every operator has; ``alu``: the epilogue's ALU cycles (one per output
    vector and stage), which the compute module runs after the GEMM, not beside it (none on
    machine v2, whose drain unit runs the epilogue beside the GEMM)."""
    nbytes = sum(moved.values())
    alu = 0.0 if cfg.has_drain else alu  # machine v2 runs the epilogue on the drain unit, not the ALU
    compute = macs / (cfg.BATCH * cfg.BLOCK_IN * cfg.BLOCK_OUT) + alu
    return {**{f"{name}_bytes": value for name, value in moved.items()}, "bytes": nbytes, "macs": macs,
            "alu_cycles": alu, "insns": insns, "threads": threads,
            **{f"{k}_occupancy": v for k, v in occupancy.items()},
            "intensity": macs / max(nbytes, 1.0), "roofline": max(compute, nbytes / cfg.bus_bytes, 1.0),
            "compute_bound": float(compute >= nbytes / cfg.bus_bytes)}


def loaded_lines(out: int, size: int, kernel: int, stride: int, pad: int, lines: int, used_only: bool) -> int:
    """Input rows (or columns) the tiles of ``size`` outputs of a loop of ``out`` load, added
    up: each tile's window clipped to the input's ``lines`` rows (or columns; the DMA adds the
    padding itself); a strided 1×1 conv2d loads only the rows it uses."""
    total = 0
    for start in range(0, out, size):
        extent = min(size, out - start)
        if used_only:
            total += extent
            continue
        low, high = start * stride - pad, (start + extent - 1) * stride - pad + kernel - 1
        total += max(0, min(high, lines - 1) - max(low, 0) + 1)
    return total
