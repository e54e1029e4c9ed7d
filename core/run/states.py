"""The workflow's own states in a run: fixed actions, people's steps, waits and ends.

The agent goes through :class:`States` after the tool steps of each round
(:mod:`core.run.agent`). At an ``agent`` state it lets the model step go on; at any
other it does that state's work and moves on by its outcome
(:func:`core.workflows.moves.follow`, :func:`core.run.arrivals.arrival`), until an
agent state, a wait for a person, or the end (docs/architecture.md, "Workflows"):

- ``action``: the workflow journals a turn of its own (``AssistantTurn.workflow``)
  with the one call (``run_command`` for a command, or the state's tool with its
  arguments; ``{check_command}`` and ``{request}`` filled in), admitted and run as a
  model's call is (policy, approvals, sandbox, exactly-once); its record's end is the
  outcome: ``passed`` (``done``), ``failed``, ``error`` (denied, interrupted, unknown);
- ``human``: ``approve`` proposes the state's fixed plan (a ``propose_plan`` call of the
  workflow's: its approval is the plan approval for the policy); ``question`` and
  ``choose`` ask with an ``ask_user`` call (the answer is ``answered``, or the option
  it names by number or word; an answer naming none is asked again); ``plan`` waits on
  the plan the model proposed (reached here without one: ``error``);
- ``wait``: for a person, a question as above; for a duration or until a time, a
  :class:`core.vocabulary.requests.WaitRequest` whose ``expires_at`` is the timer
  (``waiting(timer)``); the sweeper fires it once and :func:`timed_out` moves on;
- ``end``: the run ends with the state's message (:func:`core.run.arrivals.arrival`).

Everything is read from the journal each time: a run killed anywhere in a state goes
on from there (the call the workflow made is found again, not made twice).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from datetime import datetime

from core.context import random_id
from core.run import live
from core.run.admission import admit_turn, denial_notes
from core.run.arrivals import arrival, fill, moves_on, placeholders
from core.run.close_calls import close_open_calls, expired
from core.run.compose import CONTINUE, DONE, SUSPENDED, Flow, Outcome
from core.run.deps import RunDeps
from core.run.failing import Fail
from core.run.state import Run
from core.run.steps import ToolSteps
from core.run.tool_calls import ToolCalls
from core.tools import control
from core.vocabulary import lifecycle
from core.vocabulary.entries import (
    WORKFLOW_CALL_ID,
    AssistantTurn,
    StepEntered,
    ToolCall,
    ToolResultEntry,
)
from core.vocabulary.journal import Change, RequestResolution
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import PendingRequest, RequestState, WaitRequest
from core.vocabulary.run_events import ProgressNote
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import FINAL_TOOL_STATES, ToolCallRecord, ToolState
from core.workflows.model import Outcome as On
from core.workflows.model import State, StateKind, Workflow, parse_duration
from core.workflows.moves import follow

MOVES_PER_ROUND = 64
"""At most this many states passed through in one round without a model turn or a wait
(the load checks cap every loop; this keeps a bug from spinning)."""


class States:
    """The workflow's states that are not the model's (see the module docstring):
    ``continue`` at an agent state, ``wait`` for a person or a timer, ``done`` at an
    end, ``suspended`` when the process stops."""

    def __init__(self, deps: RunDeps) -> None:
        self._deps = deps

    async def go(self, run: Run) -> Outcome:
        """Do the states' work until an agent state, a wait or the end."""
        for _ in range(MOVES_PER_ROUND):
            if run.snap.status.lifecycle is not Lifecycle.RUNNING:
                return DONE
            if self._deps.suspended():
                return SUSPENDED
            state = run.workflow.state(run.snap.position)
            if state.kind is StateKind.AGENT:
                header = run.workflow.workflow
                strategy = state.context or header.context.strategy
                keep = header.context.keep_turns or run.settings.context_keep_turns
                run.scope = run.scope.at_state(strategy or run.settings.context_strategy, keep)
                return CONTINUE
            flow = await self._step(run, state)
            if flow is not Flow.CONTINUE:
                return Outcome(flow)
        await self._move(run, On.ERROR, note="the workflow went round too many states at once")
        return CONTINUE

    async def _step(self, run: Run, state: State) -> Flow:
        snap = run.snap
        match state.kind:
            case StateKind.END:
                await self._commit(run, await self._arrive(run, snap.position, snap.status))
                return Flow.DONE
            case StateKind.WAIT if not state.person:
                await self._commit(run, timer(run, state))
                return Flow.WAIT
            case StateKind.HUMAN if state.ask == "plan":
                return await self._move(run, On.ERROR, note="no plan was proposed to approve")
            case _:
                return await self._by_call(run, state)

    async def _by_call(self, run: Run, state: State) -> Flow:
        """A state whose work is one call of the workflow's own: made, run, read."""
        snap = run.snap
        found = own_call(snap)
        if found is None:
            return await self._make_call(run, state)
        call, record = found
        if record.state not in FINAL_TOOL_STATES:  # approved since, say: it runs now
            return (await ToolSteps(self._deps).go(run)).flow
        if state.kind is StateKind.ACTION:
            outcome = {ToolState.DONE: On.PASSED, ToolState.FAILED: On.FAILED}.get(
                record.state, On.ERROR
            )
            if outcome == On.ERROR:  # denied (its note says why), interrupted, unknown
                said = f"the {snap.position} step's {call.name} call was {record.state.value}"
                return await self._move(run, outcome, note=said)
            return await self._move(run, outcome)
        if record.state is not ToolState.DONE:
            return await self._move(run, On.ERROR, note="the question was not answered")
        if state.kind is StateKind.HUMAN and state.ask == "choose":
            chosen = chosen_option(state.options, _result(snap, call.id))
            if chosen is None:
                return await self._make_call(run, state, again=True)
            return await self._move(run, chosen)
        return await self._move(run, On.ANSWERED)

    async def _make_call(self, run: Run, state: State, *, again: bool = False) -> Flow:
        snap = run.snap
        call = ToolCall(id=WORKFLOW_CALL_ID + random_id(20), **_call_of(run, state, again=again))
        turn = AssistantTurn(tool_calls=(call,), workflow=snap.position, stop_reason="tool_use")
        deps = self._deps
        records, denials = admit_turn(
            turn,
            snap.last_seq + 1,
            snap,
            run.workflow,
            deps.toolbox,
            run.settings.tool_policy,
            expert=False,
        )
        change = Change(
            entries=(turn, *denials), tool_calls=records, events=denial_notes(turn, denials)
        )
        tools = ToolCalls(run, deps)
        ending = tools.ends_at_once(records)
        if ending is not None:  # a plan or a question: the turn and its request, one commit
            return await tools.end_with(change, ending)
        await self._commit(run, change)
        return (await ToolSteps(deps).go(run)).flow  # the call runs now

    async def _move(self, run: Run, outcome: str, *, note: str = "") -> Flow:
        snap = run.snap
        target = follow(run.workflow, snap, outcome)
        again = target == snap.position and moves_on(run.workflow, snap.position, outcome)
        if target == snap.position and not again:
            return await _fail(run, self._deps, note or f"the {snap.position} step ended {outcome}")
        change = await self._arrive(run, target, snap.status, again=again)
        if note:
            said = ProgressNote(text=f"{outcome}: {note}", step=snap.position, mark="⚠️")
            change = Change(events=(said,)).then(change)
        await self._commit(run, change)
        return Flow.CONTINUE

    async def _arrive(
        self, run: Run, target: str, status: lifecycle.Status, *, again: bool = False
    ) -> Change:
        snap = run.snap
        stats = None
        if run.workflow.state(target).kind is StateKind.END:
            stats = await ToolCalls(run, self._deps).with_changes(
                snap, run.totals.of(snap.journal, run.context.now())
            )
        return arrival(
            run.workflow,
            snap,
            target,
            status=status,
            settings=run.settings,
            stats=stats,
            again=again,
        )

    async def _commit(self, run: Run, change: Change) -> None:
        await live.commit(run, self._deps.journal, change)


