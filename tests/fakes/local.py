"""What every local fake server shares: ``async with`` around ``start()`` and ``stop()``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class LocalServer(ABC):
    """Base: ``async with Fake(...) as fake`` starts the server and stops it after.

    A fake sets ``_root`` (``http://127.0.0.1:PORT``) when it has started.
    """

    _root: str = ""

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
