"""Starting a conversation again after its run ended: where it starts, and who may.

A new request starts at the workflow's start, or where the last run ended
(:func:`next_position`).

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

from core.requests.audit import restart_refused
from core.vocabulary.entries import StopEntry, UserText
from core.vocabulary.inputs import ThreadMessage, delivery_keys
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.run_events import Refused
from core.vocabulary.snapshot import ConversationSnapshot
from core.workflows.model import Outcome, StateKind, Workflow
from core.workflows.moves import follow


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
    again (its words kept as a note, the thread told, the refusal in the audit trail, the
    conversation left ``cancelled``); None when it may start."""
    if request.may_continue or not stopped(snap):
        return None
    note = UserText(author=request.author, text=request.text, role="note", files=request.blocks)
    return Change(
        entries=(note,),
        handled=delivery_keys(request),
        events=(Refused(action="restart", by_name=request.author.name),),
        audit=(restart_refused(request),),
    )


def next_position(snap: ConversationSnapshot, request: ThreadMessage, workflow: Workflow) -> str:
    """Where ``request`` starts the conversation: a first request at the workflow's start;
    a failed run carried on by someone who may (``may_continue``) where it failed (unless
    it failed at an ``end`` state: the start); after a stop or a failure, at the start
    again (no approval outlives a stop); after an answer, where the workflow's
    ``new_message`` leads (the start when it leads nowhere but the end)."""
    if not snap.journal:
        return workflow.start
    at_end = workflow.state(snap.position).kind is StateKind.END
    if snap.status.lifecycle is Lifecycle.FAILED and request.may_continue and not at_end:
        return snap.position  # carry on from where it failed
    if snap.status.lifecycle in (Lifecycle.CANCELLED, Lifecycle.FAILED):
        return workflow.start  # no approval outlives a stop
    target = follow(workflow, snap, Outcome.NEW_MESSAGE)
    return workflow.start if workflow.state(target).kind is StateKind.END else target
