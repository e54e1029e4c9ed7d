"""The Discord runner: a real ``discord.Client`` wired to the hub, and the Discord sender.

:class:`DiscordAdapter` owns the connection's lifecycle: it points discord.py at the
configured URLs, logs in, connects to the gateway with the intents the
conversations need (guilds, guild and DM messages, Message Content, guild and DM
reactions), one connection per shard of this instance
(:mod:`adapters.discord.shards`), waits for READY on each, registers ``/stop`` and
``/threadbot settings`` (:func:`commands`), and keeps the connections
(``keep_connected``) until it closes; :meth:`DiscordAdapter.connected` says whether
they are all up. The rest is in rooms of its own:

- inbound, every gateway dispatch to the hub: :mod:`adapters.discord.inbound`
  (interactions answered within 3 s by :mod:`adapters.discord.acks`);
- outbound, :meth:`DiscordAdapter.send`: :mod:`adapters.discord.sending`, rendering
  with :mod:`adapters.discord.outbound`, REST calls through :mod:`adapters.discord.rest`.

Bad input never ends the connection: a dispatch that discord.py's own parsers
cannot read is logged with its event name and skipped
(:mod:`adapters.discord.gateway_guard`), a frame that is not JSON is skipped, and
the translators drop and log a payload they cannot read (ids must be snowflakes
before they reach a REST path).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import discord
import discord.gateway
import discord.http
import yarl

from adapters.discord.errors import DiscordStartError, GatewayClosed
from adapters.discord.files import DiscordFiles
from adapters.discord.gateway_guard import guard_parsers
from adapters.discord.inbound import Inbound
from adapters.discord.rate_limits import rate_limit_trace
from adapters.discord.sending import DiscordSender
from adapters.discord.shards import IDENTIFY_SPACING, Shard, ShardLinks, ShardSet, tap_frames
from adapters.discord.texts import TEXTS
from adapters.discord.typing import EVERY, TypingIndicator
from adapters.said import connection_said
from conversations.adapter import InboundSink
from conversations.events import OutboundAction

__all__ = [
    "SETTINGS_COMMAND",
    "DiscordAdapter",
    "DiscordConfig",
    "DiscordStartError",
    "commands",
    "intents",
]

log = logging.getLogger(__name__)

MESSAGE_CONTENT_HELP = (
    "Discord refused the gateway connection (close code 4014): the bot asked for the "
    "privileged Message Content intent, which this application is not granted. Turn it "
    "on in the Discord Developer Portal -> your application -> Bot -> Privileged Gateway "
    "Intents -> Message Content Intent."
)
"""What to do about close code 4014, Disallowed intent(s)
(https://discord.com/developers/docs/topics/opcodes-and-status-codes#gateway-gateway-close-event-codes)."""


@dataclass(frozen=True, kw_only=True)
class DiscordConfig:
    """How to reach Discord.

    ``api_url`` and ``gateway_url`` point discord.py elsewhere (tests, proxies). They set
    ``discord.http.Route.BASE`` and ``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY``,
    which are CLASS attributes: the change applies to every discord.py client in the
    process, and :meth:`DiscordAdapter.close` puts back what was there before.

    ``guilds``: guild ids to register the commands (``/stop``, ``/threadbot``) in
    (at once); empty registers them globally (Discord may take a while to show a
    new global command).
    ``allow_bots``: take other bots' messages, at most ``bot_thread_cap`` per
    thread (stops bot-to-bot loops). ``file_threshold``: characters past which a
    reply with no buttons or reactions (an answer) is attached as a file.
    ``ready_timeout``: seconds :meth:`DiscordAdapter.start` waits for READY (and
    :data:`~adapters.discord.shards.IDENTIFY_SPACING` more for each shard past the first).
    ``shard_count``: the bot's gateway shards in all (None: no sharding, one
    connection); ``shard_ids``: those this instance connects (empty: every one), as
    :class:`~adapters.discord.shards.ShardSet` says. ``typing_every``: seconds between
    two triggers of a working thread's typing indicator (:mod:`adapters.discord.typing`).
    """

    token: str
    api_url: str | None = None
    gateway_url: str | None = None
    guilds: tuple[str, ...] = ()
    allow_bots: bool = False
    bot_thread_cap: int = 5
    file_threshold: int = 12_000
    stop_command: str = "stop"
    ready_timeout: float = 30.0
    shard_count: int | None = None
    shard_ids: tuple[int, ...] = ()
    typing_every: float = EVERY


SETTINGS_COMMAND = "threadbot"
"""The command whose ``settings`` subcommand shows the channel's effective settings."""

_CHAT_INPUT = 1
"""Application command type CHAT_INPUT, a slash command
(https://discord.com/developers/docs/interactions/application-commands#application-command-object-application-command-types)."""
_SUB_COMMAND = 1
"""Option type SUB_COMMAND
(https://discord.com/developers/docs/interactions/application-commands#application-command-object-application-command-option-type)."""


def commands(stop_command: str = "stop") -> list[dict[str, Any]]:
    """The application commands the runner registers: the stop command and ``/threadbot``.

    ``/threadbot`` has one subcommand, ``settings``: Discord sends it as an option
    of type SUB_COMMAND under the command
    (https://discord.com/developers/docs/interactions/application-commands#subcommands-and-subcommand-groups),
    which :func:`adapters.discord.interactions.interaction_event` turns into
    ``CommandInvoked(name="threadbot", args="settings")``. Names are unique per
    command type, so a stop command configured as ``threadbot`` is registered alone.
    """
    wanted: list[dict[str, Any]] = [
        {
            "name": stop_command,
            "description": "Stop the bot's conversation in this thread",
            "type": _CHAT_INPUT,
        }
    ]
    if stop_command != SETTINGS_COMMAND:
        wanted.append(
            {
                "name": SETTINGS_COMMAND,
                "description": "threadbot's own commands",
                "type": _CHAT_INPUT,
                "options": [
                    {
                        "name": "settings",
                        "description": "Show this channel's settings",
                        "type": _SUB_COMMAND,
                    }
                ],
            }
        )
    return wanted


def intents() -> discord.Intents:
    """The gateway intents the runner asks for (Message Content is privileged)."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.message_content = True
    wanted.guild_reactions = True
    wanted.dm_messages = True
    wanted.dm_reactions = True
    return wanted


class DiscordAdapter:
    """Discord through discord.py; a :class:`conversations.adapter.Sender`."""

    platform = "discord"
    texts = TEXTS
    """What the hub says on Discord (``bot`` hands it to the hub)."""

    def __init__(self, config: DiscordConfig) -> None:
        self._config = config
        self._saved: tuple[str, yarl.URL] | None = None
        _no_voice_notices()
        self.shard_set = ShardSet(count=config.shard_count, ids=config.shard_ids)
        """The gateway shards this instance connects."""
        self.rate_limited: Callable[[str], None] = lambda _route: None
        """Told the route (``POST /channels/{id}/messages``) of every 429 Discord answers
        (the bot counts them; discord.py waits them out itself)."""
        self.client = self.shard_set.client(
            intents=intents(), http_trace=rate_limit_trace(self._seen_429)
        )
        guard_parsers(self.client)  # a dispatch discord.py cannot parse is skipped, not fatal
        self._links = ShardLinks(self.shard_set.shards)
        self._inbound = Inbound(
            client=self.client,
            allow_bots=config.allow_bots,
            bot_thread_cap=config.bot_thread_cap,
            shards=self.shard_set.shards,
        )
        self._sender = DiscordSender(
            client=self.client,
            file_threshold=config.file_threshold,
            answers=self._inbound.answers,
            typing_every=config.typing_every,
        )
        self.files = DiscordFiles(api_url=config.api_url)
        """Fetches the files people attach (``bot`` hands it to the hub)."""
        self._worker: asyncio.Task[None] | None = None
        self._connection: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def typing(self) -> TypingIndicator:
        """The threads whose typing indicator is kept on now (a run works there)."""
        return self._sender.typing

    @property
    def processed_seq(self) -> int:
        """The gateway sequence of the last dispatch taken on this instance's first (or
        only) shard (tests wait on it); every shard's: :attr:`processed_seqs`."""
        return self._inbound.processed_seqs[self.shard_set.shards[0]]

    @property
    def processed_seqs(self) -> dict[Shard, int]:
        """Per shard (None without sharding), the sequence of the last dispatch taken."""
        return dict(self._inbound.processed_seqs)

    def _seen_429(self, route: str) -> None:
        self.rate_limited(route)

    async def connected(self) -> bool:
        """Whether Discord reaches this instance now (the bot's ``/readyz`` asks).

        True when the client is logged in and not closed, and every shard of this
        instance (:attr:`shard_set`) has its gateway websocket open with READY (after an
        IDENTIFY) or RESUMED (after a RESUME) received on it. False before
        :meth:`start` has READY, while a shard's connection is down or being made
        again (discord.py resumes or identifies anew by itself; true again once the
        shard's RESUMED or READY arrives), and after :meth:`close`.
        """
        return (
            not self._closing
            and self.client.user is not None
            and not self.client.is_closed()
            and self._inbound.me is not None
            and self._links.all_live()
        )

    # --- lifecycle -----------------------------------------------------------------

    async def start(self, hub: InboundSink) -> None:
        """Log in, connect every shard, wait for READY on each, then register ``/stop``.

        Raises :class:`DiscordStartError` when the token is refused, the Message
        Content intent is not granted (close code 4014), or READY does not come
        within ``ready_timeout`` seconds (and ``IDENTIFY_SPACING`` more per shard
        past the first: discord.py spaces their IDENTIFYs so).
        """
        self._inbound.hub = hub
        tap_frames(self.client, opened=self._links.opened, receive=self._receive)
        log.info("connecting to the Discord gateway (%s)", self.shard_set)
        self._point_discord_py()
        self._worker = asyncio.create_task(self._inbound.work(), name="discord-inbound")
        self._connection = asyncio.create_task(self._connect(), name="discord-gateway")
        self._connection.add_done_callback(_log_end)
        ready = asyncio.create_task(self._inbound.ready.wait())
        try:
            done, _ = await asyncio.wait(
                {ready, self._connection},
                timeout=self._config.ready_timeout
                + IDENTIFY_SPACING * (len(self.shard_set.shards) - 1),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            ready.cancel()
        if self._connection in done:
            error = self._connection.exception()
            await self.close()
            if isinstance(error, discord.PrivilegedIntentsRequired):  # logged by _connect
                raise DiscordStartError(MESSAGE_CONTENT_HELP) from error
            if isinstance(error, discord.LoginFailure):
                raise DiscordStartError(f"Discord refused the bot token: {error}") from error
            ended = "ended" if error is None else f"ended: {connection_said(error)}"
            raise DiscordStartError(f"the Discord connection {ended}") from error
        if not done:
            await self.close()
            raise DiscordStartError("Discord sent no READY in time")
        await self._register_commands()

    async def stop_receiving(self) -> None:
        """A shutdown begins. Discord does not send a gateway event again, so the
        connection stays open: what arrives now is recorded by the hub (its inbox)
        and handled at the next start, and sending goes on."""

    async def keep_connected(self) -> None:
        """Wait on the gateway connection; raise when it ends (the app restarts this).

        discord.py resumes and reconnects by itself; when its ``Client.start``
        gives up (it raised), this raises the same error, and the supervised
        restart clears the client's state and connects again; when it returns
        without an error, this raises :class:`GatewayClosed`. Returns when the
        adapter is closing.
        """
        task = self._connection
        if task is None or task.done():
            if self._closing or self._inbound.hub is None:
                return
            self.client.clear()
            task = self._connection = asyncio.create_task(self._connect(), name="discord-gateway")
            task.add_done_callback(_log_end)
        await asyncio.shield(task)
        if not self._closing:
            raise GatewayClosed("the Discord gateway connection ended")

    async def close(self) -> None:
        """Disconnect, stop taking frames, and restore discord.py's URLs."""
        self._closing = True
        await self._sender.typing.close()
        with contextlib.suppress(Exception):
            await self.client.close()
        for task in (self._connection, self._worker):
            if task is not None and not task.done():
                task.cancel()
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._connection = self._worker = None
        if self._saved is not None:
            discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = self._saved
            self._saved = None

    def _point_discord_py(self) -> None:
        """Set the process-wide REST base and first gateway URL (see :class:`DiscordConfig`)."""
        if self._saved is None:
            self._saved = (
                discord.http.Route.BASE,
                discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY,
            )
        if self._config.api_url:
            discord.http.Route.BASE = self._config.api_url.rstrip("/")
        if self._config.gateway_url:
            discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self._config.gateway_url)

    async def _connect(self) -> None:
        try:
            await self.client.start(self._config.token)
        except discord.PrivilegedIntentsRequired:
            log.error("%s", MESSAGE_CONTENT_HELP)
            raise

    async def _register_commands(self) -> None:
        """Overwrite the app's commands with :func:`commands` (in ``guilds``, else globally).

        (https://discord.com/developers/docs/interactions/application-commands#bulk-overwrite-global-application-commands);
        a refusal is logged, not raised.
        """
        me = self._inbound.me
        if me is None:
            return
        wanted = commands(self._config.stop_command)
        names = ", ".join(f"/{command['name']}" for command in wanted)
        app = me.application_id
        try:
            if not self._config.guilds:
                await self.client.http.bulk_upsert_global_commands(app, wanted)
            for guild in self._config.guilds:
                await self.client.http.bulk_upsert_guild_commands(app, guild, wanted)
        except discord.HTTPException as exc:
            log.warning("could not register %s: %s", names, exc)

    # --- inbound -------------------------------------------------------------------

    def _receive(self, shard: Shard, raw: Any) -> None:
        """One gateway frame of ``shard``, as text (decompressed): see :func:`tap_frames`."""
        frame = self._inbound.receive(raw, shard)
        if frame is not None:
            self._links.heard(shard, frame)

    async def idle(self) -> None:
        """Return once every frame received so far has been taken."""
        await self._inbound.idle()

    # --- outbound ------------------------------------------------------------------

    async def send(
        self, action: OutboundAction, *, idempotency_key: str, maybe_sent: bool = False
    ) -> str | None:
        """Perform ``action`` (see :meth:`adapters.discord.sending.DiscordSender.send`)."""
        return await self._sender.send(
            action, idempotency_key=idempotency_key, maybe_sent=maybe_sent
        )


def _no_voice_notices() -> None:
    """threadbot never joins a voice channel: discord.py's start-up warnings that PyNaCl
    and davey (its voice libraries) are missing say nothing to its operator, so they are
    turned off (``VoiceClient.warn_nacl`` and ``warn_dave``, read once by ``Client``)."""
    discord.VoiceClient.warn_nacl = False
    discord.VoiceClient.warn_dave = False


def _log_end(task: asyncio.Task[None]) -> None:
    """Say so when the gateway connection ends on an error (discord.py gave up reconnecting)."""
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("the Discord gateway connection ended: %s", connection_said(error))
