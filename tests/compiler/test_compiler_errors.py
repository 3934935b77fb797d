"""Bad expressions, bad schedules and a broken token pass: each fails with a clear message."""

from __future__ import annotations

import numpy as np
import pytest

from openvta.compiler import LoweringError, ScheduleError, conv2d, create_schedule, dense, te
from openvta.compiler.intrin import gemm_intrinsic
from openvta.compiler.ir import Dep, DepAction
from openvta.compiler.ops.dense import DensePlan
from openvta.compiler.passes import insert_dep_tokens as tokens_pass
from openvta.compiler.pipeline import build
from openvta.isa import Module, preset
from openvta.sim.functional import RaceError, run

TINY = preset("tiny")


def _dense_schedule(body: str = "product", tensorize_at: str = "j"):
    """A small dense layer written out by hand, with a chosen (possibly wrong) body."""
    b, bi, bo = TINY.BATCH, TINY.BLOCK_IN, TINY.BLOCK_OUT
    data = te.placeholder((2, 3, b, bi), "int8", "data")
    weight = te.placeholder((2, 3, bo, bi), "int8", "weight")
    ko, k = te.reduce_axis(3, "ko"), te.reduce_axis(bi, "k")

    def fbody(i, o, j, m):
        x = data[i, ko, j, k].astype("int32")
        w = weight[o, ko, m, k].astype("int32")
        if body == "sum":
            return te.sum(x + w, axis=[ko, k])
        if body == "swapped":
            return te.sum(x * weight[o, ko, k, m].astype("int32"), axis=[ko, k])
        return te.sum(x * w, axis=[ko, k])

    acc = te.compute((2, 2, b, bo), fbody, "acc")
    out = te.compute(acc.shape, lambda *i: acc(*i).astype("int8"), "out")
    s = create_schedule(out)
    i, o, j, m = s[out].axis
    s[acc].set_scope("acc")
    s[acc].compute_at(s[out], o)
    ia, oa, ja, ma = s[acc].axis
    ko_, k_ = s[acc].reduce_axis
    s[acc].reorder(ko_, ia, oa, ja, ma, k_)
    for t in (data, weight):
        cache = s.cache_read(t, "inp" if t is data else "wgt", [acc])
        s[cache].compute_at(s[out], o)
    ja = s[acc].axis[2] if tensorize_at == "j" else s[acc].axis[3]
    s[acc].tensorize(ja, gemm_intrinsic(TINY))
    return s


def test_the_hand_written_schedule_compiles() -> None:
    run(build(_dense_schedule(), TINY))


@pytest.mark.parametrize(("body", "at", "message"), [
    ("sum", "j", r"^tensorize: acc: the body must be a product inp · wgt"),
    ("swapped", "j", r"^tensorize: acc: it reads weight\.wgt\[\.\.\., k, acc_i3\] where the "
                     r"intrinsic reads inp\[\.\.\., b, k\] and wgt\[\.\.\., o, k\]$"),
    ("product", "m", r"^tensorize: acc: the loops from the tensorize axis inward have extents "
                     r"\[4, 4\], the gemm intrinsic needs \[1, 4, 4\]"),
])
def test_tensorize_on_a_body_that_does_not_match(body: str, at: str, message: str) -> None:
    with pytest.raises(LoweringError, match=message):
        build(_dense_schedule(body, at), TINY)


def test_a_schedule_that_does_not_fit_the_buffers() -> None:
    with pytest.raises(LoweringError, match=(r"^check buffers: the schedule does not fit: the inp "
                                             r"buffer needs 2 × 192 elements \(.*\) but holds 256")):
        dense(TINY, batch=16, in_features=48, out_features=16, vthreads=2,
              plan=DensePlan(nb=16, ob=2, kb=12, vthreads=2)).build()


def test_virtual_threads_must_not_split_a_reduction() -> None:
    s = _dense_schedule()
    stage = s.stages[next(t for t in s.stages if t.name == "acc")]
    with pytest.raises(ScheduleError, match=r"^vthread: ko is a reduction axis; virtual threads "
                                            r"must split data-parallel work$"):
        stage.vthread(stage.reduce_axis[0])


def test_vthreads_that_divide_nothing_evenly_split_unevenly() -> None:
    """Rows or channel blocks that no tile size splits evenly among the threads: the last
    thread takes the tail tile (tests/compiler/test_uneven_threads.py checks the results)."""
    assert conv2d(preset("small"), ci=16, co=24, hw=14, kernel=3, pad=1, stride=2, vthreads=4).plan.split == "y"
    assert conv2d(preset("default"), hw=7, ci=32, co=16, kernel=5, pad=2, vthreads=4).plan.yb == 2
    assert dense(preset("default"), batch=1, in_features=16, out_features=48, vthreads=2).plan.ob == 2


