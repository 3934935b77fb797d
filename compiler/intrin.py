"""The GEMM intrinsic, declared as a tensor expression (TVM's ``decl_tensor_intrin``).

``out[b, o] += Σ_k inp[b, k] · wgt[o, k]`` on one ``BATCH × BLOCK_IN`` input tile and
one ``BLOCK_OUT × BLOCK_IN`` weight tile: the computation one GEMM micro-op performs.
``tensorize`` matches a stage's innermost loops and body against this declaration;
the lowering that replaces them (a micro-op with accumulator, input and weight
indices) is :mod:`openvta.compiler.passes.match_tensorize`.
"""

from __future__ import annotations

from dataclasses import dataclass

from openvta.isa import Config

from . import te
from .ir import Scope

__all__ = ["Intrinsic", "gemm_intrinsic"]


@dataclass(frozen=True, eq=False)
class Intrinsic:
    """A declared intrinsic: its output tensor's computation and the scopes it reads."""

    name: str
    output: te.Tensor
    inputs: tuple[te.Tensor, ...]
    scopes: tuple[Scope, ...]
    out_scope: Scope
    cfg: Config

    @property
    def op(self) -> te.ComputeOp:
        assert isinstance(self.output.op, te.ComputeOp)
        return self.output.op


def gemm_intrinsic(cfg: Config) -> Intrinsic:
    """The GEMM core's tile product for ``cfg``."""
    b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    inp = te.placeholder((b, bi), "int8", name="inp")
    wgt = te.placeholder((bo, bi), "int8", name="wgt")
    k = te.reduce_axis(bi, name="k")
    out = te.compute(
        (b, bo),
        lambda i, o: te.sum(inp[i, k].astype("int32") * wgt[o, k].astype("int32"), axis=k),
        name="gemm",
    )
    return Intrinsic("gemm", out, (inp, wgt), (Scope.INP, Scope.WGT), Scope.ACC, cfg)
