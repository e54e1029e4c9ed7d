"""What arriving at a workflow state commits: the entry, the status, what people see.

Pure functions over the snapshot (docs/architecture.md, "Workflows"): where an outcome
leads is :func:`core.workflows.moves.follow`; :func:`arrival` is the change of
entering that state (a ``StepEntered`` entry, where it matters to people a progress
note naming it, and at an ``end`` state the run's end with its answer);
:func:`finished` is what a ``finish`` (or a reply in prose where none was due) does
in a workflow: the answer, or, when ``finished`` leads to a state that is not an
end, the next state with the answer as a progress note.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from core.run.settings import EngineSettings
from core.tools import control
from core.vocabulary import lifecycle
from core.vocabulary.entries import AssistantTurn, ToolResultEntry, UserText, WorkflowChosen
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle, Status
from core.vocabulary.run_events import ProgressNote, RunAnswered, RunStats
from core.vocabulary.snapshot import ConversationSnapshot
from core.workflows.model import Outcome, State, StateKind, Workflow
from core.workflows.moves import follow

OUTPUT_SHOWN = 3000
"""Characters of an action's output an ``end`` message's ``{last_output}`` shows (its end,
:func:`shown_output`); the adapters split a message past their platform's limit."""

MARK = "➡️"
"""The mark of the progress note of a state the workflow entered by itself."""


def arrival(
    workflow: Workflow,
    snap: ConversationSnapshot,
    target: str,
    *,
    status: Status,
    settings: EngineSettings,
    stats: RunStats | None = None,
    answer: str = "",
    again: bool = False,
) -> Change:
    """The change of entering ``target`` from the conversation's position, ``status``
    being its status before (``running``, or ``waiting`` when a timer fired: it runs
    again). At an ``end`` state the run ends ``done`` (``failed`` for an end whose
    ``status`` says so) with ``answer``, or the state's message filled in
    (:func:`end_message`), and ``stats`` as its footer; at another state it goes on,
    with a progress note of the state's description when it has one and is not a
    person's step (their request says it). An end's own message comes before ``answer``
    (the model's answer is then a progress note before it). ``again``: a transition
    from a state to itself, entered again (and counted toward its ``max_visits``)."""
    state = workflow.state(target)
    entered = workflow.entered(snap.position, target, first=again)
    if state.kind is StateKind.END:
        failed = state.status == "failed"
        message = end_message(state, snap, settings)
        said = (ProgressNote(text=answer, step=snap.position),) if answer and message else ()
        text = message or answer or "Done."
        ended = lifecycle.FAILED if failed else lifecycle.DONE
        running = _running(status)
        answered = RunAnswered(
            text=text,
            stats=stats or RunStats(),
            workflow=workflow.name,
            mark="❌" if failed else "✅",
        )
        return Change(
            entries=entered,
            position=target,
            status=lifecycle.move(running, ended),
            events=(*said, answered),
        )
    notes: tuple[ProgressNote, ...] = ()
    if state.description and not state.waits_for_person and entered:
        notes = (ProgressNote(text=state.description, step=target, mark=MARK),)
    waiting = status.lifecycle is not Lifecycle.RUNNING
    return Change(
        entries=entered,
        position=target,
        status=lifecycle.move(status, lifecycle.RUNNING) if waiting else None,
        events=notes,
    )


def _running(status: Status) -> Status:
    """``status`` as it is when running, else moved to ``running``."""
    return (
        status
        if status.lifecycle is Lifecycle.RUNNING
        else lifecycle.move(status, lifecycle.RUNNING)
    )


def finished(
    workflow: Workflow,
    snap: ConversationSnapshot,
    answer: str,
    stats: RunStats,
    settings: EngineSettings,
) -> Change:
    """The model finished its state with ``answer``: where ``finished`` leads, the run
    ends with the answer (an ``end`` state), or goes on there, the answer kept as a
    progress note."""
    target = follow(workflow, snap, Outcome.FINISHED)
    again = target == snap.position and moves_on(workflow, snap.position, Outcome.FINISHED)
    if workflow.state(target).kind is StateKind.END:
        return arrival(
            workflow,
            snap,
            target,
            status=snap.status,
            settings=settings,
            stats=stats,
            answer=answer,
        )
    if target == snap.position and not again:  # leads nowhere: the answer ends the run
        answered = RunAnswered(text=answer, stats=stats, workflow=workflow.name)
        return Change(status=lifecycle.move(snap.status, lifecycle.DONE), events=(answered,))
    moved = arrival(workflow, snap, target, status=snap.status, settings=settings, again=again)
    note = ProgressNote(text=answer, step=snap.position)
    return moved.model_copy(update={"events": (note, *moved.events)})


