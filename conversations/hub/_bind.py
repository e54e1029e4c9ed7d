"""The bind step: what an inbound event is about, read from the store without writing.

A message is about the conversation bound to its thread (or, a mention, opens
one); a reaction and the ``decide`` command about the request of the bot message
they name (a number reaction, 1️⃣-9️⃣, picks that option of a question; a 👍 or 👎 on a
message that asks for nothing, an answer, is feedback); a button about what its action
names (:func:`conversations.actions.decode`; feedback: the pressed message's conversation);
``/stop`` about its thread's conversation, or the channel's. Events about nothing
this bot knows stop here, their deliveries unrecorded. A stop or a decision carries how
the person gave it, read from the event (:func:`conversations.events.means_of`), for the
audit trail.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import assert_never

from conversations.actions import (
    AnswerButton,
    ApproveButton,
    ChooseButton,
    FeedbackButton,
    RejectButton,
    StopButton,
    WiderApproveButton,
    decode,
)
from conversations.emoji import number
from conversations.events import (
    Author,
    ButtonPressed,
    CommandInvoked,
    MessagePosted,
    PlatformRef,
    ReactionChanged,
    means_of,
)
from conversations.feedback import FEEDBACK_REACTIONS
from conversations.hub._chain import (
    Answer,
    Decide,
    GiveFeedback,
    Ignore,
    Inbound,
    Intent,
    Next,
    Notice,
    Open,
    Refuse,
    Respond,
    StopInChannel,
    StopRun,
)
from conversations.hub._settings import HubSettings
from conversations.store import ConversationInfo, MessageLink, Requests, Threads
from conversations.texts import PlatformTexts
from core.requests.audit import refused
from core.vocabulary.approvals import ApprovalScope
from core.vocabulary.audit import Means
from core.vocabulary.requests import RequestState

log = logging.getLogger("conversations.hub")

STALE = "stale version"
"""Why a decision on a plan that a newer version replaced was refused (the audit trail)."""
REPLACED = "That plan was replaced by a newer version."

PassOver = Callable[..., Awaitable[None]]
"""``pass_over(platform=..., channel=...)``: returns once the deliverer has stored the id
of every message it sent in the channel (:meth:`conversations.outbox.Deliverer.pass_over`)."""


class Bind:
    """Finds the conversation, request and intent of each event (see the module docstring)."""

    def __init__(
        self,
        *,
        threads: Threads,
        requests: Requests,
        settings: HubSettings,
        texts: Callable[[str], PlatformTexts],
        pass_over: PassOver,
    ) -> None:
        self._threads = threads
        self._requests = requests
        self._settings = settings
        self._texts = texts
        self._pass_over = pass_over

    async def __call__(self, inbound: Inbound, next: Next) -> None:
        """Set ``inbound.intent`` (and, for a message in a thread, its conversation) and
        go on; stop for an event about nothing this bot knows."""
        event = inbound.event
        intent: Intent | None
        match event:
            case MessagePosted():
                inbound.conversation = await self._threads.find_by_thread(event.ref)
                intent = self._message(event, inbound.conversation)
            case ReactionChanged():
                intent = await self._reaction(event)
            case CommandInvoked():
                intent = await self._command(event)
            case ButtonPressed():
                intent = await self._button(event)
            case _:
                assert_never(event)
        if intent is not None:
            inbound.intent = intent
            await next()

    def _message(
        self, event: MessagePosted, conversation: ConversationInfo | None
    ) -> Intent | None:
        if conversation is not None:
            if event.unreadable:
                return Notice(conversation, self._texts(event.ref.platform).unreadable)
            if event.text.strip().lower() == self._settings.stop_word:
                return StopRun(conversation, event.author, means_of(event))
            return Answer(conversation, event)
        if not event.mentions_bot:
            return None
        thread = event.ref.thread or event.ref.message
        if thread is None:
            log.warning("mention without a message id: %s", event.delivery_key)
            return None
        return Open(event, event.ref.in_thread(thread).model_copy(update={"user": None}))

    async def _reaction(self, event: ReactionChanged) -> Intent | None:
        if not event.added or event.ref.message is None:
            return None  # a removed reaction changes nothing, before or after a decision
        link = await self._link(event.ref)
        if link is None:
            return None
        conversation = link.conversation or await self._threads.info(link.conversation_id)
        settings = self._settings
        if event.emoji in settings.stop_reactions:
            return StopRun(conversation, event.author, means_of(event))
        approve = event.emoji in settings.approve_reactions
        choice = number(event.emoji)
        decides = approve or choice is not None or event.emoji in settings.reject_reactions
        if link.request_id is None and event.emoji in FEEDBACK_REACTIONS:
            return GiveFeedback(conversation, event.author, FEEDBACK_REACTIONS[event.emoji])
        if link.request_id is None or not decides:
            return Ignore()
        return await self._decision(
            conversation,
            link.request_id,
            approve,
            event.author,
            means_of(event),
            state=link.request_state,
            choice=choice,
        )

    async def _command(self, event: CommandInvoked) -> Intent:
        if event.name == "decide":
            return await self._decide_command(event)
        if event.name == "settings" or (
            event.name == "threadbot" and event.args.split()[:1] == ["settings"]
        ):
            return self._settings_told(event)
        if event.name == "threadbot":
            return Respond(event.ref, "Say /threadbot settings.", to=event.author.id)
        if event.name != self._settings.stop_command:
            return Respond(event.ref, f"Unknown command /{event.name}.", to=event.author.id)
        ref = event.ref
        if ref.thread is None and event.args.strip():
            ref = ref.in_thread(event.args.strip())
        if ref.thread is None:
            return StopInChannel(event)
        conversation = await self._threads.find_by_thread(ref)
        if conversation is None and ref is not event.ref:  # named by its args: told where typed
            said = f"There is no conversation in the thread {event.args.strip()}."
            return Respond(event.ref, said, to=event.author.id)
        if conversation is None:
            return Respond(ref, "There is no conversation in this thread.", to=event.author.id)
        return StopRun(conversation, event.author, means_of(event))

    def _settings_told(self, event: CommandInvoked) -> Intent:
        """``/threadbot settings``: the channel's settings and their layers, to the asker
        (anyone may ask; no secret is among them)."""
        channels = self._settings.channels
        lines = channels(event.ref).explained if channels is not None else ()
        text = "\n".join(lines) or "This bot has no settings per channel."
        return Respond(event.ref, f"```\n{text}\n```", to=event.author.id)

    async def _decide_command(self, event: CommandInvoked) -> Intent:
        """``decide`` with args ``"N.K EMOJI"``: decide call K of the request on message N;
        ``"N.K EMOJI run"`` or ``"N.K EMOJI channel"`` approves it for the run, or always
        in the channel."""
        parts = event.args.split()
        number = parts[0].partition(".")[2] if parts else ""
        scope = ApprovalScope.ONCE
        if len(parts) == 3 and parts[2] in (ApprovalScope.RUN, ApprovalScope.CHANNEL):
            scope = ApprovalScope(parts[2])
            parts = parts[:2]
        if len(parts) != 2 or not number.isdigit() or event.ref.message is None:
            return Respond(event.ref, self._texts(event.ref.platform).decide_usage)
        link = await self._threads.find_by_message(
            event.ref.platform, event.ref.channel, event.ref.message
        )
        if link is None or link.request_id is None:
            return Respond(event.ref, "That message asks for no decision.")
        emoji = parts[1]
        approve = emoji in self._settings.approve_reactions
        if not approve and emoji not in self._settings.reject_reactions:
            return Respond(event.ref, f"Use an approve or reject reaction, not {emoji}.")
        if not approve and scope is not ApprovalScope.ONCE:
            return Respond(event.ref, f"A denial has no scope: {emoji} denies this call once.")
        conversation = await self._threads.info(link.conversation_id)
        return await self._decision(
            conversation,
            link.request_id,
            approve,
            event.author,
            means_of(event),
            int(number),
            scope=scope,
        )

    async def _button(self, event: ButtonPressed) -> Intent:
        """Approve / Reject, Allow / Deny one call, an option of a question, or Stop: the
        same rules as reactions."""
        action = decode(event.action)
        unknown = Ignore(f"button {event.action!r} names nothing this bot knows")
        match action:
            case None:
                return unknown
            case StopButton():
                conversation = await self._stop_target(action.conversation, event.ref)
                if conversation is None:
                    return Respond(event.ref, "That conversation is gone.", to=event.author.id)
                return StopRun(conversation, event.author, means_of(event))
            case ApproveButton() | RejectButton() | WiderApproveButton() | ChooseButton():
                found = await self._request_of(action.request, event.ref)
                if found is None:
                    return unknown
                conversation, request_id = found
                approve = not isinstance(action, RejectButton)
                who, means = event.author, means_of(event)
                if isinstance(action, ChooseButton):
                    return await self._decision(
                        conversation, request_id, approve, who, means, choice=action.option
                    )
                scope = ApprovalScope.ONCE
                if isinstance(action, WiderApproveButton):
                    scope = ApprovalScope(action.kind)
                return await self._decision(
                    conversation, request_id, approve, who, means, action.call, scope=scope
                )
            case AnswerButton():  # Discord's adapter opens its form; elsewhere a reply answers
                return Ignore("an answer button reached the hub: a reply in the thread answers")
            case FeedbackButton():  # the pressed answer's conversation, else its thread's
                link = await self._link(event.ref) if event.ref.message is not None else None
                given: ConversationInfo | None
                if link is not None:
                    given = link.conversation or await self._threads.info(link.conversation_id)
                else:  # its outbox row was pruned
                    given = await self._threads.find_by_thread(event.ref)
                if given is None:
                    return unknown
                return GiveFeedback(given, event.author, action.positive)
            case _:
                assert_never(action)

    async def _stop_target(
        self, conversation_id: str | None, ref: PlatformRef
    ) -> ConversationInfo | None:
        """The conversation a Stop button names, or, None, the pressed message's."""
        if conversation_id is not None:
            return await self._threads.find(conversation_id)
        link = await self._link(ref) if ref.message is not None else None
        if link is None:
            return None
        return link.conversation or await self._threads.info(link.conversation_id)

    async def _request_of(
        self, request_id: str | None, ref: PlatformRef
    ) -> tuple[ConversationInfo, str] | None:
        """The conversation and id of the request ``request_id`` names, or, None, of the
        request of the pressed message ``ref.message``; None when there is none."""
        if request_id is None and ref.message is not None:
            link = await self._link(ref)
            request_id = link.request_id if link is not None else None
        if request_id is None:
            return None
        found = await self._requests.request_conversation(request_id)
        if found is None:
            return None
        return await self._threads.info(found), request_id

    async def _decision(
        self,
        conversation: ConversationInfo,
        request_id: str,
        approve: bool,
        who: Author,
        means: Means,
        call: int | None = None,
        *,
        state: RequestState | None = None,
        choice: int | None = None,
        scope: ApprovalScope = ApprovalScope.ONCE,
    ) -> Intent:
        """A decision by ``who`` (by ``means``) on a request still open (or decided: the
        engine says so), else a refusal: told for a plan replaced meanwhile (``stale
        version``), only recorded for any other closed request; nothing for a request
        this bot does not know. ``state``: the request's, when it was read with the
        message's link; ``choice``: the option picked (a question's); ``scope``: how far
        an approval reaches."""
        if state is None:
            state = await self._requests.request_state(request_id)
        if state is None:
            return Ignore()
        if state is not RequestState.OPEN and state is not RequestState.DECIDED:
            stale = state is RequestState.SUPERSEDED
            why = STALE if stale else f"request {state.value}"
            audited = refused(who.id, means, why, request_id=request_id)
            return Refuse(conversation, audited, REPLACED if stale else "")
        return Decide(conversation, request_id, approve, who, means, call, choice, scope)

    async def _link(self, ref: PlatformRef) -> MessageLink | None:
        """What the bot message ``ref.message`` is about.

        The platform may report a reaction before the deliverer has stored the id
        of the message it just sent (or sent before a crash); look again once that
        is done.
        """
        assert ref.message is not None
        link = await self._threads.find_by_message(ref.platform, ref.channel, ref.message)
        if link is None:
            await self._pass_over(platform=ref.platform, channel=ref.channel)
            link = await self._threads.find_by_message(ref.platform, ref.channel, ref.message)
        return link
