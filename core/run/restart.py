"""Who starts a conversation again after its run ended: after a stop, the people who may stop it.

A finished or failed conversation goes on with anyone's message in its thread
(docs/architecture.md, "Conversation lifecycle and workflow position"). A stop is a person's
will that the work ends, so after one only the requester or an approver (the
people who may stop it, ``may_continue`` on the message) starts it again; anyone
else's message is kept as a note, and the thread answers with the words a
bystander's stop gets (:class:`core.vocabulary.run_events.Refused`). A conversation that
ended ``cancelled`` because its request expired is not stopped: anyone may
mention the bot again, as the expiry message says.
"""

from __future__ import annotations

from core.vocabulary.entries import StopEntry, UserText
from core.vocabulary.inputs import ThreadMessage, delivery_keys
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.run_events import Refused
from core.vocabulary.snapshot import ConversationSnapshot


def stopped(snap: ConversationSnapshot) -> bool:
    """Whether the conversation ended with a stop, not started again since: it is
    ``cancelled`` and its newest stop comes after its newest request."""
    if snap.status.lifecycle is not Lifecycle.CANCELLED:
        return False
    for record in reversed(snap.journal):
        match record.entry:
            case StopEntry():
                return True
            case UserText(role="request"):
                return False
            case _:
                pass
    return False


def refused_restart(snap: ConversationSnapshot, request: ThreadMessage) -> Change | None:
    """The change for ``request`` when its author may not start the stopped conversation
    again (its words kept as a note, the thread told, the conversation left
    ``cancelled``); None when it may start."""
    if request.may_continue or not stopped(snap):
        return None
    note = UserText(author=request.author, text=request.text, role="note", files=request.blocks)
    return Change(
        entries=(note,),
        handled=delivery_keys(request),
        events=(Refused(action="restart", by_name=request.author.name),),
    )
