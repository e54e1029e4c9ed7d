"""Counting Discord's HTTP 429 answers, by route, for the bot's metrics.

discord.py waits out a 429 itself (its rate-limit buckets:
https://discord.com/developers/docs/topics/rate-limits), so no exception tells the bot.
It hands each request of its aiohttp session to a ``TraceConfig`` given as the client's
``http_trace`` (https://docs.aiohttp.org/en/stable/tracing_reference.html), and
:func:`rate_limit_trace` makes one that tells ``seen`` the route of every 429.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from types import SimpleNamespace

import aiohttp
import yarl

_API_PREFIX = re.compile(r"^.*?/api/v\d+(?=/)")
_SNOWFLAKE = re.compile(r"^\d{15,21}$")


def route_of(method: str, url: yarl.URL) -> str:
    """``POST /channels/{id}/messages``: the REST route of a request, without its ids.

    Snowflakes become ``{id}``, the emoji of a reaction path ``{emoji}``, and the base
    (``https://discord.com/api/v10``, or a proxy's) is left out, so a route names a kind of
    call, not a message: few label values.
    """
    path = _API_PREFIX.sub("", url.path)
    parts = path.split("/")
    for i, part in enumerate(parts):
        if _SNOWFLAKE.match(part):
            parts[i] = "{id}"
        elif i > 0 and parts[i - 1] == "reactions" and part != "@me":
            parts[i] = "{emoji}"
    return f"{method.upper()} {'/'.join(parts)}"


def rate_limit_trace(seen: Callable[[str], None]) -> aiohttp.TraceConfig:
    """A trace config that calls ``seen(route)`` for each response with status 429."""
    trace = aiohttp.TraceConfig()

    async def ended(
        _session: aiohttp.ClientSession,
        _context: SimpleNamespace,
        params: aiohttp.TraceRequestEndParams,
    ) -> None:
        if params.response.status == 429:
            seen(route_of(params.method, params.url))

    trace.on_request_end.append(ended)
    return trace
