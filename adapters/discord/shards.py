"""This instance's gateway shards: which it runs, the client that connects them, and
whether each one is live.

Discord splits a bot's guilds over ``shard_count`` gateway connections: the events
of a guild go to shard ``(guild_id >> 22) % shard_count`` and DMs to shard 0, and
each connection names its shard in IDENTIFY's ``shard`` ``[id, count]``
(https://discord.com/developers/docs/events/gateway#sharding). An instance runs the
shards of its :class:`ShardSet`: without a count, the one connection that gets
everything (no ``shard`` sent, as discord.py's ``Client`` does); with a count, the
given ids (all of them when none is given) through discord.py's
``AutoShardedClient``, one websocket per shard, each resuming or identifying again
by itself. Several instances split the shards between them, each shard run by
exactly one (docs/architecture.md, "Several instances").

Each frame is told with the shard it came on (:func:`tap_frames`), so the inbound
side keeps a sequence per shard, and :class:`ShardLinks` knows, per shard, whether its
current websocket is open and has had its READY (or RESUMED).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp
import discord
import discord.gateway

from adapters.discord.errors import DiscordStartError
from adapters.discord.types import GatewayDispatch

__all__ = ["IDENTIFY_SPACING", "Shard", "ShardLinks", "ShardSet", "tap_frames"]

Shard = int | None
"""A shard id; None for the one connection of an instance that does not shard."""

IDENTIFY_SPACING = 5.0
"""Seconds discord.py waits before each IDENTIFY after an instance's first
(``Client.before_identify_hook``): Discord takes ``max_concurrency`` IDENTIFYs per 5
seconds, 1 for most bots
(https://discord.com/developers/docs/events/gateway#session-start-limit-object)."""

_LIVE_EVENTS = frozenset({"READY", "RESUMED"})
"""The dispatches after which a websocket carries its shard's events: READY after an
IDENTIFY, RESUMED after a RESUME."""


@dataclass(frozen=True)
class ShardSet:
    """The shards an instance runs: ``count`` in all (None: no sharding) and ``ids``
    of them here (empty: every one of ``count``). ``bot/settings.py`` checks that the
    ids lie below the count and name each shard once."""

    count: int | None = None
    ids: tuple[int, ...] = ()

    @property
    def shards(self) -> tuple[Shard, ...]:
        """This instance's shards in order: ``(None,)`` without a count."""
        if self.count is None:
            return (None,)
        return self.ids or tuple(range(self.count))

    def client(
        self, *, intents: discord.Intents, http_trace: aiohttp.TraceConfig
    ) -> discord.Client:
        """A discord.py client that connects these shards: a ``Client`` without a count,
        else an ``AutoShardedClient(shard_count=count, shard_ids=...)``; ``http_trace``
        sees its REST requests (:mod:`adapters.discord.rate_limits`)."""
        if self.count is None:
            return discord.Client(intents=intents, http_trace=http_trace)
        shard_ids = [shard for shard in self.shards if shard is not None]
        return discord.AutoShardedClient(
            intents=intents, shard_count=self.count, shard_ids=shard_ids, http_trace=http_trace
        )

    def __str__(self) -> str:
        if self.count is None:
            return "no sharding"
        return f"shards {', '.join(map(str, self.shards))} of {self.count}"


class ShardLinks:
    """Per shard, its current websocket and whether READY or RESUMED came on it.

    :meth:`opened` is told of each websocket discord.py makes (the first one, and one
    for every resume or new IDENTIFY), :meth:`heard` of each dispatch on it.
    """

    def __init__(self, shards: Iterable[Shard]) -> None:
        self.shards: tuple[Shard, ...] = tuple(shards)
        self._sockets: dict[Shard, discord.gateway.DiscordWebSocket] = {}
        self._live: set[Shard] = set()

    def opened(self, shard: Shard, ws: discord.gateway.DiscordWebSocket) -> None:
        """A new websocket for ``shard``: not live until its READY or RESUMED."""
        self._sockets[shard] = ws
        self._live.discard(shard)

    def heard(self, shard: Shard, frame: GatewayDispatch) -> None:
        """A dispatch came on ``shard``'s current websocket."""
        if frame.get("t") in _LIVE_EVENTS:
            self._live.add(shard)

    def live(self, shard: Shard) -> bool:
        """Whether ``shard``'s websocket is open and had its READY or RESUMED."""
        ws = self._sockets.get(shard)
        return shard in self._live and ws is not None and ws.open

    def all_live(self) -> bool:
        """Whether every shard of this instance is :meth:`live`."""
        return all(self.live(shard) for shard in self.shards)


Opened = Callable[[Shard, discord.gateway.DiscordWebSocket], None]
Receive = Callable[[Shard, Any], None]

_TAPPED = "__threadbot_tapped__"


def tap_frames(client: discord.Client, *, opened: Opened, receive: Receive) -> None:
    """Tell ``opened(shard, ws)`` of every websocket ``client`` makes, and
    ``receive(shard, raw)`` of every frame that comes on it, in order.

    discord.py's public hook, ``on_socket_raw_receive``, does not say which shard a
    frame came on, so this uses the one place every websocket passes through:
    ``DiscordWebSocket.from_client`` (``discord/gateway.py``) makes each (the first
    connection, each shard's, each resume and new IDENTIFY), sets its ``shard_id``
    and then calls ``client._connection._update_references(ws)`` before it reads a
    frame. That method is wrapped, on the client's state only, to set the
    websocket's ``log_receive``, which ``received_message`` calls with every frame
    (text, decompressed) before discord.py parses it. Tapping a client twice changes
    nothing.

    Raises :class:`DiscordStartError` when this discord.py has no such method (its
    private API changed): without it no frame would arrive.
    """
    state = getattr(client, "_connection", None)
    update = getattr(state, "_update_references", None)
    if not callable(update):
        raise DiscordStartError(
            f"discord.py {discord.__version__} has no ConnectionState._update_references: "
            "threadbot cannot read its gateway frames (it needs discord.py 2.4 to 2.x)"
        )
    if getattr(update, _TAPPED, False):
        return

    def update_references(ws: discord.gateway.DiscordWebSocket) -> None:
        update(ws)
        shard: Shard = ws.shard_id

        def log_receive(raw: Any, /) -> None:
            receive(shard, raw)

        ws.log_receive = log_receive  # type: ignore[method-assign]
        opened(shard, ws)

    setattr(update_references, _TAPPED, True)
    state._update_references = update_references  # type: ignore[union-attr]
