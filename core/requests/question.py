"""A question: the model asks the thread (``ask_user``) and waits for an answer in words.

Opens when the model's ``ask_user`` call comes up (:func:`open_question`): the
conversation waits (``waiting(question)``) and the call's record points at the
request. Anyone in the thread answers with a reply (:func:`answer`), which
becomes the call's result; reactions do not decide a question.
"""

from __future__ import annotations

from core.requests.common import Opening
from core.tool_state import answer_control, opened
from core.tools.control import AskUser
from core.vocabulary import lifecycle
from core.vocabulary.entries import UserText
from core.vocabulary.inputs import ThreadMessage
from core.vocabulary.journal import Change, RequestResolution
from core.vocabulary.requests import Question, RequestState
from core.vocabulary.run_events import QuestionAsked
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
    """``reply`` answers ``request``: the model reads ``<name> answered: <text>``."""
    by = reply.author
    answered = answer_control(snap, request.tool_use_id, f"{by.name} answered: {reply.text}")
    return Change(
        entries=(
            UserText(author=by, text=reply.text, role="answer", files=reply.blocks),
            *answered.results,
        ),
        tool_calls=answered.records,
        resolve=(
            RequestResolution(
                request_id=request.id, state=RequestState.DECIDED, verdict=Answered(), by=by
            ),
        ),
        status=lifecycle.move(snap.status, lifecycle.RUNNING),
    )
