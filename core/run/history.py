"""Build the model's message history from the journal.

The Messages API requires that every assistant ``tool_use`` is answered by exactly
one ``tool_result`` in the very next user message, before any other block of that
message (https://docs.anthropic.com/en/docs/build-with-claude/tool-use). The
journal may hold results far from their call (a plan approved a day later) and
people's notes in between, so the builder places each result right after its
call and moves people's words behind the results (and the context strategies' notes,
:class:`core.vocabulary.entries.ContextNote`, which are placed like people's words,
docs/architecture.md, "Context strategies and notes"). A call with no result at all
(never expected after a stop or resume, which close every call) gets an error
result so that a request is never malformed.

A scope whose model has a view of its own (the expert's, in a delegation:
:class:`core.vocabulary.entries.ScopeEntered` with a ``role``) is left out of the run's
history, from its entry to its exit; its model reads :func:`scope_view` instead, which
starts with its brief. The run's model reads how it ended
(:class:`core.vocabulary.entries.DelegationEnded`, :func:`delegation_ended_block`).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from core.models.base import Message
from core.vocabulary.entries import (
    AssistantTurn,
    Compacted,
    ContextNote,
    DelegationBrief,
    DelegationEnded,
    Escalated,
    JournalRecord,
    ScopeEntered,
    ScopeLeft,
    StepEntered,
    StopEntry,
    ToolResultEntry,
    UserText,
)

_ROLE_LABEL = {
    "request": "",
    "answer": " (answer)",
    "feedback": " (plan feedback)",
    "note": " (note while you work)",
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
    UserText | StepEntered | Compacted | ContextNote | Escalated | DelegationBrief | DelegationEnded
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
    return {
        "type": "text",
        "text": f"[threadbot: {said}, so I asked the people in the thread for help]",
    }


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
    an escalation as one block (:func:`escalated_block`)."""
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


def scope_view(journal: Sequence[JournalRecord], scope_id: str) -> list[JournalRecord]:
    """What the model of the scope ``scope_id`` reads (a scope with a view of its own: see
    the module docstring): the records from its newest entry on, to its exit or the
    journal's end; empty when it was never entered."""
    start = None
    for at in range(len(journal) - 1, -1, -1):
        entry = journal[at].entry
        if isinstance(entry, ScopeEntered) and entry.scope == scope_id:
            start = at
            break
    if start is None:
        return []
    view: list[JournalRecord] = []
    for record in journal[start + 1 :]:
        if isinstance(record.entry, ScopeLeft) and record.entry.scope == scope_id:
            break
        view.append(record)
    return view


