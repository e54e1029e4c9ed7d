"""A message sent while a run works: acknowledged at once, then handled by the busy mode.

The same stories on Slack (the real bolt app and slack-sdk against FakeSlackApi),
Discord (the real discord.py against FakeDiscord) and the console (the hub, printed
by the console adapter): the model's first turn is held on its gate while a person
writes in the thread, so the message surely comes mid-run. Each test reads the 👀
the fake platform received on that message, the line the thread was told, what the
scripted model received next, and what the store holds.
docs/architecture.md, "What a person sees".
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bot.app import App, build
from conversations.events import MessagePosted, PostReply
from core.models.anthropic import anthropic_model_from
from core.models.base import Model, ModelEvent, ModelRequest
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.entries import UserText
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolState
from tests.conftest import wait_for
from tests.fakes.anthropic_server import FakeAnthropicServer, tool_use
from tests.fakes.slack_api import TEAM_ID
from tests.harness import Chat
from tests.platform_threads import DISCORD_USERS, PEOPLE, ConsoleThread, on
from tests.slack_harness import CHANNEL
from tests.test_discord_story import (
    GUILD_ID,
    _restore_discord_py,  # noqa: F401  (restores discord.py)
    fixture,
)
from tests.test_settings_layers import OTHER, layered
from tests.test_slack_story import finish

PLATFORMS = pytest.mark.parametrize("platform", ["slack", "discord", "console"])
_said = itertools.count(1)
WAIT = 30.0
"""Seconds a test waits for what it expects (a slow, shared machine)."""


class Busy:
    """One thread on a platform, spoken to without waiting for runs to end."""

    def __init__(self, platform: str, thread: Any) -> None:
        self.platform = platform
        self.t = thread
        self.app: App = thread.app
        self.root = ""

    async def mention(self, text: str, by: str = "alice") -> None:
        """``by`` mentions the bot; returns once the hub has it (the run may go on)."""
        if self.platform == "slack":
            self.root = await self.t.ws.mention(text, by=PEOPLE["slack"][by], settle=False)
        elif self.platform == "discord":
            g = self.t.g
            d = g.mention_d(text, by=PEOPLE["discord"][by])
            await g.dispatch("MESSAGE_CREATE", d, settle=False)
            self.root = self.t.thread = str(d["id"])
        else:
            chat: Chat = self.t.chat
            await chat.mention(text, by=by, settle=False)
            self.root = chat.thread

    async def say(self, text: str, by: str = "alice") -> str:
        """``by`` writes in the thread (no mention); returns the message's id."""
        if self.platform == "slack":
            ws = self.t.ws
            ts = str(
                ws.api.add_message(CHANNEL, text, user=PEOPLE["slack"][by], thread_ts=self.root)[
                    "ts"
                ]
            )
            await ws.deliver(
                "events_api", ws.message_body(ts, text, by=PEOPLE["slack"][by], thread=self.root)
            )
            return ts
        if self.platform == "discord":
            g = self.t.g
            user = PEOPLE["discord"][by]
            d = fixture("message_create_in_thread")
            d.update(id=g.fake.snowflake(), channel_id=self.root, content=text, guild_id=GUILD_ID)
            username, global_name = DISCORD_USERS[user]
            d["author"].update(id=user, username=username, global_name=global_name)
            await g.dispatch("MESSAGE_CREATE", d, settle=False)
            return str(d["id"])
        chat: Chat = self.t.chat
        key = f"busy-{next(_said)}"
        await self.app.hub.handle(
            MessagePosted(
                delivery_key=key, ref=chat._ref(key, by), author=chat.person(by), text=text
            )
        )
        return key

    def seen(self) -> list[str]:
        """The messages the platform received the bot's 👀 on, in order."""
        if self.platform == "slack":
            return [
                str(c.args["timestamp"])
                for c in self.t.ws.calls("reactions.add")
                if c.args.get("name") == "eyes"
            ]
        if self.platform == "discord":
            return [
                c.path.split("/")[4]
                for c in self.t.g.calls()
                if c.method == "PUT" and c.path.endswith("/reactions/👀/@me")
            ]
        lines = self.t.chat.out.getvalue().splitlines()
        return [line.split("]")[0].strip(" [") for line in lines if line.endswith("+👀 threadbot")]

    def posts(self) -> list[str]:
        """The bot's messages in the thread, oldest first."""
        if self.platform == "slack":
            return [str(m["text"]) for m in self.t.ws.posts(self.root)]
        if self.platform == "discord":
            return self.t.g.posts(self.root)
        return self.t.posts()

    async def told(self, start: str, times: int = 1) -> None:
        """Wait until ``times`` lines starting with ``start`` are in the outbox (the hub
        has taken the messages: their jobs are queued)."""

        async def said() -> bool:
            actions = [r.action for r in await self.app.store.outbox.rows()]
            lines = [a for a in actions if isinstance(a, PostReply) and a.text.startswith(start)]
            return len(lines) >= times

        await wait_for(said, seconds=WAIT)

    async def settle(self) -> None:
        await self.t.settle()

    async def snapshot(self) -> ConversationSnapshot:
        if self.platform == "slack":
            return await self.t.ws.snapshot(self.root)
        if self.platform == "discord":
            return await self.t.g.snapshot(self.root)
        return await self.t.chat.snapshot()


