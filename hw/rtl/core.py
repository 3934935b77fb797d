"""The accelerator core: buffers, queues, the four modules, the memory arbiter, counters.

Buffers (one element per word, docs/ISA.md §1): inp, wgt, acc (two read ports transparent
for its write port), out, uop.  Command queues: three FIFOs of ``CMD_QUEUE_DEPTH``
instructions.  Token queues: four counters of ``DEP_QUEUE_DEPTH``.  Memory: seven
burst masters (fetch; load's inp and wgt readers; compute's uop, acc and acc8 readers;
store's writer) arbitrated onto the ``m_axi_*`` AXI4 master; with ``shared_dma``, four
(one reader per module: :class:`~.dma.DmaReaders`).

Machine v2 (docs/ISA.md §9) adds the epi buffer (one write and one read port, the
store module's), a read port of the acc buffer for the store module's drain unit
(:mod:`.drain`), two burst masters (store's EPI and EPI_8BIT readers) after the seven, and
a **cleared bit per accumulator tile** (:class:`ClearedTiles`, in block RAM): the drain zeroes what it
drains by setting the tile's bit, not by writing the acc buffer (a second write port would
take it out of block RAM on an FPGA); every read of the acc buffer returns zeros for a tile
whose bit is set, and compute's writes (GEMM, ALU, its ACC loads) clear the bit.

The counters of :data:`openvta.isa.HW_COUNTERS` count from ``start`` to FINISH with the
definitions of docs/ISA.md and the cycle model (event counters equal the functional
simulator's exactly).  The build option ``counters`` keeps all of them, only ``cycles``,
or none (:class:`openvta.isa.counters.CounterSet`): on a small FPGA the 38 64-bit
counters and their read multiplexer are about a third of the logic.
"""

from __future__ import annotations

from typing import Any

from amaranth import Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from openvta.isa import (
    HW_COUNTERS,
    INSN_BYTES,
    Config,
    Counter,
    LeanBuild,
    MemoryType,
    Opcode,
    Timing,
    TokenQueue,
    timing_for,
)
from openvta.isa.counters import COUNTER_WIDTH, REG_WIDTH, CounterSet, counter_set

from .buffers import buffer_geometry
from .compute import ComputeUnit
from .fetch import INSN_BITS, CommandQueue, Fetch, TokenCounter
from .fields import Decoded
from .loadstore import LoadUnit, StoreUnit
from .memory import AxiArbiter, axi_master_signature
from .params import refusing
from .stage import Stage, token_queues

__all__ = ["Core"]


