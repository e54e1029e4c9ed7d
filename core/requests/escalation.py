"""An escalation: the run is stuck, and the people in the thread are asked for help.

threadbot, not the model, decides it (docs/architecture.md, "The agent as a
composition"): when the run's last ``failure_limit`` commands failed in a row
(:func:`core.run.escalation.failure_streak`), :func:`open_escalation` journals an
:class:`~core.vocabulary.entries.Escalated` entry, opens an
:class:`~core.vocabulary.requests.Escalation` (``waiting(escalation)``) and shows
the failures in the thread. It is answered like a clarification question
(:mod:`core.requests.question`): anyone who may answer one replies in the thread
(:func:`answer`); reactions do not decide it. The answer is the model's next
instruction, and a :class:`~core.vocabulary.entries.FailuresReset` entry starts the
streak again. A stop or an expiry cancels it like any request.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.requests.common import Opening
from core.tools.command import RunCommand
from core.vocabulary import lifecycle
from core.vocabulary.entries import Escalated, FailedCall, FailuresReset, UserText
from core.vocabulary.inputs import ThreadMessage
from core.vocabulary.journal import Change, RequestResolution
from core.vocabulary.requests import Escalation, RequestState
from core.vocabulary.run_events import EscalationAsked
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.verdicts import Answered

EARLY_FINISH = "I tried to finish twice without making the change the plan asks for"
"""The reason of an escalation after a second early finish (:mod:`core.run.nudges`)."""
PROSE = "my last 2 replies neither finished the work nor went on with it"
"""The reason of an escalation after a second reply in prose (:mod:`core.run.nudges`)."""


def why_of(reason: str) -> str:
    """What made the run escalate, for its trace span (``threadbot.escalation.why``):
    ``failures`` (no ``reason``: a failure streak), ``early_finish``, ``prose``, or
    ``other`` for a reason of another kind."""
    if not reason:
        return "failures"
    return {EARLY_FINISH: "early_finish", PROSE: "prose"}.get(reason, "other")


COMMAND = RunCommand.spec.name
"""The tool whose failures are commands (``run_command``)."""


def stuck_reason(failures: Sequence[FailedCall], reason: str = "") -> str:
    """Why the run is stuck, in words: ``reason`` when one is given (an escalation a
    failure streak did not make), else ``the last 2 commands failed`` (``calls`` when
    not all of ``failures`` are commands: an invented tool, a refused ``ask_expert``)."""
    if reason:
        return reason
    what = "command" if all(f.tool == COMMAND for f in failures) else "call"
    if len(failures) == 1:
        return f"the last {what} failed"
    return f"the last {len(failures)} {what}s failed"


def stuck_line(failures: Sequence[FailedCall], reason: str = "") -> str:
    """``I'm stuck: the last 2 commands failed`` (the request's prompt, the message's title),
    or ``I'm stuck: <reason>`` (:func:`stuck_reason`)."""
    return f"I'm stuck: {stuck_reason(failures, reason)}"


def open_escalation(
    snap: ConversationSnapshot,
    failures: Sequence[FailedCall],
    opening: Opening,
    *,
    reason: str = "",
) -> Change:
    """Ask the people for help with ``failures`` (the streak, oldest first; maybe none) and
    ``reason`` (why, when the streak does not say it: words after "I'm stuck: "): the
    entry, the request and its message in one change."""
    expires_at, remind_at = opening.times()
    request = Escalation(
        id=opening.new_id(),
        prompt=stuck_line(failures, reason),
        failures=len(failures),
        expires_at=expires_at,
        remind_at=remind_at,
    )
    failed = tuple(failures)
    return Change(
        entries=(Escalated(request_id=request.id, failures=failed, reason=reason),),
        open_request=request,
        status=lifecycle.move(snap.status, lifecycle.waiting(request.wait)),
        events=(EscalationAsked(request_id=request.id, failures=failed, reason=reason),),
    )


def answer(snap: ConversationSnapshot, request: Escalation, reply: ThreadMessage) -> Change:
    """``reply`` answers ``request``: the model reads it as ``<name> (answer): <text>``, the
    failure streak starts again, and the run goes on."""
    by = reply.author
    return Change(
        entries=(
            UserText(author=by, text=reply.text, role="answer", files=reply.blocks),
            FailuresReset(request_id=request.id, by=by),
        ),
        resolve=(
            RequestResolution(
                request_id=request.id, state=RequestState.DECIDED, verdict=Answered(), by=by
            ),
        ),
        status=lifecycle.move(snap.status, lifecycle.RUNNING),
    )
