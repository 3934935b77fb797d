"""The ``board`` back end: run a program on the SoC over its UART host bridge.

It speaks :mod:`openvta.hw.fpga.bridge_protocol` to :class:`openvta.hw.rtl.soc.Soc` on a
board through a serial port (pyserial), or through any object with ``read(n)`` and
``write(data)`` (the tests pass a simulated UART)::

    openvta run prog.npz --backend board --port /dev/ttyUSB0
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from openvta.isa import COUNTER_BASE, HW_COUNTERS, Counter, LinkTiming, RunReport
from openvta.isa.counters import COUNTER_WIDTH, REG_COUNTERS, REG_WIDTH, CounterSet
from openvta.runtime.program import Program, Progress, Result

from .bridge_protocol import (
    MAX_PAYLOAD,
    REPLY_SYNC,
    Command,
    ProtocolError,
    Reply,
    Status,
    decode_reply,
    encode_request,
    reply_payload_bytes,
)

__all__ = ["BoardBackend", "BoardError", "DEFAULT_MAX_POLLS", "BYTES", "CYCLES"]

#: The ``what`` of the progress hook: bytes sent (the image) or read back (the result),
#: and the cycles the board has run (read at every STATUS poll).
BYTES, CYCLES = "bytes", "cycles"

#: STATUS polls before a run is abandoned (each is a round trip of 13 bytes: about
#: 1.1 ms at 115200 baud, so about two minutes).
DEFAULT_MAX_POLLS = 100_000
_DONE, _BUSY = 1, 2
#: Commands that are safe to send twice when their reply was lost or garbled.
_IDEMPOTENT = (Command.WRITE_MEM, Command.READ_MEM, Command.READ_REG, Command.STATUS)


class BoardError(RuntimeError):
    """The board did not answer, answered with an error, or did not finish."""


class BoardBackend:
    """Runs programs on the SoC through its UART bridge.

    Parameters
    ----------
    port : str or serial-port-like object
        a device name (``/dev/ttyUSB0``, ``COM3``), opened with pyserial on first use,
        or an open port: any object with ``read(n) -> bytes`` (returning fewer bytes
        on a timeout) and ``write(data)``.
    baud : int
        line rate for a port opened by name (the SoC's ``divisor`` must match).
    timeout : float
        seconds to wait for a reply byte, for a port opened by name.
    max_polls : int
        STATUS polls after START before the run is abandoned.
    progress : callable or None
        ``progress(what, done, total)``: ``("bytes", sent, image bytes)`` after each
        frame of the upload and again of the read-back, and ``("cycles", cycles, None)``
        at each STATUS poll (the cycle counter is then read with it: two more frames
        per poll; not with an image built without the cycle counter).

    The result's report holds the host link's figures apart from the compute
    (:class:`~openvta.isa.LinkTiming`: the bytes on the wire and the time of the upload,
    of START to FINISH, and of the read-back; ``openvta run --backend board`` prints them).

    The result's ``counters`` are those the image has (``REG_COUNTERS``, read once per
    backend): every counter of ``HW_COUNTERS``, only ``cycles``, or none; a counter the
    image lacks is absent from the dict, never 0.

    Each frame whose reply says "bad checksum" (the request was corrupted on the
    way) is sent once more; so is a frame whose reply is garbled, unless the
    command has side effects that must not happen twice (START, WRITE_REG).

    Examples
    --------
    >>> backend = BoardBackend("/dev/ttyUSB0")  # doctest: +SKIP
    >>> result = backend.run(program)  # doctest: +SKIP
    """

    def __init__(self, port: str | Any, baud: int = 115200, timeout: float = 5.0,
                 max_polls: int = DEFAULT_MAX_POLLS, progress: Progress | None = None) -> None:
        if not isinstance(port, str) and not (callable(getattr(port, "read", None))
                                              and callable(getattr(port, "write", None))):
            raise TypeError(f"port must be a device name or an object with read() and "
                            f"write(), not {port!r}")
        if isinstance(port, str) and not port:
            raise ValueError("port must be a non-empty device name, not ''")
        if not isinstance(baud, int) or isinstance(baud, bool) or baud < 1:
            raise ValueError(f"baud must be a positive integer, not {baud!r}")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        if not isinstance(max_polls, int) or isinstance(max_polls, bool) or max_polls < 1:
            raise ValueError(f"max_polls must be a positive integer, not {max_polls!r}")
        if progress is not None and not callable(progress):
            raise TypeError(f"progress must be callable or None, not {progress!r}")
        self.baud, self.timeout, self.max_polls = baud, float(timeout), max_polls
        self.progress = progress
        self._name = port if isinstance(port, str) else None
        self._port = None if isinstance(port, str) else port
        self._counter_set: CounterSet | None = None
        #: bytes written to and read from the port so far (requests and replies)
        self.wire_bytes = 0

    @property
    def port(self) -> Any:
        """The serial port, opened on first use."""
        if self._port is None:
            try:
                import serial  # pyserial
            except ImportError:
                raise BoardError("the board back end needs pyserial to open "
                                 f"{self._name!r}: pip install 'openvta[fpga]' "
                                 "(it provides pyserial==3.5)") from None
            try:
                self._port = serial.Serial(self._name, self.baud, timeout=self.timeout)
            except (OSError, ValueError) as exc:  # serial.SerialException is an OSError
                raise BoardError(f"cannot open serial port {self._name!r}: {exc}") from None
        return self._port

    # -- one frame -------------------------------------------------------------------------

    def request(self, command: Command, addr: int, length: int | None = None,
                payload: bytes = b"") -> bytes:
        """Send one request and return its reply's payload (retrying as described above).

        Raises
        ------
        BoardError
            when the reply is missing, garbled twice, or carries a non-OK status.
        """
        frame = encode_request(command, addr, length, payload)
        length = int.from_bytes(frame[6:8], "little")
        what = f"{command.name} at {addr:#x} (length {length})"
        for attempt in (1, 2):
            try:
                reply = self._exchange(frame, reply_payload_bytes(command, length), what)
            except ProtocolError as exc:
                if attempt == 2 or command not in _IDEMPOTENT:
                    raise BoardError(f"{what}: garbled reply: {exc}") from None
                continue
            if reply.status == Status.BAD_CHECKSUM and attempt == 1:
                continue
            if reply.status != Status.OK:
                raise BoardError(f"{what}: the board answered {reply.status.name} "
                                 f"(status {int(reply.status)})")
            return reply.payload
        raise AssertionError("unreachable")

    def _exchange(self, frame: bytes, payload_bytes: int, what: str) -> Reply:
        port = self.port
        flush = getattr(port, "reset_input_buffer", None)
        if callable(flush):
            flush()  # stale bytes of an earlier, abandoned reply
        port.write(frame)
        self.wire_bytes += len(frame)
        head = self._read(2, what)
        rest = payload_bytes + 1 if head[0] == REPLY_SYNC and head[1] == Status.OK else 1
        return decode_reply(head + self._read(rest, what), payload_bytes)

    def _read(self, count: int, what: str) -> bytes:
        data = bytes(self.port.read(count))
        self.wire_bytes += len(data)
        if len(data) < count:
            raise BoardError(f"{what}: no reply from the board (got {len(data)} of {count} "
                             f"bytes before the timeout); is the SoC bitstream loaded and "
                             f"the baud rate {self.baud}?")
        return data

    # -- a program -------------------------------------------------------------------------

    def write_memory(self, addr: int, data: bytes) -> None:
        for offset in range(0, len(data), MAX_PAYLOAD):
            chunk = data[offset:offset + MAX_PAYLOAD]
            self.request(Command.WRITE_MEM, addr + offset, payload=chunk)
            if self.progress is not None:
                self.progress(BYTES, offset + len(chunk), len(data))

    def read_memory(self, addr: int, size: int) -> bytes:
        out = bytearray()
        for offset in range(0, size, MAX_PAYLOAD):
            length = min(MAX_PAYLOAD, size - offset)
            out += self.request(Command.READ_MEM, addr + offset, length)
            if self.progress is not None:
                self.progress(BYTES, len(out), size)
        return bytes(out)

    def read_register(self, addr: int) -> int:
        return int.from_bytes(self.request(Command.READ_REG, addr), "little")

    def status(self) -> int:
        """The STATUS byte: bit 0 done, bit 1 busy."""
        return self.request(Command.STATUS, 0)[0]

    def counter_set(self) -> CounterSet:
        """The counters the image implements (``REG_COUNTERS``; read once, then cached).

        Raises
        ------
        BoardError
            when the register holds no :class:`~openvta.isa.counters.CounterSet` code.
        """
        if self._counter_set is None:
            code = self.read_register(REG_COUNTERS)
            try:
                self._counter_set = CounterSet(code)
            except ValueError:
                raise BoardError(f"REG_COUNTERS ({REG_COUNTERS:#x}) reads {code}, which is no "
                                 f"counter set ({', '.join(f'{int(c)} {c.label}' for c in CounterSet)})"
                                 "; is this an openvta SoC image?") from None
        return self._counter_set

    def read_counter(self, counter: Counter) -> int:
        """One hardware counter (its two registers; read while the core runs, the
        value may tear between them).

        Raises
        ------
        BoardError
            when the image was built without ``counter`` (``openvta bitstream --counters``).
        """
        present = self.counter_set()
        if counter not in present.counters:
            raise BoardError(f"the board's image has no {str(counter)!r} counter (it was built "
                             f"with --counters {present.label}); rebuild it with --counters all"
                             + ("" if counter is not Counter.CYCLES else " or cycles"))
        base = COUNTER_BASE + COUNTER_WIDTH // 8 * HW_COUNTERS.index(counter)
        low = self.read_register(base)
        return self.read_register(base + REG_WIDTH // 8) << REG_WIDTH | low

    def read_counters(self) -> dict[str, int]:
        """The counters the image has (see :meth:`counter_set`), by name; the others are
        absent, not 0."""
        return {str(counter): self.read_counter(counter) for counter in self.counter_set().counters}

    def run(self, program: Program) -> Result:
        """Load ``program`` at address 0, start it, wait for FINISH, read everything back.

        Raises
        ------
        BoardError
            when the board does not answer, rejects a frame (e.g. the image does not
            fit its memory: OUT_OF_RANGE), or does not finish within ``max_polls``.
        """
        if not isinstance(program, Program):
            raise TypeError(f"program must be a Program, not {type(program).__name__}")
        image = program.dram.tobytes()
        marks = [(self.wire_bytes, time.perf_counter())]
        self.write_memory(0, image)
        marks.append((self.wire_bytes, time.perf_counter()))
        try:
            self.request(Command.START, program.insn_addr,
                         payload=int(program.insn_count).to_bytes(4, "little"))
        except BoardError as exc:
            if "BAD_COMMAND" in str(exc):
                raise BoardError(f"{exc}; is the board running the link-test image, which "
                                 "has no accelerator (openvta bitstream --link-test)?") from None
            raise
        status = 0
        for _ in range(self.max_polls):
            status = self.status()
            if status & _DONE:
                break
            if self.progress is not None and Counter.CYCLES in self.counter_set().counters:
                self.progress(CYCLES, self.read_counter(Counter.CYCLES), None)
        else:
            raise BoardError(f"the board did not finish after {self.max_polls} STATUS polls; "
                             f"last status {status:#04x} (done={status & _DONE}, "
                             f"busy={(status & _BUSY) >> 1})")
        marks.append((self.wire_bytes, time.perf_counter()))
        counters = self.read_counters()
        dram = np.frombuffer(self.read_memory(0, len(image)), dtype=np.uint8).copy()
        marks.append((self.wire_bytes, time.perf_counter()))
        (upload, upload_s), (control, control_s), (readback, readback_s) = [
            (b - a, t - s) for (a, s), (b, t) in zip(marks, marks[1:])]
        baud = getattr(self.port, "baudrate", None)  # an open port's own rate (pyserial's), else ours
        baud = baud if isinstance(baud, int) and not isinstance(baud, bool) and baud > 0 else self.baud
        link = LinkTiming(baud, upload, upload_s, control, control_s, readback, readback_s)
        # the counters the image implements, as read: no cycle-model figure stands in for one
        return Result(dram=dram, counters=counters, report=RunReport.measured("board", counters, link))
