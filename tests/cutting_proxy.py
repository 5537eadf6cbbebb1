"""A TCP proxy in front of the API that closes one SSE response mid-stream, as a server
or a network that drops the connection would (the console's and the JS SDK's reconnect
tests)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field

# the console's run stream; tests/lg/test_js_sdk.py passes the /lg ones
EVENTS = rb"^GET (/api/agent/runs/\S+/events\S*) HTTP"


@dataclass
class Stream:
    """One stream response through the proxy: its request path and the seqs of the
    complete events it delivered."""

    path: str
    delivered: bytearray = field(default_factory=bytearray)
    cut: bool = False

    def seqs(self) -> list[int]:
        complete = bytes(self.delivered)
        complete = complete[: complete.rfind(b"\r\n\r\n") + 4]
        return [int(n) for n in re.findall(rb"(?m)^id: (\d+)\r$", complete)]


class CuttingProxy:
    """A TCP proxy in front of the API that closes the first run stream it sees (a
    request whose first line matches ``streams``) right after the event named ``after``
    (a server dropping the connection mid-run); the rest passes through untouched."""

    def __init__(self, upstream: str, streams: bytes = EVENTS) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.pattern = re.compile(streams, re.M)
        self.armed = False
        self.after = b"event: metadata"
        self.streams: list[Stream] = []
        self.server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> CuttingProxy:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    def _cut_at(self, delivered: bytearray) -> int | None:
        """Where to close: after the event's block and, in a chunked response, after
        the CRLF that ends its chunk (else the browser never hands the chunk over)."""
        at = delivered.find(self.after)
        end = delivered.find(b"\r\n\r\n", at) if at >= 0 else -1
        if end < 0:
            return None
        end += 4
        if b"transfer-encoding: chunked" not in bytes(delivered[:end]).lower():
            return end
        if len(delivered) < end + 2:
            return None  # the chunk's CRLF comes with the next read
        assert delivered[end : end + 2] == b"\r\n", bytes(delivered[end - 40 : end + 10])
        return end + 2

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        current: list[Stream] = []

        async def upward() -> None:
            while data := await reader.read(65536):
                found = self.pattern.search(data)
                if found:
                    current[:] = [Stream(found.group(1).decode())]
                    self.streams.append(current[0])
                up_writer.write(data)
                await up_writer.drain()

        async def downward() -> None:
            while data := await up_reader.read(65536):
                stream = current[0] if current else None
                if stream is not None:
                    stream.delivered += data
                    if self.armed and len(self.streams) == 1:
                        cut = self._cut_at(stream.delivered)
                        if cut is not None:
                            keep = cut - (len(stream.delivered) - len(data))
                            del stream.delivered[cut:]
                            writer.write(data[:keep])
                            await writer.drain()
                            stream.cut = True
                            self.armed = False
                            return
                writer.write(data)
                await writer.drain()

        tasks = [asyncio.ensure_future(upward()), asyncio.ensure_future(downward())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for w in (writer, up_writer):
                w.close()
