"""The UART host bridge protocol, written once for the host back end, the RTL and the tests.

Pure Python (no Amaranth): :mod:`openvta.hw.rtl.bridge` implements the device side in
hardware, :mod:`openvta.hw.fpga.backend` the host side, and the tests use both.  The byte
tables and examples are in ``docs/BRIDGE.md``.

A request is ``0xA5, command, addr (4 bytes LE), length (2 bytes LE), payload,
checksum``; a reply is ``0x5A, status, payload, checksum``.  The checksum is the two's
complement of the 8-bit sum of every byte after the sync byte, so that those bytes
including the checksum sum to 0 modulo 256.  ``length`` is the number of data bytes
the command moves: the request payload of a write, the reply payload of a read.  A
reply carries its payload only when the status is :attr:`Status.OK`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "REQUEST_SYNC", "REPLY_SYNC", "MAX_PAYLOAD", "REG_WINDOW_BYTES", "HEADER_BYTES",
    "Command", "Status", "ProtocolError", "Request", "Reply",
    "checksum", "encode_request", "decode_request", "encode_reply", "decode_reply",
    "request_payload_bytes", "reply_payload_bytes", "check_length", "FIXED_LENGTH",
]

REQUEST_SYNC = 0xA5
REPLY_SYNC = 0x5A
#: Longest WRITE_MEM / READ_MEM transfer: the device buffers a write's payload until
#: the checksum has been verified.
MAX_PAYLOAD = 256
#: Register addresses are 4-byte aligned offsets below this (the AXI4-Lite window).
REG_WINDOW_BYTES = 4096
#: Bytes after the sync byte and before the payload: command, addr, length.
HEADER_BYTES = 7


class Command(IntEnum):
    """Request commands (the byte after ``0xA5``)."""

    WRITE_MEM = 1  #: payload ``length`` bytes stored at ``addr``
    READ_MEM = 2  #: reply ``length`` bytes from ``addr``
    WRITE_REG = 3  #: payload: 4-byte LE value for the register at ``addr``
    READ_REG = 4  #: reply: 4-byte LE value of the register at ``addr``
    START = 5  #: ``addr`` = instruction address; payload: 4-byte LE instruction count
    STATUS = 6  #: reply: 1 byte, bit 0 done, bit 1 busy


class Status(IntEnum):
    """Reply status (the byte after ``0x5A``)."""

    OK = 0
    BAD_CHECKSUM = 1  #: checksum wrong, a UART framing error, or the frame timed out
    BAD_COMMAND = 2  #: unknown command, or a length the command does not allow
    OUT_OF_RANGE = 3  #: memory or register address outside the device's range


#: Commands whose request carries ``length`` payload bytes.
_WRITES = (Command.WRITE_MEM, Command.WRITE_REG, Command.START)
#: Fixed lengths (everything else: WRITE_MEM and READ_MEM take 1..MAX_PAYLOAD).
FIXED_LENGTH = {Command.WRITE_REG: 4, Command.READ_REG: 4, Command.START: 4, Command.STATUS: 1}


class ProtocolError(ValueError):
    """A frame that cannot be encoded or does not decode: names the field and the value."""


@dataclass(frozen=True)
class Request:
    command: Command
    addr: int
    length: int
    payload: bytes = b""


@dataclass(frozen=True)
class Reply:
    status: Status
    payload: bytes = b""


def checksum(data: bytes) -> int:
    """The byte that makes ``data`` plus itself sum to 0 modulo 256."""
    return -sum(data) & 0xFF


def request_payload_bytes(command: Command, length: int) -> int:
    """Payload bytes following the header of a request (0 for commands that read)."""
    return length if command in _WRITES else 0


def reply_payload_bytes(command: Command, length: int) -> int:
    """Payload bytes of an OK reply to a request (0 for commands that write)."""
    return 0 if command in _WRITES else length


def check_length(command: Command, length: int) -> None:
    """Raise :class:`ProtocolError` unless ``length`` is allowed for ``command``."""
    want = FIXED_LENGTH.get(command)
    if want is not None and length != want:
        raise ProtocolError(f"{command.name} length must be {want}, not {length!r}")
    if want is None and not 1 <= length <= MAX_PAYLOAD:
        raise ProtocolError(f"{command.name} length must be between 1 and {MAX_PAYLOAD}, "
                            f"not {length!r}")


def _command(value: object) -> Command:
    if isinstance(value, int) and value in {c.value for c in Command}:
        return Command(value)
    raise ProtocolError(f"command must be one of "
                        f"{', '.join(f'{c.name}={c.value}' for c in Command)}, "
                        f"not {value!r}")


def encode_request(command: Command | int, addr: int, length: int | None = None,
                   payload: bytes = b"") -> bytes:
    """The request frame; ``length`` defaults to ``len(payload)``.

    Raises
    ------
    ProtocolError
        naming the field: an unknown command, ``addr`` outside 32 bits, a length the
        command does not allow, a payload whose size is not the length (or a payload
        on a command that reads).

    Examples
    --------
    >>> encode_request(Command.READ_REG, 0x104).hex(" ")
    'a5 04 04 01 00 00 04 00 f3'
    """
    cmd = _command(command)
    if not isinstance(addr, int) or isinstance(addr, bool) or not 0 <= addr < 1 << 32:
        raise ProtocolError(f"addr must be an integer in [0, 2**32), not {addr!r}")
    payload = bytes(payload)
    if length is None:
        length = len(payload) if cmd in _WRITES else FIXED_LENGTH.get(cmd, 0)
    check_length(cmd, length)
    if len(payload) != request_payload_bytes(cmd, length):
        raise ProtocolError(f"{cmd.name} payload must be {request_payload_bytes(cmd, length)} "
                            f"bytes, not {len(payload)}")
    body = bytes([cmd]) + addr.to_bytes(4, "little") + length.to_bytes(2, "little") + payload
    return bytes([REQUEST_SYNC]) + body + bytes([checksum(body)])


def decode_request(frame: bytes) -> Request:
    """Parse one whole request frame (the inverse of :func:`encode_request`).

    Raises
    ------
    ProtocolError
        for a wrong sync byte, a short or long frame, a bad checksum, an unknown
        command or a length the command does not allow.
    """
    frame = bytes(frame)
    if len(frame) < 2 + HEADER_BYTES:
        raise ProtocolError(f"request frame must be at least {2 + HEADER_BYTES} bytes, "
                            f"not {len(frame)}")
    if frame[0] != REQUEST_SYNC:
        raise ProtocolError(f"request must start with {REQUEST_SYNC:#04x}, not {frame[0]:#04x}")
    if sum(frame[1:]) & 0xFF:
        raise ProtocolError(f"request checksum {frame[-1]:#04x} is wrong: the bytes after the "
                            f"sync byte sum to {sum(frame[1:]) & 0xFF:#04x}, not 0")
    cmd = _command(frame[1])
    addr = int.from_bytes(frame[2:6], "little")
    length = int.from_bytes(frame[6:8], "little")
    check_length(cmd, length)
    want = 2 + HEADER_BYTES + request_payload_bytes(cmd, length)
    if len(frame) != want:
        raise ProtocolError(f"{cmd.name} request of length {length} must be {want} bytes, "
                            f"not {len(frame)}")
    return Request(cmd, addr, length, frame[8:-1])


def encode_reply(status: Status | int, payload: bytes = b"") -> bytes:
    """The reply frame (a payload only with :attr:`Status.OK`)."""
    try:
        st = Status(status)
    except ValueError:
        raise ProtocolError(f"status must be one of 0..{len(Status) - 1}, not {status!r}") from None
    if st != Status.OK and payload:
        raise ProtocolError(f"a {st.name} reply carries no payload, not {len(payload)} bytes")
    body = bytes([st]) + bytes(payload)
    return bytes([REPLY_SYNC]) + body + bytes([checksum(body)])


def decode_reply(frame: bytes, payload_bytes: int) -> Reply:
    """Parse a reply expected to carry ``payload_bytes`` bytes if OK.

    An error reply is ``0x5A, status, checksum`` whatever ``payload_bytes`` is.

    Raises
    ------
    ProtocolError
        for a wrong sync byte, an unknown status, a wrong size or a bad checksum.

    Examples
    --------
    >>> decode_reply(bytes([0x5A, 0, 0x03, 0xFD]), 1)
    Reply(status=<Status.OK: 0>, payload=b'\\x03')
    """
    frame = bytes(frame)
    if len(frame) < 3:
        raise ProtocolError(f"reply frame must be at least 3 bytes, not {len(frame)}")
    if frame[0] != REPLY_SYNC:
        raise ProtocolError(f"reply must start with {REPLY_SYNC:#04x}, not {frame[0]:#04x}")
    try:
        status = Status(frame[1])
    except ValueError:
        raise ProtocolError(f"reply status must be one of 0..{len(Status) - 1}, "
                            f"not {frame[1]}") from None
    want = 3 + (payload_bytes if status == Status.OK else 0)
    if len(frame) != want:
        raise ProtocolError(f"{status.name} reply must be {want} bytes, not {len(frame)}")
    if sum(frame[1:]) & 0xFF:
        raise ProtocolError(f"reply checksum {frame[-1]:#04x} is wrong: the bytes after the "
                            f"sync byte sum to {sum(frame[1:]) & 0xFF:#04x}, not 0")
    return Reply(status, frame[2:-1])
