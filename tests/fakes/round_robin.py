"""A round-robin HTTP proxy: the load balancer in front of several bot processes.

Each request (a Slack event POST, a slash command) goes to the next process in turn,
its headers and body passed on as they came (Slack's signature covers them), and the
process's answer is returned as it came. A process that does not accept the
connection (killed) is passed over for the next, as a load balancer's health check
would. Used by ``tests/instances.py``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import aiohttp
from aiohttp import web

from tests.fakes.local import LocalServer
from tests.process_harness import Listening

_HOP_BY_HOP = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding"}
)


class RoundRobin(LocalServer):
    """A round-robin HTTP proxy on ``127.0.0.1:port`` in front of ``targets``.

    Every request, whatever its method and path, goes to the next target in turn
    (``http://127.0.0.1:{target.port}`` and the same path and query), with its body
    and headers (hop-by-hop ones aside) as they came; the target's status, body and
    content type are answered. A target that refuses the connection is passed over
    for the next; when none accepts, 502. ``routed`` lists the port each request went
    to, in order.
    """

    def __init__(self, targets: Sequence[Listening]) -> None:
        self.targets = list(targets)
        self.routed: list[int] = []
        self._turn = itertools.count()
        self._http: aiohttp.ClientSession | None = None

    @property
    def port(self) -> int:
        """The port the proxy listens on (once started)."""
        return int(self.root_url.rpartition(":")[2])

    async def start(self) -> None:
        self._http = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        await self.listen(app)

    async def stop(self) -> None:
        await self.unlisten()
        if self._http is not None:
            await self._http.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._http is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        first = next(self._turn)
        for step in range(len(self.targets)):
            target = self.targets[(first + step) % len(self.targets)]
            url = f"http://127.0.0.1:{target.port}{request.rel_url}"
            try:
                async with self._http.request(
                    request.method, url, data=body, headers=headers, allow_redirects=False
                ) as answer:
                    payload = await answer.read()
                    kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_BY_HOP}
            except aiohttp.ClientConnectorError:
                continue  # not listening (killed): the next one takes it
            self.routed.append(target.port)
            return web.Response(status=answer.status, body=payload, headers=kept)
        return web.Response(status=502, text="no instance accepted the connection")
