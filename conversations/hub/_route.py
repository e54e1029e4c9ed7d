"""The route step, the last: the intent is carried out.

A new conversation's run, a reply and a decision's run go through the
conversation's queue (:mod:`conversations.hub._runs`); a decision itself is taken
at once (compare-and-set: the first wins, the second is told it was decided); a
stop goes to the stopper, which reaches the run wherever it runs; feedback is stored
with the conversation and acknowledged to its giver alone; a refused attempt (one the
authorise step refused, or a decision that found its request decided already, gone or
without that call) is recorded in the audit trail with its notice; notices go to
the thread through the outbox; answers where no conversation is bound go straight
to the adapter. A reply's shared files are fetched here, before it is queued
(:mod:`conversations.hub._files`), so the hub returns to the adapter once they are
fetched, within the download timeout. A reply that comes while a run of its
conversation works here is acknowledged and handled by the busy mode
(:mod:`conversations.hub._busy`); one queued again after a restart goes the way its
acknowledgement told, whether a run works or not.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import assert_never

from conversations import logcontext
from conversations.access import AccessPolicy
from conversations.actions import StopButton
from conversations.events import Author, Button, CommandInvoked, PostReply, means_of
from conversations.feedback import acknowledgement
from conversations.hub._busy import Busy
from conversations.hub._chain import (
    Answer,
    Begin,
    Decide,
    GiveFeedback,
    Ignore,
    Inbound,
    Next,
    Notice,
    Open,
    Refuse,
    Respond,
    StopInChannel,
    StopRun,
    person_of,
)
from conversations.hub._files import Downloads
from conversations.hub._refusals import Refusals
from conversations.hub._runs import Runs
from conversations.stopping import Stopper
from conversations.store import ConversationInfo, Threads
from conversations.store.feedback import Feedback
from core.requests.audit import refused
from core.run.engine import Engine
from core.run.state import Handover
from core.vocabulary.approvals import SCOPE_SAID
from core.vocabulary.audit import STOP, Means
from core.vocabulary.inputs import Approve, Choose, DecideOutcome, Decision, Reject, ThreadMessage

log = logging.getLogger("conversations.hub")

NOTHING_HERE = "nothing they may stop here"
"""Why a ``/stop`` outside a thread stopped nothing (the audit trail)."""

Notify = Callable[[ConversationInfo, str], Awaitable[None]]
"""Posts a short message in the conversation's thread (through the outbox)."""
SendNow = Callable[[PostReply], Awaitable[None]]
"""Sends an action at once, outside the outbox (:meth:`conversations.outbox.Deliverer.send_now`)."""