def ends_run(workflow: Workflow, snap: ConversationSnapshot) -> bool:
    """Whether a ``finish`` at the conversation's position ends the run (``finished``
    leads to an end, or nowhere) rather than moving it on."""
    target = follow(workflow, snap, Outcome.FINISHED)
    if workflow.state(target).kind is StateKind.END:
        return True
    return target == snap.position and not moves_on(workflow, snap.position, Outcome.FINISHED)


def moves_on(workflow: Workflow, state: str, outcome: str) -> bool:
    """Whether ``state`` names a transition for ``outcome`` (to itself, maybe): a state
    that leads back to itself is entered again, not left where it is."""
    return workflow.target(state, outcome) is not None


def end_message(state: State, snap: ConversationSnapshot, settings: EngineSettings) -> str:
    """An ``end`` state's message with its placeholders filled in: ``{check_command}``
    (:func:`check_command`), ``{request}`` (the newest request's words), ``{last_output}`` (the end
    of the newest fixed action's result, :func:`shown_output`) and ``{runs}``
    (how many fixed actions ran since the request)."""
    return fill(state.message, placeholders(snap, settings))


def fill(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each ``{name}`` of ``values`` replaced (other braces left as they are),
    in one pass: a value that holds ``{name}`` (a request's words) is not filled in again."""
    return _PLACEHOLDER.sub(lambda found: values.get(found.group(1), found.group(0)), text)


_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def placeholders(snap: ConversationSnapshot, settings: EngineSettings) -> dict[str, str]:
    """The values a workflow's texts may name (see :func:`end_message`)."""
    request = ""
    runs = 0
    last_call = ""
    results: dict[str, str] = {}
    for record in reversed(snap.journal):
        entry = record.entry
        if isinstance(entry, ToolResultEntry):
            results.setdefault(entry.tool_use_id, entry.content)
        elif isinstance(entry, AssistantTurn) and entry.workflow and _acts(entry):
            runs += 1
            last_call = last_call or entry.tool_calls[0].id
        elif isinstance(entry, UserText) and entry.role == "request":
            request = entry.text
            break
    output = shown_output(results.get(last_call, ""))
    return {
        "check_command": check_command(snap, settings),
        "request": request,
        "last_output": output.strip() or "(no output)",
        "runs": str(runs),
    }


def shown_output(output: str) -> str:
    """``output`` as an ``end`` message shows it in a code block: its last
    :data:`OUTPUT_SHOWN` characters from a line's start (``…`` on a line of its own
    first when cut), each run of three backticks or more broken with zero-width spaces,
    so no line of it closes the message's code block early (a fence on Slack, Discord
    and CommonMark alike)."""
    if len(output) > OUTPUT_SHOWN:
        tail = output[-OUTPUT_SHOWN:]
        start = tail.find("\n")
        if output[-OUTPUT_SHOWN - 1] != "\n" and 0 <= start < len(tail) - 1:
            tail = tail[start + 1 :]  # the cut line's end, dropped
        output = "…\n" + tail
    return _FENCE.sub(lambda found: "\u200b".join(found.group()), output)


_FENCE = re.compile(r"`{3,}")


def check_command(snap: ConversationSnapshot, settings: EngineSettings) -> str:
    """What ``{check_command}`` stands for in the conversation: the command journaled when
    its workflow was chosen (:class:`core.vocabulary.entries.WorkflowChosen`: the plan a
    person approved names it), else, journaled before it was kept or with no workflow
    chosen, the ``check_command`` setting's. Read from the start of the journal (the
    choice comes before the first request)."""
    for record in snap.journal:
        entry = record.entry
        if isinstance(entry, WorkflowChosen):
            if entry.check_command is not None:
                return entry.check_command
            break
        if isinstance(entry, UserText) and entry.role == "request":
            break
    return settings.check_command


def _acts(turn: AssistantTurn) -> bool:
    """Whether the workflow's ``turn`` is a fixed action (not its plan or question)."""
    return bool(turn.tool_calls) and not control.ends_turn(turn.tool_calls[0].name)