async def _fail(run: Run, deps: RunDeps, error: str) -> Flow:
    await Fail(deps).go_with(run, f"The workflow cannot go on: {error}.")
    return Flow.DONE


def own_call(snap: ConversationSnapshot) -> tuple[ToolCall, ToolCallRecord] | None:
    """The call the workflow made at the conversation's position since it was entered
    (its newest), with its record; None when it made none yet."""
    for record in reversed(snap.journal):
        entry = record.entry
        if isinstance(entry, AssistantTurn) and entry.workflow == snap.position:
            if not entry.tool_calls:
                return None
            call = entry.tool_calls[0]
            found = snap.tool_calls.get(call.id)
            return None if found is None else (call, found)
        if isinstance(entry, StepEntered) and entry.position == snap.position:
            return None
    return None


def _call_of(run: Run, state: State, *, again: bool) -> dict[str, object]:
    """``name`` and ``input`` of the call ``state`` makes."""
    values = placeholders(run.snap, run.settings)
    match state.kind:
        case StateKind.ACTION if state.command:
            return {"name": control.RUN_COMMAND, "input": {"command": command_of(state, values)}}
        case StateKind.ACTION:
            args = {key: fill(value, values) for key, value in state.args.items()}
            return {"name": state.tool, "input": args}
        case StateKind.HUMAN if state.ask == "approve":
            steps, tools = fixed_plan(run.workflow, state, values)
            return {"name": control.PROPOSE_PLAN, "input": {"steps": steps, "tools": tools}}
        case _:
            prompt = fill(state.prompt or state.description, values)
            if state.kind is StateKind.HUMAN and state.ask == "choose":
                if again:
                    prompt += " (answer with one of the numbers)"
                asked = {"question": prompt, "options": list(state.options)}
                return {"name": control.ASK_USER, "input": asked}
            return {"name": control.ASK_USER, "input": {"question": prompt}}


