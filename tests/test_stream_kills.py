"""Streamed answers across real process deaths and between two instances
(docs/architecture.md "Streamed answers", "Several instances").

Real ``threadbot run`` processes (:mod:`tests.process_harness`) on Slack in HTTP mode
against the Slack fake, with the real ``anthropic`` client against the Messages API
fake, whose ``finish`` reply is held half written (``Reply(gate_after=4, gate=...)``:
``message_start``, the block's start, a ping and the first third of its input, then
nothing until the test lets it go), so the answer's stream is open with part of the
answer in it when the test acts. Each process calls Slack with a token of its own, so
the fake says which process made each call.

- SIGKILL in the middle of the stream, then a second process on the same store (a
  SQLite file, or PostgreSQL): the run goes on there, the model answers again whole,
  and the message left streaming is taken over and finalised (stopped, the whole
  answer edited in): one message holds the answer, whole, once.
- Two instances on one PostgreSQL database, the conversation opened on A (which holds
  its delivery claim) and its plan approved on B, which runs the rest:
  - A's claim lapsed first (A paused meanwhile, so B is the one to take it): B takes
    it to send what it wrote, then streams the answer as the claim's holder, and
    finalises it in the stream;
  - A keeps its claim: B streams nothing, and A posts the answer B wrote.
- Two instances on one PostgreSQL database, A SIGKILLed while it streams: B, running
  beside it all along, takes the run over once A's lease lapses and finalises the
  stream A left open.

Every wait is for what the fakes or the store show, never for a time.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from conversations.outbox._previews import OPENING
from tests.fakes.anthropic_server import FakeAnthropicServer, Reply, tool_use
from tests.fakes.slack_api import FakeSlackApi, RecordedCall
from tests.process_harness import WAIT, BotProcess, Channel, eventually
from tests.slack_harness import ALICE, CHANNEL

ANSWER = (
    "The session fixture was shared across tests, so a logout in one test ended "
    "another test's session. Each test now gets its own session; ten runs pass."
)
HALF = 4
"""SSE events the held reply sends before it waits: ``message_start``, the ``finish``
block's start, a ping, the first third of its input (``answer`` begun)."""
PLAN = [tool_use("toolu_plan", "propose_plan", {"steps": ["Find why the login tests fail"]})]


@dataclass
class World:
    """The fakes the processes talk to, and the people in the channel."""

    api: FakeSlackApi
    model: FakeAnthropicServer
    channel: Channel


@pytest.fixture
async def world() -> AsyncIterator[World]:
    async with FakeSlackApi() as api, FakeAnthropicServer() as model:
        async with aiohttp.ClientSession() as http:
            yield World(api, model, Channel(api, http))


def held(gate: asyncio.Event) -> Reply:
    """The model's ``finish`` with :data:`ANSWER`, held after :data:`HALF` events until
    ``gate`` is set."""
    return Reply(
        content=[tool_use("toolu_finish", "finish", {"answer": ANSWER})],
        gate_after=HALF,
        gate=gate,
    )


def whole() -> list[dict[str, Any]]:
    """The model's ``finish`` with :data:`ANSWER`, sent at once."""
    return [tool_use("toolu_again", "finish", {"answer": ANSWER})]


def process(
    tmp_path: Path,
    world: World,
    name: str,
    database: str | None,
    instance: str | None = None,
    **settings: str,
) -> BotProcess:
    """A bot process that calls Slack with a token of its own (``xoxb-<name>``), so each
    call the fake records says which process made it; ``instance``: its lease owner name
    (None: ``host:pid``, so a process of this host sees it is gone once killed)."""
    bot = BotProcess(
        tmp_path,
        world.api,
        world.model.base_url,
        database_url=database,
        instance=instance,
        **settings,
    )
    bot.settings["SLACK_BOT_TOKEN"] = f"xoxb-{name}"
    bot.env["SLACK_BOT_TOKEN"] = f"xoxb-{name}"
    return bot


def by(call: RecordedCall) -> str:
    """The name of the process that made ``call`` (:func:`process`'s token)."""
    return (call.token or "").removeprefix("xoxb-")


def in_thread(api: FakeSlackApi, method: str, thread: str) -> list[RecordedCall]:
    """The calls of ``method`` Slack took for ``thread`` (a start or a post in it, or a
    stream call or an edit of one of its messages)."""
    ours = {str(m["ts"]) for m in api.thread(CHANNEL, thread)}
    return [
        c
        for c in api.calls_of(method)
        if c.ok and (c.args.get("thread_ts") == thread or str(c.args.get("ts")) in ours)
    ]


