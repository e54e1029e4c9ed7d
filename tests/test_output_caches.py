"""The cache strategies for large tool outputs (issue 25): persistent, in_memory, none.

Each strategy stores, retrieves and previews behind one protocol
(:mod:`core.outputs`). An ``in_memory`` output lives a time to live by the run
context's clock and does not outlive the process: ``read_output`` then tells the
model it is gone and why, as a normal result, while an id never issued keeps its
error. And for each strategy, one console conversation whose command's output is
large is killed with SIGKILL just after that tool result was committed
(``THREADBOT_FAULT=after_tool_result:1``) and restarted: what it keeps of the
output and what the model reads next equal an uninterrupted run's (``persistent``
pages on, ``none`` never had an id), except that ``in_memory`` says the output is
gone, the restart having lost it, and the run goes on.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from bot.app import build
from bot.settings import Settings
from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.context import ManualClock
from core.models.base import ToolKind, ToolSpec
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.outputs import (
    NOTE_ROOM,
    Gone,
    InMemoryOutputs,
    PersistentOutputs,
    cache_strategy,
    look_up,
    preview_text,
)
from core.run.history import build_messages
from core.tools.base import Toolbox, ToolContext, ToolOutput
from core.tools.control import control_tools
from core.tools.outputs import ReadOutput
from core.vocabulary.entries import JournalRecord, ToolResultEntry
from core.vocabulary.people import Person
from core.workflows import default_workflow
from tests.console_process import Bot, command, finish, plan
from tests.harness import Chat

BIG = "".join(f"{n:05d}|" for n in range(8_334))[:50_000]
"""50,000 characters, every stretch of it different."""
LIMIT = 16_000
"""The default ``output_limit``."""
PAGE = LIMIT - NOTE_ROOM
TTL = 600.0
ALICE = Person(id="U0ALICE001", name="alice")
OUTPUT_ID = re.compile(r'read_output\(id="(out_[0-9a-f]{12})", offset=(\d+)\)')


async def conversation(store: MemoryStore, name: str = "c") -> str:
    cid = await store.threads.open_conversation(
        delivery_key=f"m-{name}",
        binding=PlatformRef(platform="console", channel="console", thread=f"m-{name}"),
        requester=ALICE,
        workspace_root=Path("unused"),
        position=default_workflow().start,
    )
    assert cid is not None
    return cid


def result_record(seq: int, content: str) -> JournalRecord:
    return JournalRecord(
        seq=seq,
        at=ManualClock()(),
        entry=ToolResultEntry(tool_use_id=f"toolu_{seq}", content=content),
    )


def no_journal(records: tuple[JournalRecord, ...] = ()) -> Any:
    async def journal() -> tuple[JournalRecord, ...]:
        return records

    return journal


# --- each strategy: store, retrieve, preview ------------------------------------------


async def test_persistent_keeps_the_whole_output_in_the_store_and_previews_it() -> None:
    store = MemoryStore(render=render_event)
    cid, other = await conversation(store, "a"), await conversation(store, "b")
    cache = cache_strategy("persistent", store=store.outputs)
    assert isinstance(cache, PersistentOutputs)

    preview, output_id = await cache.preview(cid, BIG, LIMIT)
    kept = await cache.store(cid, "short")

    assert preview == preview_text(BIG, output_id, LIMIT)
    assert re.fullmatch(r"out_[0-9a-f]{12}", output_id) and kept != output_id
    assert await store.outputs.get_output(cid, output_id) == BIG  # in the store itself
    assert await cache.retrieve(cid, output_id) == BIG
    assert await cache.retrieve(cid, kept) == "short"
    assert await cache.retrieve(other, output_id) is None
    assert await cache.retrieve(cid, "out_000000000000") is None
    assert cache.lost(cid, output_id) is None  # answered as an unknown id, as before


async def test_in_memory_keeps_each_output_for_its_time_to_live_by_the_given_clock() -> None:
    clock = ManualClock()
    cache = cache_strategy("in_memory", ttl=TTL, clock=clock)
    assert isinstance(cache, InMemoryOutputs)

    preview, output_id = await cache.preview("c1", BIG, LIMIT)
    assert preview == preview_text(BIG, output_id, LIMIT)
    assert cache.entries == {("c1", output_id): BIG}
    clock.advance(TTL / 2)
    later = await cache.store("c1", "later")

    clock.advance(TTL / 2 - 1)
    assert await cache.retrieve("c1", output_id) == BIG
    assert await cache.retrieve("c2", output_id) is None  # another conversation's
    clock.advance(1)  # TTL after the first was stored
    expired = Gone(f"it was kept in memory for {TTL:g} s and has expired")
    assert await cache.retrieve("c1", output_id) == expired
    assert await cache.retrieve("c1", output_id) == expired  # dropped, still known
    assert cache.entries == {("c1", later): "later"}
    assert await cache.retrieve("c1", later) == "later"
    assert await cache.retrieve("c1", "out_000000000000") is None

    clock.advance(TTL / 2)
    await cache.store("c1", "newest")  # drops what expired, unread
    assert ("c1", later) not in cache.entries
    assert await cache.retrieve("c1", later) == expired


async def test_none_is_no_cache_and_an_unknown_name_is_refused() -> None:
    assert cache_strategy("none") is None
    with pytest.raises(ValueError, match="no output cache is called 'disk'"):
        cache_strategy("disk")
    with pytest.raises(ValueError, match="needs a store"):
        cache_strategy("persistent")
    with pytest.raises(ValueError, match="above 0"):
        cache_strategy("in_memory", ttl=0)


async def test_an_id_the_journal_names_is_gone_from_a_new_process_and_others_unknown() -> None:
    before = InMemoryOutputs(TTL, ManualClock())
    preview, output_id = await before.preview("c1", BIG, LIMIT)
    journal = no_journal((result_record(3, "small"), result_record(5, preview)))

    after = InMemoryOutputs(TTL, ManualClock())  # a restart: memory is empty
    restarted = Gone("it was kept in memory only, and the bot has restarted since")
    assert await look_up(after, "c1", output_id, journal) == restarted
    assert await look_up(after, "c1", "out_000000000000", journal) is None
    assert await look_up(after, "c1", output_id, no_journal()) is None  # not this one's
    assert await look_up(before, "c1", output_id, journal) == BIG
    persistent = PersistentOutputs(MemoryStore(render=render_event).outputs)
    assert await look_up(persistent, "c1", output_id, journal) is None


# --- read_output with in_memory, in one process and across a restart ------------------


class Big:
    """A read-only tool whose output is :data:`BIG`."""

    spec = ToolSpec(
        name="big",
        description="Print a lot.",
        input_schema={"type": "object", "properties": {}},
        kind=ToolKind.READ_ONLY,
    )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput(content=BIG, note="printed a lot")


def tool_result(model: ScriptedModel, request: int) -> dict[str, Any]:
    """The (one) tool result block in the newest message of request ``request``."""
    (block,) = [
        b for b in model.requests[request].messages[-1]["content"] if b["type"] == "tool_result"
    ]
    return block


def text_of(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else content[0]["text"]


def read(output_id: str, offset: int = 0) -> ScriptedCall:
    return ScriptedCall("read_output", {"id": output_id, "offset": offset})


async def test_in_memory_pages_within_its_time_to_live_and_then_says_the_output_is_gone(
    settings: Settings,
) -> None:
    settings.output_cache, settings.output_cache_ttl = "in_memory", TTL
    clock = ManualClock()
    go_on, later = asyncio.Event(), asyncio.Event()
    reading, late = ScriptedTurn(gate=go_on), ScriptedTurn(gate=later)
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("big")]),
            reading,
            late,
            ScriptedTurn(calls=[read("out_000000000000")]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Read."})]),
        ]
    )
    tools = Toolbox([*control_tools(), Big(), ReadOutput()])
    app = await build(settings, model=model, wall_clock=clock, toolbox=tools)
    await app.start()
    chat = Chat(app)
    await chat.mention("print a lot", settle=False)

    await reading.started.wait()
    preview = text_of(tool_result(model, 1))
    found = OUTPUT_ID.search(preview)
    assert found, preview
    output_id, offset = found[1], int(found[2])
    assert preview == preview_text(BIG, output_id, LIMIT)
    reading.calls = [read(output_id, offset)]
    clock.advance(TTL - 1)
    go_on.set()

    await late.started.wait()
    late.calls = [read(output_id, offset)]
    clock.advance(1)
    later.set()
    await app.hub.settled()
    await app.close()

    page = tool_result(model, 2)
    assert text_of(page) == (
        f"{BIG[offset : offset + PAGE]}\n[characters {offset:,} to {offset + PAGE:,} of "
        f'50,000; next: read_output(id="{output_id}", offset={offset + PAGE})]'
    )
    gone = tool_result(model, 3)
    assert text_of(gone) == (
        f"The output {output_id} is gone: it was kept in memory for 600 s and has expired. "
        "Run the call that made it again if you still need it."
    )
    assert not gone.get("is_error")
    unknown = tool_result(model, 4)
    assert text_of(unknown) == "there is no output 'out_000000000000' in this conversation"
    assert unknown["is_error"] is True
    assert "✅ Read." in "\n".join(chat.said())
    assert await app.store.outputs.get_output(chat.thread, output_id) is None  # never stored


# --- killed after the tool result, restarted: each strategy against a straight run ----

NUMBERS = "seq 1 12000"
"""A command whose output (60,894 characters) is past the output limit."""
SCRIPT = [
    plan("Print the numbers"),
    {"calls": [command(NUMBERS)]},
    {"calls": [{"name": "ask_user", "input": {"question": "Read on?"}}]},
]
NO_ID = "out_000000000000"


def script_with_read(output_id: str, offset: int) -> list[dict[str, Any]]:
    """The script with the turns after the question: read the output on, and finish."""
    read_on = {"name": "read_output", "input": {"id": output_id, "offset": offset}}
    return [*SCRIPT, {"calls": [read_on]}, finish("Read.")]


def journal_of(bot: Bot) -> list[JournalRecord]:
    return [
        JournalRecord.model_validate({"seq": seq, "at": at, "entry": json.loads(body)})
        for seq, at, body in bot.query("select seq, created_at, body from journal order by seq")
    ]


def command_result(bot: Bot) -> str:
    (result,) = [
        r.entry.content
        for r in journal_of(bot)
        if isinstance(r.entry, ToolResultEntry) and r.entry.tool_use_id == "toolu_script_1_0"
    ]
    return result


def finish_after_the_question(bot: Bot, proc: subprocess.Popen[str]) -> None:
    """With ``proc`` waiting for the answer: script the read of the output the preview
    names (an id no run was given, under ``none``), answer, and wait for the end."""
    assert proc.stdin is not None
    try:
        bot.wait_until("select 1 from conversations where wait_kind = 'question'")
        found = OUTPUT_ID.search(command_result(bot))
        output_id, offset = (found[1], int(found[2])) if found else (NO_ID, 0)
        scripted = bot.script.with_suffix(".new")
        scripted.write_text(json.dumps(script_with_read(output_id, offset)))
        scripted.replace(bot.script)  # read whole by the model's next request
        proc.stdin.write(">1 yes\n")
        proc.stdin.flush()
        bot.wait_until("select 1 from conversations where lifecycle = 'done'")
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


def what_the_model_read(bot: Bot) -> list[dict[str, Any]]:
    """The messages of the conversation's last request (each request extends the one
    before), output ids written ``out_ID`` (a run draws its own)."""
    text = json.dumps(build_messages(journal_of(bot)))
    return json.loads(re.sub(r"out_[0-9a-f]{12}", "out_ID", text))


def kept_outputs(bot: Bot) -> list[str]:
    return [content for (content,) in bot.query("select content from tool_outputs")]


def straight_run(tmp_path: Path, cache: str) -> Bot:
    tmp_path.mkdir()
    bot = Bot(tmp_path, SCRIPT, env={"THREADBOT_OUTPUT_CACHE": cache})
    finish_after_the_question(bot, bot.start("print the numbers\n+✅ 2\n"))
    return bot


def killed_run(tmp_path: Path, cache: str) -> Bot:
    tmp_path.mkdir()
    bot = Bot(tmp_path, SCRIPT, env={"THREADBOT_OUTPUT_CACHE": cache})
    killed = bot.run("print the numbers\n+✅ 2\n", fault="after_tool_result:1")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert bot.query("select lifecycle from conversations") == [("running",)]
    finish_after_the_question(bot, bot.start(""))  # restarted: the run resumes
    return bot


def read_output_result(messages: list[dict[str, Any]]) -> dict[str, Any]:
    (block,) = [
        b
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("tool_use_id") == "toolu_script_3_0"
    ]
    return block


NUMBERS_TEXT = "".join(f"{n}\n" for n in range(1, 12_001))


def test_persistent_pages_on_after_a_kill_exactly_as_a_straight_run(tmp_path: Path) -> None:
    straight = straight_run(tmp_path / "straight", "persistent")
    killed = killed_run(tmp_path / "killed", "persistent")

    assert what_the_model_read(killed) == what_the_model_read(straight)
    assert kept_outputs(killed) == kept_outputs(straight)
    (kept,) = kept_outputs(killed)
    assert kept == f"exit code 0\n{NUMBERS_TEXT}"
    offset = PAGE // 2  # where the preview's head ends
    page = text_of(read_output_result(what_the_model_read(killed)))
    assert page == (
        f"{kept[offset : offset + PAGE]}\n[characters {offset:,} to {offset + PAGE:,} of "
        f'{len(kept):,}; next: read_output(id="out_ID", offset={offset + PAGE})]'
    )


def test_in_memory_says_gone_after_a_kill_and_the_run_goes_on(tmp_path: Path) -> None:
    straight = straight_run(tmp_path / "straight", "in_memory")
    killed = killed_run(tmp_path / "killed", "in_memory")

    assert kept_outputs(straight) == kept_outputs(killed) == []  # nothing in the store
    read, lost = what_the_model_read(straight), what_the_model_read(killed)
    page, gone = read_output_result(read), read_output_result(lost)
    assert 'next: read_output(id="out_ID"' in text_of(page)
    assert text_of(gone) == (
        "The output out_ID is gone: it was kept in memory only, and the bot has restarted "
        "since. Run the call that made it again if you still need it."
    )
    assert not gone.get("is_error")
    gone["content"] = page["content"]
    assert lost == read  # all else the model read is the straight run's, to the answer
    assert killed.query("select lifecycle from conversations") == [("done",)]


def test_none_gives_no_id_and_a_kill_changes_nothing(tmp_path: Path) -> None:
    straight = straight_run(tmp_path / "straight", "none")
    killed = killed_run(tmp_path / "killed", "none")

    assert what_the_model_read(killed) == what_the_model_read(straight)
    assert kept_outputs(straight) == kept_outputs(killed) == []
    result = command_result(killed)
    assert "out_" not in result and "read_output" not in result
    assert result.startswith("exit code 0\n1\n2\n3\n")  # the command's own head and tail
    assert "\n[... 44894 characters cut ...]\n" in result
    assert result.endswith("11999\n12000\n\n[output capped at 16000 characters]")
    refused = read_output_result(what_the_model_read(killed))
    assert text_of(refused) == "there is no output 'out_ID' in this conversation"  # NO_ID
    assert refused["is_error"] is True
