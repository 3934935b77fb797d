"""The graph level's integer requantization as epilogue stages.

``openvta.graph`` rescales an int32 accumulator to the next tensor's scale with

::

    x = acc >> pre_shift                          SHR pre_shift
    y = wrap32(x * multiplier[c])                 MUL (immediate, or a channel operand)
    z = round_shift(y, post_shift[c])             SHR s-1, ADD 1, SHR 1   (s >= 1)
                                                  nothing                 (s == 0)
                                                  SHR s (a left shift)    (s < 0)
    out = clip(z, low, high)                      MIN high, MAX low

where ``round_shift(y, s) = ((y >> (s-1)) + 1) >> 1`` rounds half up without overflowing
int32 (:func:`openvta.isa.arith.round_shift`, its steps
:func:`~openvta.isa.arith.round_shift_steps`; :func:`~openvta.isa.arith.requantize_int32`
is the whole rescaling).  :func:`requantize_stages` builds those stages: per-tensor values become
immediates; per-channel ones (or a multiplier too wide for the immediate) become
:class:`~openvta.compiler.epilogue.ChannelOperand` vectors whose int32 contents it
returns.  With per-channel post-shifts the three rounding steps take per-channel
amounts: ``s-1, 1, 1`` where ``s >= 1``, ``0, 0, 0`` where ``s == 0`` and ``s, 0, 0``
where ``s < 0``.

Examples
--------
>>> import numpy as np
>>> from openvta.compiler.epilogue import Epilogue, apply_epilogue
>>> stages, vectors = requantize_stages(2, (20000,), (15,), channels=3, clip=(-128, 127))
>>> Epilogue(stages).describe()
'SHR 2, MUL 20000, SHR 14, ADD 1, SHR 1, MIN 127, MAX -128'
>>> vectors
{}
>>> apply_epilogue(np.array([[100, -100, 37]], np.int32), Epilogue(stages), vectors).tolist()
[[15, -15, 5]]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from openvta.isa import INT8_RANGE, INT32_MAX, INT32_MIN, AluOp, round_shift_steps

from .epilogue import IMM_FIELD, SHR_RANGE, AluStage, ChannelOperand

__all__ = ["requantize_stages", "POST_SHIFT_RANGE"]

#: The post-shifts :func:`requantize_stages` accepts: SHR s-1 must be a SHR amount for
#: s >= 1, SHR s for s < 0.
POST_SHIFT_RANGE = (SHR_RANGE[0], SHR_RANGE[1] + 1)


def _ints(values: Sequence[int], what: str, channels: int, low: int, high: int) -> tuple[int, ...]:
    out = tuple(int(v) for v in values)
    if len(out) not in (1, channels):
        raise ValueError(f"requantization {what} must hold 1 value or one per channel ({channels}), "
                         f"not {len(out)}")
    bad = [v for v in out if not low <= v <= high]
    if bad:
        raise ValueError(f"requantization {what} must be in {low}..{high}, not {bad[0]!r}")
    return out


def requantize_stages(pre_shift: int, multiplier: Sequence[int], post_shift: Sequence[int], *,
                      channels: int, clip: tuple[int, int] | None = INT8_RANGE,
                      prefix: str = "requant") -> tuple[tuple[AluStage, ...], dict[str, np.ndarray]]:
    """The stages of the module docstring and the channel operands they read.

    Parameters
    ----------
    pre_shift :
        the first arithmetic right shift, 0…31.
    multiplier, post_shift :
        one value (per tensor) or one per output channel; int32 multipliers, post-shifts in
        −32…32.
    channels :
        the output channels (the length of the channel operands).
    clip :
        ``(low, high)`` after rounding (None: no clip).
    prefix :
        the channel operands are named ``<prefix>_mul``, ``<prefix>_shift`` and
        ``<prefix>_round``.

    Returns
    -------
    (stages, vectors)
        the stages, and each channel operand's logical int32 ``(channels,)`` array by name.

    Raises
    ------
    ValueError
        for a count or value out of range (naming it).
    """
    if isinstance(pre_shift, bool) or not isinstance(pre_shift, (int, np.integer)) \
            or not 0 <= pre_shift <= SHR_RANGE[1]:
        raise ValueError(f"requantization pre_shift must be an integer in 0..{SHR_RANGE[1]}, not {pre_shift!r}")
    mul = _ints(multiplier, "multiplier", channels, INT32_MIN, INT32_MAX)
    post = _ints(post_shift, "post_shift", channels, *POST_SHIFT_RANGE)
    stages: list[AluStage] = []
    vectors: dict[str, np.ndarray] = {}

    def vector(name: str, values: Sequence[int]) -> ChannelOperand:
        full = np.broadcast_to(np.asarray(values, np.int32), (channels,))
        vectors[f"{prefix}_{name}"] = full.copy()
        return ChannelOperand(f"{prefix}_{name}")

    if pre_shift:
        stages.append(AluStage(AluOp.SHR, int(pre_shift)))
    if len(set(mul)) > 1 or not IMM_FIELD.low <= mul[0] <= IMM_FIELD.high:
        stages.append(AluStage(AluOp.MUL, vector("mul", mul)))
    elif mul[0] != 1:
        stages.append(AluStage(AluOp.MUL, mul[0]))
    if len(set(post)) > 1:
        first, rounds, _ = zip(*(round_shift_steps(s) for s in post))
        stages += [AluStage(AluOp.SHR, vector("shift", first)), AluStage(AluOp.ADD, vector("round", rounds)),
                   AluStage(AluOp.SHR, ChannelOperand(f"{prefix}_round"))]
    elif post[0]:
        shift, add, second = round_shift_steps(post[0])
        stages += [AluStage(op, value) for op, value in ((AluOp.SHR, shift), (AluOp.ADD, add), (AluOp.SHR, second))
                   if value]
    if clip is not None:
        stages += [AluStage(AluOp.MIN, clip[1]), AluStage(AluOp.MAX, clip[0])]
    return tuple(stages), vectors