async def started(turn: ScriptedTurn) -> None:
    await asyncio.wait_for(turn.started.wait(), WAIT)


def held(*calls: ScriptedCall) -> ScriptedTurn:
    """A turn the model gives only once the test opens its gate."""
    return ScriptedTurn(calls=calls, gate=asyncio.Event())


def texts(request: ModelRequest) -> list[str]:
    """The text blocks of the request's last (user) message."""
    content = request.messages[-1]["content"]
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if b.get("type") == "text"]


def results(request: ModelRequest) -> dict[str, str]:
    """The tool results of the request's last message, by call id."""
    content = request.messages[-1]["content"]
    return {b["tool_use_id"]: str(b["content"]) for b in content if b.get("type") == "tool_result"}


def paired(request: ModelRequest) -> bool:
    """Every ``tool_use`` is answered by exactly one ``tool_result`` in the next message,
    and every result answers a call of the message before it (the Messages API's rule)."""
    messages = request.messages
    for i, message in enumerate(messages):
        content = message["content"] if isinstance(message["content"], list) else []
        uses = [b["id"] for b in content if b.get("type") == "tool_use"]
        answers = [b["tool_use_id"] for b in content if b.get("type") == "tool_result"]
        before = messages[i - 1]["content"] if i else []
        asked = [b["id"] for b in before if isinstance(b, dict) and b.get("type") == "tool_use"]
        if sorted(answers) != sorted(asked):
            return False
        if uses and i + 1 >= len(messages):
            return False
    return True


# --- steer ---------------------------------------------------------------------------------


@PLATFORMS
async def test_steer_a_message_mid_run_is_seen_told_and_read_as_a_note(platform, settings) -> None:
    first = held(ScriptedCall("list_files", {}))
    model = ScriptedModel([first, finish("Here is what I found.")])
    settings.busy_mode = "steer"
    async with on(platform, settings, model) as t:
        b = Busy(platform, t)
        await b.mention("what is in the workspace? workflow=chat")
        await started(first)
        said = await b.say("also look at the README")
        await b.told("💬 Noted")
        assert first.gate is not None
        first.gate.set()
        await b.settle()

        assert b.seen() == [said]
        notice = next(p for p in b.posts() if p.startswith("💬 Noted"))
        assert "I'll read this before my next step" in notice
        assert b.posts()[-1].startswith("✅ Here is what I found.")
        assert len(model.requests) == 2
        assert any(
            s.endswith("(note while you work): also look at the README")
            for s in texts(model.requests[1])
        )
        snap = await b.snapshot()
        notes = [r.entry for r in snap.journal if isinstance(r.entry, UserText)]
        assert [(n.role, n.text) for n in notes][-1] == ("note", "also look at the README")
        assert await b.app.store.inbox.unhandled() == []


# --- queue ---------------------------------------------------------------------------------