def command_of(state: State, values: dict[str, str]) -> str:
    """The command an action runs, its placeholders filled in; the request's words are
    quoted for the shell (``{request}`` is the requester's text, never shell code)."""
    quoted = {**values, "request": shlex.quote(values.get("request", ""))}
    return fill(state.command, quoted)


def fixed_plan(
    workflow: Workflow, state: State, values: dict[str, str]
) -> tuple[list[str], list[str]]:
    """The steps and tools of the plan a human ``approve`` step proposes: its own steps,
    then each command the workflow's actions run that no step shows as it will run,
    and the tools of its actions beside its own, so the person approves what runs."""
    steps = [fill(step, values) for step in state.steps]
    tools = list(state.tools)
    for action in workflow.states.values():
        if action.kind is not StateKind.ACTION:
            continue
        tool = action.tool or control.RUN_COMMAND
        if tool not in tools:
            tools.append(tool)
        shown = command_of(action, values) if action.command else ""
        if shown and not any(f"`{shown}`" in step for step in steps):
            steps.append(f"Run `{shown}`")
        elif action.tool:
            args = ", ".join(f"{k}={fill(v, values)!r}" for k, v in action.args.items())
            steps.append(f"Call {action.tool}({args})")
    return steps, tools


_NUMBER = re.compile(r"^\s*(\d+)\b")


def chosen_option(options: tuple[str, ...], answer: str) -> str | None:
    """The option ``answer`` names: by its number (``2``, ``2.``) or by its words
    (case does not matter); None when it names none."""
    words = answer.strip().lower()
    for option in options:
        if words == option.lower():
            return option
    found = _NUMBER.match(words)
    if found is not None and 1 <= int(found.group(1)) <= len(options):
        return options[int(found.group(1)) - 1]
    return None


_CHOSE = re.compile(r" chose option (\d+): ")


def _result(snap: ConversationSnapshot, tool_use_id: str) -> str:
    """The answer a question got: its call's result, without the ``<name> answered:`` it
    opens with, or, for ``<name> chose option 2: <option>``, the option's number
    (:mod:`core.requests.question`)."""
    for record in reversed(snap.journal):
        entry = record.entry
        if isinstance(entry, ToolResultEntry) and entry.tool_use_id == tool_use_id:
            content = entry.content
            answered, chose = content.find(" answered: "), _CHOSE.search(content)
            if chose is not None and (answered < 0 or chose.start() < answered):
                return chose.group(1)
            return content.split(" answered: ", 1)[-1]
    return ""


def timer(run: Run, state: State) -> Change:
    """The change that starts ``state``'s wait: a :class:`WaitRequest` firing after its
    ``duration`` or at its ``until`` (at once when that has passed), and a note."""
    now = run.context.now()
    if state.duration:
        fires = now + parse_duration(state.duration)
    else:
        fires = max(datetime.fromisoformat(state.until), now)
    request = WaitRequest(
        id=run.opening.new_id(),
        prompt=f"Waiting until {fires:%Y-%m-%d %H:%M} UTC",
        expires_at=fires,
    )
    note = ProgressNote(
        text=f"waiting until {fires:%Y-%m-%d %H:%M} UTC", step=run.snap.position, mark="⏳"
    )
    return Change(
        open_request=request,
        status=lifecycle.move(run.snap.status, lifecycle.waiting(request.wait)),
        events=(note,),
    )


def expiry(
    run: Run, request: PendingRequest, read_only: Callable[[str], bool]
) -> tuple[Change, bool]:
    """The change of ``request``'s expiry, and whether the run goes on after it: at a state
    that times out (:func:`times_out`) the move along ``timeout`` (:func:`timed_out`);
    else the conversation ends ``cancelled`` (:func:`core.run.close_calls.expired`)."""
    if times_out(run, request):
        return timed_out(run, request, read_only), True
    return expired(run.snap, request.id, read_only), False


def times_out(run: Run, request: PendingRequest) -> bool:
    """Whether ``request``'s expiry moves the workflow on (a timer, or a state with a
    ``timeout`` transition) rather than ending the conversation."""
    state = run.workflow.state(run.snap.position)
    return isinstance(request, WaitRequest) or On.TIMEOUT in state.on


def timed_out(run: Run, request: PendingRequest, read_only: Callable[[str], bool]) -> Change:
    """The change of ``request``'s expiry at a state that moves on: the request
    ``expired`` (compare-and-set: fired once), every open call closed, the run
    ``running`` again at the state ``timeout`` leads to."""
    snap = run.snap
    closing = close_open_calls(snap, "no answer in time", read_only)
    resolution = RequestResolution(request_id=request.id, state=RequestState.EXPIRED)
    target = follow(run.workflow, snap, On.TIMEOUT)
    moved = arrival(run.workflow, snap, target, status=snap.status, settings=run.settings)
    return Change(entries=closing.results, tool_calls=closing.records, resolve=(resolution,)).then(
        moved
    )
