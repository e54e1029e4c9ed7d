"""What every local fake server shares: ``async with`` around ``start()`` and ``stop()``,
and listening on 127.0.0.1 with an aiohttp app (:meth:`LocalServer.listen`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

from aiohttp import web


class LocalServer(ABC):
    """Base: ``async with Fake(...) as fake`` starts the server and stops it after.

    A fake sets ``_root`` (``http://127.0.0.1:PORT``) when it has started.
    """

    _root: str = ""
    _runner: web.AppRunner | None = None

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT`` (or ``ws://``) once started."""
        if not self._root:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._root

    @abstractmethod
    async def start(self) -> None:
        """Listen on 127.0.0.1."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop listening and close open connections."""

    async def listen(
        self, app: web.Application, *, scheme: str = "http", shutdown_timeout: float = 2.0
    ) -> None:
        """Serve ``app`` on a free port of 127.0.0.1; ``root_url`` is ``scheme://host:port``."""
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        host, port = self._runner.addresses[0][:2]
        self._root = f"{scheme}://{host}:{port}"

    async def unlisten(self) -> None:
        """Stop serving (open connections closed); nothing when not listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
