"""Compaction (issue 16, acceptance 2): a long conversation's oldest turns become a summary.

The real Anthropic model against the local Messages API fake (which answers 400, as
the API does, when a ``tool_use`` lacks its ``tool_result``), with a small window:
once a call reports a context past ``compact_at`` of it, the next call asks for a
summary in a request that is the previous request with the ask added (the cached
prefix); the summary is journaled and priced; from then on every request starts
with the summary and the newest turns, pairs each ``tool_use`` with its
``tool_result``, and extends the one before, across a wait for a person and a
restart of the bot.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import Any

from bot.settings import Settings
from core.run.compaction import KEEP_TURNS, SUMMARY_ASK, context_tokens, cut_at
from core.vocabulary.entries import AssistantTurn, Compacted, JournalRecord, ModelUsage, UserText
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from tests.fakes.anthropic_server import (
    FakeAnthropicServer,
    Reply,
    check_tool_results,
    text,
    tool_use,
)
from tests.harness import Chat
from tests.test_cache_prefix import assert_each_request_extends_the_one_before, canonical, running

SUMMARY = "Summary: the plan was approved; I wrote a.md (hello) and read it back; b.md is next."
SCRIPT = [
    Reply([tool_use("toolu_01", "propose_plan", {"steps": ["Write", "Ask"]})], input_tokens=900),
    Reply(
        [tool_use("toolu_02", "write_file", {"path": "a.md", "content": "hello\n"})],
        input_tokens=2_000,
    ),
    Reply([tool_use("toolu_03", "read_file", {"path": "a.md"})], input_tokens=3_000),
    Reply([tool_use("toolu_04", "list_files", {})], input_tokens=5_400, output_tokens=200),
    Reply([text(SUMMARY)], input_tokens=5_700, output_tokens=60),  # the summary's call
    Reply([tool_use("toolu_05", "ask_user", {"question": "Which branch?"})], input_tokens=1_500),
    Reply(
        [tool_use("toolu_06", "write_file", {"path": "b.md", "content": "main\n"})],
        input_tokens=1_700,
    ),
    Reply([tool_use("toolu_07", "finish", {"answer": "Written on main."})], input_tokens=1_900),
]


async def test_the_oldest_turns_are_summarized_and_the_context_is_stable_after(
    sqlite_settings: Settings,
) -> None:
    sqlite_settings.context_window = 10_000
    sqlite_settings.compact_at = 0.5  # 5,600 tokens after the fourth call: compact
    async with FakeAnthropicServer(SCRIPT) as server:
        async with running(sqlite_settings, server) as app:
            chat = Chat(app)
            await chat.mention("write a.md, ask me the branch, then write b.md")
            await chat.react(chat.bot_message("📋 Plan (v1)"))
            await app.hub.settled()
            assert str((await chat.snapshot()).status) == "waiting(question)"
            thread = chat.thread
            assert "⏳ summarized the oldest part of this conversation (5,600 tokens" in (
                chat.out.getvalue()
            )

        async with running(sqlite_settings, server) as app:  # a restart during the wait
            chat = Chat(app)
            chat.thread = thread
            await chat.reply("main")
            await app.hub.settled()
            snap = await chat.snapshot()
            assert snap.status.lifecycle is Lifecycle.DONE

    bodies = [r.body for r in server.requests]
    assert len(bodies) == 8 and server.remaining == 0
    before, ask, after = bodies[3], bodies[4], bodies[5:]
    # The summary's request is the previous request with the ask at its end.
    assert canonical(ask["tools"]) == canonical(before["tools"])
    assert canonical(ask["system"]) == canonical(before["system"])
    assert ask["messages"][-1]["content"][-1]["text"] == SUMMARY_ASK
    # After it: the summary first, then the two newest turns (read_file, list_files).
    first = after[0]["messages"][0]
    assert first["role"] == "user"
    assert first["content"][0]["text"].endswith(SUMMARY)
    assert first["content"][1]["text"].startswith("[threadbot: the executing step]")
    assert [
        b["id"] for m in after[0]["messages"] for b in m["content"] if b["type"] == "tool_use"
    ] == [
        "toolu_03",
        "toolu_04",
    ]
    for body in after:
        assert check_tool_results(body["messages"]) is None
    assert_each_request_extends_the_one_before(after)  # the restart included

    (compacted,) = [r for r in snap.journal if isinstance(r.entry, Compacted)]
    assert compacted.entry.summary == SUMMARY
    assert compacted.entry.usage is not None and compacted.entry.usage.input_tokens == 5_700
    kept = [r for r in snap.journal if r.seq > compacted.entry.through_seq]
    assert kept[0].entry.kind == "assistant_turn"
    database = sqlite_settings.database_url.removeprefix("sqlite+aiosqlite:///")
    with sqlite3.connect(database) as db:
        calls = db.execute("select input_tokens from model_calls order by id").fetchall()
    assert [n for (n,) in calls] == [900, 2_000, 3_000, 5_400, 5_700, 1_500, 1_700, 1_900]


def test_nothing_is_summarized_without_more_turns_than_are_kept_or_a_known_size() -> None:
    def record(seq: int, entry: Any) -> JournalRecord:
        return JournalRecord(seq=seq, at=datetime(2026, 12, 1, tzinfo=UTC), entry=entry)

    usage = ModelUsage(model="m", input_tokens=10, output_tokens=2, cache_read_tokens=30)
    request = record(1, UserText(author=Person(id="u", name="u"), text="go"))
    turns = [record(n, AssistantTurn(text=str(n), usage=usage)) for n in range(2, 6)]
    assert context_tokens([request]) is None
    assert context_tokens([request, *turns]) == 42
    assert cut_at([request, *turns[:KEEP_TURNS]]) is None
    assert cut_at([request, *turns]) == 1 + len(turns) - KEEP_TURNS
    summary = record(6, Compacted(summary="s", through_seq=3))
    assert context_tokens([request, *turns, summary]) is None  # not known until the next call
    assert cut_at([request, *turns, summary]) is None  # nothing new since it
