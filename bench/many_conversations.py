"""Benchmark 4: many conversations at once, through Slack HTTP mode, until every answer arrived.

**Figure.** ``conversations`` signed ``app_mention`` events sent at once (aiohttp's
default 100 connections) to threadbot in Slack HTTP mode (:mod:`bench._slack`:
the real bolt app, the app built by ``bot.app.build`` on a new temporary SQLite
file, default settings). Each conversation is 4 model turns with a model that
takes 50 ms per turn: three turns of one read-only tool call
(:class:`bench._agent.TickTool`, no plan or approval needed), then ``finish``.
Time is from just before the first POST to the arrival at the Slack fake of the
last answer (the ``chat.postMessage`` holding the answer in each thread), in s.
Every answer must arrive (within ``patience`` seconds); how many did is printed.

**Floor.** A minimal bolt app (same server, client, fake and signed bodies) whose
``app_mention`` listener does the same model waits and writes the conversation
the least a durable bot can: per turn, ``asyncio.sleep(delay)`` then one
aiosqlite transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``, one connection
shared by all conversations behind an ``asyncio.Lock``, threadbot's SQLite
settings, on a database migrated by threadbot's migrations) that inserts the
turn's journal rows (the assistant turn and, in turns 1-3, its tool result; the
first transaction also the ``conversations`` row and the request); after the
fourth turn one ``chat.postMessage`` with the answer in the thread.

**Rounds.** ``rounds`` rounds, each a fresh bot and database for both, the floor
and threadbot alternating (:func:`bench._verdict.in_turn`: the floor first in
round 0, threadbot first in round 1...). A round's ratio is threadbot's time
over the floor's of the same round; the verdict is on the median of those
ratios, printed with their spread. Target: threadbot at most 10x the floor, and
every answer arrived in every round (else the figure is missed whatever the
ratio).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import aiosqlite
from slack_sdk.web.async_client import AsyncWebClient

from bench._agent import ANSWER, TurnModel, ticks_then_finish, toolbox
from bench._floor import aiosqlite_connection, migrated
from bench._report import Figure, Result
from bench._slack import Deliverer, SlackBot, mention_body, minimal_bolt_app, threadbot_on_slack
from bench._verdict import Target, in_turn
from tests.slack_harness import ALICE, CHANNEL

TARGET = 10.0
TURNS = 4


async def run(
    root: Path,
    *,
    conversations: int = 1000,
    rounds: int = 3,
    delay_ms: int = 50,
    patience: float = 900.0,
) -> Result:
    """Measure ``rounds`` rounds of ``conversations`` conversations on threadbot and the floor."""
    started = time.perf_counter()
    delay = delay_ms / 1000
    seconds: dict[str, list[float]] = {"bot": [], "floor": []}
    arrived: dict[str, list[int]] = {"bot": [], "floor": []}
    for number in range(rounds):
        for name in in_turn(number, "floor", "bot"):
            where = root / f"many-{name}-{number}"
            bot_cm = _threadbot(where, delay) if name == "bot" else _floor(where, delay)
            async with aiohttp.ClientSession() as session, bot_cm as bot:
                took, count = await _burst(Deliverer(session), bot, conversations, patience)
            seconds[name].append(took)
            arrived[name].append(count)
    missing = sum(conversations - n for n in arrived["bot"])
    figure = Figure(
        key="many_conversations_s",
        label=f"{conversations} conversations of {TURNS} turns, until every answer arrived",
        unit="s",
        rounds=seconds["bot"],
        floor_rounds=seconds["floor"],
        floor_label="minimal bolt app: same waits, 1 aiosqlite tx per turn, 1 post",
        target=Target(TARGET),
        unmet=f"{missing} answers did not arrive within {patience:g} s" if missing else "",
        notes=[
            "answers arrived by round: threadbot "
            + ", ".join(f"{n}/{conversations}" for n in arrived["bot"])
            + "; floor "
            + ", ".join(f"{n}/{conversations}" for n in arrived["floor"])
        ],
    )
    return Result(
        number=4,
        title=f"Many conversations at once through Slack HTTP mode ({delay_ms} ms model)",
        sizes=f"{conversations} conversations x {rounds} rounds each",
        figures=[figure],
        seconds=time.perf_counter() - started,
    )


async def _burst(
    client: Deliverer, bot: SlackBot, conversations: int, patience: float
) -> tuple[float, int]:
    """Send every mention at once; seconds until the last answer arrived, and how many did."""
    threads = [
        str(bot.api.add_message(CHANNEL, "please look into it", user=ALICE)["ts"])
        for _ in range(conversations)
    ]
    answers = [bot.api.post_in(ts, ANSWER) for ts in threads]
    sent = time.monotonic()
    await asyncio.gather(*(client.post(bot.url, mention_body(ts)) for ts in threads))
    done, _pending = await asyncio.wait(answers, timeout=patience)
    for future in answers:
        future.cancel()
    if not done:
        return patience, 0
    last = max(f.result().time for f in done)
    return (last - sent if len(done) == conversations else patience), len(done)


@contextlib.asynccontextmanager
async def _threadbot(root: Path, delay: float) -> AsyncIterator[SlackBot]:
    model = TurnModel(ticks_then_finish(TURNS - 1), delay=delay)
    async with threadbot_on_slack(root, model=model, toolbox=toolbox()) as bot:
        yield bot


@contextlib.asynccontextmanager
async def _floor(root: Path, delay: float) -> AsyncIterator[SlackBot]:
    db = await aiosqlite_connection(await migrated(root / "floor.db"))
    lock = asyncio.Lock()

    async def on_mention(event: dict[str, Any], client: AsyncWebClient) -> None:
        cid = uuid.uuid4().hex
        for turn in range(TURNS):
            await asyncio.sleep(delay)
            async with lock:
                await _write_turn(db, cid, event, turn)
        await client.chat_postMessage(channel=event["channel"], thread_ts=event["ts"], text=ANSWER)

    try:
        async with minimal_bolt_app(on_mention) as bot:
            yield bot
    finally:
        await db.close()


async def _write_turn(db: aiosqlite.Connection, cid: str, event: dict[str, Any], turn: int) -> None:
    """One transaction: the turn's journal rows (and the conversation, at the first)."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    await db.execute("BEGIN IMMEDIATE")
    try:
        if turn == 0:
            await db.execute(
                "INSERT INTO conversations (id, platform, workspace, channel, thread, "
                "requester_id, requester_name, lifecycle, position, plan_version, "
                "workspace_dir, created_at, updated_at) "
                "VALUES (?, 'slack', ?, ?, ?, ?, ?, 'running', 'planning', 0, ?, ?, ?)",
                (
                    cid,
                    event.get("team", ""),
                    event["channel"],
                    event["ts"],
                    event["user"],
                    event["user"],
                    f"workspaces/{cid}",
                    now,
                    now,
                ),
            )
            await _journal(db, cid, 1, {"kind": "user_text", "text": event["text"]}, now)
        seq = 2 + 2 * turn
        asked = {"kind": "assistant_turn", "tool_calls": [{"id": f"toolu_{turn}", "name": "t"}]}
        await _journal(db, cid, seq, asked, now)
        if turn < TURNS - 1:
            await _journal(db, cid, seq + 1, {"kind": "tool_result", "content": "tick"}, now)
        await db.execute("COMMIT")
    except BaseException:
        await db.execute("ROLLBACK")
        raise


async def _journal(
    db: aiosqlite.Connection, cid: str, seq: int, body: dict[str, Any], now: str
) -> None:
    await db.execute(
        "INSERT INTO journal (conversation_id, seq, kind, body, created_at) VALUES (?, ?, ?, ?, ?)",
        (cid, seq, body["kind"], json.dumps(body), now),
    )