class OwnViews:
    """The records of ``journal`` outside every scope with a view of its own (see the module
    docstring; such a scope's part ends at its exit, or at a stop or a new request,
    which end its work), for a journal that grows at its end: each call reads only the records
    appended since the last, and gives the journal itself while no such scope was
    entered. Any other journal (shorter, or not going on from the records read) is
    read again whole."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._read = 0
        self._last: object = None
        self._inside: str | None = None
        """The scope with a view of its own the journal is in at its end, if any."""
        self._kept: list[JournalRecord] = []
        self._any = False
        """Whether a record was left out."""

    def __call__(self, journal: Sequence[JournalRecord]) -> Sequence[JournalRecord]:
        """``journal`` without the records of those scopes (the same records, in order)."""
        read = self._read
        if read and (len(journal) < read or journal[read - 1].entry is not self._last):
            self._reset()
        for record in journal[self._read :]:
            entry = record.entry
            if self._inside is None and isinstance(entry, ScopeEntered) and entry.role:
                self._inside = entry.scope
            if self._inside is None:
                self._kept.append(record)
                continue
            if isinstance(entry, StopEntry) or (
                isinstance(entry, UserText) and entry.role == "request"
            ):
                self._inside = None  # a stop, or a new request, ends the scope's work
                self._kept.append(record)
                continue
            self._any = True
            if isinstance(entry, ScopeLeft) and entry.scope == self._inside:
                self._inside = None
        self._read = len(journal)
        self._last = journal[-1].entry if journal else None
        return self._kept if self._any else journal


def build_messages(journal: Sequence[JournalRecord]) -> list[Message]:
    """Messages API history for ``journal``: alternating roles, results first.

    Returns a list of ``{"role", "content"}`` dicts; the first is a user message
    whenever the journal starts with a person's words. Builds from scratch; a run
    that calls the model turn after turn uses a :class:`History`, which gives the
    same messages at the cost of what was added since its last call.
    """
    return History().build(journal)


class History:
    """:func:`build_messages` for a journal that grows at its end, built incrementally.

    Everything up to the newest assistant turn is final once built: the results of
    a turn's calls come after it and before the next turn (a run gives every open
    call its result before it calls the model again), so the user message between
    two turns never changes. :meth:`build` keeps those messages and, on the next
    call, goes on from where it stopped: each call costs what was journaled since,
    not the whole conversation. It starts over when the journal is not the one it
    built from (a different first or last-built entry) or when a result turns up
    for a call it had already marked as having none.
    """

    def __init__(self) -> None:
        self._reset()
        self._compaction: JournalRecord | None = None
        """The newest compaction in the journal: the view starts with it."""
        self._scanned = 0
        """Journal records looked through for compactions."""
        self._own_views = OwnViews()

    def _reset(self) -> None:
        self._messages: list[Message] = []
        self._built = 0
        """Journal records consumed into ``_messages`` (up to an assistant turn, included)."""
        self._first: object = None
        self._last: object = None
        self._turn: AssistantTurn | None = None
        """The newest assistant turn consumed; its results open the next user message."""
        self._missing: set[str] = set()
        """Calls of consumed turns given a "no result" block."""

    def build(self, journal: Sequence[JournalRecord]) -> list[Message]:
        """The messages for ``journal`` (a new list; the message dicts may be shared)."""
        journal = self._view(self._own_views(journal))
        if not self._continues(journal):
            self._reset()
        newer = journal[self._built :]
        results: dict[str, ToolResultEntry] = {}
        for record in newer:
            if isinstance(record.entry, ToolResultEntry):
                results.setdefault(record.entry.tool_use_id, record.entry)
        if self._missing & results.keys():  # a late result for a call marked as having none
            self._reset()
            return self.build(journal)
        last = next(  # the newest assistant turn among the new records, -1 for none
            (i for i in range(len(newer) - 1, -1, -1) if isinstance(newer[i].entry, AssistantTurn)),
            -1,
        )
        pending = self._consume(newer[: last + 1], results)
        if last >= 0:
            self._built += last + 1
            self._last = newer[last].entry
            if self._first is None:
                self._first = journal[0].entry
        tail = [*self._results_of(self._turn, results, mark=False)] if self._turn else pending
        tail += [
            block
            for r in newer[last + 1 :]
            if isinstance(r.entry, UserEntry)
            for block in user_blocks(r.entry)
        ]
        messages = list(self._messages)
        if tail:
            messages.append({"role": "user", "content": tail})
        return messages

    def _view(self, journal: Sequence[JournalRecord]) -> Sequence[JournalRecord]:
        """``journal`` as the model reads it: after a compaction, the compaction (its
        summary) and then the entries after the ones it summarized, less the expired
        notes it left out (``Compacted.dropped``)."""
        if len(journal) < self._scanned:  # not the journal scanned so far
            self._compaction, self._scanned = None, 0
        for record in journal[self._scanned :]:
            if isinstance(record.entry, Compacted):
                self._compaction = record
        self._scanned = len(journal)
        if self._compaction is None:
            return journal
        assert isinstance(self._compaction.entry, Compacted)
        through = self._compaction.entry.through_seq
        start = bisect.bisect_right(journal, through, key=lambda r: r.seq)
        dropped = self._compaction.entry.dropped
        kept = [
            r
            for r in journal[start:]
            if not isinstance(r.entry, Compacted) and (not dropped or r.seq not in dropped)
        ]
        return [self._compaction, *kept]

    def _continues(self, journal: Sequence[JournalRecord]) -> bool:
        if self._built == 0:
            return True
        return (
            len(journal) >= self._built
            and journal[0].entry is self._first
            and journal[self._built - 1].entry is self._last
        )

    def _consume(
        self, records: Sequence[JournalRecord], results: dict[str, ToolResultEntry]
    ) -> list[dict[str, Any]]:
        """Add ``records`` (ending with an assistant turn, or none) to the built messages;
        the user blocks left over when there is no turn among them."""
        pending: list[dict[str, Any]] = []
        for record in records:
            entry = record.entry
            if isinstance(entry, UserEntry):
                pending.extend(user_blocks(entry))
            elif isinstance(entry, AssistantTurn):
                before = self._results_of(self._turn, results, mark=True) if self._turn else []
                if before or pending:
                    self._messages.append({"role": "user", "content": [*before, *pending]})
                pending = []
                self._messages.append({"role": "assistant", "content": _assistant_content(entry)})
                self._turn = entry
        return pending

    def _results_of(
        self, turn: AssistantTurn, results: dict[str, ToolResultEntry], *, mark: bool
    ) -> list[dict[str, Any]]:
        """A result block for each call of ``turn``, in its order; ``mark``: remember the
        calls given a "no result" block (they are now in a built message)."""
        blocks = []
        for call in turn.tool_calls:
            found = results.get(call.id)
            if found is None and mark:
                self._missing.add(call.id)
            blocks.append(_result_block(call.id, found))
        return blocks


def _assistant_content(turn: AssistantTurn) -> list[dict[str, Any]]:
    if turn.content:
        return [dict(block) for block in turn.content]
    content: list[dict[str, Any]] = []
    if turn.text:
        content.append({"type": "text", "text": turn.text})
    content.extend(
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.input} for c in turn.tool_calls
    )
    return content or [{"type": "text", "text": "(no reply)"}]


def _result_block(tool_use_id: str, result: ToolResultEntry | None) -> dict[str, Any]:
    if result is None:
        return {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": "No result was recorded for this call; check before relying on it.",
            "is_error": True,
        }
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": result.content or "(no output)",
    }
    if result.is_error:
        block["is_error"] = True
    return block
