"""Gateway dispatches in, neutral events to the hub: the Discord runner's inbound side.

discord.py hands every raw text frame, with the shard it came on, to
:meth:`Inbound.receive` (:func:`adapters.discord.shards.tap_frames`), which keeps the
dispatches (op 0); one worker task (:meth:`Inbound.work`) takes them one at a time, in
the order they arrived, feeding each ``d`` to the pure translators of
:mod:`adapters.discord.translate`. discord.py's own models and cache are not used.
Each shard has a sequence of its own (:attr:`Inbound.processed_seqs`).

- ``READY`` (:class:`~adapters.discord.types.ReadyEvent`): who the bot is
  (:meth:`BotIdentity.from_ready`); the adapter's start waits until every shard of
  the instance had its READY (:attr:`Inbound.ready`);
- ``GUILD_CREATE`` / ``THREAD_CREATE``: the bot's roles and the ids of threads, so
  that a message in one is known to be in a thread;
- ``MESSAGE_CREATE``: :func:`message_event` (``unreadable`` when Discord withheld
  the content). A mention in a guild text channel gets a public thread started
  from the message (its id is the message's id) and reaches the hub seen from that
  thread (:func:`opened_in_thread`). In a DM, the DM channel is the conversation's
  thread (``ref.thread`` = the channel id), so every later DM goes to it;
- ``MESSAGE_REACTION_ADD`` / ``_REMOVE``: :func:`reaction_event`;
- ``INTERACTION_CREATE``: answered at once (:mod:`adapters.discord.acks`; Discord
  wants an answer within 3 s; the button of a question's form is answered with the
  form, :mod:`adapters.discord.modals`), and only then translated
  (:func:`interaction_event`) and handed to the hub; a command, and a feedback
  button, stays open for a reply to its user alone meanwhile (:attr:`Inbound.answers`).

The hub drops duplicates (a gateway RESUME replays dispatches) by delivery key. A
frame that is not JSON is logged and skipped; a dispatch the worker fails on is
logged with its name, and the next one is taken.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any, TypeVar, cast

import discord
import discord.http

from adapters.discord.acks import answered_alone, close_deferred, defer, respond
from adapters.discord.answers import CommandAnswers
from adapters.discord.errors import MalformedReady
from adapters.discord.modals import answer_modal
from adapters.discord.outbound import thread_name
from adapters.discord.shards import Shard
from adapters.discord.translate import (
    BotIdentity,
    bot_role_ids,
    interaction_event,
    message_event,
    opened_in_thread,
    reaction_event,
    thread_id_of,
    thread_parent_of,
)
from adapters.discord.types import (
    GatewayDispatch,
    GuildCreateEvent,
    Interaction,
    MessageCreateEvent,
    ReadyEvent,
)
from adapters.fields import mappings
from adapters.inbound import BotCap, hand_over
from conversations.adapter import InboundSink
from conversations.events import (
    ButtonPressed,
    CommandInvoked,
    InboundEvent,
    MessagePosted,
    ReactionChanged,
)

log = logging.getLogger(__name__)

THREAD_EXISTS = 160004
"""Error code: a thread has already been created for this message
(https://discord.com/developers/docs/topics/opcodes-and-status-codes#json)."""

_MESSAGE_CONTENT_FLAGS = (1 << 18) | (1 << 19)
"""Application flags GATEWAY_MESSAGE_CONTENT and GATEWAY_MESSAGE_CONTENT_LIMITED
(https://discord.com/developers/docs/resources/application#application-object-application-flags)."""

_GUILD_TEXT_TYPES = frozenset({0, 5})
"""Channel types a thread can be started from: GUILD_TEXT and GUILD_ANNOUNCEMENT."""

_E = TypeVar("_E", MessagePosted, ReactionChanged, CommandInvoked, ButtonPressed)


class Inbound:
    """Takes gateway dispatches in order and hands their events to :attr:`hub`.

    ``client`` is the adapter's ``discord.Client`` (to start threads and answer
    interactions); ``shards``: the instance's shards (``(None,)`` without sharding);
    ``allow_bots``: take other bots' messages, at most ``bot_thread_cap`` per thread.
    """

    def __init__(
        self,
        *,
        client: discord.Client,
        allow_bots: bool,
        bot_thread_cap: int,
        shards: tuple[Shard, ...] = (None,),
    ) -> None:
        self._client = client
        self._shards = frozenset(shards)
        self._readied: set[Shard] = set()
        self._allow_bots = allow_bots
        self.hub: InboundSink | None = None
        """Where events go; None (before the adapter starts) drops them."""
        self.me: BotIdentity | None = None
        """Who the bot is, from READY; dispatches before it are skipped."""
        self.ready = asyncio.Event()
        """Set once every shard had a READY that names the bot."""
        self.thread_ids: set[str] = set()
        self.parents: dict[str, str] = {}
        """The channel each known thread is in (its ``parent_id``)."""
        self.processed_seqs: dict[Shard, int] = dict.fromkeys(shards, 0)
        """Per shard, the gateway sequence of the last dispatch taken (tests wait on it)."""
        self._bot_roles: frozenset[str] = frozenset()
        self._frames: asyncio.Queue[tuple[Shard, GatewayDispatch]] = asyncio.Queue()
        self._opening: set[asyncio.Task[None]] = set()
        """Mentions whose thread is being started (:meth:`_start_in_thread`)."""
        self._bots = BotCap(bot_thread_cap)
        self.answers = CommandAnswers()
        """Commands open for a reply to their user alone while handed over (the
        sender answers through them: :mod:`adapters.discord.answers`)."""

    def receive(self, raw: Any, shard: Shard = None) -> GatewayDispatch | None:
        """Keep one gateway frame of ``shard`` (text or bytes, decompressed) if it is a
        dispatch (op 0); that dispatch, or None."""
        try:
            frame = json.loads(raw) if isinstance(raw, str | bytes) else raw
        except (ValueError, RecursionError):
            log.warning("skipped a gateway frame that is not JSON")
            return None
        if not isinstance(frame, dict) or frame.get("op") != 0:
            return None
        dispatch = cast(GatewayDispatch, frame)
        self._frames.put_nowait((shard, dispatch))
        return dispatch

    async def idle(self) -> None:
        """Return once every frame received so far has been taken (mentions whose thread
        is being started included)."""
        await self._frames.join()
        while self._opening:
            await asyncio.gather(*self._opening, return_exceptions=True)

    async def work(self) -> None:
        """Take the frames one at a time, forever (the adapter runs it as a task); when
        cancelled, the mentions whose thread is being started are cancelled too."""
        try:
            while True:
                shard, frame = await self._frames.get()
                try:
                    await self._take(frame, shard)
                except Exception:
                    log.exception("could not take the gateway dispatch %s", frame.get("t"))
                finally:
                    seq = frame.get("s")
                    if isinstance(seq, int):
                        self.processed_seqs[shard] = seq
                    self._frames.task_done()
        finally:
            for task in list(self._opening):
                task.cancel()
            await asyncio.gather(*self._opening, return_exceptions=True)

    async def _take(self, frame: GatewayDispatch, shard: Shard) -> None:
        name, d = frame.get("t"), frame.get("d")
        if not _is_object(d):
            return
        if name == "READY":
            self._on_ready(d, shard)
            return
        me = self.me
        if me is None:
            return
        match name:
            case "GUILD_CREATE":
                self._on_guild(d, me)
            case "THREAD_CREATE":
                self._thread(d)
            case "MESSAGE_CREATE":
                await self._on_message(d, me)
            case "MESSAGE_REACTION_ADD" | "MESSAGE_REACTION_REMOVE":
                added = name == "MESSAGE_REACTION_ADD"
                reaction = reaction_event(
                    d, me, added=added, thread_ids=self.thread_ids, parents=self.parents
                )
                if reaction is not None:
                    await self._deliver(_dm_as_thread(reaction))
            case "INTERACTION_CREATE":
                await self._on_interaction(d, me)
            case _:
                return

    def _on_ready(self, d: ReadyEvent, shard: Shard) -> None:
        try:
            self.me = BotIdentity.from_ready(d)
        except MalformedReady:
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
        self._readied.add(shard)
        if self._readied >= self._shards:
            self.ready.set()

    def _on_guild(self, d: GuildCreateEvent, me: BotIdentity) -> None:
        self._bot_roles |= bot_role_ids(d, me)
        for thread in mappings(d.get("threads")):
            self._thread(thread)

    def _thread(self, d: Any) -> None:
        """Know a thread (THREAD_CREATE, or a GUILD_CREATE thread) and its channel."""
        if (tid := thread_id_of(d)) is not None:
            self.thread_ids.add(tid)
            if (parent := thread_parent_of(d)) is not None:
                self.parents[tid] = parent

    async def _on_message(self, d: MessageCreateEvent, me: BotIdentity) -> None:
        event = message_event(
            d,
            me,
            thread_ids=self.thread_ids,
            parents=self.parents,
            allow_bots=self._allow_bots,
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
            # Starting the thread may wait out a rate limit (discord.py sleeps it out):
            # in a task of its own, so the frames behind it (other conversations,
            # interactions that must be answered within 3 s) are not held up.
            task = asyncio.create_task(self._start_in_thread(event))
            self._opening.add(task)
            task.add_done_callback(self._opening.discard)
            return
        await self._deliver(event)

    async def _start_in_thread(self, event: MessagePosted) -> None:
        """Open the mention's thread, then hand the mention over as posted in it."""
        try:
            thread = await self._open_thread(event)
            if thread is not None:
                await self._deliver(opened_in_thread(event, thread))
        except Exception:
            log.exception("could not take the mention %s", event.ref.message)

    async def _open_thread(self, event: MessagePosted) -> str | None:
        """Start a public thread from the mention; its id (the message's), or None.

        ``POST /channels/{channel}/messages/{message}/threads``
        (https://discord.com/developers/docs/resources/channel#start-thread-from-message)
        answers the thread channel; a mention replayed after its thread was made
        gets 160004, and the thread's id is the message's.
        """
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
            thread = await self._client.http.request(route, json={"name": thread_name(event.text)})
        except discord.HTTPException as exc:
            if exc.code == THREAD_EXISTS:
                return message  # a replayed mention: its thread is there already
            log.warning("could not start a thread on %s: %s", message, exc)
            return None
        thread_id = str(thread.get("id") or message) if isinstance(thread, dict) else message
        self.thread_ids.add(thread_id)
        self.parents[thread_id] = event.ref.channel
        return thread_id

    async def _on_interaction(self, d: Interaction, me: BotIdentity) -> None:
        form = answer_modal(d)  # a question's form: it must be the first answer
        if form is not None:
            await respond(self._client, d, form)
            return
        deferred = await defer(self._client, d)
        event = interaction_event(d, me)
        answered = False
        if isinstance(event, CommandInvoked):  # one branch per type: _dm_as_thread keeps it
            event = _dm_as_thread(event)
            if not deferred:
                await self._deliver(event)
                return
            with self.answers.open(d, event) as command:
                await self._deliver(event)
            answered = command is not None and command.answered
        elif isinstance(event, ButtonPressed) and deferred and answered_alone(d):
            with self.answers.open(d, event) as command:  # feedback: acknowledged alone
                await self._deliver(_dm_as_thread(event))
            answered = command is not None and command.answered
        elif isinstance(event, ButtonPressed):
            await self._deliver(_dm_as_thread(event))
        elif isinstance(event, MessagePosted):  # a question's form, submitted: a reply
            await self._deliver(_dm_as_thread(event))
        if answered_alone(d) and not answered:
            await close_deferred(self._client, d)

    async def _deliver(self, event: InboundEvent) -> None:
        await hand_over(self.hub, event)

    def _within_bot_cap(self, event: MessagePosted) -> bool:
        thread = event.ref.thread or event.ref.message or event.ref.channel  # a mention: its thread
        return self._bots.allows(event, thread)


def _is_object(value: object) -> bool:
    """Whether a dispatch's ``d`` is a JSON object (without narrowing its type for mypy)."""
    return isinstance(value, Mapping)


def _dm_as_thread(event: _E) -> _E:
    """In a DM (no guild), the DM channel is the conversation's thread."""
    if event.ref.workspace or event.ref.thread is not None:
        return event
    return event.model_copy(
        update={"ref": event.ref.model_copy(update={"thread": event.ref.channel})}
    )