class Route:
    """Carries out each intent; never calls ``next`` (it ends the chain)."""

    def __init__(
        self,
        *,
        engine: Engine,
        runs: Runs,
        stopper: Stopper,
        threads: Threads,
        access: AccessPolicy,
        stop_command: str,
        notice: Notify,
        send_now: SendNow,
        feedback: Feedback,
        refusals: Refusals,
        downloads: Downloads | None = None,
        reply_elsewhere: Callable[[ConversationInfo], None] | None = None,
        busy: Busy | None = None,
    ) -> None:
        self._engine = engine
        self._busy = busy
        self._reply_elsewhere = reply_elsewhere
        self._downloads = downloads
        self._runs = runs
        self._stopper = stopper
        self._threads = threads
        self._access = access
        self._stop_command = stop_command
        self._notice = notice
        self._send_now = send_now
        self._feedback = feedback
        self._refusals = refusals

    async def __call__(self, inbound: Inbound, next: Next) -> None:
        """Do what ``inbound.intent`` asks."""
        intent = inbound.intent
        match intent:
            case Begin(conversation_id=conversation_id, event=event, snapshot=snapshot):
                self._runs.start(conversation_id, event, snapshot)
            case Answer(
                conversation=conversation,
                event=event,
                may_continue=may,
                resumed=again,
                busy_mode=told,
            ):
                # Fetched before it is queued: a run at work may take it as a note.
                downloads = self._downloads
                files = await downloads.of(conversation.id, event) if downloads else ()
                reply = ThreadMessage(
                    text=event.text,
                    author=person_of(event.author),
                    may_continue=may,
                    delivery_key=event.delivery_key,
                    files=files,
                )
                busy = self._busy
                if busy is not None and (told is not None or busy.working(conversation.id)):
                    await busy.take(conversation, event, reply, acknowledge=not again, told=told)
                else:
                    self._runs.reply(conversation.id, reply)
                if self._reply_elsewhere is not None:
                    self._reply_elsewhere(conversation)  # its run may be held elsewhere
            case StopRun(conversation=conversation, who=who, means=means):
                await self._stop(conversation, who, means)
            case Decide():
                await self._decide(intent)
            case GiveFeedback(conversation=conversation, who=who, positive=positive):
                await self._feedback.give(conversation.id, who.id, positive=positive)
                said = acknowledgement(who.name, positive=positive)
                await self._respond(Respond(conversation.binding, said, to=who.id))
            case StopInChannel(event=event):
                await self._stop_in_channel(event)
            case Notice(conversation=conversation, text=text):
                await self._notice(conversation, text)
            case Refuse(conversation=conversation, audited=audited, text=text):
                await self._refusals.refuse(conversation, audited, text)
            case Respond():
                await self._respond(intent)
            case Ignore(reason=reason):
                if reason:
                    log.info("%s", reason)
            case Open():
                raise AssertionError("the dedupe step opens the conversation of a mention")
            case _:
                assert_never(intent)

    async def _stop(self, conversation: ConversationInfo, who: Author, means: Means) -> None:
        with logcontext.about(conversation.id):
            await self._stopper.stop(conversation, person_of(who), means)

    async def _decide(self, intent: Decide) -> None:
        """Take the decision (the engine records it with the change it makes); record an
        outcome that changed nothing as a refusal, with what the person is told."""
        conversation, who = intent.conversation, intent.who
        by, request_id, means = person_of(who), intent.request_id, intent.means
        decision: Decision
        if intent.choice is not None:
            decision = Choose(request_id=request_id, by=by, option=intent.choice, means=means)
        elif intent.approve:
            call, scope = intent.call, intent.scope
            decision = Approve(request_id=request_id, by=by, call=call, scope=scope, means=means)
        else:
            decision = Reject(request_id=request_id, by=by, call=intent.call, means=means)
        handed: list[Handover] = []
        outcome = await self._engine.decide(conversation.id, decision, handover=handed.append)
        if outcome is DecideOutcome.DECIDED:
            self._runs.run(conversation.id, handed[0] if handed else None)
            return
        text, why = "", outcome.value.replace("_", " ")
        if outcome is DecideOutcome.ALREADY_DECIDED:
            text = f"This was already decided, {who.name}."
        elif outcome is DecideOutcome.NO_SUCH_CALL and intent.choice is not None:
            text, why = (
                f"That question has no option {intent.choice}, {who.name}.",
                "no such option",
            )
        elif outcome is DecideOutcome.NO_SUCH_CALL:
            text = f"That request has no call {intent.call}, {who.name}."
        elif outcome is DecideOutcome.SCOPE_NOT_OFFERED:
            text, why = (
                f"Approvals {SCOPE_SAID[intent.scope]} are not offered here, {who.name}: "
                "allow this call once instead.",
                "scope not offered",
            )
        elif outcome is DecideOutcome.EXPIRED:
            self._runs.expire(conversation.id, intent.request_id)  # after the run, if one works
        audited = refused(who.id, means, why, request_id=request_id)
        await self._refusals.refuse(conversation, audited, text)

    async def _stop_in_channel(self, event: CommandInvoked) -> None:
        """Stop the one conversation here the person may stop; name them if there are more."""
        here = await self._threads.active(
            platform=event.ref.platform, workspace=event.ref.workspace, channel=event.ref.channel
        )
        who = event.author
        active = [c for c in here if await self._access.may_stop(who, c.requester, c.binding)]
        if len(active) == 1:
            await self._stop(active[0], who, means_of(event))
        elif not active:
            audited = refused(who.id, means_of(event), NOTHING_HERE, request_kind=STOP)
            await self._refusals.outside(event.ref, audited)
            await self._respond(
                Respond(event.ref, "Nothing you may stop is running here.", to=who.id)
            )
        else:
            threads = ", ".join(c.binding.thread or "?" for c in active)
            buttons = tuple(
                Button(
                    label=f"Stop {c.binding.thread}",
                    action=StopButton(conversation=c.id),
                    style="danger",
                )
                for c in active
            )
            text = (
                f"You have {len(active)} active conversations here (threads {threads}); "
                f"pick one, or say /{self._stop_command} with the thread."
            )
            await self._respond(Respond(event.ref, text, to=who.id, buttons=buttons))

    async def _respond(self, intent: Respond) -> None:
        """Answer where no conversation is bound (``to``: only that user sees it, where
        the platform can)."""
        await self._send_now(
            PostReply(
                ref=intent.ref.model_copy(update={"message": None}),
                text=intent.text,
                ephemeral_to=intent.to,
                buttons=intent.buttons,
            )
        )
