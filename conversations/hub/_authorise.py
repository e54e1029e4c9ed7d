"""The authorise step: who may stop and decide (:class:`conversations.access.AccessPolicy`).

A stop or a decision by someone who may not becomes a refusal in the thread, recorded
in the audit trail with the means it came by (reason ``not an approver``), and nothing
changes. A message in a thread is never refused here: whether its author
may decide goes with it (``may_continue``: a requester's or approver's reply to a
retry or go-on question is an answer, a bystander's is not; after a stop theirs
starts the conversation again, a bystander's is kept as a note and refused). The
engine applies it in the conversation's turn (:mod:`core.run.restart`), where the
status is the one the stop left, not the one seen when the message came in, and the
refusal is written with the note, so a restart of the bot does not refuse it twice.
"""

from __future__ import annotations

import dataclasses

from conversations.access import AccessPolicy
from conversations.events import Author
from conversations.hub._chain import Answer, Decide, Inbound, Next, Refuse, StopRun
from conversations.render import refusal
from conversations.store import ConversationInfo
from core.requests.audit import refused
from core.vocabulary.audit import NOT_ALLOWED, STOP


class Authorise:
    """Checks the person behind a stop, a decision or a reply against ``access``."""

    def __init__(self, *, access: AccessPolicy) -> None:
        self._access = access

    async def __call__(self, inbound: Inbound, next: Next) -> None:
        """Refuse (as a :class:`Refuse`) what the person may not do; then go on."""
        intent = inbound.intent
        match intent:
            case StopRun(conversation=conversation, who=who, means=means):
                if not await self._access.may_stop(
                    who, conversation.requester, conversation.binding
                ):
                    audited = refused(who.id, means, NOT_ALLOWED, request_kind=STOP)
                    inbound.intent = Refuse(conversation, audited, refusal("stop", who.name))
            case Decide(conversation=conversation, who=who, means=means):
                if not await self.may_decide(who, conversation):
                    audited = refused(who.id, means, NOT_ALLOWED, request_id=intent.request_id)
                    inbound.intent = Refuse(conversation, audited, refusal("decide", who.name))
            case Answer(conversation=conversation, event=event):
                may = await self.may_decide(event.author, conversation)
                inbound.intent = dataclasses.replace(intent, may_continue=may)
            case _:
                pass
        await next()

    async def may_decide(self, who: Author, conversation: ConversationInfo) -> bool:
        """Whether ``who`` may decide the conversation's requests (the requester or an approver)."""
        return await self._access.may_decide(who, conversation.requester, conversation.binding)
