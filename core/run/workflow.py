"""The run's workflow: which one a conversation runs, chosen when it starts, and kept.

A first request runs the channel's ``workflow`` setting, or the one it asks for with
``workflow=NAME`` when the channel allows it (``workflows``, with ``workflow`` itself
always allowed); a workflow it may not ask for is refused with the list of those it
may, and nothing starts (:func:`choose`). The choice is journaled with the
workflow's definition (:class:`core.vocabulary.entries.WorkflowChosen`), and every
later run reads it back from the journal (:func:`journaled`), so a file edited or a
bot restarted never changes a conversation under way; a conversation journaled before
workflows were chosen runs ``default`` (docs/architecture.md, "Workflows").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from core.run.settings import EngineSettings
from core.run.state import Run
from core.vocabulary.entries import JournalRecord, UserText, WorkflowChosen
from core.vocabulary.inputs import ThreadMessage, delivery_keys
from core.vocabulary.journal import Change
from core.vocabulary.run_events import WorkflowRefused
from core.workflows.loading import WorkflowLibrary
from core.workflows.model import Workflow

ASKED = re.compile(r"(?<![A-Za-z0-9=/-])workflow=(\S*)", re.IGNORECASE)
"""``workflow=NAME`` in a request (a word of its own, in any case): the workflow it asks
for, whatever ``NAME`` holds (a name no workflow has is refused, never passed over)."""

_AROUND = "\"'`*_~.,;:!?()[]{}<>“”‘’«»"
"""Characters around a name that are the sentence's or the formatting's, not the name's
(``workflow=chat.``, ``workflow=*chat*``)."""

DEFAULT = "default"
"""The workflow of a conversation that journaled none (it started before workflows)."""


def asked_for(text: str) -> tuple[str | None, str]:
    """``(the workflow text asks for or None, text without the ask)``; the first
    ``workflow=NAME`` counts, its name in lower case (workflows' names are) and without
    the punctuation or formatting around it (``""`` when nothing is left)."""
    found = ASKED.search(text)
    if found is None:
        return None, text
    before = text[: found.start()].rstrip(_AROUND)  # the ask's own opening mark
    rest = (before + text[found.end() :]).strip()
    return found.group(1).strip(_AROUND).lower(), re.sub(r"[ \t]{2,}", " ", rest)


def allowed(settings: EngineSettings) -> tuple[str, ...]:
    """The workflows a request may ask for in the conversation's channel: its default
    first, then the ``workflows`` setting's."""
    return tuple(dict.fromkeys((settings.workflow, *settings.workflows)))


@dataclass(frozen=True)
class Chosen:
    """The workflow a first request starts, and its journal entry."""

    workflow: Workflow
    entry: WorkflowChosen


def choose(
    asked: str | None, settings: EngineSettings, library: WorkflowLibrary
) -> Chosen | WorkflowRefused:
    """The workflow for a first request that asked for ``asked`` (None: the default), or
    the refusal when the channel does not allow it, there is none by that name, or it
    needs the ``check_command`` setting and the channel has none. A
    default the library does not hold runs ``default`` (the bot checks its settings
    against the library at start, so only a test gets here)."""
    may = tuple(name for name in allowed(settings) if name in library)
    name = settings.workflow if asked is None else asked
    if asked is not None and asked not in may:
        return WorkflowRefused(asked=asked, allowed=may)
    workflow = library[name] if name in library else library[DEFAULT]
    if needs_check_command(workflow) and not settings.check_command:
        return WorkflowRefused(asked=workflow.name, allowed=may, missing="check_command")
    entry = WorkflowChosen(
        name=workflow.name,
        definition=workflow.model_dump_json(by_alias=True),
        check_command=settings.check_command,
    )
    return Chosen(workflow=workflow, entry=entry)


def needs_check_command(workflow: Workflow) -> bool:
    """Whether a text of ``workflow`` (a command, a tool's arguments, a plan's steps, a
    message) names ``{check_command}``."""
    for state in workflow.states.values():
        texts = (state.command, *state.args.values(), *state.steps, state.message, state.prompt)
        if any("{check_command}" in text for text in texts):
            return True
    return False


def journaled(journal: Sequence[JournalRecord]) -> Workflow | None:
    """The workflow the conversation chose (the newest :class:`WorkflowChosen`), read from
    its journal; None when it journaled none."""
    for record in reversed(journal):
        if isinstance(record.entry, WorkflowChosen):
            return Workflow.model_validate_json(record.entry.definition)
    return None


def at_start(
    run: Run, message: ThreadMessage, library: WorkflowLibrary
) -> tuple[ThreadMessage, tuple[WorkflowChosen, ...]] | Change:
    """What a request that starts a run does about the workflow: for the conversation's
    first request, the workflow chosen (``run.workflow`` set to it), the message without its
    ``workflow=NAME`` and the entry to journal with it; for a later one, the message as
    it is and nothing to journal (the conversation keeps its workflow). A workflow it
    may not ask for: the change that refuses it instead (the words kept as a note, the
    thread told which it may ask for; nothing starts)."""
    if any(_started(record.entry) for record in run.snap.journal):
        return message, ()  # its workflow is journaled, or it started before workflows
    asked, text = asked_for(message.text)
    choice = choose(asked, run.settings, library)
    if isinstance(choice, WorkflowRefused):
        note = UserText(author=message.author, text=message.text, role="note", files=message.blocks)
        return Change(entries=(note,), handled=delivery_keys(message), events=(choice,))
    run.workflow = choice.workflow
    return message.model_copy(update={"text": text}), (choice.entry,)


def _started(entry: object) -> bool:
    return isinstance(entry, WorkflowChosen) or (
        isinstance(entry, UserText) and entry.role == "request"
    )