def test_vthreads_that_split_nothing_are_refused_with_the_real_reason() -> None:
    with pytest.raises(LoweringError, match=r"^plan conv2d: no axis of this conv2d splits among 4 virtual "
                                            r"threads, evenly or with the last thread taking the tail tile "
                                            r"\(output channels: 1 block of 16, rows: 5\)$"):
        conv2d(preset("default"), hw=5, ci=16, co=16, kernel=3, pad=1, vthreads=4)
    with pytest.raises(LoweringError, match=r"^plan dense: 4 virtual threads must divide the 3 output blocks, "
                                            r"evenly or with the last thread taking the tail tile$"):
        dense(preset("default"), batch=1, in_features=16, out_features=48, vthreads=4)
    # rows 13 split unevenly among 4 threads need tiles of 4 rows: too large for tiny's buffers
    with pytest.raises(LoweringError, match=r"^plan conv2d: no tiling of this conv2d fits the buffers with 4 "
                                            r"virtual threads: inp buffer overflow: 4 threads × 70 = 280 entries "
                                            r"> 256$"):
        conv2d(preset("tiny"), hw=13, ci=16, co=preset("tiny").BLOCK_OUT, kernel=7, pad=3, vthreads=4)


def test_a_conv2d_whose_smallest_tiles_overflow_says_which_buffer() -> None:
    cfg = preset("tiny")
    with pytest.raises(LoweringError, match=r"^plan conv2d: no tiling of this conv2d fits the buffers with 1 "
                                            r"virtual thread: inp buffer overflow: 1 thread × 529 = 529 entries > 256; "
                                            r"wgt buffer overflow"):
        conv2d(cfg, ci=4, co=4, hw=40, kernel=23, pad=0)


def test_schedule_primitive_errors() -> None:
    s = _dense_schedule()
    out = s[s.outputs[0]]
    i, o, j, m = out.axis
    with pytest.raises(ScheduleError, match=r"^split takes exactly one of factor and nparts$"):
        out.split(i)
    io, ii = out.split(i, factor=1)
    with pytest.raises(ScheduleError, match=r"^split: out_i0 is not a loop of out \(its loops: "):
        out.split(i, factor=2)
    with pytest.raises(ScheduleError, match=r"^fuse: out_i0\.outer and out_i2 must be adjacent"):
        out.fuse(io, j)
    with pytest.raises(ScheduleError, match=r"^reorder: an axis is given twice$"):
        out.reorder(io, io)
    with pytest.raises(ScheduleError, match=r"^pragma must be one of dma_copy, alu, not 'gpu'$"):
        out.pragma(io, "gpu")
    with pytest.raises(ScheduleError, match=r"^scope must be one of global, inp, wgt, acc, out, "
                                            r"not 'l2'$"):
        out.set_scope("l2")
    with pytest.raises(ScheduleError, match=r"^compute_at: out cannot be attached to itself$"):
        out.compute_at(out, io)
    acc = s.stages[next(t for t in s.stages if t.name == "acc")]
    with pytest.raises(ScheduleError, match=r"^compute_inline: acc must be an element-wise compute$"):
        acc.compute_inline()
    with pytest.raises(ScheduleError, match=r"^cache_read scope must be one of inp, wgt, acc, out"):
        s.cache_read(s.outputs[0], "global", [])


def test_a_split_that_does_not_divide_its_loop() -> None:
    s = _dense_schedule()
    out = s[s.outputs[0]]
    out.split(out.axis[1], factor=3)
    with pytest.raises(LoweringError, match=r"^bound inference: split of out\.out_i1 \(extent 2\) "
                                            r"by factor 3 does not divide it$"):
        build(s, TINY)


def test_expression_errors() -> None:
    a = te.placeholder((2, 3), "int8", "a")
    with pytest.raises(te.TEError, match=r"^a has 2 dimensions, indexed with 1$"):
        a[0]
    with pytest.raises(te.TEError, match=r"^dtype must be one of int8, int32, not 'float32'$"):
        te.placeholder((2,), "float32")
    with pytest.raises(te.TEError, match=r"^shape must be positive integers, not \(0, 2\)$"):
        te.placeholder((0, 2))
    with pytest.raises(te.TEError, match=r"^clip bounds must satisfy low <= high, not 5 > 1$"):
        te.clip(a[0, 0], 5, 1)
    with pytest.raises(te.TEError, match=r"^sum needs reduction axes made by reduce_axis$"):
        te.sum(a[0, 0], [])
    with pytest.raises(te.TEError, match=r"^expressions combine integers and expressions, not 1\.5$"):
        a[0, 0] + 1.5


