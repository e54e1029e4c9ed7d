"""A question: the model asks the thread (``ask_user``) and waits for an answer.

Opens when the model's ``ask_user`` call comes up (:func:`open_question`): the
conversation waits (``waiting(question)``) and the call's record points at the
request. Anyone in the thread answers with a reply (:func:`answer`), which becomes
the call's result; a reply that is only the number of one of the options picks
that option, when its author may decide. A question with options (at most
:data:`core.tools.control.MAX_OPTIONS`) is also answered by a choice
(:func:`choose`: a button or a number reaction, by the requester or an approver, as
any decision). The options are read from the call's own input
(:func:`core.requests.closing.options_of`), so the request stores nothing more. A
question with options has a message to edit once answered (its buttons go): the
change that answers it carries a :class:`~core.vocabulary.run_events.RequestClosed`
with the answer and who gave it (docs/architecture.md, "What a person sees").
"""

from __future__ import annotations

from typing import Any

from core.requests.closing import options_of, request_closed
from core.requests.common import Opening
from core.tool_state import answer_control, opened
from core.tools.control import AskUser
from core.vocabulary import lifecycle
from core.vocabulary.entries import UserText
from core.vocabulary.inputs import Choose, ThreadMessage
from core.vocabulary.journal import Change, RequestResolution
from core.vocabulary.people import Person
from core.vocabulary.requests import Question, RequestState
from core.vocabulary.run_events import QuestionAsked, RequestClosed
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord
from core.vocabulary.verdicts import Answered


def open_question(
    snap: ConversationSnapshot, record: ToolCallRecord, asked: AskUser, opening: Opening
) -> Change:
    """Ask ``asked``, the ``ask_user`` call ``record``'s question (with its options, if any)."""
    question, options = asked.question, tuple(asked.options)
    expires_at, remind_at = opening.times()
    request = Question(
        id=opening.new_id(),
        tool_use_id=record.tool_use_id,
        prompt=question,
        expires_at=expires_at,
        remind_at=remind_at,
    )
    return Change(
        tool_calls=(opened(record, request.id),),
        open_request=request,
        status=lifecycle.move(snap.status, lifecycle.waiting(request.wait)),
        events=(QuestionAsked(request_id=request.id, question=request.prompt, options=options),),
    )


def answer(snap: ConversationSnapshot, request: Question, reply: ThreadMessage) -> Change:
    """``reply`` answers ``request``: the model reads ``<name> answered: <text>``, or, for a
    reply that is only an option's number (``2``) by someone who may decide
    (``reply.may_continue``: the requester or an approver, as for a button), ``<name>
    chose option 2: <option>``; anyone else's number is an answer in words, as before,
    and so is a reply queued while a run worked (``reply.queued``), written before the
    question was asked (docs/architecture.md, "What a person sees")."""
    options = options_of(snap, request)
    text = reply.text.strip()
    picks = reply.may_continue and not reply.queued
    if picks and text.isdigit() and 1 <= int(text) <= len(options):
        return _chosen(snap, request, reply.author, int(text), options, reply.blocks)
    by = reply.author
    closed = request_closed(snap, request, "answered", by=by, answer=reply.text)
    return _answered(
        snap,
        request,
        by,
        said=reply.text,
        result=f"{by.name} answered: {reply.text}",
        closed=closed,
        files=reply.blocks,
    )


def choose(snap: ConversationSnapshot, request: Question, choice: Choose) -> Change | None:
    """``choice`` picks one of ``request``'s options: the model reads ``<name> chose option
    2: <option>``. None when the question has no such option."""
    options = options_of(snap, request)
    if not 1 <= choice.option <= len(options):
        return None
    return _chosen(snap, request, choice.by, choice.option, options, ())


def _chosen(
    snap: ConversationSnapshot,
    request: Question,
    by: Person,
    option: int,
    options: tuple[str, ...],
    files: tuple[dict[str, Any], ...],
) -> Change:
    label = options[option - 1]
    closed = request_closed(snap, request, "answered", by=by, answer=label, option=option)
    return _answered(
        snap,
        request,
        by,
        said=label,
        result=f"{by.name} chose option {option}: {label}",
        closed=closed,
        files=files,
    )


def _answered(
    snap: ConversationSnapshot,
    request: Question,
    by: Person,
    *,
    said: str,
    result: str,
    closed: tuple[RequestClosed, ...],
    files: tuple[dict[str, Any], ...],
) -> Change:
    answered = answer_control(snap, request.tool_use_id, result)
    return Change(
        entries=(
            UserText(author=by, text=said, role="answer", files=files),
            *answered.results,
        ),
        tool_calls=answered.records,
        resolve=(
            RequestResolution(
                request_id=request.id, state=RequestState.DECIDED, verdict=Answered(), by=by
            ),
        ),
        status=lifecycle.move(snap.status, lifecycle.RUNNING),
        events=closed,
    )
