"""Fetch and the dependency-token queues.

:class:`Fetch` reads ``insn_count`` instructions from ``insn_addr`` in bursts and routes
each, in program order, to the load, compute or store command queue (docs/ISA.md §5),
holding the bus while the target queue is full.  :class:`TokenCounter` is one token
queue: tokens carry no data, so a queue is an up/down counter of ``depth`` entries.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from amaranth import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from openvta.isa import INSN_BYTES, LOAD_MODULE_TYPES, STORE_MODULE_TYPES, Config, Format, Opcode
from openvta.isa import Module as Unit
from openvta.isa import layouts_of
from openvta.isa.counters import REG_WIDTH
from openvta.isa.timing import INSN_MOVE_CHOICES

from .memory import ADDR_WIDTH, mem_port
from .memory import burst_beats as next_burst
from .params import check_bus_bits, refusing

__all__ = ["CommandQueue", "Fetch", "TokenCounter", "check_insn_words"]

INSN_BITS = INSN_BYTES * 8


def _up_down(m: Module, counter: Signal, up: Value, down: Value) -> None:
    """``counter`` one up in a cycle with ``up``, one down with ``down`` (both: unchanged)."""
    with m.If(up & ~down):
        m.d.sync += counter.eq(counter + 1)
    with m.Elif(down & ~up):
        m.d.sync += counter.eq(counter - 1)


def check_insn_words(words: object) -> int:
    """``words`` if an instruction may move in that many words (``Timing.insn_move_cycles``)."""
    if not isinstance(words, int) or isinstance(words, bool) or words not in INSN_MOVE_CHOICES:
        raise ValueError(f"instructions move in {', '.join(map(str, INSN_MOVE_CHOICES[:-1]))} or "
                         f"{INSN_MOVE_CHOICES[-1]} words (insn_move_cycles), not {words!r}")
    return words


class CommandQueue(wiring.Component):
    """A module's command queue of ``depth`` instructions, each held as ``words`` words of
    ``INSN_BITS // words`` bits (``insn_move_cycles``; one block RAM on the iCE40 at 16 bits).

    The writer pushes an instruction's words on consecutive cycles, its first only when
    ``w_rdy`` (room for a whole instruction); ``r_stream`` gives the words in order (the
    members of :class:`~amaranth.lib.fifo.SyncFIFOBuffered` that the core uses).  An
    instruction counts against ``depth`` from its first word written to its first word
    read, as a whole instruction does in a FIFO of instructions: the storage holds one
    instruction more, the one being read.
    """

    @refusing
    def __init__(self, depth: int, words: int) -> None:
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"command queue depth must be at least 1, not {depth!r}")
        self.depth, self.words = depth, check_insn_words(words)
        self.word_bits = INSN_BITS // self.words
        super().__init__({"w_data": In(self.word_bits), "w_en": In(1), "w_rdy": Out(1),
                          "r_stream": Out(stream.Signature(self.word_bits))})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.words = fifo = SyncFIFOBuffered(width=self.word_bits, depth=(self.depth + 1) * self.words)
        count = Signal(range(self.depth + 1))  # instructions begun and not yet being read
        w_pos, r_pos = Signal(range(self.words)), Signal(range(self.words))
        read = self.r_stream.ready & fifo.r_rdy
        begun = self.w_en & (w_pos == 0)
        taken = read & (r_pos == 0)
        m.d.comb += [fifo.w_data.eq(self.w_data), fifo.w_en.eq(self.w_en), self.w_rdy.eq(count != self.depth),
                     self.r_stream.valid.eq(fifo.r_rdy), self.r_stream.payload.eq(fifo.r_data),
                     fifo.r_en.eq(self.r_stream.ready)]
        with m.If(self.w_en):
            m.d.sync += w_pos.eq(w_pos + 1)
        with m.If(read):
            m.d.sync += r_pos.eq(r_pos + 1)
        _up_down(m, count, begun, taken)
        return m


class TokenCounter(wiring.Component):
    """A dependency-token queue of ``depth`` tokens: ``push`` and ``pop`` in one cycle cancel.

    ``pop`` when empty and ``push`` when full are ignored (the modules never do either).
    """

    @refusing
    def __init__(self, depth: int) -> None:
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"token queue depth must be at least 1, not {depth!r}")
        self.depth = depth
        super().__init__({"push": In(1), "pop": In(1), "count": Out(range(depth + 1)),
                          "empty": Out(1), "full": Out(1)})

    def elaborate(self, platform: object) -> Module:
        m = Module()
        _up_down(m, self.count, self.push & (self.count != self.depth), self.pop & (self.count != 0))
        m.d.comb += [self.empty.eq(self.count == 0), self.full.eq(self.count == self.depth)]
        return m


class Fetch(wiring.Component):
    """Reads the instruction stream and routes it to the three command queues.

    Bursts land in a prefetch FIFO that holds a whole burst, and a new burst is requested
    only when that FIFO is empty: fetch never holds the bus while a command queue is
    full (a module waiting for the bus would otherwise deadlock against it).  The
    router moves one instruction per cycle from the prefetch FIFO to its module's queue.
    An instruction spans whole beats, or (on a bus wider than an instruction) a beat
    holds several, written into the prefetch FIFO one per cycle; the first beat then
    starts at the beat that holds ``insn_addr``.

    With ``words`` > 1 (``Timing.insn_move_cycles``) the FIFOs hold an instruction as
    that many words: fetch writes one word a cycle, the router moves one word a cycle
    once all of an instruction's are in, and the next burst is asked for once the router
    has begun the last instruction (the FIFO holds one instruction more for the rest).

    Members
    -------
    queue_data, queue_en :
        the instruction (or word) and, per module (load, compute, store), its FIFO write
        enable.
    queue_ready :
        per module, whether its FIFO has room.
    """

    @refusing
    def __init__(self, cfg: Config, bus_bits: int, max_burst: int, words: int = 1) -> None:
        check_bus_bits(bus_bits, "fetch bus width")
        self.cfg, self.bus_bits, self.words = cfg, bus_bits, check_insn_words(words)
        self.word_bits = INSN_BITS // self.words
        self.beats_per_insn = max(1, INSN_BITS // bus_bits)
        self.insns_per_beat = max(1, bus_bits // INSN_BITS)
        self.max_burst = max(self.beats_per_insn, max_burst // self.beats_per_insn * self.beats_per_insn)
        self.insns_per_burst = self.max_burst // self.beats_per_insn * self.insns_per_beat
        super().__init__({
            "start": In(1), "insn_addr": In(ADDR_WIDTH), "insn_count": In(REG_WIDTH),
            "busy": Out(1),
            "fetched": Out(1), "waiting_memory": Out(1), "waiting_queue": Out(1),
            "queue_data": Out(self.word_bits), "queue_en": Out(len(Unit)), "queue_ready": In(len(Unit)),
            "mem": Out(mem_port(bus_bits)),
        })

    def _target(self, word: Value) -> Value:
        """Which queue an instruction goes to: 0 load, 1 compute, 2 store (docs/ISA.md §5,
        :func:`openvta.isa.module_of`)."""
        layout = layouts_of(self.cfg)[Format.MEM]
        op = word[: layout.field("opcode").width]
        mt_field = layout.field("memory_type")
        mtype = word[mt_field.offset : mt_field.offset + mt_field.width]
        on_load = (op == Opcode.LOAD) & _any(mtype == t for t in LOAD_MODULE_TYPES)
        to_store = op == Opcode.STORE
        if self.cfg.has_drain:  # machine v2: LOAD EPI/EPI_8BIT run on the store module
            to_store = to_store | ((op == Opcode.LOAD) & _any(mtype == t for t in STORE_MODULE_TYPES))
        return Mux(to_store, Unit.STORE, Mux(on_load, Unit.LOAD, Unit.COMPUTE))

    def elaborate(self, platform: object) -> Module:
        m = Module()
        bpi, bus = self.beats_per_insn, self.bus_bits
        words, log_words = self.words, self.words.bit_length() - 1
        # (with words: room for one instruction more, the rest of the one being routed
        # when the next burst is asked for)
        m.submodules.prefetch = prefetch = SyncFIFOBuffered(
            width=self.word_bits, depth=self.insns_per_burst * words + (words if words > 1 else 0))
        # with words: the instructions in the prefetch FIFO the router has not begun
        unstarted = Signal(range(self.insns_per_burst + 1), name="unstarted")
        addr = Signal(ADDR_WIDTH)
        left = Signal(REG_WIDTH)  # instructions not yet requested
        routing = Signal(REG_WIDTH)  # instructions not yet routed
        k, log_k = self.insns_per_beat, self.insns_per_beat.bit_length() - 1
        log_bpi = bpi.bit_length() - 1
        # several instructions per beat: the one to take next, and how many this burst has
        slot = Signal(range(k), name="slot") if k > 1 else Const(0, 1)
        # words of this burst left to write (with several instructions per beat, or words)
        take = Signal(range(self.insns_per_burst * words + 1), name="take") if k > 1 or words > 1 else Const(0, 1)
        w_slot = Signal(range(max(1, bus // self.word_bits)), name="w_slot")  # the word in the beat
        m.d.comb += self.busy.eq(routing != 0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [addr.eq(self.insn_addr), left.eq(self.insn_count),
                                 routing.eq(self.insn_count)]
                    if k > 1:  # the burst starts at the beat that holds the first instruction
                        log_insn, log_bus = INSN_BYTES.bit_length() - 1, (bus // 8).bit_length() - 1
                        first = self.insn_addr[log_insn:log_bus]
                        m.d.sync += [addr.eq(Cat(Const(0, log_bus), self.insn_addr[log_bus:])),
                                     slot.eq(first)]
                    m.next = "REQ"
            with m.State("REQ"):
                # whole instructions: a 4 KiB boundary is a multiple of 16 bytes
                beats = next_burst(addr, ((slot + left + k - 1) >> log_k) << log_bpi,
                                   self.max_burst, bus // 8)
                avail = ((beats >> log_bpi) << log_k) - slot
                with m.If(left == 0):
                    m.next = "IDLE"
                with m.Elif(~prefetch.r_rdy & (prefetch.level == 0) if words == 1
                            else unstarted == 0):  # the last burst is routed (its last one begun)
                    m.d.comb += [self.mem.rreq.valid.eq(1), self.mem.rreq.payload.addr.eq(addr),
                                 self.mem.rreq.payload.beats.eq(beats), self.waiting_memory.eq(1)]
                    with m.If(self.mem.rreq.ready):
                        m.d.sync += [addr.eq(addr + beats * (bus // 8)),
                                     left.eq(Mux(left < avail, 0, left - avail))]
                        if k > 1 or words > 1:
                            taken = Mux(left < avail, left, avail)
                            m.d.sync += take.eq(taken << log_words if words > 1 else taken)
                        if words > 1 and k > 1:  # the first burst's first word; then slot is 0
                            m.d.sync += [w_slot.eq(slot << log_words), slot.eq(0)]
                        m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += self.waiting_memory.eq(~self.mem.rdata.valid)
                if words > 1:
                    self._receive_words(m, prefetch, w_slot, take)
                else:
                    self._receive(m, prefetch, slot, take)
                with m.If(self.mem.rdata.valid & self.mem.rdata.ready & self.mem.rdata.payload.last):
                    m.next = "REQ"
        if words > 1:
            self._route_words(m, prefetch, routing, unstarted)
        else:
            self._route(m, prefetch, routing)
        return m

    def _receive(self, m: Module, prefetch: SyncFIFOBuffered, slot: Any, take: Any) -> None:
        """The DATA state: beats into the prefetch FIFO, whole instructions only."""
        if self.insns_per_beat == 1:
            self._item_over_beats(m, prefetch, INSN_BITS)
        else:  # several instructions per beat: one per cycle, then the next beat
            self._items_of_beats(m, prefetch, slot, take, INSN_BITS, self.insns_per_beat)

    def _item_over_beats(self, m: Module, prefetch: SyncFIFOBuffered, bits: int) -> None:
        """Items of ``bits`` (instructions or words) that span whole beats into the prefetch
        FIFO, each when its last beat arrives."""
        rdata = self.mem.rdata.payload.data
        per_item = max(1, bits // self.bus_bits)
        part = Signal(range(per_item + 1))
        shift = Signal(bits)
        item = Cat(shift[self.bus_bits:], rdata) if per_item > 1 else rdata
        complete = part == per_item - 1
        m.d.comb += [prefetch.w_data.eq(item), self.mem.rdata.ready.eq(1)]
        with m.If(self.mem.rdata.valid):
            m.d.sync += [shift.eq(item), part.eq(Mux(complete, 0, part + 1))]
            m.d.comb += prefetch.w_en.eq(complete)

    def _items_of_beats(self, m: Module, prefetch: SyncFIFOBuffered, slot: Any, take: Any,
                        bits: int, per_beat: int) -> None:
        """Beats of ``per_beat`` items of ``bits`` (instructions or words) into the prefetch
        FIFO, one item a cycle; ``take`` counts the burst's items left, ``slot`` the next
        one's place in its beat."""
        rdata = self.mem.rdata.payload.data
        last = (slot == per_beat - 1) | (take <= 1)
        m.d.comb += [prefetch.w_data.eq(rdata.word_select(slot, bits) if per_beat > 1 else rdata),
                     self.mem.rdata.ready.eq(last)]
        with m.If(self.mem.rdata.valid):
            with m.If(take != 0):
                m.d.comb += prefetch.w_en.eq(1)
                m.d.sync += [take.eq(take - 1), slot.eq(slot + 1)]
            with m.If(last):
                m.d.sync += slot.eq(0)

    def _route(self, m: Module, prefetch: SyncFIFOBuffered, routing: Signal) -> None:
        # the router: one instruction per cycle from the prefetch FIFO to its module's queue
        target = Signal(range(len(Unit)))
        m.d.comb += [target.eq(self._target(prefetch.r_data)), self.queue_data.eq(prefetch.r_data)]
        ready = self.queue_ready.bit_select(target, 1)
        m.d.comb += self.waiting_queue.eq(prefetch.r_rdy & ~ready)
        with m.If(prefetch.r_rdy & ready):
            m.d.comb += [prefetch.r_en.eq(1), self.queue_en.bit_select(target, 1).eq(1),
                         self.fetched.eq(1)]
            m.d.sync += routing.eq(routing - 1)


    def _receive_words(self, m: Module, prefetch: SyncFIFOBuffered, w_slot: Signal, take: Signal) -> None:
        """The DATA state with ``words`` > 1: the beats' words into the prefetch FIFO, one a
        cycle (several per beat, or a word over several beats)."""
        w = self.word_bits
        if self.bus_bits < w:  # a word spans beats
            self._item_over_beats(m, prefetch, w)
        else:
            self._items_of_beats(m, prefetch, w_slot, take, w, self.bus_bits // w)

    def _route_words(self, m: Module, prefetch: SyncFIFOBuffered, routing: Signal, unstarted: Signal) -> None:
        """The router with ``words`` > 1: an instruction once all its words are in the
        prefetch FIFO (``prefetch_latency_cycles`` after its last, as a whole one), its
        module from its first word, then one word a cycle into that module's queue."""
        words = self.words
        written = Signal(range(words))  # words of the instruction being written
        complete = Signal()  # its last word was written last cycle
        ready_insns = Signal(range(self.insns_per_burst + 1))  # whole instructions not yet routed
        sent = Signal(range(words))  # words of the instruction being routed already sent
        target = Signal(range(len(Unit)))
        first = Signal()  # the router begins an instruction
        with m.If(prefetch.w_en):
            m.d.sync += written.eq(written + 1)
        _up_down(m, unstarted, prefetch.w_en & (written == 0), first)
        m.d.sync += complete.eq(prefetch.w_en & (written == words - 1))
        m.d.comb += self.queue_data.eq(prefetch.r_data)
        head = self._target(Cat(prefetch.r_data, Const(0, INSN_BITS - self.word_bits)))
        can_start = (sent == 0) & (ready_insns != 0) & prefetch.r_rdy
        ready = self.queue_ready.bit_select(head, 1)
        m.d.comb += [first.eq(can_start & ready), self.waiting_queue.eq(can_start & ~ready)]
        _up_down(m, ready_insns, complete, first)
        with m.If(first):
            m.d.comb += [prefetch.r_en.eq(1), self.queue_en.bit_select(head, 1).eq(1), self.fetched.eq(1)]
            m.d.sync += [routing.eq(routing - 1), target.eq(head), sent.eq(1)]
        with m.Elif(sent != 0):  # the rest of the instruction, all in the FIFO
            m.d.comb += [prefetch.r_en.eq(1), self.queue_en.bit_select(target, 1).eq(1)]
            m.d.sync += sent.eq(sent + 1)


def _any(terms: Iterable[Value]) -> Value:
    result: Value = Const(0)
    for term in terms:
        result = term | result
    return result