def streaming(api: FakeSlackApi, thread: str) -> str | None:
    """The ts of the stream open in ``thread`` with part of the answer in it, if any."""
    for start in in_thread(api, "chat.startStream", thread):
        ts = str(start.response["ts"])
        message = api.message(CHANNEL, ts)
        shown = str((message or {}).get("text", ""))
        if api.streams[ts]["state"] == "streaming" and len(shown) > len(OPENING):
            return ts
    return None


def finishing(api: FakeSlackApi, ts: str) -> list[tuple[str, str]]:
    """The calls Slack took on the message ``ts`` after its stream's start, and who made
    each."""
    return [
        (c.method, by(c))
        for c in api.calls
        if c.ok and c.method.startswith("chat.") and c.args.get("ts") == ts
    ]


def pending(bot: BotProcess) -> int:
    """How many outbox rows are pending in ``bot``'s store."""
    [(count,)] = bot.query("select count(*) from outbox where state = 'pending'")
    return int(count)


async def seen(
    world: World, condition: Callable[[], object], *bots: BotProcess, seconds: float = WAIT
) -> None:
    """:func:`tests.process_harness.eventually`, failing with what the Slack fake took (and
    from whom), what the model was asked, where the conversation stands in the store and
    what ``bots`` logged."""
    try:
        await eventually(condition, seconds=seconds)
    except TimeoutError:
        calls = [(c.method, by(c), c.ok) for c in world.api.calls if c.method != "auth.test"]
        asked = [len(r.body.get("messages", [])) for r in world.model.requests]
        stands = bots[0].query(
            "select lifecycle, position, lease_owner, delivery_owner, delivery_epoch,"
            " (select count(*) from outbox where state = 'pending') from conversations"
        )
        logs = "".join(
            f"\n--- {bot.settings['SLACK_BOT_TOKEN']} ---\n{bot.log[-3000:]}" for bot in bots
        )
        raise AssertionError(
            f"not seen in {seconds:g} s; Slack took {calls}; the model was asked with "
            f"{asked} messages; the store: {stands}{logs}"
        ) from None


def answers(channel: Channel, thread: str) -> list[dict[str, Any]]:
    """The bot's messages in ``thread`` that hold the answer, or its start (a plan's
    approval opens with the same mark)."""
    start = OPENING + ANSWER[:12]
    return [m for m in channel.bot_posts(thread) if str(m.get("text", "")).startswith(start)]


def assert_one_whole_answer(world: World, thread: str, ts: str) -> None:
    """``thread`` holds the answer once, whole, in the message ``ts`` streamed into; the
    stream was started once and is stopped; nothing of the answer was posted."""
    found = answers(world.channel, thread)
    assert len(found) == 1, [(m["ts"], m["text"]) for m in found]
    [answer] = found
    assert answer["ts"] == ts
    lines = str(answer["text"]).split("\n")
    assert lines[0] == OPENING + ANSWER, answer["text"]
    assert lines[-1].startswith(f"<@{ALICE}>, here is the answer"), answer["text"]
    assert world.api.streams[ts]["state"] == "stopped"
    assert len(in_thread(world.api, "chat.startStream", thread)) == 1
    posts = [str(c.args.get("text", "")) for c in in_thread(world.api, "chat.postMessage", thread)]
    assert not [p for p in posts if ANSWER[:40] in p], posts
    # The message carries the answer's outbox key: a later look finds it sent.
    assert answer["metadata"]["event_type"] == "threadbot_outbox"


