"""A deliberately naive model of docs/ISA.md §3, for testing the simulators against.

It runs a program's instructions one by one in stream order (so it is only valid for
programs whose token order agrees with the stream order, as the generators in
``tests/programs.py`` make them), every micro-op execution separately, every lane in
plain Python integers.  Slow and obvious on purpose: it shares no code with
``openvta.sim``.
"""

from __future__ import annotations

import numpy as np

from openvta.isa import AluOp, Config, MemoryType, Opcode, decode_uop
from openvta.runtime import Program


def _wrap32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >> 31 else value


def _low8(value: int) -> int:
    value &= 0xFF
    return value - 256 if value >> 7 else value


def alu_reference(op: AluOp, a: int, b: int) -> int:
    """One lane of the ALU, straight from docs/ISA.md §3."""
    if op == AluOp.MIN:
        return min(a, b)
    if op == AluOp.MAX:
        return max(a, b)
    if op == AluOp.ADD:
        return _wrap32(a + b)
    if op == AluOp.MUL:
        return _wrap32(a * b)
    if op == AluOp.SHR:
        s = b & 0x3F
        if s >= 32:
            s -= 64
        return a >> s if s >= 0 else _wrap32(a << -s)
    raise ValueError(op)


class ReferenceMachine:
    def __init__(self, cfg: Config, dram: np.ndarray) -> None:
        self.cfg = cfg
        self.dram = bytearray(dram.tobytes())
        b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
        self.inp = [[[0] * bi for _ in range(b)] for _ in range(cfg.inp_depth)]
        self.wgt = [[[0] * bi for _ in range(bo)] for _ in range(cfg.wgt_depth)]
        self.acc = [[[0] * bo for _ in range(b)] for _ in range(cfg.acc_depth)]
        self.out = [[[0] * bo for _ in range(b)] for _ in range(cfg.acc_depth)]
        self.uop = [0] * cfg.uop_depth

    # -- DRAM element access --------------------------------------------------------
    def _read_elem(self, mt: MemoryType, addr: int) -> object:
        cfg = self.cfg
        nbytes = cfg.elem_bytes(mt)
        raw = self.dram[addr * nbytes : (addr + 1) * nbytes]
        assert len(raw) == nbytes, "DRAM read out of range"
        if mt == MemoryType.UOP:
            return int.from_bytes(raw, "little")
        if mt == MemoryType.ACC:
            words = [int.from_bytes(raw[i : i + 4], "little", signed=True) for i in range(0, nbytes, 4)]
            return [words[r * cfg.BLOCK_OUT : (r + 1) * cfg.BLOCK_OUT] for r in range(cfg.BATCH)]
        values = [v - 256 if v > 127 else v for v in raw]
        cols = cfg.BLOCK_IN if mt in (MemoryType.INP, MemoryType.WGT) else cfg.BLOCK_OUT
        return [values[r * cols : (r + 1) * cols] for r in range(len(values) // cols)]

    def _zero(self, mt: MemoryType) -> object:
        cfg = self.cfg
        if mt == MemoryType.UOP:
            return 0
        rows = cfg.BLOCK_OUT if mt == MemoryType.WGT else cfg.BATCH
        cols = cfg.BLOCK_IN if mt in (MemoryType.INP, MemoryType.WGT) else cfg.BLOCK_OUT
        return [[0] * cols for _ in range(rows)]

    def _buffer(self, mt: MemoryType) -> list:
        buffers: dict[MemoryType, list] = {MemoryType.INP: self.inp, MemoryType.WGT: self.wgt,
                                           MemoryType.UOP: self.uop, MemoryType.ACC: self.acc,
                                           MemoryType.ACC_8BIT: self.acc}
        return buffers[mt]

    # -- instructions -------------------------------------------------------------------
    def load(self, insn) -> None:
        if insn.x_size == 0:
            return
        mt = MemoryType(insn.memory_type)
        buffer = self._buffer(mt)
        index = insn.sram_base
        width = insn.x_pad_0 + insn.x_size + insn.x_pad_1
        for _ in range(insn.y_pad_0 * width):
            buffer[index] = self._zero(mt)
            index += 1
        for y in range(insn.y_size):
            for _ in range(insn.x_pad_0):
                buffer[index] = self._zero(mt)
                index += 1
            for x in range(insn.x_size):
                buffer[index] = self._read_elem(mt, insn.dram_base + y * insn.x_stride + x)
                index += 1
            for _ in range(insn.x_pad_1):
                buffer[index] = self._zero(mt)
                index += 1
        for _ in range(insn.y_pad_1 * width):
            buffer[index] = self._zero(mt)
            index += 1

    def store(self, insn) -> None:
        nbytes = self.cfg.out_elem_bytes
        for y in range(insn.y_size):
            for x in range(insn.x_size):
                tile = self.out[insn.sram_base + y * insn.x_size + x]
                flat = bytes(v & 0xFF for row in tile for v in row)
                addr = (insn.dram_base + y * insn.x_stride + x) * nbytes
                assert addr + nbytes <= len(self.dram), "DRAM write out of range"
                self.dram[addr : addr + nbytes] = flat

    def loops(self, insn):
        for i in range(insn.iter_out):
            for j in range(insn.iter_in):
                for u in range(insn.uop_bgn, insn.uop_end):
                    uop = decode_uop(self.uop[u], self.cfg)
                    yield i, j, uop

    def gemm(self, insn) -> None:
        cfg = self.cfg
        for i, j, uop in self.loops(insn):
            a = uop.dst_idx + i * insn.dst_factor_out + j * insn.dst_factor_in
            x = uop.src_idx + i * insn.src_factor_out + j * insn.src_factor_in
            w = uop.wgt_idx + i * insn.wgt_factor_out + j * insn.wgt_factor_in
            for b in range(cfg.BATCH):
                for o in range(cfg.BLOCK_OUT):
                    if insn.reset_reg:
                        self.acc[a][b][o] = 0
                        continue
                    total = self.acc[a][b][o]
                    for k in range(cfg.BLOCK_IN):
                        total += self.inp[x][b][k] * self.wgt[w][o][k]
                    self.acc[a][b][o] = _wrap32(total)
                    self.out[a][b][o] = _low8(self.acc[a][b][o])

    def alu(self, insn) -> None:
        cfg = self.cfg
        for i, j, uop in self.loops(insn):
            d = uop.dst_idx + i * insn.dst_factor_out + j * insn.dst_factor_in
            s = uop.src_idx + i * insn.src_factor_out + j * insn.src_factor_in
            for b in range(cfg.BATCH):
                for o in range(cfg.BLOCK_OUT):
                    operand = insn.imm if insn.use_imm else self.acc[s][b][o]
                    self.acc[d][b][o] = alu_reference(insn.alu_opcode, self.acc[d][b][o], operand)
                    self.out[d][b][o] = _low8(self.acc[d][b][o])


def run_reference(program: Program) -> np.ndarray:
    """The final DRAM image, executing in stream order."""
    machine = ReferenceMachine(program.config, program.dram)
    for insn in program.instructions():
        if insn.opcode == Opcode.LOAD:
            machine.load(insn)
        elif insn.opcode == Opcode.STORE:
            machine.store(insn)
        elif insn.opcode == Opcode.GEMM:
            machine.gemm(insn)
        elif insn.opcode == Opcode.ALU:
            machine.alu(insn)
    return np.frombuffer(bytes(machine.dram), dtype=np.uint8).copy()
