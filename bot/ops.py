"""The operations address: health, readiness and metrics over HTTP, apart from Slack's port.

:class:`Operations` serves, on ``ops_host:ops_port`` (127.0.0.1:9464 by default), in
every deployment of ``threadbot run`` (Slack over HTTP or Socket Mode, Discord):

- ``GET /healthz``: 200 ``ok`` while the process and its event loop live (a liveness
  probe: restart the process when it does not answer);
- ``GET /readyz``: 200 ``ready`` when the database answers, its schema is the newest
  this code knows, and every platform is connected; else 503 with one line per check
  that failed (``database: cannot reach the database: ...``, ``slack: not
  connected``, ``shutting down``). A load balancer sends events only to a ready
  instance; an orchestrator waits for it before it stops the next one;
- ``GET /metrics``: :class:`bot.metrics.Metrics` in the Prometheus text format
  (https://prometheus.io/docs/instrumenting/exposition_formats/);
- ``GET /``: the list of these;
- in a Socket Mode deployment with Slack installs, ``GET /slack/install`` and ``GET
  /slack/oauth_redirect``: Slack's OAuth flow (:mod:`adapters.slack.oauth`), since no
  other port of the bot is open then (:meth:`Operations.add_page`);
- with the setting ``inspector``, the run inspector's pages under ``/inspector/``
  (:mod:`bot.inspector`, added by :meth:`Operations.mount`).

Every check has ``check_timeout`` seconds (a database that does not answer is a
failed check, not a hung probe). The server is aiohttp's, already the Slack adapter's
HTTP server (docs/architecture.md, "Operating threadbot"). A request it cannot parse (a
request line over 8 KB, a duplicate ``Host``, garbage) gets aiohttp's 400 and one log
line at ``INFO`` (:class:`adapters.http_log.ServerLog`), not a traceback on stderr.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from adapters.http_log import ServerLog
from bot.metrics import Metrics
from conversations.store.health import StoreHealth

log = logging.getLogger(__name__)

Connected = Callable[[], Awaitable[bool]]
"""Whether one platform's adapter is connected now."""

Page = Callable[[web.Request], Awaitable[web.StreamResponse]]
"""A ``GET`` handler another part of the bot serves here (an adapter's)."""

PATHS = ("/healthz", "/readyz", "/metrics")


class Operations:
    """The operations HTTP server of one bot (see the module docstring).

    ``platforms``: each platform's connection check, by name; ``clock``: the current
    time, timezone-aware UTC (the age of the oldest outbox row).
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        health: StoreHealth,
        metrics: Metrics,
        platforms: Mapping[str, Connected],
        clock: Callable[[], datetime],
        check_timeout: float = 5.0,
    ) -> None:
        self._host = host
        self._port = port
        self._health = health
        self._metrics = metrics
        self._platforms = dict(platforms)
        self._clock = clock
        self._check_timeout = check_timeout
        self._runner: web.AppRunner | None = None
        self._pages: dict[str, Page] = {}
        self._mounts: list[Callable[[web.Application], None]] = []
        self.draining = False
        """Set at a graceful shutdown: ``/readyz`` answers 503 from then on."""

    def add_platform(self, name: str, connected: Connected) -> None:
        """Check ``connected`` in ``/readyz`` as ``name``."""
        self._platforms[name] = connected

    def add_page(self, path: str, page: Page) -> None:
        """Serve ``GET path`` with ``page`` too (before :meth:`start`)."""
        self._pages[path] = page

    def mount(self, setup: Callable[[web.Application], None]) -> None:
        """Call ``setup`` with the application before it starts (:meth:`start`): it adds
        routes and middlewares of its own (the run inspector's, :mod:`bot.inspector`)."""
        self._mounts.append(setup)

    @property
    def pages(self) -> list[str]:
        """The paths of the pages added (:meth:`add_page`)."""
        return list(self._pages)

    async def start(self) -> str:
        """Listen; returns the address (``http://host:port``, the port bound when 0 was asked).

        Raises ``OSError`` when the address cannot be bound (in use, not this host's).
        """
        app = web.Application()
        app.router.add_get("/", self._index)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics_page)
        for path, page in self._pages.items():
            app.router.add_get(path, page)
        for setup in self._mounts:
            setup(app)
        server_log = ServerLog(logging.getLogger("bot.ops.server"))
        self._runner = web.AppRunner(app, access_log=None, logger=server_log)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        try:
            await site.start()
        except OSError:
            await self.close()
            raise
        return self.address

    @property
    def address(self) -> str:
        """``http://host:port`` as bound (the requested one before :meth:`start`)."""
        port = self._port
        if self._runner is not None:
            for bound in self._runner.addresses:
                port = int(bound[1])
                break
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{port}"

    async def close(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def problems(self) -> list[str]:
        """What keeps this instance from being ready, one line each (empty: ready)."""
        found: list[str] = ["shutting down"] if self.draining else []
        checks: dict[str, Awaitable[object]] = {"database": self._health.problem()}
        checks |= {name: connected() for name, connected in self._platforms.items()}
        results = await asyncio.gather(
            *(self._within(check) for check in checks.values()), return_exceptions=True
        )
        for name, result in zip(checks, results, strict=True):
            if name == "database":
                if result is not None:
                    found.append(f"database: {_said(result)}")
            elif result is not True:
                found.append(f"{name}: {'not connected' if result is False else _said(result)}")
        return found

    async def _within(self, check: Awaitable[object]) -> object:
        try:
            return await asyncio.wait_for(check, self._check_timeout)
        except TimeoutError:
            return f"no answer within {self._check_timeout:g} s"

    async def _index(self, _request: web.Request) -> web.Response:
        return web.Response(text="threadbot operations: " + " ".join(PATHS) + "\n")

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _request: web.Request) -> web.Response:
        problems = await self.problems()
        if problems:
            return web.Response(status=503, text="".join(f"{p}\n" for p in problems))
        return web.Response(text="ready\n")

    async def _metrics_page(self, _request: web.Request) -> web.Response:
        try:
            levels = await asyncio.wait_for(self._health.levels(self._clock()), self._check_timeout)
        except Exception as exc:  # the database is down: the rest is still worth a scrape
            log.debug("metrics: the levels could not be read: %s", exc)
            levels = None
        self._metrics.levels_read(levels)
        response = web.Response(body=self._metrics.exposition())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response


def _said(result: object) -> str:
    """A check's failure in words (its own words, or the exception's)."""
    if isinstance(result, BaseException):
        return str(result) or type(result).__name__
    return str(result)