@PLATFORMS
async def test_queue_messages_mid_run_start_the_next_run_together(platform, settings) -> None:
    first = held(ScriptedCall("list_files", {}))
    model = ScriptedModel([first, finish("First answer."), finish("Second answer.")])
    settings.busy_mode = "queue"
    async with on(platform, settings, model) as t:
        b = Busy(platform, t)
        await b.mention("what is in the workspace? workflow=chat")
        await started(first)
        one = await b.say("then count the files")
        await b.told("📥 Queued")
        two = await b.say("and name the biggest")
        await b.told("📥 Queued", times=2)
        assert first.gate is not None
        first.gate.set()
        await b.settle()

        assert b.seen() == [one, two]
        posts = b.posts()
        assert sum(p.startswith("📥 Queued") for p in posts) == 2
        assert all(
            p.endswith("I'll take this up when the current run ends.")
            for p in posts
            if p.startswith("📥 Queued")
        )
        answers = [p for p in posts if p.startswith("✅")]
        assert [a.split("\n")[0] for a in answers] == ["✅ First answer.", "✅ Second answer."]
        assert len(model.requests) == 3
        # the run at work never saw them; the next run got both, in order, as its request
        assert not any("count the files" in s for s in texts(model.requests[1]))
        assert any(
            s.endswith("then count the files\n\nand name the biggest")
            for s in texts(model.requests[2])
        )
        snap = await b.snapshot()
        requests = [
            r.entry.text
            for r in snap.journal
            if isinstance(r.entry, UserText) and r.entry.role == "request"
        ]
        assert requests[-1] == "then count the files\n\nand name the biggest"
        assert snap.status.lifecycle is Lifecycle.DONE
        assert await b.app.store.inbox.unhandled() == []


@PLATFORMS
async def test_queue_a_run_that_ends_asking_gets_the_queued_message_as_its_answer(
    platform, settings
) -> None:
    first = held(ScriptedCall("list_files", {}))
    ask = ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": "Which file should I read?"})])
    model = ScriptedModel([first, ask, finish("Read it.")])
    settings.busy_mode = "queue"
    async with on(platform, settings, model) as t:
        b = Busy(platform, t)
        await b.mention("read something for me workflow=chat")
        await started(first)
        said = await b.say("the README")
        await b.told("📥 Queued")
        assert first.gate is not None
        first.gate.set()
        await b.settle()

        assert b.seen() == [said]
        assert len(model.requests) == 3
        asked = list(results(model.requests[2]).values())  # the ask_user call's result
        assert len(asked) == 1 and "the README" in asked[0], asked
        snap = await b.snapshot()
        answers = [
            r.entry.text
            for r in snap.journal
            if isinstance(r.entry, UserText) and r.entry.role == "answer"
        ]
        assert answers == ["the README"]
        assert snap.status.lifecycle is Lifecycle.DONE
        assert b.posts()[-1].startswith("✅ Read it.")


@PLATFORMS
async def test_queue_a_number_sent_before_the_question_is_an_answer_in_words(
    platform, settings
) -> None:
    """``2`` is queued while the run works, before it asks a question with options: when
    the run ends waiting on it, the message answers in words (the person had not seen
    the options), never as the pick of option 2."""
    first = held(ScriptedCall("list_files", {}))
    options = {"question": "Which file should I read?", "options": ["a.txt", "b.txt"]}
    ask = ScriptedTurn(calls=[ScriptedCall("ask_user", options)])
    model = ScriptedModel([first, ask, finish("Read it.")])
    settings.busy_mode = "queue"
    async with on(platform, settings, model) as t:
        b = Busy(platform, t)
        await b.mention("read something for me workflow=chat")
        await started(first)
        said = await b.say("2")
        await b.told("📥 Queued")
        assert first.gate is not None
        first.gate.set()
        await b.settle()

        assert b.seen() == [said]
        assert len(model.requests) == 3
        [told] = results(model.requests[2]).values()
        assert told.endswith(" answered: 2") and "chose option" not in told, told
        snap = await b.snapshot()
        answers = [
            r.entry.text
            for r in snap.journal
            if isinstance(r.entry, UserText) and r.entry.role == "answer"
        ]
        assert answers == ["2"]
        assert b.posts()[-1].startswith("✅ Read it.")


# --- interrupt -----------------------------------------------------------------------------


