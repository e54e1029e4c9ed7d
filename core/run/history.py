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

The executor's own view (when its model differs from the planner's: the caller decides,
:func:`core.run.model_turn.own_plan`) starts after the plan's approval: a first user
message with the request and the approved plan's steps (:func:`plan_blocks`), then
everything journaled since the approval; the planning turns are left out
(docs/architecture.md, "Conversation lifecycle and workflow position").

A scope whose model has a view of its own (the expert's, in a delegation:
:class:`core.vocabulary.entries.ScopeEntered` with a ``role``) is left out of the run's
history, from its entry to its exit (:mod:`core.run.own_views`); its model reads
:func:`core.run.own_views.scope_view` instead, which
starts with its brief. The run's model reads how it ended
(:class:`core.vocabulary.entries.DelegationEnded`, :func:`core.run.blocks.delegation_ended_block`).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from core.models.base import Message
from core.run.blocks import UserEntry, user_blocks
from core.run.executor_view import approval_at, plan_of
from core.run.own_views import OwnViews
from core.vocabulary.entries import (
    AssistantTurn,
    Compacted,
    JournalRecord,
    ToolResultEntry,
)
from core.vocabulary.requests import PlanApproval


def build_messages(
    journal: Sequence[JournalRecord], plan: PlanApproval | None = None
) -> list[Message]:
    """Messages API history for ``journal``: alternating roles, results first.

    Returns a list of ``{"role", "content"}`` dicts; the first is a user message
    whenever the journal starts with a person's words. ``plan``: the executor's own
    view, from that approved plan on (:meth:`History.build`). Builds from scratch; a
    run that calls the model turn after turn uses a :class:`History`, which gives the
    same messages at the cost of what was added since its last call.
    """
    return History().build(journal, plan)


def plan_blocks(
    journal: Sequence[JournalRecord], at: int, plan: PlanApproval
) -> list[dict[str, Any]]:
    """The first user message of the executor's own view of ``plan``, which the decision
    ``journal[at]`` approved: the request (:func:`core.run.blocks.user_blocks`: its
    files first), then the plan (:func:`core.run.executor_view.plan_of`)."""
    request, said = plan_of(journal, at, plan)
    return [*(user_blocks(request) if request else []), {"type": "text", "text": said}]


_WHOLE: list[dict[str, Any]] = []
"""No first message of the view's own: the whole history (no executor's view)."""