class Core(wiring.Component):
    """The whole accelerator behind an AXI4 master and a start/done interface.

    Parameters
    ----------
    cfg :
        the configuration (every preset elaborates).
    timing :
        its ``max_burst_beats`` sets the longest AXI burst (default: the preset's), and its
        ``gemm_ii_cycles``, ``alu_imm_ii_cycles`` and ``alu_vec_ii_cycles`` the lean
        build of the compute unit (:class:`~openvta.isa.LeanBuild`: the GEMM core and the ALU
        folded over that many cycles, one accumulator read port), and its
        ``insn_move_cycles`` the words of an instruction in the prefetch buffer and the
        command queues (:class:`~.fetch.CommandQueue`).
    counters : str or CounterSet
        ``"all"`` (default), ``"cycles"`` or ``"none"``: the counters built; the
        ``counters`` port carries them in ``HW_COUNTERS`` order
        (``counter_set.counters``).
    shared_dma :
        one DMA reader per module for all its LOADs, of the width each chooses
        (:class:`~.dma.DmaReaders`), instead of one per buffer: less logic and fewer
        arbiter masters, the same cycles (:attr:`LeanBuild.shared_dma`).

    Raises
    ------
    ValueError
        if ``counters`` names no counter set, or ``timing`` a lean build the compute
        unit cannot be.
    """

    @refusing
    def __init__(self, cfg: Config, timing: Timing | None = None,
                 counters: str | CounterSet = "all", shared_dma: bool = False) -> None:
        self.counter_set = counter_set(counters)
        self.cfg, self.shared_dma = cfg, bool(shared_dma)
        self.timing = timing or timing_for(cfg)
        LeanBuild.of(cfg, self.timing)  # a lean build the compute unit cannot be is refused here
        self.bus_bits = cfg.bus_bytes * 8
        members = {
            "start": In(1), "insn_addr": In(REG_WIDTH), "insn_count": In(REG_WIDTH),
            "done": Out(1), "busy": Out(1),
            "counters": Out(data.ArrayLayout(COUNTER_WIDTH, len(self.counter_set.counters))),
        }
        members.update(axi_master_signature(self.bus_bits))
        super().__init__(members)

    def _memories(self, m: Module, acc_ports: int) -> tuple[dict[str, Any], Memory]:
        """The buffers, and their ports by the names of the modules' members; the acc buffer
        (machine v2's drain reads it through a port of its own: :meth:`_drain`)."""
        mems = {name: Memory(shape=unsigned(width), depth=depth, init=[])
                for name, (width, depth) in buffer_geometry(self.cfg).items()}
        for name, mem in mems.items():
            m.submodules[f"{name}_buffer"] = mem
        ports: dict[str, Any] = {}
        for name in (n for n in mems if n != "acc"):  # (machine v2's epi buffer: the store module's)
            ports[f"{name}_w"] = mems[name].write_port()
            ports[f"{name}_r"] = mems[name].read_port()
        ports["acc_w"] = mems["acc"].write_port()
        ports["acc_ra"] = mems["acc"].read_port(transparent_for=(ports["acc_w"],))
        if acc_ports == 2:
            ports["acc_rb"] = mems["acc"].read_port(transparent_for=(ports["acc_w"],))
        return ports, mems["acc"]

    def _drain(self, m: Module, ports: dict[str, Any], acc: Memory,
               units: tuple[LoadUnit, ComputeUnit, StoreUnit]) -> list[Any]:
        """Machine v2 (docs/ISA.md §9): the drain's read port of the acc buffer, and the
        drained tiles' cleared bits between the acc buffer's read ports and the modules that
        read them (their data zero while the bit is set; the drain's zeroing port sets the
        bits, compute's acc writes clear them).  It takes the read ports it wires out of
        ``ports`` and connects the others (:func:`_connect_ports`, first: the netlist's
        names follow the statements' order); it returns the store module's burst masters."""
        _, compute, store = units
        readers = [(compute.acc_ra, ports.pop("acc_ra")), (store.acc_d, acc.read_port())]
        if "acc_rb" in ports:
            readers.append((compute.acc_rb, ports.pop("acc_rb")))
        _connect_ports(m, ports, units)
        m.submodules.cleared = cleared = ClearedTiles(self.cfg.acc_depth, len(readers))
        write = ports["acc_w"]
        m.d.comb += [cleared.set_en.eq(store.acc_z.en), cleared.set_addr.eq(store.acc_z.addr),
                     cleared.clear_en.eq(write.en), cleared.clear_addr.eq(write.addr)]
        for i, (unit_port, mem_port) in enumerate(readers):
            m.d.comb += [mem_port.addr.eq(unit_port.addr), mem_port.en.eq(unit_port.en),
                         cleared.read_addr[i].eq(unit_port.addr), cleared.read_en[i].eq(unit_port.en),
                         unit_port.data.eq(Mux(cleared.read_bit[i], 0, mem_port.data))]
        return [getattr(store, n) for n in store.readers.port_names()]

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cfg, burst = self.cfg, self.timing.max_burst_beats
        compute = ComputeUnit(cfg, self.bus_bits, self.timing, self.shared_dma)
        ports, acc = self._memories(m, compute.lean.acc_ports)
        words = self.timing.insn_move_cycles
        fifos: list[Any] = [SyncFIFOBuffered(width=INSN_BITS, depth=cfg.CMD_QUEUE_DEPTH) if words == 1
                            else CommandQueue(cfg.CMD_QUEUE_DEPTH, words) for _ in range(3)]
        for name, fifo in zip(("load", "compute", "store"), fifos):
            m.submodules[f"{name}_queue"] = fifo
        tokens = {q: TokenCounter(cfg.DEP_QUEUE_DEPTH) for q in TokenQueue}
        for q, counter in tokens.items():
            m.submodules[f"tokens_{q.name.lower()}"] = counter
        m.submodules.fetch = fetch = Fetch(cfg, self.bus_bits, burst, words)
        m.submodules.load = load = LoadUnit(cfg, self.bus_bits, burst, self.shared_dma, words)
        m.submodules.compute = compute
        m.submodules.store = store = StoreUnit(cfg, self.bus_bits, burst, self.shared_dma, words,
                                               compute.lean.mul_cycles)
        for unit, fifo in zip((load, compute, store), fifos):
            wiring.connect(m, fifo.r_stream, unit.cmd)
            m.d.comb += unit.remaining.eq(fetch.busy)
            _connect_tokens(m, unit, tokens)
        masters = [fetch.mem, *(getattr(load, n) for n in load.readers.port_names()),
                   *(getattr(compute, n) for n in compute.readers.port_names()), store.out_mem]
        if cfg.has_drain:
            masters += self._drain(m, ports, acc, (load, compute, store))
        else:
            _connect_ports(m, ports, (load, compute, store))
        m.submodules.arbiter = arbiter = AxiArbiter(len(masters), self.bus_bits)
        for i, port in enumerate(masters):
            wiring.connect(m, port, arbiter.masters[i])
        for name in axi_master_signature(self.bus_bits):
            ours, theirs = getattr(self, name), getattr(arbiter, name)
            if self.signature.members[name].flow == Out:
                m.d.comb += ours.eq(theirs)
            else:
                m.d.comb += theirs.eq(ours)
        for i, fifo in enumerate(fifos):
            m.d.comb += [fifo.w_data.eq(fetch.queue_data), fifo.w_en.eq(fetch.queue_en[i]),
                         fetch.queue_ready[i].eq(fifo.w_rdy)]
        running = Signal()
        with m.If(self.start):
            m.d.sync += running.eq(1)
        with m.Elif(compute.finished & running):
            m.d.sync += running.eq(0)
        m.d.comb += [fetch.start.eq(self.start), fetch.insn_addr.eq(self.insn_addr),
                     fetch.insn_count.eq(self.insn_count), compute.clear.eq(self.start),
                     self.done.eq(compute.finished), self.busy.eq(running)]
        self._counters(m, running, fetch, load, compute, store)
        return m

    def _counters(self, m: Module, running: Signal, fetch: Fetch, load: LoadUnit,
                  compute: ComputeUnit, store: StoreUnit) -> None:
        cfg = self.cfg
        inc: dict[Counter, list] = {c: [] for c in HW_COUNTERS}
        ld, cd, sd = (Decoded(u.status.insn, cfg) for u in (load, compute, store))

        def moved(d: Decoded, elem_bytes: int) -> Any:
            return d.mem("y_size") * d.mem("x_size") * elem_bytes

        def started_mem(unit: Any, d: Decoded, mtype: MemoryType | None) -> Any:
            cond = unit.status.started & (d.mem("x_size") != 0)
            return cond if mtype is None else cond & (d.mem("memory_type") == mtype)

        inc[Counter.FETCH_INSNS].append(fetch.fetched)
        inc[Counter.INSN_FETCH_BYTES].append(fetch.fetched * INSN_BYTES)
        for unit, counter in ((load, Counter.LOAD_INSNS), (compute, Counter.COMPUTE_INSNS),
                              (store, Counter.STORE_INSNS)):
            inc[counter].append(unit.status.started)
            inc[Counter.TOKEN_PUSHES].extend(unit.status.pushes)
            inc[Counter.TOKEN_POPS].extend(unit.status.pops)
        for unit, d in ((load, ld), (store, sd)):
            inc[Counter.SYNC_INSNS].append(unit.status.started & (d.mem("x_size") == 0))
        inc[Counter.SYNC_INSNS].append(compute.status.started & (cd.opcode == Opcode.LOAD)
                                       & (cd.mem("x_size") == 0))
        inc[Counter.GEMM_INSNS].append(compute.status.started & (cd.opcode == Opcode.GEMM))
        inc[Counter.ALU_INSNS].append(compute.status.started & (cd.opcode == Opcode.ALU))
        inc[Counter.GEMM_UOPS].append(compute.uop_fire & compute.uop_is_gemm)
        inc[Counter.ALU_UOPS].append(compute.uop_fire & ~compute.uop_is_gemm)
        inc[Counter.MACS].append((compute.uop_fire & compute.uop_is_gemm & ~compute.uop_reset)
                                 * cfg.macs_per_uop)
        byte_counts: list[tuple[Counter, Any, Decoded, MemoryType, int]] = [
            (Counter.INP_LOAD_BYTES, load, ld, MemoryType.INP, cfg.inp_elem_bytes),
            (Counter.WGT_LOAD_BYTES, load, ld, MemoryType.WGT, cfg.wgt_elem_bytes),
            (Counter.UOP_LOAD_BYTES, compute, cd, MemoryType.UOP, cfg.uop_elem_bytes),
            (Counter.ACC_LOAD_BYTES, compute, cd, MemoryType.ACC, cfg.acc_elem_bytes),
            (Counter.ACC_LOAD_BYTES, compute, cd, MemoryType.ACC_8BIT, cfg.out_elem_bytes),
        ]
        storing = started_mem(store, sd, None)
        if cfg.has_drain:  # machine v2 (docs/ISA.md §9): the store module also runs the EPI loads
            byte_counts += [(Counter.ACC_LOAD_BYTES, store, sd, MemoryType.EPI, cfg.acc_elem_bytes),
                            (Counter.ACC_LOAD_BYTES, store, sd, MemoryType.EPI_8BIT, cfg.out_elem_bytes)]
            storing = storing & (sd.opcode == Opcode.STORE)
        for counter, unit, d, mtype, size in byte_counts:
            amount = started_mem(unit, d, mtype) & (d.opcode == Opcode.LOAD)
            inc[counter].append(amount * moved(d, size))
            inc[Counter.DRAM_READ_BYTES].append(amount * moved(d, size))
        inc[Counter.DRAM_READ_BYTES].append(fetch.fetched * INSN_BYTES)
        stored = storing * moved(sd, cfg.out_elem_bytes)
        inc[Counter.OUT_STORE_BYTES].append(stored)
        inc[Counter.DRAM_WRITE_BYTES].append(stored)
        inc[Counter.CYCLES].append(1)
        inc[Counter.FETCH_BUSY_CYCLES].append(fetch.busy & ~fetch.waiting_memory & ~fetch.waiting_queue)
        inc[Counter.FETCH_WAIT_MEMORY_CYCLES].append(fetch.waiting_memory)
        inc[Counter.FETCH_WAIT_QUEUE_CYCLES].append(fetch.waiting_queue)
        units: dict[str, Any] = {"LOAD": load, "COMPUTE": compute, "STORE": store}
        for name, unit in units.items():
            s = unit.status
            inc[Counter[f"{name}_BUSY_CYCLES"]].append((s.busy & ~unit.waiting_memory) | s.issue)
            inc[Counter[f"{name}_WAIT_MEMORY_CYCLES"]].append(s.busy & unit.waiting_memory)
            inc[Counter[f"{name}_WAIT_TOKEN_CYCLES"]].append(s.wait_token)
            inc[Counter[f"{name}_WAIT_QUEUE_CYCLES"]].append(s.wait_queue)
        inc[Counter.GEMM_BUSY_CYCLES].append(compute.gemm_busy)
        inc[Counter.ALU_BUSY_CYCLES].append(compute.alu_busy)
        for k, counter in enumerate(self.counter_set.counters):
            value = self.counters[k]
            total = 0
            for term in inc[counter]:
                total = term + total
            with m.If(self.start):
                m.d.sync += value.eq(0)
            with m.Elif(running):
                m.d.sync += value.eq(value + total)


