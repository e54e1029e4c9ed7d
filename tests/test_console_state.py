"""The console after a restart: its ids, threads and printed sends come back from its file.

Each "process" is a new ConsoleAdapter on the same state file. The hub is a tiny
fake that answers a mention with a plan and a reply with a note, through ``send``.
"""

from __future__ import annotations

import asyncio
import io
import json
import stat
from pathlib import Path

import pytest

from adapters.console import ConsoleAdapter, StateFileError
from conversations.errors import DeliveryError
from conversations.events import (
    AddReaction,
    CommandInvoked,
    InboundEvent,
    MessagePosted,
    PlatformRef,
    PostReply,
    ReactionChanged,
    UpdateMessage,
)

TOP = PlatformRef(platform="console", channel="console")


class FakeHub:
    """Records events; answers a mention with a plan, a reply with a note (keyed like an outbox)."""

    def __init__(self, adapter: ConsoleAdapter) -> None:
        self.adapter = adapter
        self.events: list[InboundEvent] = []
        self._tasks: list[asyncio.Task[None]] = []

    async def handle(self, event: InboundEvent) -> None:
        self.events.append(event)
        if isinstance(event, MessagePosted):
            self._tasks.append(asyncio.create_task(self._answer(event)))

    async def _answer(self, event: MessagePosted) -> None:
        thread = event.ref.thread or event.ref.message
        assert thread is not None
        text = "📋 Plan (v1)" if event.mentions_bot else f"noted: {event.text}"
        reply = PostReply(ref=event.ref.in_thread(thread), text=text)
        await self.adapter.send(reply, idempotency_key=f"reply:{event.delivery_key}")

    async def settled(self) -> None:
        await asyncio.gather(*self._tasks)


async def process(
    state: Path, text: str, *, session: str = ""
) -> tuple[ConsoleAdapter, FakeHub, list[str]]:
    """One run of the console on ``state``: the adapter, the hub and the printed lines."""
    output = io.StringIO()
    adapter = ConsoleAdapter(
        input=io.StringIO(text), output=output, state_file=state, session=session
    )
    hub = FakeHub(adapter)
    assert await adapter.run(hub, settled=hub.settled) == 0
    adapter.close()  # as the process's end: the next run may use the file
    return adapter, hub, output.getvalue().splitlines()


def files(directory: Path) -> list[Path]:
    return list(directory.iterdir())


def records(state: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in state.read_text(encoding="utf-8").splitlines()]


async def test_after_a_restart_the_plan_of_the_first_process_can_be_approved(
    tmp_path: Path,
) -> None:
    state = tmp_path / "console" / "state.jsonl"  # the directory is created
    _, first, lines = await process(state, "the login test is flaky\n+👀 1\n")
    assert lines == [
        "[1] you: the login test is flaky",
        "  [2] ↳1 threadbot: 📋 Plan (v1)",
        "[1] +👀 you",
    ]
    session = records(state)[0]["session"]  # a new file's own, in every key and ref
    assert isinstance(session, str) and session
    assert records(state) == [
        {"session": session},
        {"id": 1, "root": 1, "key": None, "author": "you"},
        {"id": 2, "root": 1, "key": f"reply:console:{session}:1", "author": "threadbot"},
        {"counter": 1},
    ]
    assert files(state.parent) == [state]  # every event handed: none kept pending
    assert {event.ref.workspace for event in first.events} == {session}

    _, second, lines = await process(state, "+✅ 2\n>2 use one per test\nanother one\n/stop 2\n")

    approve, reply, mention, stop = second.events
    assert isinstance(approve, ReactionChanged)
    assert approve.delivery_key == f"console:{session}:r2" != first.events[1].delivery_key
    assert (approve.ref.thread, approve.ref.message, approve.emoji) == (
        "1",
        "2",
        "white_check_mark",
    )
    assert isinstance(reply, MessagePosted)
    assert (reply.ref.thread, reply.ref.message) == ("1", "3")
    assert reply.delivery_key == f"console:{session}:3"
    assert isinstance(mention, MessagePosted) and mention.mentions_bot
    assert mention.delivery_key == f"console:{session}:5" != first.events[0].delivery_key
    assert isinstance(stop, CommandInvoked)
    assert (stop.args, stop.ref.thread, stop.delivery_key) == ("1", "1", f"console:{session}:r3")
    assert lines == [
        "  [2] +✅ you",
        "  [3] ↳1 you: use one per test",
        "  [4] ↳1 threadbot: noted: use one per test",
        "[5] you: another one",
        "  [6] ↳5 threadbot: 📋 Plan (v1)",
        "  ↳1 you: /stop 1",
    ]