@PLATFORMS
async def test_interrupt_by_the_requester_cancels_the_calls_not_run(platform, settings) -> None:
    first = held(
        ScriptedCall("list_files", {}),
        ScriptedCall("read_file", {"path": "README.md"}),
    )
    model = ScriptedModel([first, finish("Hi.")])
    settings.busy_mode = "interrupt"
    async with on(platform, settings, model) as t:
        b = Busy(platform, t)
        await b.mention("look through the workspace workflow=chat")
        await started(first)
        said = await b.say("never mind, just say hi")
        await b.told("⏸ Interrupting")
        assert first.gate is not None
        first.gate.set()
        await b.settle()

        assert b.seen() == [said]
        assert any(p.startswith("⏸ Interrupting") for p in b.posts())
        assert b.posts()[-1].startswith("✅ Hi.")
        snap = await b.snapshot()
        states = [r.state for r in snap.tool_calls.values() if r.name != "finish"]
        assert states == [ToolState.CANCELLED, ToolState.CANCELLED]
        assert len(model.requests) == 2
        after = model.requests[1]
        assert paired(after)
        assert all(v.startswith("Not run:") for v in results(after).values())
        assert len(results(after)) == 2
        assert any(
            s.endswith(
                "(interrupted you; the calls not yet run were cancelled): never mind, just say hi"
            )
            for s in texts(after)
        )
        assert await b.app.store.inbox.unhandled() == []


@PLATFORMS
async def test_interrupt_by_someone_else_is_steered_and_they_are_told(platform, settings) -> None:
    first = held(ScriptedCall("list_files", {}))
    model = ScriptedModel([first, finish("Listed.")])
    settings.busy_mode = "interrupt"
    async with on(platform, settings, model) as t:  # bob asks and approves; alice may not stop
        b = Busy(platform, t)
        await b.mention("list the workspace workflow=chat", by="bob")
        await started(first)
        said = await b.say("stop, do something else", by="alice")
        await b.told("Only the requester or an approver can interrupt")
        [(key, _, _)] = await b.app.store.inbox.unhandled()  # her message, not yet read
        assert await b.app.store.inbox.busy_mode(key) == "steer"  # what she was told
        assert first.gate is not None
        first.gate.set()
        await b.settle()

        assert b.seen() == [said]
        snap = await b.snapshot()
        assert [r.state for r in snap.tool_calls.values() if r.name == "list_files"] == [
            ToolState.DONE
        ]
        assert paired(model.requests[1])
        assert any(
            s.endswith("(note while you work): stop, do something else")
            for s in texts(model.requests[1])
        )
        assert b.posts()[-1].startswith("✅ Listed.")


# --- not busy --------------------------------------------------------------------------------


async def test_a_message_when_no_run_works_gets_no_eyes(settings) -> None:
    model = ScriptedModel([finish("One."), finish("Two.")])
    settings.busy_mode = "queue"
    async with on("console", settings, model) as t:
        assert isinstance(t, ConsoleThread)
        b = Busy("console", t)
        await b.mention("say one workflow=chat")
        await b.settle()
        await b.say("now say two")
        await b.settle()
        assert b.seen() == []
        assert not any(p.startswith("📥") for p in b.posts())
        assert b.posts()[-1].startswith("✅ Two.")


# --- durable -------------------------------------------------------------------------------


async def test_a_queued_message_survives_a_crash_between_its_eyes_and_the_next_run(
    sqlite_settings,
) -> None:
    """The message is in the inbox before it is acknowledged; a process that dies with it
    queued hands it to the next start, which runs it after the resumed run (and does not
    acknowledge it again)."""
    settings = sqlite_settings
    settings.busy_mode = "queue"
    settings.approvers = ["bob"]
    first = held(ScriptedCall("list_files", {}))
    before = await build(settings, model=ScriptedModel([first]))
    chat = Chat(before)
    await before.start()
    await chat.mention("what is in the workspace? workflow=chat", settle=False)
    await started(first)
    b = Busy("console", _Console(before, chat))
    said = await b.say("then count the files")
    await b.told("📥 Queued")
    assert b.seen() == [said]
    assert [key for key, _, _ in await before.store.inbox.unhandled()] == [said]
    await before.close()  # the process ends mid-run, the message still queued

    model = ScriptedModel([finish("First answer."), finish("Second answer.")])
    after = await build(settings, model=model)
    again = Chat(after)
    again.thread = chat.thread
    await after.start()
    try:
        await after.hub.settled()
        assert len(model.requests) == 2
        assert any(s.endswith("then count the files") for s in texts(model.requests[1]))
        assert not any("count the files" in s for s in texts(model.requests[0]))
        assert await after.store.inbox.unhandled() == []
        assert "👀" not in again.out.getvalue()  # acknowledged once, before the crash
        shown = again.out.getvalue()
        assert shown.index("✅ First answer.") < shown.index("✅ Second answer.")
    finally:
        await after.close()


class _Console:
    """What :class:`Busy` reads of a console thread, for a bot built by the test."""

    def __init__(self, app: App, chat: Chat) -> None:
        self.app, self.chat = app, chat


