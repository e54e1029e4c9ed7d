"""The model's message history, built incrementally, equals the history built from scratch.

``core.run.history.History`` keeps the messages up to the newest assistant turn and
goes on from there; these tests hold it to the straightforward builder below (the
one threadbot used before, one pass over the whole journal) on journals grown one
entry at a time, including the odd ones: results far from their call, duplicate
results, a result that never came, and a late result for a call of an older turn.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.models.base import Message
from core.run.blocks import user_text_block
from core.run.history import History, _assistant_content, _result_block
from core.vocabulary.entries import (
    AssistantTurn,
    Entry,
    JournalRecord,
    ToolCall,
    ToolResultEntry,
    UserText,
)
from core.vocabulary.people import Person

ALICE = Person(id="U0ALICE001", name="alice")
AT = datetime(2026, 12, 1, tzinfo=UTC)


def reference(journal: list[JournalRecord]) -> list[Message]:
    """The history in one pass over the whole journal (each result placed after its call)."""
    results: dict[str, ToolResultEntry] = {}
    for record in journal:
        if isinstance(record.entry, ToolResultEntry):
            results.setdefault(record.entry.tool_use_id, record.entry)
    messages: list[Message] = []
    pending: list[dict[str, Any]] = []
    for record in journal:
        entry = record.entry
        if isinstance(entry, UserText):
            pending.append(user_text_block(entry))
        elif isinstance(entry, AssistantTurn):
            if pending:
                messages.append({"role": "user", "content": list(pending)})
                pending.clear()
            messages.append({"role": "assistant", "content": _assistant_content(entry)})
            pending.extend(_result_block(c.id, results.get(c.id)) for c in entry.tool_calls)
    if pending:
        messages.append({"role": "user", "content": list(pending)})
    return messages


@st.composite
def journals(draw: st.DrawFn) -> list[JournalRecord]:
    """A journal of people's words, turns with calls, and results (in order or not)."""
    entries: list[Entry] = []
    calls: list[str] = []
    for n in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["text", "turn", "result", "result"]))
        if kind == "text":
            entries.append(UserText(author=ALICE, text=f"words {n}", role="note"))
        elif kind == "turn":
            count = draw(st.integers(0, 3))
            made = [
                ToolCall(id=f"toolu_{n}_{i}", name="list_files", input={}) for i in range(count)
            ]
            calls += [c.id for c in made]
            entries.append(AssistantTurn(text=f"turn {n}", tool_calls=tuple(made)))
        elif calls:
            target = draw(st.sampled_from(calls))
            entries.append(ToolResultEntry(tool_use_id=target, content=f"result {n}"))
    return [JournalRecord(seq=i + 1, at=AT, entry=e) for i, e in enumerate(entries)]


@settings(max_examples=300, deadline=None)
@given(journals())
def test_built_as_it_grows_it_equals_the_history_built_at_once(
    journal: list[JournalRecord],
) -> None:
    history = History()
    for end in range(len(journal) + 1):
        assert history.build(tuple(journal[:end])) == reference(journal[:end])


@settings(max_examples=100, deadline=None)
@given(journals(), journals())
def test_another_journal_starts_it_over(
    first: list[JournalRecord], second: list[JournalRecord]
) -> None:
    history = History()
    history.build(tuple(first))
    assert history.build(tuple(second)) == reference(second)


def test_a_late_result_for_an_older_turn_is_placed_after_its_call() -> None:
    ask = AssistantTurn(tool_calls=(ToolCall(id="toolu_a", name="list_files", input={}),))
    journal = [
        JournalRecord(seq=1, at=AT, entry=UserText(author=ALICE, text="look")),
        JournalRecord(seq=2, at=AT, entry=ask),
        JournalRecord(seq=3, at=AT, entry=AssistantTurn(text="again")),
        JournalRecord(seq=4, at=AT, entry=ToolResultEntry(tool_use_id="toolu_a", content="late")),
    ]
    history = History()
    before = history.build(tuple(journal[:3]))
    assert "No result was recorded" in str(before[2])
    after = history.build(tuple(journal))
    assert after == reference(journal)
    assert after[2]["content"][0]["content"] == "late"