async def test_a_send_printed_by_an_earlier_process_is_not_printed_again(tmp_path: Path) -> None:
    state = tmp_path / "state.jsonl"
    await process(state, "fix it\n")  # the plan [2] was sent with key reply:console:S:1
    session = records(state)[0]["session"]

    output = io.StringIO()
    adapter = ConsoleAdapter(input=io.StringIO(""), output=output, state_file=state)
    plan = PostReply(ref=TOP.in_thread("1"), text="📋 Plan (v1)")
    assert await adapter.send(plan, idempotency_key=f"reply:console:{session}:1") == "2"
    assert output.getvalue() == ""
    assert await adapter.send(plan, idempotency_key="tb-new") == "3"
    assert output.getvalue().splitlines() == ["  [3] ↳1 threadbot: 📋 Plan (v1)"]


async def test_edits_reactions_and_replies_to_earlier_threads_print_under_them(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.jsonl"
    first = ConsoleAdapter(input=io.StringIO(""), output=io.StringIO(), state_file=state)
    assert await first.send(PostReply(ref=TOP, text="shall I?"), idempotency_key="a") == "1"
    assert await first.send(PostReply(ref=TOP.in_thread("1"), text="ok"), idempotency_key="b")
    at_2 = TOP.model_copy(update={"message": "2"})  # no thread given: the console knows it
    await first.send(UpdateMessage(ref=at_2, text="ok!"), idempotency_key="c")
    await first.send(AddReaction(ref=at_2, emoji="x"), idempotency_key="d")
    first.close()

    output = io.StringIO()
    second = ConsoleAdapter(input=io.StringIO(""), output=output, state_file=state)
    for key in "cd":  # redelivered after a crash: already printed
        assert await second.send(UpdateMessage(ref=at_2, text="ok!"), idempotency_key=key) is None
    assert await second.send(PostReply(ref=TOP.in_thread("1"), text="more"), idempotency_key="e")
    await second.send(UpdateMessage(ref=at_2, text="ok?"), idempotency_key="f")
    await second.send(AddReaction(ref=at_2, emoji="white_check_mark"), idempotency_key="g")
    assert output.getvalue().splitlines() == [
        "  [3] ↳1 threadbot: more",
        "  [2] ↳1 threadbot (edited): ok?",
        "  [2] +✅ threadbot",
    ]


async def test_a_line_torn_by_a_crash_is_dropped_and_the_file_stays_whole(tmp_path: Path) -> None:
    state = tmp_path / "state.jsonl"
    await process(state, "fix it\n")
    with state.open("ab") as file:
        file.write(b'{"id": 3, "root": 1, "key": "reply:con')  # the crash

    _, _, lines = await process(state, ">2 and the flaky one\n")
    assert lines[0] == "  [3] ↳1 you: and the flaky one"
    assert [r.get("id") for r in records(state)] == [None, 1, 2, 3, 4]  # every line parses

    _, _, lines = await process(state, "+✅ 4\n")
    assert lines == ["  [4] +✅ you"]


async def test_a_full_last_line_without_its_newline_is_kept(tmp_path: Path) -> None:
    state = tmp_path / "state.jsonl"
    state.write_text('{"id": 4, "root": 4, "key": null, "author": "you"}', encoding="utf-8")
    _, hub, _ = await process(state, "hi\n")
    assert hub.events[0].delivery_key == "console:5"
    assert [r["id"] for r in records(state)] == [4, 5, 6]


async def test_a_damaged_file_is_an_error_at_start(tmp_path: Path) -> None:
    state = tmp_path / "state.jsonl"
    state.write_text(
        '{"id": 1, "root": 1, "key": null, "author": "you"}\nnot json\n{"counter": 1}\n'
    )
    with pytest.raises(StateFileError, match="bad line 2"):
        ConsoleAdapter(input=io.StringIO(""), output=io.StringIO(), state_file=state)
    with pytest.raises(StateFileError, match="cannot open"):
        ConsoleAdapter(input=io.StringIO(""), output=io.StringIO(), state_file=tmp_path)


async def test_a_send_that_cannot_be_recorded_is_a_delivery_error_once(tmp_path: Path) -> None:
    state = tmp_path / "state.jsonl"
    output = io.StringIO()
    adapter = ConsoleAdapter(input=io.StringIO(""), output=output, state_file=state)
    state.unlink()
    state.mkdir()  # appending now fails
    with pytest.raises(DeliveryError, match="not recorded"):
        await adapter.send(PostReply(ref=TOP, text="hello"), idempotency_key="a")
    assert await adapter.send(PostReply(ref=TOP, text="hello"), idempotency_key="a") == "1"
    assert output.getvalue().splitlines() == ["[1] threadbot: hello"]


async def test_a_session_still_prefixes_the_delivery_keys(tmp_path: Path) -> None:
    _, hub, _ = await process(tmp_path / "state.jsonl", "hi\n", session="s1")
    (mention,) = hub.events
    assert (mention.delivery_key, mention.ref.workspace) == ("console:s1:1", "s1")


async def test_without_a_state_file_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    adapter = ConsoleAdapter(input=io.StringIO("hi\n"), output=io.StringIO())
    hub = FakeHub(adapter)
    await adapter.run(hub, settled=hub.settled)
    assert files(tmp_path) == []


async def test_a_second_console_on_the_same_file_is_refused_until_the_first_closes(
    tmp_path: Path,
) -> None:
    """Two consoles on one file would number different messages alike, and a reply by id
    would go to the other's thread: the second is a start error, and the file is kept."""
    state = tmp_path / "state.jsonl"
    await process(state, "fix it\n")
    holding = ConsoleAdapter(input=io.StringIO(""), output=io.StringIO(), state_file=state)
    before = state.read_bytes()
    with pytest.raises(StateFileError, match="in use by another threadbot console"):
        ConsoleAdapter(input=io.StringIO(""), output=io.StringIO(), state_file=state)
    assert state.read_bytes() == before

    holding.close()
    _, hub, lines = await process(state, ">2 and the flaky one\n")
    assert lines[0] == "  [3] ↳1 you: and the flaky one"  # numbered on from the file
    assert hub.events[0].delivery_key.endswith(":3")


class DyingHub(FakeHub):
    """A hub the process dies in, as a kill would, before it records anything."""

    async def handle(self, event: InboundEvent) -> None:
        raise SystemExit(-9)


async def died_typing(state: Path, line: str) -> None:
    """A console on ``state`` that shows a mention and its plan, then, in a second one,
    ``line``, and dies before the bot has it (:class:`DyingHub`)."""
    await process(state, "fix it\n")
    dying = ConsoleAdapter(input=io.StringIO(line), output=io.StringIO(), state_file=state)
    with pytest.raises(SystemExit):
        await dying.run(DyingHub(dying))
    dying.close()


async def test_what_was_typed_just_before_a_crash_is_handed_to_the_bot_at_the_next_start(
    tmp_path: Path,
) -> None:
    """A message printed with its id and never handed (the process died between the two)
    was lost: its id answered nothing after the restart. Now the next console hands it."""
    state = tmp_path / "state.jsonl"
    await died_typing(state, ">2 and the flaky one\n")
    pending = tmp_path / "state.jsonl.pending"
    assert (
        "and the flaky one" in pending.read_text() and stat.S_IMODE(pending.stat().st_mode) == 0o600
    )
    assert "and the flaky one" not in state.read_text()  # what people type: only until handed

    _, hub, lines = await process(state, "")
    assert [(e.delivery_key.rsplit(":", 1)[1], e.text) for e in hub.events] == [  # type: ignore[union-attr]
        ("3", "and the flaky one")
    ]
    assert lines == [
        "* handed to the bot now: typed before the last console ended",
        "  [3] ↳1 you: and the flaky one",
        "  [4] ↳1 threadbot: noted: and the flaky one",
    ]
    _, again, _ = await process(state, "")  # handed once
    assert again.events == []
    assert files(tmp_path) == [state]


class RefusingHub(FakeHub):
    """A hub that fails every event (the store cannot be written, say)."""

    async def handle(self, event: InboundEvent) -> None:
        raise RuntimeError("the store is read-only")


async def test_a_pending_line_the_bot_refuses_is_a_start_error_saying_how_to_drop_it(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state.jsonl"
    await died_typing(state, ">2 more\n")

    refused = ConsoleAdapter(input=io.StringIO(""), output=io.StringIO(), state_file=state)
    with pytest.raises(StateFileError, match=r"read-only\); start again .* delete .*\.pending"):
        await refused.run(RefusingHub(refused))
    refused.close()
    _, hub, _ = await process(state, "")  # kept: the next start hands it
    assert [e.delivery_key.rsplit(":", 1)[1] for e in hub.events] == ["3"]


async def test_a_pending_file_beside_a_new_state_file_is_dropped_and_said(tmp_path: Path) -> None:
    state = tmp_path / "state.jsonl"
    await died_typing(state, ">2 more\n")
    state.unlink()  # "delete the state file to start afresh", the pending one left behind

    _, hub, lines = await process(state, "new start\n")
    assert hub.events and all(e.ref.workspace == records(state)[0]["session"] for e in hub.events)
    assert lines[:2] == [
        "* 1 line(s) typed before the last console ended could not be read, or were typed "
        "beside another state file: dropped",
        "[1] you: new start",
    ]
    assert files(tmp_path) == [state]