def _connect_ports(m: Module, ports: dict[str, Any], units: tuple[LoadUnit, ComputeUnit, StoreUnit]) -> None:
    """The modules' buffer ports to the buffers' (those in ``ports``: a module's member
    without a port there is not this machine's, or wired through :class:`ClearedTiles`)."""
    load, compute, store = units
    for unit, names in ((load, ("inp_w", "wgt_w")), (store, ("out_r", "epi_w", "epi_r")),
                        (compute, ("uop_w", "uop_r", "acc_w", "acc_ra", "acc_rb", "inp_r", "wgt_r", "out_w"))):
        for name in (n for n in names if n in ports):
            wiring.connect(m, getattr(unit, name), ports[name])


def _connect_tokens(m: Module, unit: Stage, tokens: dict[TokenQueue, TokenCounter]) -> None:
    """A module's token queue ends to the queues (each queue has one pusher, one popper)."""
    pops, pushes = token_queues(unit.unit)
    for q in pops:
        end = getattr(unit, q.name.lower())
        m.d.comb += [tokens[q].pop.eq(end.pop), end.empty.eq(tokens[q].empty)]
    for q in pushes:
        end = getattr(unit, q.name.lower())
        m.d.comb += [tokens[q].push.eq(end.push), end.full.eq(tokens[q].full)]


