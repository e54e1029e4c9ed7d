"""What the model reads of each journal entry that is not a turn or a result, as content blocks.

A person's words (with the files shared with them), a workflow position's
instructions, a compaction's summary, a context strategy's note, and threadbot's own
notes (an escalation, a delegation's brief and end, a nudge) are each read as text
(and image or document) blocks of a user message, after the tool results
(:class:`core.run.history.History` places them; docs/architecture.md, "Context
strategies and notes").
"""

from __future__ import annotations

from typing import Any

from core.vocabulary.entries import (
    Compacted,
    ContextNote,
    DelegationBrief,
    DelegationEnded,
    Escalated,
    Nudged,
    StepEntered,
    UserText,
)

_ROLE_LABEL = {
    "request": "",
    "answer": " (answer)",
    "feedback": " (plan feedback)",
    "note": " (note while you work)",
    "instruction": " (interrupted you; the calls not yet run were cancelled)",
}


def user_text_block(entry: UserText | StepEntered) -> dict[str, Any]:
    """A person's words as a text block that names the speaker; a position's
    instructions as a block that names the step."""
    if isinstance(entry, StepEntered):
        return {
            "type": "text",
            "text": f"[threadbot: the {entry.position} step] {entry.instructions}",
        }
    return {"type": "text", "text": f"{entry.author.name}{_ROLE_LABEL[entry.role]}: {entry.text}"}


UserEntry = (
    UserText
    | StepEntered
    | Compacted
    | ContextNote
    | Escalated
    | DelegationBrief
    | DelegationEnded
    | Nudged
)
"""The entries the model reads in a user message, after the tool results."""


def context_note_block(entry: ContextNote) -> dict[str, Any]:
    """A context strategy's note as a text block that names the strategy (and the scope,
    when it is not the run's): ``[threadbot: task list] ...``."""
    label = entry.strategy.replace("_", " ")
    if entry.scope != "run":
        label += f", scope {entry.scope}"
    return {"type": "text", "text": f"[threadbot: {label}] {entry.text}"}


def escalated_block(entry: Escalated) -> dict[str, Any]:
    """An escalation as threadbot's note to the model: why the people were asked."""
    count = len(entry.failures)
    said = "the last call failed" if count == 1 else f"the last {count} calls failed in a row"
    if entry.reason:
        said = f"I'm stuck ({entry.reason})"
    text = f"[threadbot: {said}, so I asked the people in the thread for help]"
    return {"type": "text", "text": text}


def delegation_ended_block(entry: DelegationEnded) -> dict[str, Any]:
    """How a delegation to the expert ended, as threadbot's note to the run's model: its
    work merged into the workspace (and what showed it usable, the expert's summary),
    or not usable and why."""
    if entry.outcome == "merged":
        where = f"on the branch {entry.branch}" if entry.branch else "in a copy of the workspace"
        said = (
            f"you were stuck, so I handed the work to the expert; it fixed it {where}, "
            f"now merged into your workspace ({entry.why})"
        )
        if entry.summary:
            said += f". The expert's summary: {entry.summary}"
        said += ". Go on with the plan from here"
    else:
        said = (
            f"you were stuck, so I handed the work to the expert, who could not fix it: {entry.why}"
        )
    return {"type": "text", "text": f"[threadbot: {said}]"}


def user_blocks(entry: UserEntry) -> list[dict[str, Any]]:
    """The blocks of a person's message: the files shared with it first, as journaled
    (images before text work best: https://docs.anthropic.com/en/docs/build-with-claude/vision),
    then the words (left out when there are none beside the files); a position's
    instructions as one block (:func:`user_text_block`); a compaction's summary, then
    the step it was made in; a context note as one block (:func:`context_note_block`);
    an escalation as one block (:func:`escalated_block`); a nudge as threadbot's note
    (none for a refused ``finish``, whose result says it)."""
    if isinstance(entry, StepEntered) and not entry.instructions:
        return []  # a state without instructions: the model reads nothing of it
    if isinstance(entry, Nudged):
        return (
            []
            if entry.why == "early_finish"
            else [{"type": "text", "text": f"[threadbot: {entry.text}]"}]
        )
    if isinstance(entry, ContextNote):
        return [context_note_block(entry)]
    if isinstance(entry, Escalated):
        return [escalated_block(entry)]
    if isinstance(entry, DelegationEnded):
        return [delegation_ended_block(entry)]
    if isinstance(entry, DelegationBrief):
        return [{"type": "text", "text": entry.text}]
    if isinstance(entry, Compacted):
        summary = {
            "type": "text",
            "text": "[threadbot: the conversation before this point, summarized when it "
            f"grew long]\n{entry.summary}",
        }
        return [summary, user_text_block(entry.step)] if entry.step else [summary]
    if isinstance(entry, StepEntered) or not entry.files:
        return [user_text_block(entry)]
    files = [dict(block) for block in entry.files]
    return [*files, user_text_block(entry)] if entry.text.strip() else files
