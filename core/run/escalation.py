"""Escalation, decided outside the model: the failure streak and the step that asks for help.

The model does not say when it is stuck; the run tells from what happened
(docs/architecture.md, "The agent as a composition"). :func:`failure_streak` reads the
failed calls in a row from the journal; :class:`Escalate`, a step of the agent between
a turn's tool calls and the next model call, escalates when the streak reaches the
``failure_limit`` setting. :func:`escalate` is the one entry point of an escalation
(the rest of the run calls it too, with a reason instead of failures): with an expert
model configured (``expert_model``) and not yet tried for this streak, it delegates
the work to the expert (:mod:`core.run.delegation`); when there is none, or the
expert's work is not usable, it asks the people in the thread for help
(:func:`ask_people`, :func:`core.requests.escalation.open_escalation`), and the run
waits (``waiting(escalation)``). :class:`Stuck`, the step after :class:`Escalate`,
escalates the same way when the run is stuck on nudges (:mod:`core.run.nudges`).
:class:`Delegating`, the agent's first step of a round, goes on with a delegation the
run was in when it waited or was killed.

What counts:

- a failure: a ``run_command`` call that ended ``failed`` (a non-zero exit, a command
  that could not start, a timeout, a cap hit: :class:`core.tools.command.RunCommand`),
  a call to a tool that does not exist (it ends ``failed`` at admission, its
  result listing the tools: :mod:`core.run.admission`), and an ``ask_expert`` call
  that ended ``failed`` (refused because the expert's budget is spent, or the
  expert's API call failed: :mod:`core.run.consultation`);
- the end of a streak: a ``run_command`` call that ended ``done``, the answer to an
  escalation (:class:`~core.vocabulary.entries.FailuresReset`), a delegation whose
  work was merged (:class:`~core.vocabulary.entries.DelegationEnded`), a new
  request (a person's :class:`~core.vocabulary.entries.UserText` of role ``request``)
  and a workflow state entered (:class:`~core.vocabulary.entries.StepEntered`: a fixed
  action's failure is the workflow's outcome to follow, and each state starts afresh);
- passed over: what the expert did in a delegation (from its
  :class:`~core.vocabulary.entries.Delegated` entry to its end);
- neither: a stop (``cancelled``, ``interrupted``), a denial (the policy's, or a
  person's ❌ on a tool approval), a call found ``running`` after a crash
  (``unknown``), an answered consultation (advice, not a fix), and the other tools'
  calls.

The streak is a pure function of the journal since its last end, each call's final
state read from its tool call record (both committed in one change, both in the
store): a run killed between two failures and restarted counts the same as one that
went straight through.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from core.contexts.plan import current_plan
from core.policy.summary import last_lines, shorten, summarize_call
from core.requests.escalation import COMMAND, open_escalation, why_of
from core.run import live
from core.run.compose import CONTINUE, WAIT, Outcome
from core.run.consultation import spent
from core.run.delegation import NOT_USABLE, Delegation, delegate, open_delegation
from core.run.deps import RunDeps
from core.run.nudges import stuck
from core.run.settings import EngineSettings
from core.run.state import Run
from core.tools import control
from core.vocabulary.entries import (
    Delegated,
    DelegationEnded,
    FailedCall,
    FailuresReset,
    JournalRecord,
    StepEntered,
    ToolResultEntry,
    UserText,
)
from core.vocabulary.tool_records import ToolCallRecord, ToolState

log = logging.getLogger(__name__)

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
    name is an invented tool's). Reads back from the end only as far as the streak's end;
    a delegation still open at the end is passed over whole (the streak is the one that
    made it).
    """
    failed: list[FailedCall] = []
    opened = open_delegation(journal)
    skipping: int | None = None
    """The delegation being passed over (read back from its end to its entry)."""
    for at in range(len(journal) if opened is None else opened[0], 0, -1):
        entry = journal[at - 1].entry
        if skipping is not None:
            if isinstance(entry, Delegated) and entry.n == skipping:
                skipping = None
            continue
        if isinstance(entry, DelegationEnded):
            if entry.outcome == "merged":
                break
            skipping = entry.n
            continue
        if isinstance(entry, FailuresReset | StepEntered) or (
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
    tail = last_lines(result.content, TAIL_LINES, LINE_WIDTH)
    return FailedCall(tool_use_id=record.tool_use_id, tool=name, call=said, output=tail)


def expert_tried(journal: Sequence[JournalRecord]) -> bool:
    """Whether a delegation of this streak ended with work that was not usable (the
    people are asked then, not the expert again). Reads back to the streak's end (see
    :func:`failure_streak`)."""
    for record in reversed(journal):
        entry = record.entry
        if isinstance(entry, DelegationEnded):
            return entry.outcome != "merged"
        if isinstance(entry, FailuresReset) or (
            isinstance(entry, UserText) and entry.role == "request"
        ):
            return False
    return False


def delegable(run: Run, failures: Sequence[FailedCall]) -> bool:
    """Whether the stuck work may be handed to the expert: an expert model is configured,
    it was not tried for this streak (:func:`expert_tried`), a plan is approved (the
    expert's brief is a part of it to finish: a conversation still planning, or
    answering a greeting, has none), no failure is the expert's own (an ``ask_expert``
    refused for its spent budget, or whose expert failed to answer: a failing model is
    not asked again) and the conversation's consultations of the expert have not used
    up their budget (:func:`core.run.consultation.spent`; a delegation's own calls are
    priced and shown by role, not counted in that budget)."""
    snap = run.snap
    return (
        bool(run.settings.expert_model)
        and not expert_tried(snap.journal)
        and current_plan(snap) is not None
        and not any(control.consults_expert(f.tool) for f in failures)
        and not _budget_used_up(snap.journal, run.settings)
    )


def _budget_used_up(journal: Sequence[JournalRecord], settings: EngineSettings) -> bool:
    """Whether the conversation's consultations used up the expert's budget (none made:
    not used up, whatever ``expert_consultations`` allows, 0 included)."""
    used = spent(journal)
    return used.answered > 0 and used.refusal(settings) is not None


async def escalate(
    run: Run, deps: RunDeps, failures: Sequence[FailedCall], reason: str = ""
) -> Outcome:
    """The run is stuck: ``failures`` (the streak, oldest first; maybe none), or ``reason``
    (why, when no streak says it: words that follow "I'm stuck: ", as "finish was
    called twice with no change made"). Delegate (:func:`core.run.delegation.delegate`)
    when :func:`delegable`; otherwise, or when the expert's work is not usable, ask the
    people (:func:`ask_people`).

    The outcome: ``continue`` when the expert's work was merged (the run goes on),
    ``wait`` for a person (the people's answer, or a decision inside the delegation),
    ``suspended`` or ``done``.
    """
    if delegable(run, failures):
        outcome = await delegate(run, deps, failures, reason)
        if outcome.name != NOT_USABLE:
            return outcome
    return await ask_people(run, deps, failures, reason)


async def ask_people(
    run: Run, deps: RunDeps, failures: Sequence[FailedCall], reason: str = ""
) -> Outcome:
    """Ask the people in the thread for help (:func:`core.requests.escalation.open_escalation`),
    in the escalation's trace span: ``wait``."""
    log.info("conversation %s: asking the people for help", run.conversation_id)
    change = open_escalation(run.snap, failures, run.opening, reason=reason)
    with run.span.escalation("people", len(failures), why_of(reason)):
        await live.commit(run, deps.journal, change)
    return WAIT


class Delegating:
    """Go on with the delegation the run is in (:func:`core.run.delegation.open_delegation`:
    it waited for a person inside it, or the process died there), before anything
    else of the round; ask the people when its work is not usable. ``continue`` when
    there is none, or its work was merged; else the flow it stopped at."""

    def __init__(self, deps: RunDeps) -> None:
        self._deps = deps

    async def go(self, run: Run) -> Outcome:
        """The open delegation, to its end."""
        opened = open_delegation(run.snap.journal)
        if opened is None:
            return CONTINUE
        entry = opened[1]
        outcome = await Delegation(self._deps, entry).go(run)
        if outcome.name != NOT_USABLE:
            return outcome
        return await ask_people(run, self._deps, entry.failures, entry.reason)


class Escalate:
    """Escalate (:func:`escalate`) when the failure streak reaches ``failure_limit``: its
    outcome then (``continue`` after the expert's work was merged, ``wait`` for the
    people...), else ``continue``."""

    def __init__(self, deps: RunDeps) -> None:
        self._deps = deps

    async def go(self, run: Run) -> Outcome:
        """Escalate when the run is stuck."""
        deps, snap = self._deps, run.snap
        tools = {tool.spec.name for tool in deps.toolbox}
        streak = failure_streak(snap.journal, snap.tool_calls, tools)
        limit = run.settings.failure_limit
        if len(streak) < limit:
            return CONTINUE
        log.info("conversation %s: stuck after %d failures", run.conversation_id, len(streak))
        return await escalate(run, deps, streak)


class Stuck:
    """Escalate when the run is stuck on nudges (:func:`core.run.nudges.stuck`: a second
    early finish or reply in prose since a person spoke), with the reason and what went
    wrong, as a failure streak does (:func:`escalate`: the expert first when one is
    set, else the people): its outcome then, else ``continue``."""

    def __init__(self, deps: RunDeps) -> None:
        self._deps = deps

    async def go(self, run: Run) -> Outcome:
        """Commit the escalation when the run is stuck on nudges."""
        found = stuck(run.snap)
        if found is None:
            return CONTINUE
        reason, _why, shown = found
        log.info("conversation %s: stuck: %s", run.conversation_id, reason)
        return await escalate(run, self._deps, shown, reason)
