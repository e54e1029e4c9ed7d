"""Notes with lifetimes (issue 25): an expired note is not restated, and compaction leaves
it out, the same after a restart (docs/architecture.md, "Context strategies and notes").

Through the real Anthropic client and a small window, under ``task_tree``: each step's
path note expires when the step is done; the compaction that comes records the
expired note of the part it keeps (``Compacted.dropped``) and the model reads it no
more, while the note of the step in hand stays. A bot restarted on the same database
builds the same messages. With hand-built journals, a note that holds two turns is
not restated once they are over, and an alive note a summary took is restated once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.settings import Settings
from core.contexts import NoContext, TaskList, context_strategy, expired_after, note_change
from core.run.compaction import cut_at
from core.run.history import build_messages
from core.vocabulary.entries import (
    AssistantTurn,
    Compacted,
    ContextNote,
    Entry,
    JournalRecord,
    ToolCall,
    ToolResultEntry,
    UserText,
)
from core.vocabulary.lifecycle import RUNNING, Lifecycle
from core.vocabulary.people import Person
from core.vocabulary.requests import PlanApproval, RequestState
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.verdicts import Approved
from tests.fakes.anthropic_server import FakeAnthropicServer, Reply, text, tool_use
from tests.harness import Chat
from tests.test_cache_prefix import canonical, running, unmarked

ALICE = Person(id="U0ALICE001", name="alice")
STEPS = ["Write", "Ask", "Report"]
SCRIPT = [
    Reply([tool_use("toolu_01", "propose_plan", {"steps": STEPS})], input_tokens=900),
    Reply(
        [tool_use("toolu_02", "write_file", {"path": "a.md", "content": "hi\n"})],
        input_tokens=1_500,
    ),
    Reply(
        [tool_use("toolu_03", "report_progress", {"note": "a", "step": "step 2"})],
        input_tokens=2_000,
    ),
    Reply([tool_use("toolu_04", "read_file", {"path": "a.md"})], input_tokens=3_000),
    Reply(
        [tool_use("toolu_05", "report_progress", {"note": "b", "step": "step 3"})],
        input_tokens=5_400,
        output_tokens=200,
    ),
    Reply([text("Summary: a.md written and read; on to the report.")], input_tokens=5_700),
    Reply([tool_use("toolu_06", "finish", {"answer": "Reported."})], input_tokens=1_500),
]
PATH = "[threadbot: task tree] Task path: write a.md and report"


def path_notes(body: dict[str, Any]) -> list[str]:
    """Every task path note in ``body``'s messages, in order."""
    return [
        block["text"]
        for message in body["messages"]
        for block in message["content"]
        if block.get("type") == "text" and block["text"].startswith(PATH)
    ]


async def test_an_expired_note_is_left_out_at_compaction_and_after_a_restart(
    sqlite_settings: Settings,
) -> None:
    sqlite_settings.context_strategy = "task_tree"
    sqlite_settings.context_keep_turns = 3
    sqlite_settings.context_window = 10_000
    sqlite_settings.compact_at = 0.5  # 5,600 tokens after the fifth call: compact
    async with FakeAnthropicServer(SCRIPT) as server:
        async with running(sqlite_settings, server) as app:
            chat = Chat(app)
            await chat.mention("write a.md and report")
            await chat.react(chat.bot_message("📋 Plan (v1)"))
            await app.hub.settled()
            snap = await chat.snapshot()  # read back from the database
            assert snap.status.lifecycle is Lifecycle.DONE

    bodies = [r.body for r in server.requests]
    assert len(bodies) == 7 and server.remaining == 0
    said = {n: f"Task path: write a.md and report > step {n}. {s}" for n, s in enumerate(STEPS, 1)}
    assert path_notes(bodies[4]) == [PATH, f"{PATH} > step 1. Write", f"{PATH} > step 2. Ask"]
    notes = {r.entry.text: r.seq for r in snap.journal if isinstance(r.entry, ContextNote)}
    assert list(notes) == ["Task path: write a.md and report", *said.values()]  # none restated
    (compacted,) = [r.entry for r in snap.journal if isinstance(r.entry, Compacted)]
    # Step 1's note went into the summary with its turn; step 2's was kept but had
    # expired (step 2 is done): left out; step 3's, in hand, stays.
    assert compacted.through_seq < notes[said[2]] < notes[said[3]]
    assert compacted.dropped == (notes[said[2]],)
    assert path_notes(bodies[6]) == [f"{PATH} > step 3. Report"]
    # What a restarted run builds from the journal read back is what the model read.
    last = max(i for i, r in enumerate(snap.journal) if isinstance(r.entry, AssistantTurn))
    assert canonical(build_messages(snap.journal[:last])) == canonical(
        unmarked(bodies[6]["messages"])
    )


