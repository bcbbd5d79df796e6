"""One write on the socket for each HTTP answer.

uvicorn writes an answer's head (status line and headers) when the app starts the answer and its
body when the app sends it: two sends on the socket for one answer, and a client that reads
between them wakes twice for it. The transport its protocol writes through here holds a write
until the next write, the connection's close, or the end of the event loop's current turn,
whichever comes first, and passes what it holds on together with what follows. A head and the
body sent right after it go out together; nothing waits for a later write, so a head whose body
is not ready yet (a streamed answer) still goes out as soon as the app waits for something."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


class CoalescingTransport(asyncio.Transport):
    """Wraps a connection's transport; everything but writing is the wrapped transport's.
    The wrapped transport's protocol stays the one it calls back (pause_writing and the
    like)."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        held = self._held
        if held is not None:
            self._held = None
            self._transport.writelines((held, data))
        elif self._transport.is_closing():
            # Written as it comes: what the wrapped transport does with a write after its close
            # (drop it, count it) is then done now, not in a later turn after its end.
            self._transport.write(data)
        else:
            self._held = bytes(data)  # the caller may reuse a buffer once write() returns
            self._loop.call_soon(self._flush)

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        self._flush()
        self._transport.writelines(list_of_data)

    def _flush(self) -> None:
        held = self._held
        self._held = None
        # A connection lost since the write takes nothing more (close() passes it on before).
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_write_buffer_size(self) -> int:
        held = 0 if self._held is None else len(self._held)
        return held + self._transport.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()