class History:
    """:func:`build_messages` for a journal that grows at its end, built incrementally.

    Everything up to the newest assistant turn is final once built: the results of
    a turn's calls come after it and before the next turn (a run gives every open
    call its result before it calls the model again), so the user message between
    two turns never changes. :meth:`build` keeps those messages and, on the next
    call, goes on from where it stopped: each call costs what was journaled since,
    not the whole conversation. It starts over when the journal is not the one it
    built from (a different first or last-built entry, or another view of it) or when
    a result turns up for a call it had already marked as having none.
    """

    def __init__(self) -> None:
        self._reset()
        self._compaction: JournalRecord | None = None
        """The newest compaction in the journal: the view starts with it."""
        self._scanned = 0
        """Journal records looked through for compactions."""
        self._plan: tuple[str, int, JournalRecord, list[dict[str, Any]]] | None = None
        """The executor's view last built: its plan's id, the index and record of the
        approval, and the view's first message (:func:`plan_blocks`)."""
        self._own_views = OwnViews()

    def _reset(self) -> None:
        self._messages: list[Message] = []
        self._built = 0
        """Journal records consumed into ``_messages`` (up to an assistant turn, included)."""
        self._first: object = None
        self._last: object = None
        self._head: object = None
        """The view's own first message the built messages start with (its identity)."""
        self._turn: AssistantTurn | None = None
        """The newest assistant turn consumed; its results open the next user message."""
        self._missing: set[str] = set()
        """Calls of consumed turns given a "no result" block."""

    def build(
        self, journal: Sequence[JournalRecord], plan: PlanApproval | None = None
    ) -> list[Message]:
        """The messages for ``journal`` (a new list; the message dicts may be shared).

        ``plan``: None for the whole history; the plan the executor carries out for its
        own view (its model differs from the planner's): a first user message with the
        request and the plan (:func:`plan_blocks`), then what was journaled after the
        plan's approval; the tool results of calls made before it are left out with
        their calls. A compaction made since the approval (it summarized this view)
        starts the view as it starts the whole history. The approval is looked for
        once per plan: each call still costs what was journaled since the last.
        """
        head, viewed = self._view(self._own_views(journal), plan)
        return self._build(viewed, head)

    def _build(self, journal: Sequence[JournalRecord], head: list[dict[str, Any]]) -> list[Message]:
        if not self._continues(journal, head):
            self._reset()
        newer = journal[self._built :]
        results: dict[str, ToolResultEntry] = {}
        for record in newer:
            if isinstance(record.entry, ToolResultEntry):
                results.setdefault(record.entry.tool_use_id, record.entry)
        if self._missing & results.keys():  # a late result for a call marked as having none
            self._reset()
            return self._build(journal, head)
        last = next(  # the newest assistant turn among the new records, -1 for none
            (i for i in range(len(newer) - 1, -1, -1) if isinstance(newer[i].entry, AssistantTurn)),
            -1,
        )
        opening = list(head) if self._built == 0 else []
        pending = self._consume(newer[: last + 1], results, opening)
        if last >= 0:
            self._built += last + 1
            self._last = newer[last].entry
            if self._first is None:
                self._first, self._head = journal[0].entry, head
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

    def _view(
        self, journal: Sequence[JournalRecord], plan: PlanApproval | None
    ) -> tuple[list[dict[str, Any]], Sequence[JournalRecord]]:
        """``journal`` as the model reads it, with the view's own first message (empty
        for none): after a compaction, the compaction (its summary) and then the entries
        after the ones it summarized, less the expired notes it left out
        (``Compacted.dropped``); for the executor's view of ``plan``, its first message
        and the entries after the approval (less any compaction made before it)."""
        if len(journal) < self._scanned:  # not the journal scanned so far
            self._compaction, self._scanned = None, 0
        for record in journal[self._scanned :]:
            if isinstance(record.entry, Compacted):
                self._compaction = record
        self._scanned = len(journal)
        compaction = self._compaction
        at = None if plan is None else self._approval(journal, plan)
        through = _through(compaction)
        if at is not None and self._plan is not None and through <= journal[at].seq:
            after = journal[at + 1 :]
            if compaction is not None and compaction.seq > journal[at].seq:
                after = [r for r in after if not isinstance(r.entry, Compacted)]
            return self._plan[3], after
        if compaction is None:
            return _WHOLE, journal
        assert isinstance(compaction.entry, Compacted)
        start = bisect.bisect_right(journal, through, key=lambda r: r.seq)
        dropped = compaction.entry.dropped
        kept = [
            r
            for r in journal[start:]
            if not isinstance(r.entry, Compacted) and (not dropped or r.seq not in dropped)
        ]
        return _WHOLE, [compaction, *kept]

    def _approval(self, journal: Sequence[JournalRecord], plan: PlanApproval) -> int | None:
        """The index of ``plan``'s approval in ``journal``, from the last view when it is
        the same plan's and still there; looked for (and the view's first message made)
        otherwise."""
        known = self._plan
        if known is not None and known[0] == plan.id:
            index, record = known[1], known[2]
            if index < len(journal) and journal[index].entry is record.entry:
                return index
        at = approval_at(journal, plan)
        if at is None:
            return None
        self._plan = (plan.id, at, journal[at], plan_blocks(journal, at, plan))
        return at

    def _continues(self, journal: Sequence[JournalRecord], head: object) -> bool:
        if self._built == 0:
            return True
        return (
            len(journal) >= self._built
            and head is self._head
            and journal[0].entry is self._first
            and journal[self._built - 1].entry is self._last
        )

    def _consume(
        self,
        records: Sequence[JournalRecord],
        results: dict[str, ToolResultEntry],
        pending: list[dict[str, Any]],
    ) -> list[dict[str, Any]]:
        """Add ``records`` (ending with an assistant turn, or none) to the built messages,
        the first user message opening with ``pending``; the user blocks left over when
        there is no turn among them."""
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


def _through(compaction: JournalRecord | None) -> int:
    """The ``through_seq`` of ``compaction``'s summary (0 for no compaction)."""
    entry = None if compaction is None else compaction.entry
    return entry.through_seq if isinstance(entry, Compacted) else 0


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