def test_a_broken_token_pass_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A token pass that pops load→compute after the GEMM instead of before: balanced, but racy."""
    def broken(module, body, thread):
        out = []
        for s in body:
            out += [s, Dep(DepAction.POP, Module.LOAD, Module.COMPUTE),
                    Dep(DepAction.PUSH, Module.COMPUTE, Module.LOAD)] \
                if tokens_pass._is_gemm(s) else [s]
        return out if module == Module.COMPUTE else original(module, body, thread)

    original = tokens_pass._wrap
    monkeypatch.setattr(tokens_pass, "_wrap", broken)
    program = conv2d(TINY, ci=8, co=8, hw=8, kernel=3, pad=1, vthreads=2).build(
        {"data": np.ones((1, 8, 8, 8), np.int8), "weight": np.ones((8, 8, 3, 3), np.int8)})
    with pytest.raises(RaceError, match=r"^race on (inp|wgt) buffer element \d+: "):
        run(program)


def test_a_token_pass_that_loses_tokens_is_caught_by_the_pipeline(monkeypatch) -> None:
    original = tokens_pass._wrap
    monkeypatch.setattr(tokens_pass, "_wrap", lambda m, body, thread: [
        d for d in original(m, body, thread) if not (isinstance(d, Dep) and d.action == DepAction.POP
                                              and d.dst == Module.LOAD)])
    with pytest.raises(LoweringError, match=r"^insert_dep_tokens: token queue compute→load is left "
                                            r"with \+\d+ tokens at the end of the program$"):
        conv2d(TINY, ci=8, co=8, hw=8, kernel=3, pad=1).build()


def test_inlined_element_wise_stages_and_cache_write_and_unroll() -> None:
    """A hand-written schedule using compute_inline, cache_write and unroll still computes right."""
    b, bi, bo = TINY.BATCH, TINY.BLOCK_IN, TINY.BLOCK_OUT
    data = te.placeholder((2, 3, b, bi), "int8", "data")
    weight = te.placeholder((2, 3, bo, bi), "int8", "weight")
    ko, k = te.reduce_axis(3, "ko"), te.reduce_axis(bi, "k")
    acc = te.compute((2, 2, b, bo), lambda i, o, j, m: te.sum(
        data[i, ko, j, k].astype("int32") * weight[o, ko, m, k].astype("int32"), axis=[ko, k]), "acc")
    shr = te.compute(acc.shape, lambda *i: acc(*i) >> 3, "shr")
    act = te.compute(acc.shape, lambda *i: te.relu(shr(*i) + 5), "act")
    out = te.compute(acc.shape, lambda *i: act(*i).astype("int8"), "out")
    s = create_schedule(out)
    cached = s.cache_write(out, "acc")  # out becomes a copy of the accumulator stage
    s[shr].compute_inline()
    i, o, j, m = s[out].axis
    for t in (acc, act, cached):
        s[t].set_scope("acc")
        s[t].compute_at(s[out], o)
    ia, oa, ja, ma = s[acc].axis
    ko_, k_ = s[acc].reduce_axis
    s[acc].reorder(ko_, ia, oa, ja, ma, k_)
    s[acc].unroll(ko_)
    for t, scope in ((data, "inp"), (weight, "wgt")):
        c = s.cache_read(t, scope, [acc])
        s[c].compute_at(s[out], o)
    s[acc].tensorize(ja, gemm_intrinsic(TINY))
    rng = np.random.default_rng(0)
    d = rng.integers(-128, 128, data.shape, dtype=np.int8)
    w = rng.integers(-128, 128, weight.shape, dtype=np.int8)
    program = build(s, TINY, {data: ("input", "", d), weight: ("weight", "", w)})
    result = run(program)
    got = program.read("out", result.dram)
    acc_ref = np.einsum("ikjx,okmx->iojm", d.astype(np.int64), w.astype(np.int64))
    np.testing.assert_array_equal(got, np.maximum((acc_ref >> 3) + 5, 0).astype(np.int32).astype(np.int8))


def test_an_immediate_outside_the_alu_field_names_the_field() -> None:
    data = te.placeholder((1, 1, TINY.BATCH, TINY.BLOCK_OUT), "int32", "data")
    add = te.compute(data.shape, lambda *i: data(*i) + 40000, "add")
    out = te.compute(data.shape, lambda *i: add(*i).astype("int8"), "out")
    s = create_schedule(out)
    c = s[out].axis[1]
    cached = s.cache_read(data, "acc", [add])
    for stage in (s[cached], s[add]):
        stage.set_scope("acc")
        stage.compute_at(s[out], c)
    with pytest.raises(LoweringError, match=r"^lower_alu: add: immediate 40000 does not fit the ALU's "
                                            r"16-bit signed imm field \(-32768\.\.32767\)$"):
        build(s, TINY)


def test_padding_beyond_the_dma_pad_fields_names_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """conv2d refuses pad > 15 up front; without that check code generation still would."""
    from dataclasses import replace

    from openvta.compiler.ops import conv2d as conv2d_module

    unbounded = tuple(replace(p, high=None) if p.name == "pad" else p for p in conv2d_module.CONV2D_PARAMS)
    monkeypatch.setattr(conv2d_module, "CONV2D_PARAMS", unbounded)
    op = conv2d(preset("small"), ci=8, co=8, hw=2, kernel=17, pad=16)
    with pytest.raises(LoweringError, match=r"^codegen: data_pad\.inp: padding of 16 exceeds the DMA's "
                                            r"15-element y_pad_0 field \(4 bits\)$"):
        op.build()


def test_a_binop_or_cmp_refuses_a_string_op() -> None:
    one = te.Const(1)
    with pytest.raises(te.TEError, match=r"^a BinOp's op must be an ArithOp, not '\+'$"):
        te.BinOp("+", one, one)  # the wrong type is the point
    with pytest.raises(te.TEError, match=r"^a Cmp's op must be a CmpOp, not '<'$"):
        te.Cmp("<", one, one)  # the wrong type is the point


def test_show_writes_each_arith_op_with_its_symbol() -> None:
    x = te.Var("x")
    assert te.show(te.minimum(x * 2 - 3, x >> 1)) == "min(((x * 2) - 3), (x >> 1))"
    assert te.show((x + 0) * 1 // 4 % 5) == "((x // 4) % 5)"


@pytest.mark.parametrize(("fbody", "message"), [
    (lambda a, b: a - b, r"^lower_alu: alu: the ALU cannot apply - with a tensor operand$"),
    (lambda a, b: a << b, r"^lower_alu: alu: the ALU cannot apply << with a tensor operand$"),
    (lambda a, b: a // 2, r"^lower_alu: alu: the ALU has no operation for BinOp //$"),
])
def test_an_alu_stage_the_alu_cannot_apply_names_the_op(fbody, message) -> None:
    data = te.placeholder((1, 1, TINY.BATCH, TINY.BLOCK_OUT), "int32", "data")
    bias = te.placeholder((1, 1, TINY.BATCH, TINY.BLOCK_OUT), "int32", "bias")
    alu = te.compute(data.shape, lambda *i: fbody(data(*i), bias(*i)), "alu")
    out = te.compute(data.shape, lambda *i: alu(*i).astype("int8"), "out")
    s = create_schedule(out)
    c = s[out].axis[1]
    for tensor in (data, bias):
        cached = s.cache_read(tensor, "acc", [alu])
        s[cached].set_scope("acc")
        s[cached].compute_at(s[out], c)
    s[alu].set_scope("acc")
    s[alu].compute_at(s[out], c)
    with pytest.raises(LoweringError, match=message):
        build(s, TINY)


@pytest.mark.parametrize(("skipped", "message"), [
    ("lower_alu", r"^lower_alu: left a Elementwise behind$"),
    ("inject_vthreads", r"^inject_vthreads: left a virtual-thread loop behind$"),
])
def test_a_pass_that_does_nothing_is_caught_by_the_invariant_it_promises(monkeypatch, skipped, message) -> None:
    from dataclasses import replace

    from openvta.compiler import pipeline

    steps = [replace(s, run=lambda ir, _: ir) if s.name == skipped else s for s in pipeline.PASSES]
    monkeypatch.setattr(pipeline, "PASSES", steps)
    with pytest.raises(LoweringError, match=message):
        conv2d(TINY, ci=8, co=8, hw=8, kernel=3, pad=1, vthreads=2).build()
