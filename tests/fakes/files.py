"""Files served over HTTP by the fakes, and every download recorded with its headers.

:class:`ServedFiles` is the file route of a fake: Slack's ``files.slack.com``
(``/files-pri/...``, answering only with the bot token, as Slack does:
https://api.slack.com/types/file), Discord's CDN (``/attachments/...``, no token:
https://discord.com/developers/docs/resources/message#attachment-object), or any other
host (:class:`FakeFileHost`, a second local server standing in for a foreign host).
Each request is kept in ``requests`` (:class:`FileRequest`: path, headers, status), so a
test asserts which headers each download carried, and that a host got nothing at all.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from aiohttp import web
from multidict import CIMultiDict

from tests.fakes.local import LocalServer


def png(width: int, height: int) -> bytes:
    """A real PNG image of ``width`` x ``height`` black pixels (8-bit RGB)
    (https://www.w3.org/TR/png/: signature, IHDR, IDAT, IEND)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\x00\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@dataclass(frozen=True)
class FileRequest:
    """One request on a file route: its path, its headers, and the status answered."""

    path: str
    headers: CIMultiDict[str]
    status: int

    @property
    def authorization(self) -> str | None:
        """The ``Authorization`` header sent, if any."""
        return self.headers.get("Authorization")


@dataclass(frozen=True)
class _Served:
    content: bytes
    content_type: str
    redirect_to: str | None


class ServedFiles:
    """Files by path; ``authorization``, when set, is the only header value answered
    (403 otherwise, as Slack refuses a private file without the bot token)."""

    def __init__(self, *, authorization: str | None = None) -> None:
        self.authorization = authorization
        self.requests: list[FileRequest] = []
        self._files: dict[str, _Served] = {}

    def add(
        self,
        path: str,
        content: bytes,
        *,
        content_type: str = "application/octet-stream",
        redirect_to: str | None = None,
    ) -> None:
        """Serve ``content`` at ``path``; with ``redirect_to``, answer 302 to it instead."""
        self._files[path] = _Served(content, content_type, redirect_to)

    def paths(self) -> list[str]:
        """The paths requested, in order."""
        return [r.path for r in self.requests]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """The aiohttp handler of the file route."""
        served = self._files.get(request.path)
        status = 200
        if self.authorization is not None and (
            request.headers.get("Authorization") != self.authorization
        ):
            status = 403
        elif served is None:
            status = 404
        elif served.redirect_to is not None:
            status = 302
        self.requests.append(FileRequest(request.path, CIMultiDict(request.headers), status))
        if status == 302 and served is not None and served.redirect_to is not None:
            raise web.HTTPFound(served.redirect_to)
        if status != 200 or served is None:
            return web.Response(status=status, text="no")
        return web.Response(body=served.content, content_type=served.content_type)


class FakeFileHost(LocalServer):
    """Another host (another port of 127.0.0.1) serving files; it records every request."""

    def __init__(self) -> None:
        self.files = ServedFiles()

    @property
    def requests(self) -> list[FileRequest]:
        """Every request this host received, in order."""
        return self.files.requests

    def serve(self, path: str, content: bytes, content_type: str = "image/png") -> str:
        """Serve ``content`` at ``path``; returns its URL."""
        self.files.add(path, content, content_type=content_type)
        return self.root_url + path

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.files.handle)
        await self.listen(app, shutdown_timeout=1.0)

    async def stop(self) -> None:
        await self.unlisten()
