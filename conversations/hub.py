"""The hub: chat events in, engine inputs out; engine run events become outbox rows.

For each inbound event (DESIGN.md, "One message's way through"):

1. the delivery key is recorded in the store; a duplicate stops here;
2. the thread is bound to a conversation (a mention creates one);
3. the engine gets an input through the conversation's queue: start, reply,
   decision (taken at once, compare-and-set) or stop (jumps the queue).

People who may not decide or stop are told so in the thread, and nothing changes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import assert_never

from conversations import logcontext
from conversations.access import AccessPolicy
from conversations.events import (
    Author,
    Button,
    ButtonPressed,
    CommandInvoked,
    InboundEvent,
    MessagePosted,
    PlatformRef,
    PostReply,
    ReactionChanged,
    inbound_adapter,
)
from conversations.membership import Membership
from conversations.outbox import Deliverer
from conversations.queue import ConversationQueue, Job
from conversations.render import refusal
from conversations.stopping import Stopper
from conversations.store import ConversationInfo, Outgoing, Store
from conversations.store.leases import Leases
from core.engine import Engine
from core.errors import LeaseLost
from core.inputs import DecideOutcome, Decision, Reply, Start
from core.journal import Person, RequestState

log = logging.getLogger(__name__)

UNREADABLE = (
    "I can't read messages here: the bot's Message Content intent is off. An admin "
    "can turn it on (Discord Developer Portal -> Bot -> Privileged Gateway Intents); "
    "until then, mention me or use the buttons."
)

DEFAULT_APPROVE = frozenset(
    {"white_check_mark", "heavy_check_mark", "+1", "ballot_box_with_check", "repeat"}
)
DEFAULT_REJECT = frozenset({"x", "-1", "heavy_multiplication_x"})
DEFAULT_STOP = frozenset({"octagonal_sign", "black_square_for_stop"})


@dataclass(frozen=True, kw_only=True)
class HubSettings:
    """Reaction sets (normalized names), the stop command and word, and where workspaces go."""

    workspace_root: Path
    access: AccessPolicy = field(default_factory=AccessPolicy)
    approve_reactions: frozenset[str] = DEFAULT_APPROVE
    reject_reactions: frozenset[str] = DEFAULT_REJECT
    stop_reactions: frozenset[str] = DEFAULT_STOP
    stop_command: str = "stop"
    stop_word: str = "stop"
    instance: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    """Lease owner, ``host:pid`` by default: a process on the same host takes over
    the leases of a dead process at once; elsewhere they lapse after ``lease_ttl``."""
    lease_ttl: float = 60.0
    """Seconds a lease lasts without renewal (renewed every third of it while running)."""
    shutdown_grace: float = 20.0
    """Seconds a shutdown lets running steps reach their next commit before cancelling them."""


class Hub:
    """Routes inbound events to the engine; one instance serves every adapter."""

    def __init__(
        self, *, store: Store, engine: Engine, deliverer: Deliverer, settings: HubSettings
    ) -> None:
        self._store = store
        self._engine = engine
        self._deliverer = deliverer
        self._settings = settings
        self.leases = Leases(store=store, owner=settings.instance, ttl=settings.lease_ttl)
        """This process's leases; the app runs :meth:`Leases.keep_renewed` beside the hub."""
        self._queue = ConversationQueue(around=self._hold)
        self._shutting_down = False
        self.stopper = Stopper(
            store=store, engine=engine, queue=self._queue, leases=self.leases, notice=self._notice
        )
        """Stops runs wherever they run; the app runs :meth:`Stopper.keep_polling` beside."""

    async def handle(self, event: InboundEvent) -> None:
        """Take one inbound event; returns once recorded and queued, not when its run ends.

        Adapters decide whether other bots' messages reach the hub (``allow_bots``).
        """
        match event:
            case MessagePosted():
                await self._message(event)
            case ReactionChanged():
                await self._reaction(event)
            case CommandInvoked():
                await self._command(event)
            case ButtonPressed():
                await self._button(event)
            case _:
                assert_never(event)

    def working(self) -> int:
        """How many conversations have a run going or queued in this process."""
        return self._queue.busy_count()

    def add_membership(self, membership: Membership) -> None:
        """Ask ``membership`` whether a person is in a group approver of its platform."""
        self._settings.access.add_membership(membership)

    async def settled(self) -> None:
        """Return when every run has ended or waits for a person and the outbox is empty."""
        while True:
            await self._queue.idle()
            await self._deliverer.drain()
            if not self._queue.busy_any():
                return

    async def resume_running(self) -> list[str]:
        """Queue a run for every conversation left ``running`` (after a crash or redeploy)."""
        running = await self._store.running()
        for conversation_id in running:
            self._submit_run(conversation_id)
        return running

    async def expire(self, conversation_id: str, request_id: str) -> None:
        """Expire a request through the conversation's queue (the sweeper calls this)."""
        self._queue.submit(
            conversation_id,
            Job(lambda: self._engine_expire(conversation_id, request_id)),
        )

    async def _engine_expire(self, conversation_id: str, request_id: str) -> None:
        await self._engine.expire(conversation_id, request_id)

    def _submit_run(self, conversation_id: str) -> None:
        self._queue.submit(
            conversation_id,
            Job(lambda: self._engine.run(conversation_id, self._inbox(conversation_id))),
        )

    async def close(self) -> None:
        """Cancel running work (a later start resumes it from the store)."""
        await self._queue.close()

    async def shutdown(self) -> None:
        """Stop taking work: runs end at their next commit, or are cut after the grace.

        Events still arriving are recorded (the inbox keeps them) but start
        nothing; each run finishes the step it is in and ends there, leaving its
        conversation ``running`` for the next start. After ``shutdown_grace``
        seconds the runs still going are cancelled: a running command is killed
        and recorded ``interrupted``. Leases are released as each job ends.
        """
        self._shutting_down = True
        self._engine.suspend()
        self._queue.pause()
        try:
            await asyncio.wait_for(self._queue.idle(), self._settings.shutdown_grace)
        except TimeoutError:
            log.warning(
                "runs still going after %s s of shutdown; cancelling them",
                self._settings.shutdown_grace,
            )
            await self._queue.close()

    async def _hold(self, conversation_id: str, work: Callable[[], Awaitable[None]]) -> None:
        """Run one job of the conversation under its lease (the queue's ``around``)."""
        logcontext.conversation.set(conversation_id)  # this task runs only this job
        try:
            async with self.leases.held(conversation_id):
                try:
                    await work()
                except asyncio.CancelledError:
                    if self._shutting_down:
                        await asyncio.shield(self._interrupted(conversation_id))
                    raise
        except LeaseLost as exc:
            log.warning("%s; the run ended here", exc)

    async def _interrupted(self, conversation_id: str) -> None:
        try:
            await self._engine.interrupt(conversation_id, "the bot was shutting down")
        except LeaseLost as exc:
            log.warning("%s", exc)

    # --- messages ------------------------------------------------------------------

    async def _message(self, event: MessagePosted) -> None:
        conversation = await self._store.find_by_thread(event.ref)
        if conversation is not None and event.unreadable:
            await self._notice(conversation, UNREADABLE)
            return
        if conversation is not None:
            stop = event.text.strip().lower() == self._settings.stop_word
            kept = None if stop else inbound_adapter.dump_python(event, mode="json")
            if not await self._store.record_delivery(event.delivery_key, conversation.id, kept):
                return
            if stop:
                await self._stop(conversation, event.author, event.ref)
                return
            self._submit_reply(conversation.id, await self._reply_of(event, conversation))
            return
        if not event.mentions_bot:
            return
        thread = event.ref.thread or event.ref.message
        if thread is None:
            log.warning("mention without a message id: %s", event.delivery_key)
            return
        conversation_id = await self._store.open_conversation(
            delivery_key=event.delivery_key,
            binding=event.ref.in_thread(thread).model_copy(update={"user": None}),
            requester=_person(event),
            workspace_root=self._settings.workspace_root,
            position=self._engine.workflow.start,
            event=inbound_adapter.dump_python(event, mode="json"),
        )
        if conversation_id is not None:
            self._submit_start(conversation_id, event)

    def _submit_start(self, conversation_id: str, event: MessagePosted) -> None:
        start = Start(text=event.text, author=_person(event), delivery_key=event.delivery_key)
        self._queue.submit(
            conversation_id,
            Job(lambda: self._engine.start(conversation_id, start, self._inbox(conversation_id))),
        )

    async def _reply_of(self, event: MessagePosted, conversation: ConversationInfo) -> Reply:
        may_continue = await self._settings.access.may_decide(
            event.author, conversation.requester, conversation.binding
        )
        return Reply(
            text=event.text,
            author=_person(event),
            may_continue=may_continue,
            delivery_key=event.delivery_key,
        )

    async def resume_unhandled(self) -> int:
        """Queue again the messages a crash left unjournaled; returns how many."""
        unhandled = await self._store.unhandled()
        for _key, conversation_id, data in unhandled:
            event = inbound_adapter.validate_python(data)
            if not isinstance(event, MessagePosted):
                continue
            conversation = await self._store.find(conversation_id)
            if conversation is None:
                continue
            if event.ref.thread is None:  # the mention that opened the conversation
                self._submit_start(conversation_id, event)
            else:
                self._submit_reply(conversation_id, await self._reply_of(event, conversation))
        return len(unhandled)

    def _submit_reply(self, conversation_id: str, reply: Reply) -> None:
        self._queue.submit(
            conversation_id,
            Job(
                lambda: self._engine.reply(conversation_id, reply, self._inbox(conversation_id)),
                reply=reply,
            ),
        )

    def _inbox(self, conversation_id: str) -> Callable[[], list[Reply]]:
        return lambda: self._queue.take_replies(conversation_id)

    # --- reactions -----------------------------------------------------------------

    async def _reaction(self, event: ReactionChanged) -> None:
        if not event.added or event.ref.message is None:
            return  # a removed reaction changes nothing, before or after a decision
        link = await self._store.find_by_message(
            event.ref.platform, event.ref.channel, event.ref.message
        )
        if link is None:
            # The platform may report a reaction before the deliverer has stored the
            # id of the message it just sent (or sent before a crash); look again
            # once that is done.
            await self._deliverer.pass_over(platform=event.ref.platform, channel=event.ref.channel)
            link = await self._store.find_by_message(
                event.ref.platform, event.ref.channel, event.ref.message
            )
        if link is None or not await self._store.record_delivery(event.delivery_key):
            return
        conversation = await self._store.info(link.conversation_id)
        if event.emoji in self._settings.stop_reactions:
            await self._stop(conversation, event.author, event.ref)
            return
        approve = event.emoji in self._settings.approve_reactions
        if link.request_id is None or not (
            approve or event.emoji in self._settings.reject_reactions
        ):
            return
        await self._decide(conversation, link.request_id, approve, event.author)

    async def _decide(
        self,
        conversation: ConversationInfo,
        request_id: str,
        approve: bool,
        who: Author,
        call: int | None = None,
    ) -> None:
        state = await self._store.request_state(request_id)
        if state is RequestState.SUPERSEDED:
            await self._notice(conversation, "That plan was replaced by a newer version.")
            return
        if state is not RequestState.OPEN and state is not RequestState.DECIDED:
            return
        if not await self._settings.access.may_decide(
            who, conversation.requester, conversation.binding
        ):
            await self._notice(conversation, refusal("decide", who.name))
            return
        decision = Decision(request_id=request_id, approved=approve, by=_person_of(who), call=call)
        outcome = await self._engine.decide(conversation.id, decision)
        if outcome is DecideOutcome.ALREADY_DECIDED:
            await self._notice(conversation, f"This was already decided, {who.name}.")
        elif outcome is DecideOutcome.NO_SUCH_CALL:
            await self._notice(conversation, f"That request has no call {call}, {who.name}.")
        elif outcome is DecideOutcome.DECIDED:
            self._submit_run(conversation.id)

    # --- commands and stop ---------------------------------------------------------

    async def _command(self, event: CommandInvoked) -> None:
        if not await self._store.record_delivery(event.delivery_key):
            return
        if event.name == "decide":
            await self._decide_one(event)
            return
        if event.name != self._settings.stop_command:
            await self._reply(event.ref, f"Unknown command /{event.name}.")
            return
        ref = event.ref
        if ref.thread is None and event.args.strip():
            ref = ref.in_thread(event.args.strip())
        if ref.thread is not None:
            conversation = await self._store.find_by_thread(ref)
            if conversation is None:
                await self._reply(ref, "There is no conversation in this thread.")
                return
            await self._stop(conversation, event.author, ref)
            return
        await self._stop_in_channel(event)

    async def _stop_in_channel(self, event: CommandInvoked) -> None:
        active = [
            c
            for c in await self._store.active(
                platform=event.ref.platform,
                workspace=event.ref.workspace,
                channel=event.ref.channel,
            )
            if await self._settings.access.may_stop(event.author, c.requester, c.binding)
        ]
        if len(active) == 1:
            await self._stop(active[0], event.author, event.ref)
        elif not active:
            await self._reply(
                event.ref, "Nothing you may stop is running here.", to=event.author.id
            )
        else:
            threads = ", ".join(c.binding.thread or "?" for c in active)
            buttons = tuple(
                Button(label=f"Stop {c.binding.thread}", action=f"stop:{c.id}", style="danger")
                for c in active
            )
            await self._reply(
                event.ref,
                f"You have {len(active)} active conversations here (threads {threads}); "
                f"pick one, or say /{self._settings.stop_command} with the thread.",
                to=event.author.id,
                buttons=buttons,
            )

    async def _decide_one(self, event: CommandInvoked) -> None:
        """``decide`` with args ``"N.K EMOJI"``: decide call K of the request on message N."""
        parts = event.args.split()
        number = parts[0].partition(".")[2] if parts else ""
        if len(parts) != 2 or not number.isdigit() or event.ref.message is None:
            await self._reply(event.ref, "Say which call to decide, e.g. +✅ 3.2")
            return
        link = await self._store.find_by_message(
            event.ref.platform, event.ref.channel, event.ref.message
        )
        if link is None or link.request_id is None:
            await self._reply(event.ref, "That message asks for no decision.")
            return
        emoji = parts[1]
        approve = emoji in self._settings.approve_reactions
        if not approve and emoji not in self._settings.reject_reactions:
            await self._reply(event.ref, f"Use an approve or reject reaction, not {emoji}.")
            return
        conversation = await self._store.info(link.conversation_id)
        await self._decide(conversation, link.request_id, approve, event.author, int(number))

    async def _stop(self, conversation: ConversationInfo, who: Author, ref: PlatformRef) -> None:
        if not await self._settings.access.may_stop(
            who, conversation.requester, conversation.binding
        ):
            await self._notice(conversation, refusal("stop", who.name))
            return
        with logcontext.about(conversation.id):
            await self.stopper.stop(conversation, _person_of(who))

    async def _notice(self, conversation: ConversationInfo, text: str) -> None:
        await self._store.enqueue(
            conversation.id, [Outgoing(PostReply(ref=conversation.binding, text=text))]
        )

    async def _reply(
        self,
        ref: PlatformRef,
        text: str,
        *,
        to: str | None = None,
        buttons: tuple[Button, ...] = (),
    ) -> None:
        """Answer where no conversation is bound (straight to the adapter, not the outbox).

        ``to`` makes it ephemeral: only that user sees it, where the platform can.
        """
        await self._deliverer.send_now(
            PostReply(
                ref=ref.model_copy(update={"message": None}),
                text=text,
                ephemeral_to=to,
                buttons=buttons,
            )
        )

    # --- buttons -------------------------------------------------------------------

    async def _button(self, event: ButtonPressed) -> None:
        """Approve / Reject, Allow / Deny one call, or Stop: the same rules as reactions."""
        if not await self._store.record_delivery(event.delivery_key):
            return
        verb, _, target = event.action.partition(":")
        if verb == "stop":
            conversation = await self._store.find(target)
            if conversation is None:
                await self._reply(event.ref, "That conversation is gone.", to=event.author.id)
                return
            await self._stop(conversation, event.author, event.ref)
            return
        request_id, call = target, None
        if verb in ("allow", "deny"):
            request_id, _, number = target.rpartition(":")
            call = int(number) if number.isdigit() else None
        conversation_id = await self._store.request_conversation(request_id)
        if conversation_id is None or verb not in ("approve", "reject", "allow", "deny"):
            log.info("button %r names nothing this bot knows", event.action)
            return
        conversation = await self._store.info(conversation_id)
        approve = verb in ("approve", "allow")
        await self._decide(conversation, request_id, approve, event.author, call)


def _person(event: MessagePosted) -> Person:
    return _person_of(event.author)


def _person_of(author: Author) -> Person:
    return Person(id=author.id, name=author.name)