class ClearedTiles(wiring.Component):
    """A bit per accumulator tile, for machine v2's drain unit: ``set`` (the drain has
    drained the tile: it reads as zeros) and ``clear`` (compute wrote it); ``read_bit[i]`` is
    the bit of ``read_addr[i]``, a cycle later like a block RAM's data, and taking a clear of
    the same tile in that cycle into account (the acc read ports are transparent for
    compute's writes).

    In block RAM, not flip-flops (the first version: ``depth`` flip-flops with a decoder per
    port, 4,702 LUT4 of ``small``'s SDRAM image; docs/FPGA_NOTES.md): two memories of a bit
    per tile, ``S`` written by the drain's sets and ``C`` by compute's clears, the bit their
    XOR.  A set writes ``S[i] = ~C[i]``, a clear ``C[i] = S[i]``, each a cycle after it is
    asked (the other memory's bit read then); every reader has its copy of both, and
    corrects what is still pending (a set or a clear of the cycle before) and, as a block
    RAM read transparent for compute's write would, a clear of its tile in its own cycle.
    Exact as long as no tile is both set and cleared within two cycles: the tokens keep a
    drain and compute's writes of one tile far further apart.  ``2·(reads + 1)`` memories of
    ``depth`` bits (``cleared_bits_s*``, ``cleared_bits_c*``), whose read-write collisions are
    their own to resolve (:data:`~.buffers.UNORDERED_READS_SCRIPT`).
    """

    def __init__(self, depth: int, reads: int) -> None:
        bits = max(1, (depth - 1).bit_length())
        self.depth = depth
        super().__init__({
            "set_en": In(1), "set_addr": In(bits), "clear_en": In(1), "clear_addr": In(bits),
            "read_en": In(1).array(reads), "read_addr": In(bits).array(reads), "read_bit": Out(1).array(reads),
        })

    def elaborate(self, platform: object) -> Module:
        m = Module()
        width, copies = len(self.set_addr), len(self.read_addr)
        pend_set, pend_set_addr = Signal(), Signal(width)
        pend_clear, pend_clear_addr = Signal(), Signal(width)
        m.d.sync += [pend_set.eq(self.set_en), pend_set_addr.eq(self.set_addr),
                     pend_clear.eq(self.clear_en), pend_clear_addr.eq(self.clear_addr)]
        banks = {kind: [Memory(shape=1, depth=self.depth, init=[]) for _ in range(copies + 1)] for kind in "sc"}
        for kind, mems in banks.items():
            for k, mem in enumerate(mems):
                m.submodules[f"cleared_bits_{kind}{k}"] = mem
        s_for_clear = banks["s"][-1].read_port()  # S at the clear's tile, for C's write next cycle
        c_for_set = banks["c"][-1].read_port()  # C at the set's tile, for S's
        m.d.comb += [s_for_clear.addr.eq(self.clear_addr), c_for_set.addr.eq(self.set_addr)]
        for mem in banks["s"]:
            port = mem.write_port()
            m.d.comb += [port.en.eq(pend_set), port.addr.eq(pend_set_addr), port.data.eq(~c_for_set.data)]
        for mem in banks["c"]:
            port = mem.write_port()
            m.d.comb += [port.en.eq(pend_clear), port.addr.eq(pend_clear_addr), port.data.eq(s_for_clear.data)]
        for i, (en, addr, bit) in enumerate(zip(self.read_en, self.read_addr, self.read_bit)):
            s_read, c_read = banks["s"][i].read_port(), banks["c"][i].read_port()
            hit_set, hit_clear = Signal(name=f"hit_set_{i}"), Signal(name=f"hit_clear_{i}")
            clear_now = Signal(name=f"clear_now_{i}")
            m.d.comb += [s_read.addr.eq(addr), c_read.addr.eq(addr), s_read.en.eq(en), c_read.en.eq(en)]
            with m.If(en):
                m.d.sync += [hit_set.eq(pend_set & (pend_set_addr == addr)),
                             hit_clear.eq(pend_clear & (pend_clear_addr == addr)),
                             clear_now.eq(self.clear_en & (self.clear_addr == addr))]
            m.d.comb += bit.eq(~clear_now & (hit_set | ~hit_clear & (s_read.data ^ c_read.data)))
        return m
