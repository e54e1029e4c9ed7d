"""Who a run's messages are for: the requester is mentioned when something waits for them.

A plan waiting for approval, a clarification question and the final answer name the
person who asked (:attr:`core.vocabulary.snapshot.ConversationSnapshot.requester`, a
platform user id and the name the platform marks a mention with) in the event's
``mention``; the thread's renderer adds the mention to the message
(docs/architecture.md, "What a person sees"). The conversation's
``mention_requester`` setting (a layered one) turns it off.
"""

from __future__ import annotations

from core.run.state import Run
from core.vocabulary.journal import Change
from core.vocabulary.people import Person
from core.vocabulary.run_events import PlanProposed, QuestionAsked, RunAnswered, RunEvent


def addressed(run: Run, change: Change) -> Change:
    """``change`` with the requester in the ``mention`` of its plan, question and answer
    events, when the run's settings say so and it knows the conversation (its snapshot);
    as it is otherwise."""
    snap = run.snapshot
    if not run.settings.mention_requester or snap is None or not change.events:
        return change
    events = tuple(_for(event, snap.requester) for event in change.events)
    if events == change.events:
        return change
    return change.model_copy(update={"events": events})


def _for(event: RunEvent, requester: Person) -> RunEvent:
    match event:
        case PlanProposed() | QuestionAsked() | RunAnswered() if event.mention is None:
            return event.model_copy(update={"mention": requester})
        case _:
            return event
