"""The plan a run carries out, read from its journal: the steps, which are done, which is next.

The newest plan approved since the conversation's newest task began is the task list.
A task begins with a request that moved the conversation to another step (its
:class:`~core.vocabulary.entries.StepEntered` journaled just before it: a first
request, a request after an answer or a stop); a request that carries a failed run on
where it failed keeps the step, and the plan. A step is done when a
``report_progress`` call names a later step ("step 3 of 4" makes steps 1 and 2 done),
and every step is done once the run calls ``finish`` (the expert's calls in a
delegation count for nothing here). Control calls are read through
:mod:`core.tools.control` (never by their names here); a call that was denied counts
for nothing, and so does a refused ``finish`` (:mod:`core.run.nudges`). Everything is
derived from the snapshot, so a restarted run reads the same plan (docs/architecture.md,
"Context strategies and notes").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.tools import control
from core.vocabulary.entries import AssistantTurn, JournalRecord, StepEntered, UserText
from core.vocabulary.requests import PlanApproval, RequestState
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolState
from core.vocabulary.verdicts import Approved


@dataclass(frozen=True)
class Plan:
    """An approved plan: its ``version``, its ``steps`` (in order), how many of them are
    ``done`` (the first ones), the request it carries out (its first line), the
    ``tools`` it says its steps need (as proposed) and ``turn_seq``, the journal
    ``seq`` of the model turn that proposed it."""

    version: int
    steps: tuple[str, ...]
    done: int
    request: str
    tools: tuple[str, ...] = ()
    turn_seq: int = 0

    @property
    def current(self) -> int | None:
        """The index (from 0) of the step in hand: the first one not done; None when all are."""
        return self.done if self.done < len(self.steps) else None

    def is_done(self, task: str) -> bool:
        """Whether the step whose text is ``task`` is done (False for no step of the plan)."""
        return any(step == task for step in self.steps[: self.done])


def request_of(snapshot: ConversationSnapshot) -> str:
    """The first line of the conversation's newest request ("" when it has none)."""
    for record in reversed(snapshot.journal):
        entry = record.entry
        if isinstance(entry, UserText) and entry.role == "request":
            return entry.text.strip().splitlines()[0] if entry.text.strip() else ""
    return ""


def current_plan(snapshot: ConversationSnapshot) -> Plan | None:
    """The newest plan approved since the newest task began, with its steps done; None
    when none was approved since. Reads the journal back to that task's request only."""
    approved = {
        r.tool_use_id: r.plan_version
        for r in snapshot.requests
        if isinstance(r, PlanApproval)
        and r.state is RequestState.DECIDED
        and isinstance(r.verdict, Approved)
    }
    if not approved:
        return None
    journal = snapshot.journal
    start = next((i for i in range(len(journal) - 1, -1, -1) if _begins_task(journal, i)), 0)
    plan: Plan | None = None
    for record in journal[start:]:
        if not isinstance(record.entry, AssistantTurn):
            continue
        if record.entry.experts:
            continue  # a delegation's: its finish hands the work back, it ends no step
        for call in record.entry.tool_calls:
            held = snapshot.tool_calls.get(call.id)
            if held is not None and held.state in (ToolState.DENIED, ToolState.FAILED):
                continue
            if call.id in approved:
                proposed = control.proposed_plan(call.name, call.input)
                if proposed is not None:
                    plan = Plan(
                        approved[call.id],
                        tuple(proposed.steps),
                        0,
                        request_of(snapshot),
                        tools=tuple(proposed.tools),
                        turn_seq=record.seq,
                    )
            elif plan is not None:
                plan = _advanced(plan, call.name, call.input)
    return plan


def _begins_task(journal: Sequence[JournalRecord], i: int) -> bool:
    """Whether ``journal[i]`` is a request that began a task: one journaled with the step
    it moved the conversation to (the step's entry just before it)."""
    entry = journal[i].entry
    if not (isinstance(entry, UserText) and entry.role == "request"):
        return False
    return i == 0 or isinstance(journal[i - 1].entry, StepEntered)


def _advanced(plan: Plan, name: str, args: Mapping[str, Any]) -> Plan:
    """``plan`` after a call of ``name``: later steps named, or all done at ``finish``."""
    if control.finishes(name):
        return dataclasses.replace(plan, done=len(plan.steps))
    step = control.progress_step(name, args)
    number = control.step_number(step) if step else None
    if number is None:
        return plan
    done = max(plan.done, min(number - 1, len(plan.steps)))
    return dataclasses.replace(plan, done=done)