async def _crash_after_eyes(settings: Any, mode: str, text: str, line: str) -> tuple[Chat, str]:
    """A bot with ``busy_mode`` ``mode`` gets ``text`` from the requester mid-run, says
    ``line`` about it (its 👀 too), and dies with the run at work and the message not
    journaled. Returns the thread and the message's delivery key."""
    settings.busy_mode = mode
    settings.approvers = ["bob"]
    first = held(ScriptedCall("list_files", {}))
    before = await build(settings, model=ScriptedModel([first]))
    chat = Chat(before)
    await before.start()
    try:
        await chat.mention("look through the workspace workflow=chat", settle=False)
        await started(first)
        b = Busy("console", _Console(before, chat))
        said = await b.say(text)
        await b.told(line)
        assert b.seen() == [said]
        assert [key for key, _, _ in await before.store.inbox.unhandled()] == [said]
        assert await before.store.inbox.busy_mode(said) == mode  # kept with the message
    finally:
        await before.close()  # the process ends mid-run, the message kept in the inbox
    return chat, said


def three_calls() -> ScriptedTurn:
    """The resumed run's turn: three calls, given once the test opens its gate (the
    message queued again by then)."""
    return held(*(ScriptedCall("list_files", {}, id=f"toolu_{n}") for n in (1, 2, 3)))


async def _restarted(
    settings: Any, chat: Chat, mode: str, model: ScriptedModel, *, held: ScriptedTurn | None
) -> tuple[App, Chat]:
    """The next start, its ``busy_mode`` now ``mode``: the resumed run, then the message
    queued again. With ``held`` (the model's first turn, given once the test opens its
    gate) the message is queued again only once the resumed run is in that model call,
    and this returns once it waits behind the run: a start queues it right after the
    run, which, on a busy machine, may read it at its first turn boundary instead."""
    settings.busy_mode = mode
    after = await build(settings, model=model)
    again = Chat(after)
    again.thread = chat.thread
    if held is None:
        await after.start()  # resumes the run, then queues the message again
        return after, again
    resume = after.hub.resume_unhandled

    async def later(only: object = None) -> int:
        return 0

    after.hub.resume_unhandled = later  # type: ignore[method-assign]
    await after.start()  # resumes the run
    await started(held)
    after.hub.resume_unhandled = resume  # type: ignore[method-assign]
    assert await after.hub.resume_unhandled() == 1
    cid = (await again.snapshot()).id
    await wait_for(lambda: after.hub.stopper._queue.queued(cid))
    return after, again


async def test_an_interrupt_told_before_a_crash_still_interrupts_after_it_as_steer(
    sqlite_settings,
) -> None:
    """The 👀 line said ``⏸ Interrupting``: the run resumed after the crash stops at its
    tool boundary though the channel now steers (the mode is kept with the message)."""
    chat, _said = await _crash_after_eyes(
        sqlite_settings, "interrupt", "never mind, just say hi", "⏸ Interrupting"
    )
    turn = three_calls()
    model = ScriptedModel([turn, finish("Hi.")])
    after, again = await _restarted(sqlite_settings, chat, "steer", model, held=turn)
    try:
        assert turn.gate is not None
        turn.gate.set()
        await after.hub.settled()
        snap = await again.snapshot()
        assert await after.store.inbox.unhandled() == []
    finally:
        await after.close()

    calls = [snap.tool_calls[f"toolu_{n}"].state for n in (1, 2, 3)]
    assert calls == [ToolState.CANCELLED] * 3
    request = model.requests[1]
    assert paired(request)
    assert all(v.startswith("Not run: alice interrupted") for v in results(request).values())
    assert texts(request)[-1].endswith("never mind, just say hi")


