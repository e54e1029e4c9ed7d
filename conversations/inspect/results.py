"""Tool results on the timeline: the call, its state, how long it took, its output's first page.

A call's time runs from when it could run, its model turn or, for a call a person (or a
remembered rule) had to approve, that approval, to its result; for a control call that
waits for a person (a plan, a question) that is the wait. The output shown is the
result's first :data:`FIRST_PAGE` characters, as the model read it; a large output (the
result names the id it is kept under, :mod:`core.outputs`) is paged whole by
:mod:`conversations.inspect.outputs` (docs/architecture.md, "The run inspector").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import datetime

from conversations.inspect.items import ToolResult
from conversations.inspect.turns import arguments
from core.outputs import OUTPUT_ID_PREFIX
from core.vocabulary.approvals import RuleApplied
from core.vocabulary.entries import (
    AssistantTurn,
    DecisionEntry,
    JournalRecord,
    ToolAttempt,
    ToolCall,
    ToolResultEntry,
)
from core.vocabulary.tool_records import ToolCallRecord
from core.vocabulary.verdicts import CallsDecided

FIRST_PAGE = 4_000
"""Characters of a result shown on the timeline; the rest is paged."""

_NAMED = re.compile(rf"The whole output is ({re.escape(OUTPUT_ID_PREFIX)}[0-9a-f]+) \(")


def output_named(content: str) -> str | None:
    """The id of the whole output a result's preview names (``out_...``), or None."""
    found = _NAMED.search(content)
    return found.group(1) if found else None


class Calls:
    """What the results of a journal need to know of their calls, read in one pass: each
    call asked for (``asked``: the call and the time of its turn), when it could run
    (``cleared``: the time of the approval that let it), and its failed attempts."""

    def __init__(self, journal: tuple[JournalRecord, ...]) -> None:
        self.asked: dict[str, tuple[ToolCall, datetime]] = {}
        self.cleared: dict[str, datetime] = {}
        self.attempts: dict[str, int] = {}
        for record in journal:
            entry = record.entry
            if isinstance(entry, AssistantTurn):
                for call in entry.tool_calls:
                    self.asked[call.id] = (call, record.at)
            elif isinstance(entry, DecisionEntry) and isinstance(entry.verdict, CallsDecided):
                for call_id in entry.verdict.calls:
                    self.cleared[call_id] = record.at
            elif isinstance(entry, RuleApplied):
                self.cleared[entry.tool_use_id] = record.at
            elif isinstance(entry, ToolAttempt):
                self.attempts[entry.tool_use_id] = entry.attempt

    def name(self, call_id: str) -> str:
        """The tool a call asked for (``?`` when its turn is not in the journal)."""
        found = self.asked.get(call_id)
        return found[0].name if found is not None else "?"

    def result(
        self,
        record: JournalRecord,
        records: Mapping[str, ToolCallRecord],
        redact: Callable[[str], str] = str,
    ) -> ToolResult:
        """The item of the result ``record`` (a :class:`ToolResultEntry`), its call's
        state from ``records`` (by ``tool_use_id``); its output is cut to its first page
        after ``redact`` (so no secret is cut in two and shown in part)."""
        entry = record.entry
        assert isinstance(entry, ToolResultEntry)
        call_id = entry.tool_use_id
        asked = self.asked.get(call_id)
        started = self.cleared.get(call_id) or (asked[1] if asked is not None else None)
        found = records.get(call_id)
        content = redact(entry.content)
        output_id = output_named(content)
        return ToolResult(
            seq=record.seq,
            at=record.at,
            call_id=call_id,
            name=asked[0].name if asked is not None else (found.name if found else "?"),
            arguments=arguments(asked[0].input) if asked is not None else "",
            state=found.state if found is not None else None,
            is_error=entry.is_error,
            seconds=(record.at - started).total_seconds() if started is not None else None,
            output=content[:FIRST_PAGE],
            more=len(content) > FIRST_PAGE or output_id is not None,
            output_id=output_id,
            attempts=self.attempts.get(call_id, 0) + 1,
        )
