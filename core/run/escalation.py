"""Escalation, decided outside the model: the failure streak and the step that asks for help.

The model does not say when it is stuck; the run tells from what happened
(docs/architecture.md, "The agent as a composition"). :func:`failure_streak` reads the
failed calls in a row from the journal; :class:`Escalate`, a step of the agent between
a turn's tool calls and the next model call, asks the people in the thread for help
when the streak reaches the ``failure_limit`` setting
(:func:`core.requests.escalation.open_escalation`), and the run waits
(``waiting(escalation)``).

What counts:

- a failure: a ``run_command`` call that ended ``failed`` (a non-zero exit, a command
  that could not start, a timeout, a cap hit: :class:`core.tools.command.RunCommand`),
  a call to a tool that does not exist (it ends ``failed`` at admission, its
  result listing the tools: :mod:`core.run.admission`), and an ``ask_expert`` call
  that ended ``failed`` (refused because the expert's budget is spent, or the
  expert's API call failed: :mod:`core.run.consultation`);
- the end of a streak: a ``run_command`` call that ended ``done``, the answer to an
  escalation (:class:`~core.vocabulary.entries.FailuresReset`) and a new request
  (a person's :class:`~core.vocabulary.entries.UserText` of role ``request``);
- neither: a stop (``cancelled``, ``interrupted``), a denial (the policy's, or a
  person's ❌ on a tool approval), a call found ``running`` after a crash
  (``unknown``), an answered consultation (advice, not a fix), and the other tools'
  calls.

The streak is a pure function of the journal since its last end, each call's final
state read from its tool call record (both committed in one change, both in the
store): a run killed between two failures and restarted counts the same as one that
went straight through.

With an expert model configured (``expert_model``), the run escalates to the people
all the same for now: delegating to the expert comes later (issue 28).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from core.policy.summary import shorten, summarize_call
from core.requests.escalation import open_escalation
from core.run import live
from core.run.compose import CONTINUE, WAIT, Outcome
from core.run.deps import RunDeps
from core.run.state import Run
from core.tools import control
from core.tools.command import RunCommand
from core.vocabulary.entries import (
    FailedCall,
    FailuresReset,
    JournalRecord,
    ToolResultEntry,
    UserText,
)
from core.vocabulary.tool_records import ToolCallRecord, ToolState

log = logging.getLogger(__name__)

COMMAND = RunCommand.spec.name
"""The tool whose failures count (``run_command``)."""
TAIL_LINES = 5
"""Lines of a failed call's result the people are shown (its end)."""
LINE_WIDTH = 120
"""Characters of each of those lines, and of the call's summary: two failures fit in
one Discord message (2,000 characters; Slack's hold 3,900); more are split between
paragraphs (docs/architecture.md, "What a person sees")."""


def failure_streak(
    journal: Sequence[JournalRecord],
    records: Mapping[str, ToolCallRecord],
    tools: Collection[str],
) -> tuple[FailedCall, ...]:
    """The failed calls in a row at the end of ``journal``, oldest first (see the module's
    docstring for what counts); empty when the last command succeeded or nothing failed.

    ``records``: the tool call records by ``tool_use_id`` (each call's name, input and
    final state); ``tools``: the names of the tools that exist (a failed call of another
    name is an invented tool's). Reads back from the end only as far as the streak's end.
    """
    failed: list[FailedCall] = []
    for journaled in reversed(journal):
        entry = journaled.entry
        if isinstance(entry, FailuresReset) or (
            isinstance(entry, UserText) and entry.role == "request"
        ):
            break
        if not isinstance(entry, ToolResultEntry):
            continue
        record = records.get(entry.tool_use_id)
        if record is None:
            continue
        if record.name == COMMAND and record.state is ToolState.DONE:
            break
        invented = record.name not in tools
        counted = record.name == COMMAND or invented or control.consults_expert(record.name)
        if record.state is ToolState.FAILED and counted:
            failed.append(_shown(record, entry))
    return tuple(reversed(failed))


def _shown(record: ToolCallRecord, result: ToolResultEntry) -> FailedCall:
    """What the people see of one failed call: its summary and its result's last lines."""
    name = record.name
    if name == COMMAND or control.consults_expert(name):
        said = summarize_call(name, record.input, LINE_WIDTH)
    else:
        said = f"{shorten(name, 60)} (no such tool)"
    lines = [line.rstrip() for line in result.content.strip().splitlines() if line.strip()]
    tail = "\n".join(shorten(line, LINE_WIDTH) for line in lines[-TAIL_LINES:])
    return FailedCall(tool_use_id=record.tool_use_id, tool=name, call=said, output=tail)


class Escalate:
    """Ask the people for help when the failure streak reaches ``failure_limit``: ``wait``
    then (the escalation committed, in its trace span), else ``continue``."""

    def __init__(self, deps: RunDeps) -> None:
        self._deps = deps

    async def go(self, run: Run) -> Outcome:
        """Commit the escalation when the run is stuck."""
        deps, snap = self._deps, run.snap
        tools = {tool.spec.name for tool in deps.toolbox}
        streak = failure_streak(snap.journal, snap.tool_calls, tools)
        limit = run.settings.failure_limit
        if len(streak) < limit:
            return CONTINUE
        log.info("conversation %s: stuck after %d failures", run.conversation_id, len(streak))
        change = open_escalation(snap, streak, run.opening)
        with run.span.escalation("people", len(streak)):
            await live.commit(run, deps.journal, change)
        return WAIT
