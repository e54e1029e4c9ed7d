"""A TCP proxy that a test can cut: the network between a bot and its database.

``async with TcpProxy(port) as proxy`` listens on ``127.0.0.1:proxy.port`` and pipes
every connection to ``127.0.0.1:port`` (PostgreSQL). :meth:`TcpProxy.cut` closes every
open connection and refuses new ones until :meth:`TcpProxy.restore`, the way a database
that went down looks to its clients: a refused connection, a reset one. ``accepted``
counts the connections taken so far (a test waits for a reconnect on it).
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Self


class TcpProxy:
    """A cuttable TCP pipe to ``127.0.0.1:target`` (see the module docstring)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self.accepted = 0
        self.is_cut = False
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._pipe, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        _type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def cut(self) -> None:
        """Close every open connection; refuse new ones (closed as they come)."""
        self.is_cut = True
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    def restore(self) -> None:
        """Pass new connections on again."""
        self.is_cut = False

    async def _pipe(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        if self.is_cut:
            client_out.transport.abort()
            return
        try:
            server_in, server_out = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            client_out.transport.abort()
            return
        self.accepted += 1
        self._open |= {client_out, server_out}
        try:
            await asyncio.gather(
                _copy(client_in, server_out), _copy(server_in, client_out), return_exceptions=True
            )
        finally:
            for writer in (client_out, server_out):
                self._open.discard(writer)
                writer.transport.abort()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Bytes from ``reader`` to ``writer`` until either side ends."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.transport.abort()
