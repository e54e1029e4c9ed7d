"""The pure parts of busy turns: replies joined into one request, and the commit that
ends a turn for a reply that interrupts it (docs/architecture.md, "What a person sees")."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.run.history import build_messages
from core.run.interrupting import interrupted, interrupting
from core.vocabulary import lifecycle
from core.vocabulary.entries import (
    AssistantTurn,
    JournalRecord,
    ToolCall,
    ToolResultEntry,
    UserText,
)
from core.vocabulary.fold import apply_change
from core.vocabulary.inputs import SharedFile, ThreadMessage, delivery_keys, joined
from core.vocabulary.journal import Committed
from core.vocabulary.people import Person
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolState

ALICE = Person(id="U1", name="alice")
BOB = Person(id="U2", name="bob")
AT = datetime(2026, 1, 1, tzinfo=UTC)


def said(text: str, by: Person = ALICE, key: str | None = None, **more: object) -> ThreadMessage:
    return ThreadMessage.model_validate(
        {"text": text, "author": by, "delivery_key": key or text, **more}
    )


# --- joined --------------------------------------------------------------------------------


def test_one_persons_queued_replies_join_in_order_and_are_all_handled() -> None:
    a = said("count the files", key="k1", files=(SharedFile(name="a.txt"),))
    b = said("and name the biggest", key="k2", files=(SharedFile(name="b.txt"),))
    one = joined([a, b])
    assert one.text == "count the files\n\nand name the biggest"
    assert [f.name for f in one.files] == ["a.txt", "b.txt"]
    assert one.author == ALICE
    assert delivery_keys(one) == ("k1", "k2")


def test_several_peoples_replies_each_name_their_author() -> None:
    one = joined([said("count the files", key="k1"), said("skip tests/", by=BOB, key="k2")])
    assert one.text == "alice: count the files\n\nbob: skip tests/"
    assert one.author == ALICE


def test_one_reply_is_itself_and_none_is_refused() -> None:
    only = said("count the files")
    assert joined([only]) is only
    with pytest.raises(ValueError, match="nothing to join"):
        joined([])


# --- interrupted ---------------------------------------------------------------------------


def running_turn(*calls: str, answered: tuple[str, ...] = ()) -> ConversationSnapshot:
    """A running conversation whose last turn made ``calls`` (ids), ``answered`` done."""
    turn = AssistantTurn(
        tool_calls=tuple(ToolCall(id=c, name="read_file", input={"path": c}) for c in calls)
    )
    entries = [
        UserText(author=ALICE, text="read the files"),
        turn,
        *(ToolResultEntry(tool_use_id=c, content="text") for c in answered),
    ]
    return ConversationSnapshot(
        id="c1",
        requester=ALICE,
        status=lifecycle.RUNNING,
        position="answering",
        plan_version=0,
        workspace="/tmp/w",
        journal=tuple(JournalRecord(seq=n, at=AT, entry=e) for n, e in enumerate(entries, 1)),
        tool_calls={},
        requests=(),
    )


def test_the_calls_not_run_end_cancelled_and_the_reply_is_an_instruction() -> None:
    snap = running_turn("t1", "t2", "t3", answered=("t1",))
    note = said("also skip docs/", by=BOB, key="k1")
    stop = said("never mind, just say hi", key="k2", interrupts=True)
    change = interrupted(snap, [note, stop], read_only=lambda _name: True)

    assert [(r.tool_use_id, r.state) for r in change.tool_calls] == [
        ("t2", ToolState.CANCELLED),
        ("t3", ToolState.CANCELLED),
    ]
    results = [e for e in change.entries if isinstance(e, ToolResultEntry)]
    assert [r.tool_use_id for r in results] == ["t2", "t3"]
    assert all(r.content.startswith("Not run: alice interrupted") and r.is_error for r in results)
    words = [(e.role, e.text) for e in change.entries if isinstance(e, UserText)]
    assert words == [("note", "also skip docs/"), ("instruction", "never mind, just say hi")]
    assert change.handled == ("k1", "k2")

    # what the model reads next: every tool_use answered once, then the people's words
    seqs = tuple(range(snap.last_seq + 1, snap.last_seq + 1 + len(change.entries)))
    after = apply_change(snap, change, Committed(seqs=seqs, at=AT))
    messages = build_messages(after.journal)
    assert messages[-2]["role"] == "assistant"
    last = messages[-1]["content"]
    assert [b["tool_use_id"] for b in last if b["type"] == "tool_result"] == ["t1", "t2", "t3"]
    assert last[-1]["text"] == (
        "alice (interrupted you; the calls not yet run were cancelled): never mind, just say hi"
    )


class _Inbox:
    def __init__(self, waiting: bool) -> None:
        self.waiting = waiting

    def __call__(self) -> list[ThreadMessage]:
        return []

    def interrupting(self) -> bool:
        return self.waiting


def test_only_an_inbox_that_says_so_interrupts_and_never_a_turn_waiting_on_a_person() -> None:
    snap = running_turn("t1")
    assert interrupting(_Inbox(True), snap)
    assert not interrupting(_Inbox(False), snap)
    assert not interrupting(lambda: [], snap)  # a plain inbox (a run on a Ray host)
    assert not interrupting(None, snap)
