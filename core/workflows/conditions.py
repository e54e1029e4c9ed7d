"""Conditions a workflow file names where TOML cannot compute: Python functions
registered under a name (docs/architecture.md, "Workflows").

A transition may be a guard, ``finished = { if = "changed_files", then = "review",
else = "answered" }``: the engine asks the condition with the conversation as it
stands and follows ``then`` or ``else``. :data:`CONDITIONS` lists the shipped ones
(``threadbot workflows show`` prints them); :func:`register` adds one (a deployment's
own code, before the bot starts). A condition reads the snapshot only: it is decided
again the same way when a run restarts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.tools import control
from core.vocabulary.entries import UserText
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolState


@dataclass(frozen=True)
class Condition:
    """A named test of a conversation: ``test(snapshot)`` is True or False; ``doc`` says
    what it tests, in one line."""

    name: str
    doc: str
    test: Callable[[ConversationSnapshot], bool]


CONDITIONS: dict[str, Condition] = {}
"""Every registered condition by name."""


Test = Callable[[ConversationSnapshot], bool]
"""A condition's function: the conversation as it stands -> whether it holds."""


def register(name: str, doc: str) -> Callable[[Test], Test]:
    """Register the decorated function as condition ``name``; raises ``ValueError`` when
    the name is taken."""

    def add(test: Test) -> Test:
        if name in CONDITIONS:
            raise ValueError(f"a condition is registered as {name!r} already")
        CONDITIONS[name] = Condition(name=name, doc=doc, test=test)
        return test

    return add


def _request_seq(snap: ConversationSnapshot) -> int:
    for record in reversed(snap.journal):
        if isinstance(record.entry, UserText) and record.entry.role == "request":
            return record.seq
    return 0


@register("changed_files", "a tool call that changes things succeeded since the request")
def changed_files(snap: ConversationSnapshot) -> bool:
    """Whether a mutating call ended ``done`` since the newest request."""
    since = _request_seq(snap)
    return any(
        not record.read_only and record.state is ToolState.DONE and record.turn_seq > since
        for record in snap.tool_calls.values()
    )


@register("asked_people", "the run asked the people a question since the request")
def asked_people(snap: ConversationSnapshot) -> bool:
    """Whether an ``ask_user`` call was made since the newest request."""
    since = _request_seq(snap)
    return any(
        control.asks_people(record.name) and record.turn_seq > since
        for record in snap.tool_calls.values()
    )