def snapshot(*entries: Entry) -> ConversationSnapshot:
    """A conversation whose plan v1 (``toolu_plan``, :data:`STEPS`) was approved, with
    ``entries`` journaled after the plan's turn and result, ``seq`` from 1."""
    head: list[Entry] = [
        UserText(author=ALICE, text="write a.md and report"),
        AssistantTurn(
            tool_calls=(ToolCall(id="toolu_plan", name="propose_plan", input={"steps": STEPS}),)
        ),
        ToolResultEntry(tool_use_id="toolu_plan", content="Plan v1 was approved."),
    ]
    at = datetime(2025, 1, 1, tzinfo=UTC)
    return ConversationSnapshot(
        id="c1",
        requester=ALICE,
        status=RUNNING,
        position="executing",
        plan_version=1,
        workspace="/tmp/w",
        journal=tuple(
            JournalRecord(seq=n, at=at, entry=e) for n, e in enumerate([*head, *entries], 1)
        ),
        tool_calls={},
        requests=(
            PlanApproval(
                id="r1",
                tool_use_id="toolu_plan",
                plan_version=1,
                state=RequestState.DECIDED,
                verdict=Approved(),
                decided_by=ALICE,
            ),
        ),
    )


def turn(n: int) -> tuple[AssistantTurn, ToolResultEntry]:
    call = ToolCall(id=f"toolu_{n}", name="list_files", input={})
    return AssistantTurn(tool_calls=(call,)), ToolResultEntry(tool_use_id=call.id, content="a.md")


def test_a_note_that_holds_two_turns_is_not_restated_once_they_are_over() -> None:
    strategy = TaskList(lifetime_turns=2)
    first = note_change(snapshot(), strategy, "run")
    assert first is not None
    (note,) = first.entries
    assert isinstance(note, ContextNote) and note.lifetime_turns == 2
    assert note.text == "Task list (plan v1):\n[>] 1. Write\n[ ] 2. Ask\n[ ] 3. Report"

    assert note_change(snapshot(note, *turn(1)), strategy, "run") is None  # alive, read
    over = snapshot(note, *turn(1), *turn(2))
    assert note_change(over, strategy, "run") is None  # expired: not restated
    assert expired_after(over, 3) == (4,)  # a compaction keeping it leaves it out
    # It stays in the messages already sent: nothing is rewritten.
    said = [b for m in build_messages(over.journal) for b in m["content"] if b["type"] == "text"]
    assert said[-1]["text"].startswith("[threadbot: task list] Task list (plan v1)")


def test_an_alive_note_the_summary_took_is_restated_with_the_turns_it_has_left() -> None:
    strategy = TaskList(lifetime_turns=3)
    first = note_change(snapshot(), strategy, "run")
    assert first is not None
    (note,) = first.entries
    summary = Compacted(summary="all of it", through_seq=6)  # the note (4) and turn 1
    taken = snapshot(note, *turn(1), summary)
    again = note_change(taken, strategy, "run")
    assert again is not None
    (restated,) = again.entries
    assert isinstance(restated, ContextNote)
    assert (restated.text, restated.lifetime_turns) == (note.text, 2)
    # Once restated it is read again; nothing more until it changes.
    assert note_change(snapshot(note, *turn(1), summary, restated), strategy, "run") is None
    # Left out by a compaction (expired then) and not alive now: never restated.
    dropped = Compacted(summary="all of it", through_seq=3, dropped=(4,))
    late = snapshot(note, *turn(1), *turn(2), *turn(3), dropped)
    assert note_change(late, strategy, "run") is None
    view = build_messages(late.journal)
    assert "[threadbot: task list]" not in canonical(view)
    assert Compacted.model_validate(dropped.model_dump(mode="json")) == dropped
    assert "dropped" not in Compacted(summary="s", through_seq=3).model_dump(mode="json")


def test_none_keeps_no_turn_whole_at_compaction() -> None:
    journal = snapshot(*turn(1), *turn(2)).journal
    assert cut_at(journal, 0) == len(journal)  # the summary stands for all
    assert cut_at(journal, 2) is not None and cut_at(journal[:3], 0) is not None
    assert cut_at(journal[:1], 0) is None  # no turn yet: nothing to summarize
    compacted = Compacted(summary="all of it", through_seq=journal[-1].seq)
    at = journal[-1].at
    view = build_messages([*journal, JournalRecord(seq=len(journal) + 1, at=at, entry=compacted)])
    assert [m["role"] for m in view] == ["user"]
    assert NoContext().keep_turns == 0 and context_strategy("none", keep_turns=5).keep_turns == 0
