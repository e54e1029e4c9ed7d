"""The Discord runner: a real ``discord.Client`` wired to the hub, and the Discord sender.

Inbound: the client connects to the gateway with the intents the conversations need
(guilds, guild and DM messages, Message Content, guild and DM reactions) and, with
``enable_debug_events``, hands every raw text frame to ``on_socket_raw_receive``.
The runner parses the frame and feeds the dispatch's ``d`` to the pure translators
of :mod:`adapters.discord.translate`; discord.py's own models and cache are not
used. Frames are taken one at a time, in gateway order, by one worker task:

- ``READY``: who the bot is (:meth:`BotIdentity.from_ready`);
- ``GUILD_CREATE`` / ``THREAD_CREATE``: the ids of threads, so that a message in
  one is known to be in a thread;
- ``MESSAGE_CREATE``: :func:`message_event` (``unreadable`` when Discord withheld
  the content). A mention in a guild text channel gets a public thread started
  from the message (its id is the message's id) and reaches the hub seen from that
  thread (:func:`opened_in_thread`). In a DM, the DM channel is the conversation's
  thread (``ref.thread`` = the channel id), so every later DM goes to it;
- ``MESSAGE_REACTION_ADD`` / ``_REMOVE``: :func:`reaction_event`;
- ``INTERACTION_CREATE``: answered at once (deferred: callback type 6 for a button,
  type 5 ephemeral for a command; Discord wants an answer within 3 s), and only
  then translated (:func:`interaction_event`) and handed to the hub.

The hub drops duplicates (a gateway RESUME replays dispatches) by delivery key.

Bad input never ends the connection: a dispatch that discord.py's own parsers
cannot read is logged with its event name and skipped
(:mod:`adapters.discord.gateway_guard`), a frame that is not JSON is skipped, and
the translators drop and log a payload they cannot read (ids must be snowflakes
before they reach a REST path).

Outbound: :meth:`DiscordAdapter.send` renders a neutral action into REST calls
(:mod:`adapters.discord.outbound`) and sends them through ``client.http.request``,
so discord.py's rate-limit buckets apply (it sleeps on a 429 and retries). Every
posted message carries a ``nonce`` derived from the outbox key with
``enforce_nonce``: Discord returns the first message for a second post with the
same nonce within a few minutes, so a redelivery (``maybe_sent``) posts nothing
twice. A post to an archived thread (50083) unarchives it and tries once more.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import discord
import discord.gateway
import discord.http
import yarl

from adapters.common import BotCap, hand_over
from adapters.discord.gateway_guard import guard_parsers
from adapters.discord.outbound import RestCall, render, seed_reactions, thread_name
from adapters.discord.payload import mappings, snowflake
from adapters.discord.payload import token as interaction_token
from adapters.discord.translate import (
    BotIdentity,
    bot_role_ids,
    interaction_event,
    message_event,
    opened_in_thread,
    reaction_event,
    thread_id_of,
)
from conversations.adapter import InboundSink
from conversations.errors import DeliveryError
from conversations.events import (
    AddReaction,
    ButtonPressed,
    CommandInvoked,
    InboundEvent,
    MessagePosted,
    OutboundAction,
    PostReply,
    ReactionChanged,
)

log = logging.getLogger(__name__)

THREAD_ARCHIVED = 50083
"""Error code: the thread is archived (https://discord.com/developers/docs/topics/opcodes-and-status-codes#json)."""
THREAD_EXISTS = 160004
"""Error code: a thread has already been created for this message."""
DISALLOWED_INTENTS = 4014
"""Gateway close code: an intent the app was not granted (a privileged one)."""

_MESSAGE_CONTENT_FLAGS = (1 << 18) | (1 << 19)
"""Application flags GATEWAY_MESSAGE_CONTENT and GATEWAY_MESSAGE_CONTENT_LIMITED
(https://discord.com/developers/docs/resources/application#application-object-application-flags)."""

_GUILD_TEXT_TYPES = frozenset({0, 5})
"""Channel types a thread can be started from: GUILD_TEXT and GUILD_ANNOUNCEMENT."""

_COMPONENT = 3
_DEFERRED_UPDATE = 6
_DEFERRED_MESSAGE = 5
_EPHEMERAL = 1 << 6

_E = TypeVar("_E", MessagePosted, ReactionChanged, CommandInvoked, ButtonPressed)

_UNREACHABLE: tuple[type[Exception], ...] = (aiohttp.ClientError, TimeoutError, OSError)

_REST_FAILURES: tuple[type[Exception], ...] = (discord.HTTPException, *_UNREACHABLE)

MESSAGE_CONTENT_HELP = (
    "Discord refused the gateway connection (close code 4014): the bot asked for the "
    "privileged Message Content intent, which this application is not granted. Turn it "
    "on in the Discord Developer Portal -> your application -> Bot -> Privileged Gateway "
    "Intents -> Message Content Intent."
)


class DiscordStartError(RuntimeError):
    """The bot could not log in or connect to the gateway; the message says why."""


@dataclass(frozen=True, kw_only=True)
class DiscordConfig:
    """How to reach Discord.

    ``api_url`` and ``gateway_url`` point discord.py elsewhere (tests, proxies). They
    set ``discord.http.Route.BASE`` and
    ``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY``, which are CLASS attributes:
    the change applies to every discord.py client in the process, and
    :meth:`DiscordAdapter.close` puts back what was there before.

    ``guilds``: guild ids to register ``/stop`` in (at once); empty registers it
    globally (Discord may take a while to show a new global command).
    ``allow_bots``: take other bots' messages, at most ``bot_thread_cap`` per
    thread (stops bot-to-bot loops). ``file_threshold``: characters past which a
    reply with no buttons or reactions (an answer) is attached as a file.
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

    def __init__(self, config: DiscordConfig) -> None:
        self._config = config
        self._saved: tuple[str, yarl.URL] | None = None
        self.client = discord.Client(intents=intents(), enable_debug_events=True)
        self.client.event(self.on_socket_raw_receive)
        guard_parsers(self.client)  # a dispatch discord.py cannot parse is skipped, not fatal
        self.me: BotIdentity | None = None
        self.thread_ids: set[str] = set()
        self.processed_seq = 0
        """The gateway sequence of the last dispatch taken (tests wait on it)."""
        self._bot_roles: frozenset[str] = frozenset()
        self._hub: InboundSink | None = None
        self._frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._connection: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._bots = BotCap(config.bot_thread_cap)
        self._closing = False

    # --- lifecycle -----------------------------------------------------------------

    async def start(self, hub: InboundSink) -> None:
        """Log in, connect, wait for READY, then register ``/stop``.

        Raises :class:`DiscordStartError` when the token is refused, the Message
        Content intent is not granted (close code 4014), or READY does not come
        within ``ready_timeout`` seconds.
        """
        self._hub = hub
        self._point_discord_py()
        self._worker = asyncio.create_task(self._work(), name="discord-inbound")
        self._connection = asyncio.create_task(self._connect(), name="discord-gateway")
        self._connection.add_done_callback(_log_end)
        ready = asyncio.create_task(self._ready.wait())
        try:
            done, _ = await asyncio.wait(
                {ready, self._connection},
                timeout=self._config.ready_timeout,
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
            raise DiscordStartError(f"the Discord connection ended: {error!r}") from error
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
        restart clears the client's state and connects again. Returns when the
        adapter is closing.
        """
        task = self._connection
        if task is None or task.done():
            if self._closing or self._hub is None:
                return
            self.client.clear()
            task = self._connection = asyncio.create_task(self._connect(), name="discord-gateway")
            task.add_done_callback(_log_end)
        await asyncio.shield(task)
        if not self._closing:
            raise ConnectionError("the Discord gateway connection ended")

    async def close(self) -> None:
        """Disconnect, stop taking frames, and restore discord.py's URLs."""
        self._closing = True
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
        """Overwrite the app's commands with ``/stop`` (in ``guilds``, else globally)."""
        if self.me is None:
            return
        commands = [
            {
                "name": self._config.stop_command,
                "description": "Stop the bot's conversation in this thread",
                "type": 1,
            }
        ]
        app = self.me.application_id
        try:
            if not self._config.guilds:
                await self.client.http.bulk_upsert_global_commands(app, commands)
            for guild in self._config.guilds:
                await self.client.http.bulk_upsert_guild_commands(app, guild, commands)
        except discord.HTTPException as exc:
            log.warning("could not register /%s: %s", self._config.stop_command, exc)

    # --- inbound -------------------------------------------------------------------

    async def on_socket_raw_receive(self, raw: Any) -> None:
        """discord.py's debug event: one gateway frame, as text (decompressed)."""
        try:
            frame = json.loads(raw) if isinstance(raw, str | bytes) else raw
        except (ValueError, RecursionError):
            log.warning("skipped a gateway frame that is not JSON")
            return
        if isinstance(frame, dict) and frame.get("op") == 0:
            self._frames.put_nowait(frame)

    async def idle(self) -> None:
        """Return once every frame received so far has been taken."""
        await self._frames.join()

    async def _work(self) -> None:
        while True:
            frame = await self._frames.get()
            try:
                await self._take(frame)
            except Exception:
                log.exception("could not take the gateway dispatch %s", frame.get("t"))
            finally:
                seq = frame.get("s")
                if isinstance(seq, int):
                    self.processed_seq = seq
                self._frames.task_done()

    async def _take(self, frame: Mapping[str, Any]) -> None:
        name, d = frame.get("t"), frame.get("d")
        if not isinstance(d, Mapping):
            return
        if name == "READY":
            self._on_ready(d)
            return
        me = self.me
        if me is None:
            return
        match name:
            case "GUILD_CREATE":
                self._bot_roles |= bot_role_ids(d, me)
                for thread in mappings(d, "threads"):
                    if tid := thread_id_of(thread):
                        self.thread_ids.add(tid)
            case "THREAD_CREATE":
                if (tid := thread_id_of(d)) is not None:
                    self.thread_ids.add(tid)
            case "MESSAGE_CREATE":
                await self._on_message(d, me)
            case "MESSAGE_REACTION_ADD" | "MESSAGE_REACTION_REMOVE":
                added = name == "MESSAGE_REACTION_ADD"
                reaction = reaction_event(d, me, added=added, thread_ids=self.thread_ids)
                if reaction is not None:
                    await self._deliver(_dm_as_thread(reaction))
            case "INTERACTION_CREATE":
                await self._on_interaction(d, me)
            case _:
                return

    def _on_ready(self, d: Mapping[str, Any]) -> None:
        try:
            self.me = BotIdentity.from_ready(d)
        except ValueError:
            log.error("READY names no bot user: %s", dict(d))
            return
        application = d.get("application")
        flags = application.get("flags") if isinstance(application, Mapping) else None
        if isinstance(flags, int) and not flags & _MESSAGE_CONTENT_FLAGS:
            log.warning(
                "READY: the Message Content intent is not granted (application flags %s); "
                "thread replies will arrive empty. Turn it on in the Developer Portal.",
                flags,
            )
        self._ready.set()

    async def _on_message(self, d: Mapping[str, Any], me: BotIdentity) -> None:
        event = message_event(
            d,
            me,
            thread_ids=self.thread_ids,
            allow_bots=self._config.allow_bots,
            bot_roles=self._bot_roles,
        )
        if event is None or not self._within_bot_cap(event):
            return
        event = _dm_as_thread(event)
        if event.ref.thread is None:
            if not event.mentions_bot:
                return  # a channel message that is not for the bot
            if d.get("channel_type") not in (None, *_GUILD_TEXT_TYPES):
                return
            thread = await self._open_thread(event)
            if thread is None:
                return
            event = opened_in_thread(event, thread)
        await self._deliver(event)

    async def _open_thread(self, event: MessagePosted) -> str | None:
        """Start a public thread from the mention; its id (the message's), or None."""
        message = event.ref.message
        if message is None:
            return None
        route = discord.http.Route(
            "POST",
            "/channels/{channel_id}/messages/{message_id}/threads",
            channel_id=event.ref.channel,
            message_id=message,
        )
        try:
            thread = await self.client.http.request(route, json={"name": thread_name(event.text)})
        except discord.HTTPException as exc:
            if exc.code == THREAD_EXISTS:
                return message  # a replayed mention: its thread is there already
            log.warning("could not start a thread on %s: %s", message, exc)
            return None
        thread_id = str(thread.get("id") or message) if isinstance(thread, dict) else message
        self.thread_ids.add(thread_id)
        return thread_id

    async def _on_interaction(self, d: Mapping[str, Any], me: BotIdentity) -> None:
        await self._defer(d)
        event = interaction_event(d, me)
        if isinstance(event, CommandInvoked):
            await self._deliver(_dm_as_thread(event))
        elif isinstance(event, ButtonPressed):
            await self._deliver(_dm_as_thread(event))
        if d.get("type") != _COMPONENT:
            await self._close_deferred(d)

    async def _defer(self, d: Mapping[str, Any]) -> None:
        """Answer the interaction at once (Discord wants it within 3 s)."""
        interaction, token = snowflake(d, "id"), interaction_token(d, "token")
        if interaction is None or token is None:
            log.warning("could not answer an interaction without a valid id and token")
            return
        body: dict[str, Any] = (
            {"type": _DEFERRED_UPDATE}
            if d.get("type") == _COMPONENT
            else {"type": _DEFERRED_MESSAGE, "data": {"flags": _EPHEMERAL}}
        )
        route = discord.http.Route(
            "POST",
            "/interactions/{interaction_id}/{interaction_token}/callback",
            interaction_id=interaction,
            interaction_token=token,
        )
        try:
            await self.client.http.request(route, json=body)
        except _REST_FAILURES as exc:
            log.warning("could not answer the interaction %s: %s", interaction, exc)

    async def _close_deferred(self, d: Mapping[str, Any]) -> None:
        """Delete a command's deferred "thinking..." response: the hub answers in the thread."""
        token, application = interaction_token(d, "token"), snowflake(d, "application_id")
        if token is None or application is None:
            return
        route = discord.http.Route(
            "DELETE",
            "/webhooks/{webhook_id}/{webhook_token}/messages/@original",
            webhook_id=application,
            webhook_token=token,
        )
        with contextlib.suppress(*_REST_FAILURES):
            await self.client.http.request(route)

    async def _deliver(self, event: InboundEvent) -> None:
        await hand_over(self._hub, event)

    def _within_bot_cap(self, event: MessagePosted) -> bool:
        thread = event.ref.thread or event.ref.message or event.ref.channel  # a mention: its thread
        return self._bots.allows(event, thread)

    # --- outbound ------------------------------------------------------------------

    async def send(
        self, action: OutboundAction, *, idempotency_key: str, maybe_sent: bool = False
    ) -> str | None:
        """Perform ``action``; the id of the (last) new message for a post, else None.

        ``maybe_sent`` needs nothing more: every message goes with a nonce derived
        from ``idempotency_key`` and ``enforce_nonce``, and Discord returns the
        message already posted with that nonce instead of posting it again. Raises
        :class:`DeliveryError` (``permanent`` for a 4xx other than 429) when
        Discord refused or could not be reached.
        """
        try:
            if isinstance(action, PostReply):
                return await self._post(action, idempotency_key)
            for call in render(action, nonce=idempotency_key):
                await self._call(call)
            return None
        except discord.HTTPException as exc:
            raise _delivery_error(exc, action) from exc
        except _UNREACHABLE as exc:
            raise DeliveryError(f"Discord could not be reached for {action.kind}: {exc!r}") from exc

    async def _post(self, action: PostReply, key: str) -> str | None:
        if self._as_file(action):
            message = await self._call(self._file_call(action, key), file=_answer_file(key, action))
            return str(message.get("id")) if message else None
        last: dict[str, Any] = {}
        for call in render(action, nonce=key):
            last = await self._call(call)
        message_id = str(last.get("id") or "") or None
        if message_id is not None and action.reactions:
            channel = str(last.get("channel_id") or "")
            await self._seed(action, channel, message_id)
        return message_id

    def _as_file(self, action: PostReply) -> bool:
        """A long reply that asks for nothing goes up as a file (see :class:`DiscordConfig`)."""
        plain = not (action.buttons or action.reactions)
        return plain and len(action.text) > self._config.file_threshold

    def _file_call(self, action: PostReply, key: str) -> RestCall:
        """The first message of the reply, cut to its first line, to carry the file."""
        first_line = action.text.strip().splitlines()[0][:200] if action.text.strip() else ""
        summary = action.model_copy(
            update={"text": f"{first_line}\n(the whole answer is in the attached file)"}
        )
        [call] = render(summary, nonce=key)[:1]
        return call

    async def _seed(self, action: PostReply, channel: str, message_id: str) -> None:
        """Add the bot's reactions to its new message; a failure is only logged."""
        for call in seed_reactions(action, channel, message_id):
            try:
                await self._call(call)
            except _REST_FAILURES as exc:
                log.warning("could not react on %s: %s", message_id, exc)

    async def _call(self, call: RestCall, *, file: discord.File | None = None) -> dict[str, Any]:
        """Send one call; a post to an archived thread unarchives it and tries once more."""
        try:
            return await self._request(call, file)
        except discord.HTTPException as exc:
            channel = _channel_of(call)
            if exc.code != THREAD_ARCHIVED or channel is None:
                raise
        log.info("thread %s is archived: unarchiving it to post", channel)
        await self._request(RestCall("PATCH", f"/channels/{channel}", {"archived": False}), None)
        return await self._request(call, file)

    async def _request(self, call: RestCall, file: discord.File | None) -> dict[str, Any]:
        route = discord.http.Route(call.method, call.path)  # the path is encoded already
        route.channel_id = _channel_of(call)  # discord.py's per-channel rate-limit bucket
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
            result = await self.client.http.request(route, files=[file], form=form)
        elif call.json is None:
            result = await self.client.http.request(route)
        else:
            result = await self.client.http.request(route, json=call.json)
        return dict(result) if isinstance(result, dict) else {}


def _dm_as_thread(event: _E) -> _E:
    """In a DM (no guild), the DM channel is the conversation's thread."""
    if event.ref.workspace or event.ref.thread is not None:
        return event
    return event.model_copy(
        update={"ref": event.ref.model_copy(update={"thread": event.ref.channel})}
    )


def _log_end(task: asyncio.Task[None]) -> None:
    """Say so when the gateway connection ends on an error (discord.py gave up reconnecting)."""
    if not task.cancelled() and (error := task.exception()) is not None:
        log.error("the Discord gateway connection ended: %r", error)


def _channel_of(call: RestCall) -> str | None:
    parts = call.path.split("/")
    return parts[2] if len(parts) > 2 and parts[1] == "channels" else None


def _answer_file(key: str, action: PostReply) -> discord.File:
    data = io.BytesIO(action.text.encode())
    return discord.File(data, filename=f"threadbot-answer-{key}.md")


def _delivery_error(exc: discord.HTTPException, action: OutboundAction) -> DeliveryError:
    status = exc.status
    permanent = (400 <= status < 500 and status != 429) or isinstance(action, AddReaction)
    return DeliveryError(
        f"Discord refused {action.kind}: {status} (code {exc.code}) {exc.text}",
        permanent=permanent,
    )
