"""Sending one REST call through discord.py's HTTP client.

Every call the adapter makes goes through ``client.http.request(Route(...))``, so
discord.py's rate-limit buckets apply: it sleeps on a 429 and retries, and keys
its buckets by ``Route`` (method, path and the channel of the path). What can go
wrong: Discord answers an error (``discord.HTTPException``: ``status``, ``code``,
``text``; https://discord.com/developers/docs/topics/opcodes-and-status-codes#json)
or does not answer at all (:data:`UNREACHABLE`).
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import discord
import discord.http

from adapters.discord.outbound import RestCall

UNREACHABLE: tuple[type[Exception], ...] = (aiohttp.ClientError, TimeoutError, OSError)
"""What discord.py's HTTP client raises when Discord did not answer."""

REST_FAILURES: tuple[type[Exception], ...] = (discord.HTTPException, *UNREACHABLE)
"""Every way a REST call can fail: refused or not answered."""


async def request(
    client: discord.Client, call: RestCall, file: discord.File | None = None
) -> dict[str, Any]:
    """Send ``call`` (with ``file`` as ``files[0]`` of a multipart body); the JSON answer.

    An answer that is not a JSON object (204 No Content) gives ``{}``. Raises what
    discord.py raises: ``discord.HTTPException`` for an error answer, one of
    :data:`UNREACHABLE` when there is none.
    """
    route = discord.http.Route(call.method, call.path)  # the path is encoded already
    route.channel_id = channel_of(call)  # discord.py's per-channel rate-limit bucket
    if file is not None:
        form: list[dict[str, Any]] = [
            {"name": "payload_json", "value": json.dumps(call.json or {})},
            {
                "name": "files[0]",
                "value": file.fp,
                "filename": file.filename,
                "content_type": "application/octet-stream",
            },
        ]
        result = await client.http.request(route, files=[file], form=form)
    elif call.json is None:
        result = await client.http.request(route)
    else:
        result = await client.http.request(route, json=call.json)
    return dict(result) if isinstance(result, dict) else {}


def channel_of(call: RestCall) -> str | None:
    """The channel id in ``call``'s path (``/channels/{id}/...``), or None."""
    parts = call.path.split("/")
    return parts[2] if len(parts) > 2 and parts[1] == "channels" else None
