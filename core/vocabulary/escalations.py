"""The journal entries of a stuck run (docs/architecture.md, "The agent as a composition").

The failed calls of a failure streak as the people and the expert are shown them
(:class:`FailedCall`), the escalation to the people and the reset of the streak by
their answer (:class:`Escalated`, :class:`FailuresReset`), and a delegation to the
expert: handed over, briefed, checked, ended (:class:`Delegated`,
:class:`DelegationBrief`, :class:`DelegationChecked`, :class:`DelegationEnded`), and
the nudges that come before a run is stuck on an early finish or a reply in prose
(:class:`Nudged`).
Each is a member of the journal's tagged union, :data:`core.vocabulary.entries.Entry`
(and is imported from there as well).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SerializationInfo, model_serializer

from core.vocabulary.people import Person


class FailedCall(BaseModel):
    """One failed call of a failure streak, as the people are shown it: its tool, what it
    did (``call``: a command line, shortened) and the end of its result (``output``: its
    last lines, each shortened; :mod:`core.run.escalation`)."""

    model_config = ConfigDict(frozen=True)

    tool_use_id: str
    tool: str
    call: str
    output: str


class Escalated(BaseModel):
    """The run was stuck, decided outside the model: its last ``failures`` failed in a row
    (``failure_limit`` reached), or ``reason`` says why (words after "I'm stuck: ";
    empty: the failures say it), so it asked ``to`` for help with the request
    ``request_id`` (docs/architecture.md, "The agent as a composition").

    The model reads it as a note of threadbot's in the next user message (before the
    answer), so it knows why a person speaks (:mod:`core.run.history`).
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["escalated"] = "escalated"
    request_id: str
    to: Literal["people"] = "people"
    failures: tuple[FailedCall, ...]
    reason: str = ""

    @model_serializer(mode="wrap")
    def _without_reason(
        self, handler: Callable[[Any], dict[str, Any]], info: SerializationInfo
    ) -> dict[str, Any]:
        data = handler(self)
        if not self.reason:  # stored as before for a failure streak
            data.pop("reason", None)
        return data


class FailuresReset(BaseModel):
    """The failure streak starts again from here: ``by`` answered the escalation
    ``request_id``. The streak counts the failures after the newest reset
    (:func:`core.run.escalation.failure_streak`). Not a message: the model reads the
    answer itself."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["failures_reset"] = "failures_reset"
    request_id: str
    by: Person


class Delegated(BaseModel):
    """The run was stuck, so it handed the work to the expert: delegation ``n`` (from 1,
    counted over the conversation), to the expert's ``model``, on ``branch``
    (``threadbot/<conversation>-delegation-<n>``) of a copy of the conversation's
    clone, or in a plain copy of its folder (None: the workspace is no clone).
    ``failures``: the streak that made it (oldest first); ``reason``: why, when
    something else did (words after "I'm stuck: "). Followed by the delegation's
    scope (``delegation-<n>``, :class:`ScopeEntered` with the role ``expert``) and
    its :class:`DelegationEnded` (:mod:`core.run.delegation`). Not a message: the
    executor reads how it ended."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["delegated"] = "delegated"
    n: int
    model: str
    branch: str | None = None
    failures: tuple[FailedCall, ...] = ()
    reason: str = ""


class DelegationBrief(BaseModel):
    """The expert's brief for delegation ``n``, the first message of its own view: the
    approved plan, what failed, and the instruction to finish the sub-task within the
    plan (:func:`core.run.delegation.brief`)."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["delegation_brief"] = "delegation_brief"
    n: int
    text: str


class DelegationChecked(BaseModel):
    """Whether the expert's work in delegation ``n`` is usable, checked by threadbot: the
    ``command`` that failed last, run again in the expert's workspace, ``passed`` (it
    exited 0) or not, and the end of its ``output``. A run that goes on after a crash
    takes the check from here instead of running it again."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["delegation_checked"] = "delegation_checked"
    n: int
    command: str
    passed: bool
    output: str = ""


class DelegationEnded(BaseModel):
    """Delegation ``n`` ended: ``merged`` (the expert called ``finish`` and the command
    that failed last exits 0: its branch is merged into the conversation's, or its
    copy's files copied back) or ``not_usable`` (then the people are asked). ``why``:
    what showed it, in words; ``summary``: the expert's own words at ``finish``.

    The executor reads it as a note of threadbot's in its next request
    (:mod:`core.run.history`); a merged one ends the failure streak
    (:func:`core.run.escalation.failure_streak`)."""

    model_config = ConfigDict(frozen=True)
    kind: Literal["delegation_ended"] = "delegation_ended"
    n: int
    outcome: Literal["merged", "not_usable"]
    why: str = ""
    summary: str = ""
    branch: str | None = None


class Nudged(BaseModel):
    """threadbot corrected the model, decided outside it (docs/architecture.md, "The agent
    as a composition"; :mod:`core.run.nudges`).

    ``why``: ``early_finish``, a ``finish`` refused (``tool_use_id``) because the
    approved plan names a mutating tool and no call of one succeeded: the refusal is
    that call's result, so the model does not read this entry; ``prose``, a reply
    without the tool call that was due (``finish``, or a tool to go on): the model
    reads ``text`` as threadbot's note in the next user message (a journaled message,
    not a change of the system prompt, so the cached prefix holds). A second one of
    the same ``why`` since a person last spoke escalates instead.
    """

    model_config = ConfigDict(frozen=True)
    kind: Literal["nudged"] = "nudged"
    why: Literal["early_finish", "prose"]
    text: str
    tool_use_id: str | None = None
