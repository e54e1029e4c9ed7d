"""A person's message in a run: a new request, an answer, plan feedback, or a note.

The engine's :meth:`core.run.engine.Engine.start` and
:meth:`core.run.engine.Engine.reply` open a run and hand it here. A message to an
ended conversation starts the next run (the history kept; after a stop only those
who may go on restart it: :mod:`core.run.restart`); a message while a run is active
answers its pending request (:func:`core.requests.decide.reply_change`) or, when
there is none or it is not one words answer, is kept as a note
(docs/architecture.md, "Conversation lifecycle and workflow position").

A reply that says which request it answers (``answers``, the runner protocol's
verified resume: :class:`core.runner.protocol.RunRequest`) is checked against the
store: unless that request is the one pending now, the message is an ordinary one.
"""

from __future__ import annotations

from core.requests.decide import reply_change
from core.run import live
from core.run import workflow as run_workflow
from core.run.deps import RunDeps
from core.run.restart import next_position, refused_restart
from core.run.scope import Scope
from core.run.state import Run
from core.run.turn import Turns
from core.vocabulary import lifecycle
from core.vocabulary.entries import UserText
from core.vocabulary.errors import RequestConflict
from core.vocabulary.inputs import Inbox, ThreadMessage, delivery_keys
from core.vocabulary.journal import Change
from core.vocabulary.requests import PendingRequest
from core.vocabulary.snapshot import ConversationSnapshot


async def start(run: Run, deps: RunDeps, message: ThreadMessage, inbox: Inbox | None) -> None:
    """Begin a run with the request ``message``; to an active conversation it is a reply.

    The workflow is chosen (:func:`core.run.workflow.at_start`: one it may not ask for
    is refused and nothing starts), the message journaled as the request, and the
    turns go on (:class:`core.run.turn.Turns`).
    """
    snap = run.snap
    if snap.status.active:
        await reply(run, deps, message, inbox)
        return
    message = await _read_files(run, deps, message)
    refused = refused_restart(snap, message)
    if refused is not None:
        await live.commit(run, deps.journal, refused)
        return
    chosen = run_workflow.at_start(run, message, deps.workflows)
    if isinstance(chosen, Change):  # a workflow it may not ask for: refused
        await live.commit(run, deps.journal, chosen)
        return
    message, chosen_entries = chosen
    run.scope = Scope.root(run.settings, deps.outputs, run.workflow.workflow)
    workflow = run.workflow
    position = next_position(snap, message, workflow)
    step = workflow.entered(snap.position, position, first=not snap.journal)
    request = UserText(
        author=message.author, text=message.text, role="request", files=message.blocks
    )
    change = Change(
        entries=(*chosen_entries, *step, request),
        status=lifecycle.move(snap.status, lifecycle.RUNNING),
        position=position,
        handled=delivery_keys(message),
    )
    await live.commit(run, deps.journal, change)
    await Turns(run, deps).go(inbox)


async def reply(
    run: Run,
    deps: RunDeps,
    message: ThreadMessage,
    inbox: Inbox | None,
    answers: str | None = None,
) -> None:
    """A message in the thread: answers the pending request, or is a note.

    ``answers``: the id of the request the sender meant to answer; it is used only when
    it is the request pending now (:func:`pending_answered`). To an ended conversation
    the message is a new request (:func:`start`). A reply to no request, to one words
    do not answer (a tool approval), or to a request decided meanwhile is a note.
    """
    snap = run.snap
    if not snap.status.active:
        await start(run, deps, message, inbox)
        return
    message = await _read_files(run, deps, message)
    request = pending_answered(snap, answers)
    change = reply_change(snap, request, message, run.workflow) if request else None
    if change is None:
        await note(run, deps, message)
        return
    try:
        update = {"handled": delivery_keys(message)}
        await live.commit(run, deps.journal, change.model_copy(update=update))
    except RequestConflict:  # decided meanwhile: the words are kept as a note
        await note(run, deps, message)
        return
    await Turns(run, deps).go(inbox)


def pending_answered(snap: ConversationSnapshot, answers: str | None) -> PendingRequest | None:
    """The request a reply answers: the newest open one, when ``answers`` is None or
    names it; None when nothing is open or ``answers`` names another request (answered,
    stopped, expired, or one asked before the newest): the reply is then ordinary."""
    pending = snap.open_requests[-1] if snap.open_requests else None
    if pending is None or (answers is not None and pending.id != answers):
        return None
    return pending


async def note(run: Run, deps: RunDeps, message: ThreadMessage) -> None:
    """Journal ``message`` as a note (the model reads it at its next turn)."""
    entry = UserText(author=message.author, text=message.text, role="note", files=message.blocks)
    await live.commit(run, deps.journal, Change(entries=(entry,), handled=delivery_keys(message)))


async def _read_files(run: Run, deps: RunDeps, message: ThreadMessage) -> ThreadMessage:
    settings = run.settings
    return await deps.files.read(
        run.snap, message, text_limit=settings.file_text_limit, repo=settings.git_repo
    )
