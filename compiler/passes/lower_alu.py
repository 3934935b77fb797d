"""Pass: element-wise stages become ALU instructions, applied in place.

Pre: :class:`~openvta.compiler.ir.Elementwise` statements whose body applies integer
operations to the previous accumulator stage (read at the same tile).  Post: one
:class:`~openvta.compiler.ir.UopInsn` of kind ``alu`` per operation, innermost operation
first: ``x >> c`` is SHR c, ``x << c`` SHR −c, ``x + c`` / ``x - c`` ADD, ``x * c`` MUL,
``min``/``max`` MIN/MAX (so ``clip`` is MIN then MAX and ``relu`` MAX 0); an operand
read from another accumulator tensor (e.g. a bias) makes the vector form.  Casts to
int32 are no-ops; the int8 cast happens when the out buffer is stored.
"""

from __future__ import annotations

from dataclasses import replace

from openvta.isa import AluOp, Field, Format, layouts_of

from ..affine import Affine
from ..ir import Block, Buffer, Elementwise, LoweringError, MicroOp, Stmt, UopInsn, UopKind, UopLoopSpec, transform
from ..lower import Lowered
from ..te import ArithOp, BinOp, Cast, Const, Expr, Read

__all__ = ["lower_alu"]

_OPS = {ArithOp.ADD: AluOp.ADD, ArithOp.SUB: AluOp.ADD, ArithOp.MUL: AluOp.MUL, ArithOp.SHR: AluOp.SHR,
        ArithOp.SHL: AluOp.SHR, ArithOp.MIN: AluOp.MIN, ArithOp.MAX: AluOp.MAX}
_COMMUTATIVE = {ArithOp.ADD, ArithOp.MUL, ArithOp.MIN, ArithOp.MAX}
_NEGATED = {ArithOp.SUB, ArithOp.SHL}  # applied as ADD / SHR of the negated immediate


def lower_alu(lowered: Lowered) -> Lowered:
    imm = layouts_of(lowered.cfg)[Format.ALU].field("imm")
    return replace(lowered, body=transform(lowered.body, lambda s: _lower(s, imm)))


def _fail(stage: str, message: str) -> LoweringError:
    return LoweringError("lower_alu", f"{stage}: {message}")


def _lower(stmt: Stmt, imm: Field) -> Stmt:
    if not isinstance(stmt, Elementwise):
        return stmt
    ops: list[tuple[AluOp, int | None, tuple[Buffer, Affine] | None]] = []
    _collect(stmt, stmt.body, ops, imm)
    loop_vars = [v for v, _ in stmt.loops]
    dst_buffer, dst = stmt.dst
    insns: list[Stmt] = []
    for alu_op, imm, operand in ops:
        src_buffer, src = operand if operand is not None else (dst_buffer, dst)
        loops = tuple(UopLoopSpec(extent, dst.coeff(v), src.coeff(v)) for v, extent in stmt.loops)
        stray = [v.name for v in src.vars() + dst.vars() if v not in loop_vars]
        if stray:
            raise _fail(stmt.stage, f"an index depends on {', '.join(stray)}, not a loop of the stage")
        insns.append(UopInsn(stmt.stage, UopKind.ALU, loops, (MicroOp(dst.const, src.const),),
                             (dst_buffer, src_buffer, None), alu_op=alu_op, imm=imm))
    return Block(tuple(insns))


def _collect(stmt: Elementwise, expr: Expr, ops: list, imm: Field) -> None:
    """Append the ALU operations of ``expr`` (innermost first); the chain ends at the in-place read."""
    if isinstance(expr, Cast):
        if expr.dtype != "int32":
            raise _fail(stmt.stage, "only the output may cast to int8")
        return _collect(stmt, expr.value, ops, imm)
    if isinstance(expr, Read):
        operand = stmt.operands.get(expr.tensor)
        if operand is None or operand != stmt.dst:
            raise _fail(stmt.stage, f"it must update the accumulator tile in place; it reads "
                        f"{expr.tensor.name} at another tile")
        return None
    if not isinstance(expr, BinOp) or expr.op not in _OPS:
        op = expr.op.value if isinstance(expr, BinOp) else ""
        raise _fail(stmt.stage, f"the ALU has no operation for {type(expr).__name__} {op}".rstrip())
    chain, other = expr.a, expr.b
    if _is_leaf_operand(stmt, chain) and expr.op in _COMMUTATIVE:
        chain, other = other, chain
    _collect(stmt, chain, ops, imm)
    if isinstance(other, Const):
        value = other.value
        if expr.op in _NEGATED:
            value = -value
        if not imm.low <= value <= imm.high:
            raise _fail(stmt.stage, f"immediate {value} does not fit the ALU's {imm.width}-bit "
                        f"signed {imm.name} field ({imm.low}..{imm.high})")
        ops.append((_OPS[expr.op], value, None))
        return None
    if expr.op in _NEGATED:
        raise _fail(stmt.stage, f"the ALU cannot apply {expr.op.value} with a tensor operand")
    operand = stmt.operands.get(other.tensor) if isinstance(other, Read) else None
    if operand is None:
        raise _fail(stmt.stage, "the second operand must be a constant or an accumulator tensor")
    ops.append((_OPS[expr.op], None, operand))
    return None


def _is_leaf_operand(stmt: Elementwise, expr: Expr) -> bool:
    if isinstance(expr, Const):
        return True
    return isinstance(expr, Read) and stmt.operands.get(expr.tensor) != stmt.dst
