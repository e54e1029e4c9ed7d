"""Refusals and nudges, decided outside the model: an early ``finish``, a reply in prose.

The model does not decide when it is done; the run tells from what happened
(docs/architecture.md, "The agent as a composition"):

- an early finish: ``finish`` while the approved plan names a tool that changes
  something (a ``mutating`` tool among the plan's ``tools``) and no call of such a
  tool has succeeded since the plan was proposed. The first is refused: the call
  ends ``failed`` with the reason as its result and the run goes on. A plan of
  reading and answering (no mutating tool named) is never refused, nor a finish
  after a person or the policy denied such a call (the change was refused, not
  forgotten);
- a reply in prose where a tool call was due: a turn without tool calls at a
  workflow position whose tools include ``finish`` (every position the model works
  in, in the default workflow) is not the run's answer: the first is answered by a
  note the model reads in the next user message (a journaled
  :class:`~core.vocabulary.entries.Nudged`, not a change of the system prompt, so
  the cached prefix holds), and the run goes on.

Each is a :class:`~core.vocabulary.entries.Nudged` entry, a progress note in the
thread and a ``threadbot.nudge`` span. A second of the same kind since a person
last gave the run its word (a request, an answer, a decision) is journaled the same
way, and :class:`core.run.escalation.Stuck`, the agent's step after the failure
streak's, escalates as the streak does (:func:`core.run.escalation.escalate`: the
expert first when one is set, then the people, with what went wrong attached). Counted from the
journal, so a restart does not reset it, and a run killed between the second nudge
and its escalation escalates when it goes on.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from typing import Literal

from core.contexts.plan import current_plan
from core.models.base import ToolKind
from core.policy.summary import shorten
from core.requests.escalation import EARLY_FINISH, PROSE
from core.run import live
from core.run.compose import CONTINUE, Outcome
from core.run.deps import RunDeps
from core.run.state import Run
from core.tool_state import move
from core.tools import control
from core.tools.base import Toolbox
from core.vocabulary.entries import (
    AssistantTurn,
    DecisionEntry,
    Delegated,
    DelegationEnded,
    Escalated,
    FailedCall,
    FailuresReset,
    JournalRecord,
    Nudged,
    UserText,
)
from core.vocabulary.journal import Change
from core.vocabulary.run_events import ProgressNote, RunStats
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord, ToolState
from core.workflows.model import Workflow

log = logging.getLogger(__name__)

Why = Literal["early_finish", "prose"]

PROSE_NOTE = (
    "your last reply had no tool call, and one is due here: call finish with the answer "
    "if the work is done, ask_user to ask the people, or the next tool to go on"
)
"""What the model reads after a reply in prose."""
REMINDED = "reminded the model to end its reply with an answer or a next step"
"""What the thread reads after the first reply in prose (the second escalates)."""
SHOWN = 300
"""Characters of a reply or an answer the people are shown when the run escalates."""


def early_finish(snap: ConversationSnapshot, toolbox: Toolbox) -> str | None:
    """Why a ``finish`` now is early (see the module docstring), or None when it is not.

    Reads the approved plan (:func:`core.contexts.plan.current_plan`) and the tool call
    records of the turns since the one that proposed it (the expert's calls count only
    when its delegation's work was merged: a fork's changes are not the workspace's).
    """
    plan = current_plan(snap)
    if plan is None:
        return None
    changes = [t for t in plan.tools if toolbox.kind(t) is ToolKind.MUTATING]
    if not changes:
        return None
    discarded = _discarded_turns(snap.journal, plan.turn_seq)
    since = [
        r
        for r in snap.tool_calls.values()
        if r.turn_seq > plan.turn_seq
        and r.turn_seq not in discarded
        and toolbox.kind(r.name) is ToolKind.MUTATING
    ]
    if any(r.state in (ToolState.DONE, ToolState.DENIED) for r in since):
        return None
    return f"the approved plan needs {', '.join(changes)}, and no change has been made yet"


def _discarded_turns(journal: Sequence[JournalRecord], after: int) -> set[int]:
    """The ``seq`` of the expert's turns after ``after`` in delegations whose work was not
    merged (their changes stayed in a fork: they made no change to the workspace)."""
    discarded: set[int] = set()
    pending: list[int] = []
    for record in journal:
        entry = record.entry
        if record.seq <= after:
            continue
        if isinstance(entry, AssistantTurn) and entry.experts:
            pending.append(record.seq)
        elif isinstance(entry, DelegationEnded):
            if entry.outcome != "merged":
                discarded.update(pending)
            pending = []
    return discarded


def calls_due(workflow: Workflow, toolbox: Toolbox, position: str) -> bool:
    """Whether a reply at ``position`` must call a tool: its tools include ``finish``
    (the run ends with that call, not with prose). False at a position the workflow
    does not know."""
    found = workflow.states.get(position)
    if found is None:
        return False
    return any(control.finishes(t.spec.name) for t in toolbox.select(found.tools))


def nudged_since_word(journal: Sequence[JournalRecord], why: Why) -> list[tuple[int, Nudged]]:
    """The nudges of kind ``why`` (each with its ``seq``) since a person last gave the run
    its word (a request, an answer, plan feedback, a decision; an escalation's
    answer) or the expert's work was merged, oldest first. Reads back only that far."""
    found: list[tuple[int, Nudged]] = []
    for record in reversed(journal):
        entry = record.entry
        if isinstance(entry, Nudged) and entry.why == why:
            found.append((record.seq, entry))
        elif (
            isinstance(entry, DecisionEntry | FailuresReset)
            or (isinstance(entry, UserText) and entry.role != "note")
            or (isinstance(entry, DelegationEnded) and entry.outcome == "merged")
        ):
            break
    return found[::-1]


def refuse_finish(run: Run, record: ToolCallRecord, reason: str, *, again: bool) -> Change:
    """The ``finish`` call ``record`` refused for ``reason`` (:func:`early_finish`): the
    call ends ``failed`` with the reason as its result, with a ``Nudged`` entry and a
    progress note, in a ``threadbot.nudge`` span; the run goes on. ``again``: the run
    refused one since a person spoke, so this one escalates (:class:`core.run.escalation.Stuck`,
    the next step of the round) and the result says so."""
    if again:
        said = (
            f"finish refused again: {reason}. You are stuck here, so threadbot hands this "
            "on (to the expert, or to the people in the thread); what they say comes next."
        )
    else:
        said = (
            f"finish refused: {reason}. Make the change the plan asks for with the tools, "
            "or ask the people with ask_user why it cannot be made."
        )
    moved = move(record, ToolState.FAILED, result=said)
    nudge = Nudged(why="early_finish", text=reason, tool_use_id=record.tool_use_id)
    log.info("conversation %s: finish refused: %s", run.conversation_id, reason)
    with run.span.nudge("early_finish"):
        return Change(
            entries=(*moved.results, nudge),
            tool_calls=moved.records,
            events=(ProgressNote(text=f"finish refused: {reason}", mark="↩️"),),
        )


async def prose_reply(
    run: Run, deps: RunDeps, turn: AssistantTurn, totals: RunStats
) -> Outcome | None:
    """``turn``, a reply without tool calls, where a call was due (:func:`calls_due`):
    committed with a ``Nudged`` entry (the model reads its note next), the reply as a
    progress note and, the first time since a person spoke, :data:`REMINDED`, in a
    ``threadbot.nudge`` span: ``continue`` (a second escalates at the next step of the
    round, :class:`core.run.escalation.Stuck`). None when no call is due at the run's
    position: the reply is the run's answer."""
    snap = run.snap
    if not calls_due(run.workflow, deps.toolbox, snap.position):
        return None
    said = (ProgressNote(text=turn.text, totals=totals),) if turn.text else ()
    log.info("conversation %s: a reply in prose, nudged", run.conversation_id)
    again = bool(nudged_since_word(snap.journal, "prose"))  # the escalation says it then
    notes = () if again else (ProgressNote(text=REMINDED, mark="↩️"),)
    with run.span.nudge("prose"):
        await live.commit(
            run,
            deps.journal,
            Change(entries=(turn, Nudged(why="prose", text=PROSE_NOTE)), events=(*said, *notes)),
        )
    return CONTINUE


def stuck(snap: ConversationSnapshot) -> tuple[str, Why, tuple[FailedCall, ...]] | None:
    """Whether the run is stuck on nudges: two or more of one kind since a person last
    spoke, the newest not yet escalated (no ``Escalated`` entry after it). Then the
    words for the people (:data:`EARLY_FINISH`, :data:`PROSE`), the kind, and what
    went wrong (each refused finish's answer and why; each reply's text), oldest
    first; else None. Read from the journal, so a run killed between the nudge and its
    escalation escalates when it goes on. Costs the entries since the newest model turn
    unless a nudge is among them (only then may the run have become stuck): a long
    run reads no further back each round."""
    journal = snap.journal
    if not _nudged_since_turn(journal):
        return None
    kinds: tuple[tuple[Why, str], ...] = (("early_finish", EARLY_FINISH), ("prose", PROSE))
    for why, reason in kinds:
        nudges = nudged_since_word(journal, why)
        if len(nudges) < 2 or _escalated_since(journal, nudges[-1][0]):
            continue
        shown = tuple(_shown(snap, seq, nudge) for seq, nudge in nudges)
        return reason, why, shown
    return None


def _nudged_since_turn(journal: Sequence[JournalRecord]) -> bool:
    """Whether a nudge was journaled after the run's newest model turn (the expert's turns
    in a delegation passed over: a run killed between a delegation that was not usable
    and its question to the people still finds the nudges that made it stuck)."""
    for record in reversed(journal):
        entry = record.entry
        if isinstance(entry, Nudged):
            return True
        if isinstance(entry, AssistantTurn) and not entry.experts:
            return False
    return False


def _escalated_since(journal: Sequence[JournalRecord], seq: int) -> bool:
    """Whether the nudge at ``seq`` was escalated already: the people were asked after it,
    or the expert was handed the work and its delegation goes on or was merged (one
    whose work was not usable is followed by the question to the people, which a run
    killed in between has still to ask)."""
    not_usable = False
    for record in reversed(journal):
        entry = record.entry
        if record.seq <= seq:
            return False
        if isinstance(entry, Escalated):
            return True
        if isinstance(entry, DelegationEnded) and entry.outcome != "merged":
            not_usable = True
        elif isinstance(entry, Delegated):
            return not not_usable
    return False


def _shown(snap: ConversationSnapshot, seq: int, nudge: Nudged) -> FailedCall:
    """One nudge as the people see it: a refused finish's answer and why it was refused,
    or the reply in prose (the assistant turn just before the nudge at ``seq``)."""
    if nudge.why == "early_finish":
        held = snap.tool_calls.get(nudge.tool_use_id or "")
        answer = str(held.input.get("answer", "")) if held is not None else ""
        said = f"finish: {shorten(' '.join(answer.split()), SHOWN)}"
        return FailedCall(
            tool_use_id=nudge.tool_use_id or "", tool="finish", call=said, output=nudge.text
        )
    at = bisect.bisect_left(snap.journal, seq, key=lambda r: r.seq)
    before = snap.journal[at - 1].entry if at > 0 else None
    text = before.text if isinstance(before, AssistantTurn) else ""
    return FailedCall(
        tool_use_id="",
        tool="",
        call="a reply without a tool call",
        output=shorten(" ".join(text.split()), SHOWN) or "(no text)",
    )
