"""A message that interrupts a run: the turn stops at its next tool boundary.

In a conversation whose busy mode is ``interrupt`` (docs/architecture.md, "What a
person sees"), a message from someone who may stop the run comes marked
(:attr:`core.vocabulary.inputs.ThreadMessage.interrupts`). Before the next call of
the turn runs, :class:`core.run.tool_calls.ToolCalls` asks the run's inbox
(:class:`core.vocabulary.inputs.InterruptibleInbox`) whether such a message waits;
if so, :func:`interrupted` is the one commit that ends the turn there: every call
of the turn not yet run gets its ``cancelled`` record and its one result (so each
``tool_use`` keeps exactly one ``tool_result``, as the Messages API requires), the
interrupting message is journaled as the person's ``instruction`` and the other
messages that waited as notes, their deliveries handled. The model reads them all
at its next turn. A turn that waits on a person (an open request) is not
interrupted: the message then answers that request, or is a note.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from core.tool_state import answered_calls, move, parts, unrecorded
from core.vocabulary.entries import AssistantTurn
from core.vocabulary.inputs import Inbox, InterruptibleInbox, ThreadMessage, said_to_run
from core.vocabulary.journal import Change
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolState


def interrupting(inbox: Inbox | None, snap: ConversationSnapshot) -> bool:
    """Whether the run's turn stops here: ``inbox`` holds a message that interrupts and
    nothing waits on a person (no open request)."""
    if not isinstance(inbox, InterruptibleInbox) or snap.open_requests:
        return False
    return inbox.interrupting()


def interrupted(
    snap: ConversationSnapshot,
    messages: Sequence[ThreadMessage],
    read_only: Callable[[str], bool],
) -> Change:
    """The change that ends the last turn for ``messages`` (their files already read):
    each open call ``cancelled`` with a result naming who interrupted, each
    interrupting message an ``instruction``, the others notes, all handled.

    A call found ``running`` (only after a crash, never at a live tool boundary) is
    closed ``interrupted`` instead. Who interrupted is the first interrupting
    message's author (the first message's when none is marked).
    """
    by = next((m for m in messages if m.interrupts), messages[0] if messages else None)
    name = by.author.name if by is not None else "a new message"
    moves = []
    answered = answered_calls(snap)
    for record in reversed(snap.journal):
        turn = record.entry
        if not isinstance(turn, AssistantTurn):
            continue
        for index, call in enumerate(turn.tool_calls):
            if call.id in answered:
                continue
            found = unrecorded(snap, read_only(call.name), call, record.seq, index)
            if found.state is ToolState.RUNNING:
                text = f"Interrupted by {name} while it ran; its effects may be partial."
                moves.append(move(found, ToolState.INTERRUPTED, result=text))
            else:
                text = f"Not run: {name} interrupted the turn with a new instruction."
                moves.append(move(found, ToolState.CANCELLED, result=text))
        break  # only the last turn's calls are open at a tool boundary
    results, records = parts(moves)
    said, keys = said_to_run(messages)
    return Change(entries=(*results, *said), tool_calls=records, handled=keys)