async def test_a_sigkill_in_the_middle_of_a_stream_leaves_one_whole_answer(
    tmp_path: Path, world: World, instances_database: str | None
) -> None:
    gate = asyncio.Event()
    world.model.add(held(gate), whole())
    first = process(tmp_path, world, "first", instances_database)
    second = process(tmp_path, world, "second", instances_database)
    try:
        await first.start()
        thread = await world.channel.mention(first, "why do the login tests fail? workflow=chat")
        await seen(world, lambda: streaming(world.api, thread), first)
        ts = streaming(world.api, thread)
        assert ts is not None
        message = world.api.message(CHANNEL, ts)
        assert message is not None
        shown = str(message["text"])
        assert (OPENING + ANSWER).startswith(shown) and shown != OPENING + ANSWER  # a part

        await first.kill()  # SIGKILL, the stream open
        assert first.proc is not None and first.proc.returncode == -signal.SIGKILL
        assert world.api.streams[ts]["state"] == "streaming"
        assert first.query("select lifecycle from conversations") == [("running",)]

        await second.start()  # resumes the run: the model answers again, whole
        await seen(world, lambda: world.channel.post_with(thread, ANSWER), second)
        await seen(world, lambda: not pending(second), second)
        assert len(world.model.requests) == 2
        assert_one_whole_answer(world, thread, ts)
        assert [by(c) for c in in_thread(world.api, "chat.startStream", thread)] == ["first"]
        # The second process streamed nothing into it: it stopped it and edited the answer in.
        assert finishing(world.api, ts) == [
            ("chat.stopStream", "second"),
            ("chat.update", "second"),
        ]
        assert second.query("select lifecycle from conversations") == [("done",)]
        second.signal(signal.SIGTERM)
        assert await second.wait() == 0, second.log
    finally:
        gate.set()  # the fake's held reply goes on (to nobody) and ends
        await first.kill()
        await second.kill()


def offered(channel: Channel, thread: str) -> dict[str, Any] | None:
    """The plan's message once the bot put its ✅ under it (it knows the message then)."""
    plan = channel.post_with(thread, "Plan (v1)")
    if plan is None or not any(
        r.get("name") == "white_check_mark" for r in plan.get("reactions", [])
    ):
        return None
    return plan


async def planned_on_a(world: World, a: BotProcess) -> tuple[str, dict[str, Any]]:
    """Alice mentions the bot through ``a``, which opens the conversation (holding its
    delivery claim) and posts the plan; the thread's ts and the plan's message."""
    thread = await world.channel.mention(a, "why do the login tests fail?")
    await seen(world, lambda: offered(world.channel, thread), a)
    plan = offered(world.channel, thread)
    assert plan is not None
    assert [by(c) for c in in_thread(world.api, "chat.postMessage", thread)] == ["a"]
    assert a.query("select delivery_owner from conversations") == [("instance-a",)]
    return thread, plan


def approved_by(world: World, plan: dict[str, Any]) -> set[str]:
    """Who edited the plan's message once it was approved (its closing edit, its steps)."""
    return {
        by(c)
        for c in world.api.calls_of("chat.update")
        if c.ok and c.args.get("ts") == plan["ts"] and "Approved by" in str(c.args.get("text"))
    }


def claim_lapsed(bot: BotProcess) -> bool:
    """Whether the conversation's delivery claim has lapsed in the store (its time is
    UTC: asyncpg gives it with its zone)."""
    [(until,)] = bot.query("select delivery_until from conversations")
    return until is not None and until < datetime.now(UTC)


async def test_a_run_on_the_other_instance_streams_its_answer_once_it_holds_the_claim(
    tmp_path: Path, world: World, postgres_url: str
) -> None:
    # A opens the conversation and posts its plan; its claim is short and lapses. The
    # approval goes to B, which runs the rest: B takes the claim to send what it wrote
    # (a long one: A cannot take it back), and then streams the answer, held half
    # written, as its holder. A is paused while B takes the claim: told of B's rows, A
    # might renew its own lapsed claim first (as right, but the answer held half
    # written would then wait for the model's next piece to stream).
    gate = asyncio.Event()
    world.model.add(PLAN, held(gate))
    a = process(tmp_path, world, "a", postgres_url, instance="instance-a", lease_ttl="3")
    b = process(tmp_path, world, "b", postgres_url, instance="instance-b", lease_ttl="60")
    try:
        await asyncio.gather(a.start(), b.start())
        thread, plan = await planned_on_a(world, a)
        await seen(world, lambda: not pending(a), a, b)  # the plan's ts stored: B knows it
        a.signal(signal.SIGSTOP)
        await seen(world, lambda: claim_lapsed(a), a, b)
        await world.channel.react(b, str(plan["ts"]))
        await seen(
            world,
            lambda: a.query("select delivery_owner from conversations") == [("instance-b",)],
            a,
            b,
        )
        a.signal(signal.SIGCONT)

        await seen(world, lambda: streaming(world.api, thread), a, b)
        ts = streaming(world.api, thread)
        assert ts is not None
        [start] = in_thread(world.api, "chat.startStream", thread)
        [(lease, claim, epoch)] = a.query(
            "select lease_owner, delivery_owner, delivery_epoch from conversations"
        )
        # the process that runs the answer, holding the claim
        assert by(start) == "b", (lease, claim, epoch, a.log[-3000:], b.log[-3000:])
        assert (lease, claim) == ("instance-b", "instance-b") and epoch > 1  # taken from A
        assert approved_by(world, plan) == {"b"}

        gate.set()
        await seen(world, lambda: world.channel.post_with(thread, ANSWER), a, b)
        await seen(world, lambda: not pending(a), a, b)
        assert_one_whole_answer(world, thread, ts)
        assert {who for _, who in finishing(world.api, ts)} == {"b"}
        assert a.query("select lifecycle from conversations") == [("done",)]
        for bot in (a, b):
            bot.signal(signal.SIGTERM)
        assert [await a.wait(), await b.wait()] == [0, 0], a.log + b.log
    finally:
        gate.set()
        await a.kill()
        await b.kill()