async def test_a_message_queued_before_a_crash_is_not_an_interrupt_after_it(
    sqlite_settings,
) -> None:
    """The 👀 line said ``📥 Queued``: after the crash, with the channel set to
    ``interrupt`` now, the resumed run's calls all run and the message is the next
    run's request, as the person was told."""
    chat, _said = await _crash_after_eyes(
        sqlite_settings, "queue", "then count the files", "📥 Queued"
    )
    turn = three_calls()
    model = ScriptedModel([turn, finish("First answer."), finish("Second answer.")])
    after, again = await _restarted(sqlite_settings, chat, "interrupt", model, held=turn)
    try:
        assert turn.gate is not None
        turn.gate.set()
        await after.hub.settled()
        snap = await again.snapshot()
        assert await after.store.inbox.unhandled() == []
    finally:
        await after.close()

    calls = [snap.tool_calls[f"toolu_{n}"].state for n in (1, 2, 3)]
    assert calls == [ToolState.DONE] * 3
    assert not any(v.startswith("Not run") for v in results(model.requests[1]).values())
    assert len(model.requests) == 3
    assert not any("count the files" in s for s in texts(model.requests[1]))
    assert texts(model.requests[2])[-1].endswith("then count the files")
    requests = [
        r.entry.text
        for r in snap.journal
        if isinstance(r.entry, UserText) and r.entry.role == "request"
    ]
    assert requests[-1] == "then count the files"


async def test_a_number_queued_before_a_crash_answers_the_question_after_it_in_words(
    sqlite_settings,
) -> None:
    """``2`` was queued before the run asked anything; after the crash (the channel now
    steers) the resumed run asks a question with options and the message answers it
    as words, not as the pick of option 2."""
    chat, _said = await _crash_after_eyes(sqlite_settings, "queue", "2", "📥 Queued")
    ask = ScriptedTurn(
        calls=[ScriptedCall("ask_user", {"question": "Which one?", "options": ["a", "b", "c"]})]
    )
    model = ScriptedModel([ask, finish("Noted.")])
    after, again = await _restarted(sqlite_settings, chat, "steer", model, held=None)
    try:
        await after.hub.settled()
        snap = await again.snapshot()
    finally:
        await after.close()

    assert len(model.requests) == 2
    assert list(results(model.requests[1]).values()) == ["alice answered: 2"]
    answers = [
        r.entry.text
        for r in snap.journal
        if isinstance(r.entry, UserText) and r.entry.role == "answer"
    ]
    assert answers == ["2"]


# --- interrupt, through the real anthropic client ------------------------------------------


class _Held:
    """The real model, its first answer held until ``gate`` is set (``started`` once asked)."""

    def __init__(self, model: Model) -> None:
        self.model, self.name = model, model.name
        self.gate, self.started = asyncio.Event(), asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if not self.started.is_set():
            self.started.set()
            await self.gate.wait()
        async for event in self.model.stream(request):
            yield event


async def test_an_interrupted_turn_is_a_request_the_messages_api_takes(settings) -> None:
    """The Messages API fake refuses a request whose ``tool_use`` blocks are not each
    answered by one ``tool_result``: the request after an interrupt goes through."""
    settings.busy_mode = "interrupt"
    script = [
        [
            tool_use("toolu_a", "list_files", {}),
            tool_use("toolu_b", "read_file", {"path": "README.md"}),
        ],
        [tool_use("toolu_c", "finish", {"answer": "Hi."})],
    ]
    async with FakeAnthropicServer(script) as server:
        real = anthropic_model_from(api_key="test-key", base_url=server.base_url, model="claude-t")
        model = _Held(real)
        app = await build(settings, model=model)
        chat = Chat(app)
        await app.start()
        try:
            await chat.mention("look through the workspace workflow=chat", settle=False)
            await asyncio.wait_for(model.started.wait(), WAIT)
            b = Busy("console", _Console(app, chat))
            said = await b.say("never mind, just say hi")
            await b.told("⏸ Interrupting")
            model.gate.set()
            await app.hub.settled()
            snap = await chat.snapshot()
        finally:
            await app.close()
            await real.aclose()

    assert b.seen() == [said]
    assert len(server.requests) == 2 and server.remaining == 0  # no 400, no retry
    assert snap.tool_calls["toolu_a"].state is ToolState.CANCELLED
    assert snap.tool_calls["toolu_b"].state is ToolState.CANCELLED
    last = server.requests[1].body["messages"][-1]["content"]
    assert [b["tool_use_id"] for b in last if b["type"] == "tool_result"] == ["toolu_a", "toolu_b"]
    assert last[-1]["text"].endswith("never mind, just say hi")
    assert "✅ Hi." in chat.out.getvalue()


# --- the setting, in layers ----------------------------------------------------------------


