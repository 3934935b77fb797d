"""Pass: a tensorized reduction becomes a GEMM instruction (before micro-op folding).

Pre: :class:`~openvta.compiler.ir.Reduction` statements.  Post: one
:class:`~openvta.compiler.ir.UopInsn` of kind ``gemm`` per reduction, with one loop per
kernel loop and a single micro-op at the loops' origin.

The stage's innermost loops and body must match the intrinsic declared in
:mod:`openvta.compiler.intrin`: loops (batch, output block, reduction block) with the
intrinsic's extents; a body ``inp[.., b, k] · wgt[.., o, k]`` (each cast to int32)
reading the inp and wgt scopes; the output indexed ``[.., b, o]``.  Any difference is a
:class:`~openvta.compiler.ir.LoweringError` naming it.
"""

from __future__ import annotations

from dataclasses import replace

from ..intrin import Intrinsic
from ..bounds import split_index
from ..ir import LoweringError, MicroOp, Reduction, Reset, Scope, Stmt, UopInsn, UopKind, UopLoopSpec, transform
from ..lower import Lowered
from ..te import ArithOp, BinOp, Cast, Expr, Read, Var, show

__all__ = ["match_tensorize"]


def match_tensorize(lowered: Lowered, intrinsic: Intrinsic) -> Lowered:
    return replace(lowered, body=transform(lowered.body, lambda s: _match(s, intrinsic)))


def _fail(stage: str, message: str) -> LoweringError:
    return LoweringError("tensorize", f"{stage}: {message}")


def _match(stmt: Stmt, intrinsic: Intrinsic) -> Stmt:
    if isinstance(stmt, Reset):
        # zero every tile of the accumulator region: one loop, one micro-op
        buffer = stmt.buffer
        return UopInsn(stmt.stage, UopKind.GEMM, (UopLoopSpec(buffer.elems, 1, 0, 0),), (MicroOp(0, 0, 0),),
                       (buffer, buffer, buffer), reset=True)
    if not isinstance(stmt, Reduction):
        return stmt
    op = intrinsic.op
    want = [a.extent for a in op.axis] + [a.extent for a in op.reduce_axis]
    got = [extent for _, extent in stmt.tensor_loops]
    if got != want:
        raise _fail(stmt.stage, f"the loops from the tensorize axis inward have extents {got}, "
                    f"the {intrinsic.name} intrinsic needs {want} (batch, block out, block in)")
    b, o, k = (var for var, _ in stmt.tensor_loops)
    if not (_is(stmt.dst_tile[0], b) and _is(stmt.dst_tile[1], o)):
        raise _fail(stmt.stage, "the output's last two axes must be the tensorized batch and "
                    "block-out loops")
    reads = _product_reads(stmt)
    roles = {}
    for buffer, local, read in stmt.reads:
        assert isinstance(read, Read)
        scope = buffer.scope
        tile = read.indices[-2:]
        expected = (b, k) if scope == Scope.INP else (o, k)
        if scope not in (Scope.INP, Scope.WGT) or not all(_is(t, v) for t, v in zip(tile, expected)):
            raise _fail(stmt.stage, f"it reads {read.tensor.name}[..., {_show(tile)}] where the "
                        f"intrinsic reads inp[..., b, k] and wgt[..., o, k]")
        roles[scope] = (buffer, local)
    if set(roles) != {Scope.INP, Scope.WGT} or reads != 2:
        raise _fail(stmt.stage, "the body must be the product of one inp and one wgt tile")
    loop_vars = [v for v, _ in stmt.loops]
    maps = {"dst": stmt.dst[1], "src": roles[Scope.INP][1], "wgt": roles[Scope.WGT][1]}
    for name, index in maps.items():
        stray = [v.name for v in index.vars() if v not in loop_vars]
        if stray:
            raise _fail(stmt.stage, f"its {name} tile index depends on {', '.join(stray)}, "
                        "which is not a loop around the intrinsic")
    loops = tuple(UopLoopSpec(extent, maps["dst"].coeff(v), maps["src"].coeff(v), maps["wgt"].coeff(v))
                  for v, extent in stmt.loops)
    uop = MicroOp(maps["dst"].const, maps["src"].const, maps["wgt"].const)
    return UopInsn(stmt.stage, UopKind.GEMM, loops, (uop,),
                   (stmt.dst[0], roles[Scope.INP][0], roles[Scope.WGT][0]),
                   unrolled=tuple(v in stmt.unrolled for v in loop_vars))


def _is(expr: Expr, var: Var) -> bool:
    """Whether ``expr`` is exactly ``var`` (after folding constants such as ``0 + var``)."""
    parts = split_index(expr, {var})
    return parts is not None and parts.outer is None and parts.const == 0 \
        and parts.inner.terms == ((var, 1),)


def _show(indices: tuple[Expr, ...]) -> str:
    return ", ".join(show(i) for i in indices)


def _product_reads(stmt: Reduction) -> int:
    body = stmt.body
    if not (isinstance(body, BinOp) and body.op is ArithOp.MUL):
        raise _fail(stmt.stage, "the body must be a product inp · wgt (the GEMM intrinsic's body)")
    count = 0
    for side in (body.a, body.b):
        inner = side.value if isinstance(side, Cast) and side.dtype == "int32" else side
        if not isinstance(inner, Read):
            raise _fail(stmt.stage, "each factor of the product must be a (cast) tile read")
        count += 1
    return count
