"""What the legalize steps rewrite for (:mod:`.legalize`, :mod:`.legalize_dense`): one
:class:`LegalizeOptions`, derived from the configuration, the requantization mode and the
CPU placement."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from openvta.isa import Config

from ..ir import Op, RequantMode

__all__ = ["LegalizeOptions"]


@dataclass(frozen=True)
class LegalizeOptions:
    """What :func:`legalize` rewrites for.

    Parameters
    ----------
    block_in :
        pack a few-channel Conv's windows into channels for a GEMM of this many input lanes;
        None: pack none.
    grouped_block :
        the block the grouped mapping's group sizes must divide (0: it takes only depthwise
        convolutions); every other grouped Conv made dense.  None: every Conv stays grouped.
    keep :
        node names left as they are.
    depthwise_batch_norms :
        make a BatchNormalization of 4-D data a 1×1 depthwise Conv.
    """

    block_in: int | None = None
    grouped_block: int | None = None
    keep: frozenset[str] = frozenset()
    depthwise_batch_norms: bool = False

    @classmethod
    def of(cls, cfg: Config, mode: RequantMode, cpu_ops: Collection[Op] = frozenset(),
           cpu_nodes: Collection[str] = frozenset()) -> LegalizeOptions:
        """The options for the accelerator ``cfg``: convolutions rewritten unless ``cpu_ops``
        sends them to the CPU; none packed, and no BatchNormalization made a Conv, in
        ``exact`` mode (every node on the CPU, onnxruntime's float32 arithmetic); the nodes
        ``cpu_nodes`` kept."""
        convs = Op.CONV not in cpu_ops
        exact = mode is RequantMode.EXACT
        return cls(block_in=cfg.BLOCK_IN if convs and not exact else None,
                   grouped_block=cfg.BLOCK_IN * (cfg.BLOCK_IN == cfg.BLOCK_OUT) if convs else None,
                   keep=frozenset(cpu_nodes), depthwise_batch_norms=not exact)