async def test_an_instance_without_the_claim_streams_nothing_and_the_holder_posts_it(
    tmp_path: Path, world: World, postgres_url: str
) -> None:
    # A opens the conversation and keeps its claim (a long one); B runs it after the
    # approval. B may not stream: the answer goes to A, which posts it, once, whole.
    world.model.add(PLAN, whole())
    a = process(tmp_path, world, "a", postgres_url, instance="instance-a", lease_ttl="300")
    b = process(tmp_path, world, "b", postgres_url, instance="instance-b", lease_ttl="300")
    try:
        await asyncio.gather(a.start(), b.start())
        thread, plan = await planned_on_a(world, a)
        await world.channel.react(b, str(plan["ts"]))

        await seen(world, lambda: world.channel.post_with(thread, ANSWER), a, b)
        await seen(world, lambda: not pending(a), a, b)
        assert a.query("select lifecycle, lease_owner, delivery_owner from conversations") == [
            ("done", None, "instance-a")
        ]
        assert approved_by(world, plan) == {"a"}  # B's rows all went through A
        streamed = [
            c for c in world.api.calls if c.method.startswith("chat.") and "Stream" in c.method
        ]
        assert not streamed, [(c.method, by(c)) for c in streamed]
        [answer] = answers(world.channel, thread)
        assert str(answer["text"]).split("\n")[0] == OPENING + ANSWER
        posts = in_thread(world.api, "chat.postMessage", thread)
        assert [by(c) for c in posts if ANSWER in str(c.args.get("text"))] == ["a"]
        assert len(world.model.requests) == 2
        for bot in (a, b):
            bot.signal(signal.SIGTERM)
        assert [await a.wait(), await b.wait()] == [0, 0], a.log + b.log
    finally:
        await a.kill()
        await b.kill()


async def test_the_instance_left_finalises_the_stream_of_the_one_killed_mid_answer(
    tmp_path: Path, world: World, postgres_url: str
) -> None:
    # A streams the answer and is SIGKILLed half way; B, running beside it all along,
    # takes the run over once A's lease lapses (a short one; B's look for lapsed leases
    # comes often), and finalises the stream A left open with the answer the model gives
    # again.
    gate = asyncio.Event()
    world.model.add(held(gate), whole())
    a = process(tmp_path, world, "a", postgres_url, instance="instance-a", lease_ttl="6")
    b = process(tmp_path, world, "b", postgres_url, instance="instance-b", lease_ttl="2")
    try:
        await asyncio.gather(a.start(), b.start())
        thread = await world.channel.mention(a, "why do the login tests fail? workflow=chat")
        await seen(world, lambda: streaming(world.api, thread), a, b)
        ts = streaming(world.api, thread)
        assert ts is not None
        assert a.query("select lease_owner, delivery_owner from conversations") == [
            ("instance-a", "instance-a")
        ]

        a.signal(signal.SIGKILL)
        assert await a.wait() == -signal.SIGKILL
        assert world.api.streams[ts]["state"] == "streaming"

        await seen(world, lambda: world.channel.post_with(thread, ANSWER), b)
        await seen(world, lambda: not pending(b), b)
        assert "taking over conversation " in b.log  # Hub.take_over, not a restart
        assert len(world.model.requests) == 2
        assert_one_whole_answer(world, thread, ts)
        assert [by(c) for c in in_thread(world.api, "chat.startStream", thread)] == ["a"]
        assert finishing(world.api, ts) == [("chat.stopStream", "b"), ("chat.update", "b")]
        assert b.query("select lifecycle, delivery_owner from conversations") == [
            ("done", "instance-b")
        ]
        b.signal(signal.SIGTERM)
        assert await b.wait() == 0, b.log
    finally:
        gate.set()
        await a.kill()
        await b.kill()
