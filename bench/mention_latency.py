"""Benchmark 1: a signed Slack mention to the plan's ``chat.postMessage``.

**Figure.** threadbot in Slack HTTP mode (the real bolt app of
``adapters.slack.runner``, the app built by ``bot.app.build`` on a temporary
SQLite file with its migrations and pragmas, default settings) with a model that
proposes a plan at once. One event at a time: the latency of one mention is from
just before its signed ``app_mention`` POST leaves the client to the arrival at
the local Slack fake of the ``chat.postMessage`` in the mention's thread whose
text holds ``Plan (v1)`` (both ``time.monotonic()``, in ms). After each event the
benchmark waits until threadbot has settled (its reactions on the plan sent, no
run left), so events never overlap.

**Floor.** A minimal bolt app: ``AsyncApp`` with the same signing secret behind
an aiohttp server, one ``app_mention`` listener that posts one reply in the
thread with slack-sdk's ``AsyncWebClient`` to its own Slack fake; no database.
Same client, same signed bodies, same fake, measured the same way.

**Rounds.** ``rounds`` rounds of ``events / rounds`` mentions each, alternating
threadbot and the floor (:func:`bench._verdict.in_turn`: the floor first in
round 0, threadbot first in round 1...) after a warm-up of a few events each. A
round's ratio is threadbot's p50 over the floor's p50 of the same round; the
verdict is on the median of those ratios, printed with their spread. Target:
threadbot's p50 at most 3x the floor's. p99 (no target) is over all events of
each, nearest rank: one pooled "round", since a round's 60 events have no p99
of their own.

**Reference, no database.** The same threadbot on the in-memory store
(``database_url = "memory://"``: nothing written anywhere), measured the same way
against the same floor, in rounds of their own after the figure's (the SQLite bot is
closed by then: neither shares the event loop with the other). It has no target: it
tells how much of the ratio is threadbot's own work (the hub, the run, the model
request, the plan card, the deliverer) rather than its database.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from bench._agent import TurnModel, plan_turn, toolbox
from bench._report import Figure, Result, median, percentile
from bench._slack import (
    Deliverer,
    SlackBot,
    mention_body,
    minimal_bolt_app,
    reply_in_thread,
    threadbot_on_slack,
)
from bench._verdict import Target, in_turn
from tests.slack_harness import ALICE, CHANNEL

PLAN = "Plan (v1)"
TARGET = 3.0
WARMUP = 5
TIMEOUT = 60.0


async def run(root: Path, *, events: int = 300, rounds: int = 5) -> Result:
    """Measure ``events`` mentions on threadbot and as many on the floor, in ``rounds``."""
    started = time.perf_counter()
    model = TurnModel(lambda _turn: plan_turn())

    async def floor_reply(event: dict[str, Any], client: AsyncWebClient) -> None:
        await reply_in_thread(event, client, f"📋 {PLAN}: look around, answer")

    per_round = max(1, events // rounds)
    async with aiohttp.ClientSession() as session, minimal_bolt_app(floor_reply) as floor:
        client = Deliverer(session)
        samples = await _against_floor(
            client,
            floor,
            threadbot_on_slack(root / "mention", model=model, toolbox=toolbox()),
            per_round,
            rounds,
        )
        reference = await _against_floor(  # after: the figure shares its loop with no bot
            client,
            floor,
            threadbot_on_slack(
                root / "memory", model=model, toolbox=toolbox(), database_url="memory://"
            ),
            per_round,
            rounds,
        )
    bot_rounds = [median(r) for r in samples["bot"]]
    floor_rounds = [median(r) for r in samples["floor"]]
    every_bot = [x for r in samples["bot"] for x in r]
    every_floor = [x for r in samples["floor"] for x in r]
    p50 = Figure(
        key="mention_p50",
        label="mention -> plan posted, p50",
        unit="ms",
        rounds=bot_rounds,
        floor_rounds=floor_rounds,
        floor_label="minimal bolt app replying in the thread",
        target=Target(TARGET),
    )
    p99 = Figure(
        key="mention_p99",
        label="mention -> plan posted, p99",
        unit="ms",
        rounds=[percentile(every_bot, 99)],
        floor_rounds=[percentile(every_floor, 99)],
        floor_label="the same",
        notes=[f"pooled over all {len(every_bot)} events of each (one round)"],
    )
    no_database = Figure(
        key="mention_p50_no_database",
        label="reference: the same p50 on the in-memory store (no database)",
        unit="ms",
        rounds=[median(r) for r in reference["bot"]],
        floor_rounds=[median(r) for r in reference["floor"]],
        floor_label="the same floor, in rounds of their own",
        notes=["no target: threadbot's own work, the database left out"],
    )
    return Result(
        number=1,
        title="Signed Slack mention to the plan's chat.postMessage (HTTP mode)",
        sizes=f"{len(every_bot)} mentions each, {rounds} rounds",
        figures=[p50, p99, no_database],
        seconds=time.perf_counter() - started,
    )


async def _against_floor(
    client: Deliverer,
    floor: SlackBot,
    bot_on_slack: AbstractAsyncContextManager[SlackBot],
    per_round: int,
    rounds: int,
) -> dict[str, list[list[float]]]:
    """``rounds`` rounds of ``per_round`` mentions each to the bot and to ``floor``, in
    turn, after a warm-up of each: every mention's latency in ms, by round, under
    ``"bot"`` and ``"floor"``."""
    samples: dict[str, list[list[float]]] = {"bot": [], "floor": []}
    async with bot_on_slack as bot:
        for target in (bot, floor):
            for _ in range(WARMUP):
                await _one(client, target)
        for number in range(rounds):
            for name, target in in_turn(number, ("floor", floor), ("bot", bot)):
                samples[name].append([await _one(client, target) for _ in range(per_round)])
    return samples


async def _one(client: Deliverer, target: SlackBot) -> float:
    """One mention to ``target``: ms from the POST to the plan's arrival at the fake."""
    ts = str(target.api.add_message(CHANNEL, "please look into it", user=ALICE)["ts"])
    waiter = target.api.post_in(ts, PLAN)
    sent = time.monotonic()
    await client.post(target.url, mention_body(ts))
    call = await asyncio.wait_for(waiter, TIMEOUT)
    if target.app is not None:
        await asyncio.wait_for(target.app.hub.settled(), TIMEOUT)
    return (call.time - sent) * 1000