def test_busy_mode_comes_from_the_nearest_layer_that_sets_it(settings) -> None:
    slack = {TEAM_ID: {"busy_mode": "interrupt", "channels": {CHANNEL: {"busy_mode": "queue"}}}}
    s = layered(settings, slack=slack)
    here = s.layers().at("slack", TEAM_ID, CHANNEL)
    assert here.channel_settings.busy_mode == "queue"
    assert s.layers().at("slack", TEAM_ID, OTHER).channel_settings.busy_mode == "interrupt"
    assert settings.layers().at("slack", TEAM_ID, CHANNEL).channel_settings.busy_mode == "steer"
    assert any(
        line.startswith("busy_mode = 'queue'") and "slack channel" in line
        for line in here.explain()
    )
    with pytest.raises(ValidationError, match="busy_mode"):
        layered(settings, slack={TEAM_ID: {"channels": {CHANNEL: {"busy_mode": "shout"}}}})


async def test_an_interrupt_while_a_command_runs_lets_it_end_and_cancels_the_next_call(
    settings,
) -> None:
    """The turn stops at its next tool boundary: the call running goes on to its end,
    the calls after it end ``cancelled``, each with its one result."""
    settings.busy_mode = "interrupt"
    settings.approvers = ["bob"]
    wait = "while [ ! -e go ]; do sleep 0.05; done"
    job = ScriptedCall("run_command", {"command": wait}, id="toolu_job")
    then = ScriptedCall("read_file", {"path": "README.md"}, id="toolu_then")
    plan = ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Wait", "Read"]})])
    model = ScriptedModel([plan, ScriptedTurn(calls=[job, then]), finish("Hi.")])
    app = await build(settings, model=model)
    chat = Chat(app)
    await app.start()
    try:
        await chat.mention("wait, then read the README")
        await chat.react(chat.bot_message("📋 Plan (v1)"))

        async def running() -> bool:
            record = (await chat.snapshot()).tool_calls.get("toolu_job")
            return record is not None and record.process is not None

        await wait_for(running, seconds=WAIT)
        b = Busy("console", _Console(app, chat))
        said = await b.say("never mind, just say hi")
        await b.told("⏸ Interrupting")
        snap = await chat.snapshot()
        (Path(snap.workspace) / "go").touch()
        await app.hub.settled()
        after = await chat.snapshot()
    finally:
        await app.close()

    assert b.seen() == [said]
    assert after.tool_calls["toolu_job"].state is ToolState.DONE
    assert after.tool_calls["toolu_then"].state is ToolState.CANCELLED
    request = model.requests[2]
    assert paired(request)
    told = results(request)
    assert told["toolu_then"].startswith("Not run: alice interrupted")
    assert not told["toolu_job"].startswith("Not run")
    assert texts(request)[-1].endswith("never mind, just say hi")
    assert "✅ Hi." in chat.out.getvalue()


@pytest.mark.parametrize("mode", ["steer", "queue", "interrupt"])
async def test_a_message_sent_mid_run_is_a_note_of_the_stopped_run_and_no_restart_runs_it(
    sqlite_settings, mode
) -> None:
    """A stop ends the run with what was said to it: a message it had not read yet is
    journaled with the stop as a note (its delivery handled), so the next start finds
    nothing to run and the conversation stays stopped (what a tester found: the message
    stayed unhandled and the next start ran a new run from it)."""
    settings = sqlite_settings
    settings.busy_mode = mode
    first = held(ScriptedCall("list_files", {}))
    before = await build(settings, model=ScriptedModel([first]))
    chat = Chat(before)
    await before.start()
    await chat.mention("what is in the workspace? workflow=chat", settle=False)
    await started(first)
    b = Busy("console", _Console(before, chat))
    await b.say("then count the files")
    await b.told({"steer": "💬 Noted", "queue": "📥 Queued", "interrupt": "⏸ Interrupting"}[mode])
    await chat.stop()
    snap = await chat.snapshot()
    assert snap.status.lifecycle is Lifecycle.CANCELLED
    notes = [e.entry for e in snap.journal if isinstance(e.entry, UserText)]
    assert [(n.role, n.text) for n in notes][-1] == ("note", "then count the files")
    assert await before.store.inbox.unhandled() == []
    await before.close()

    model = ScriptedModel([finish("Should not run.")])
    after = await build(settings, model=model)
    again = Chat(after)
    again.thread = chat.thread
    await after.start()
    try:
        await after.hub.settled()
        assert model.requests == []
        assert (await again.snapshot()).status.lifecycle is Lifecycle.CANCELLED
    finally:
        await after.close()
