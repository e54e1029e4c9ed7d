"""Discord sharding and the adapter's readiness (issue 27).

A guild's events go to gateway shard ``(guild_id >> 22) % shard_count`` and DMs to
shard 0 (https://discord.com/developers/docs/events/gateway#sharding). FakeDiscord
holds two guilds that fall in different shards of two: the first guild
(:data:`GUILD_ID`, shard 0) and :data:`SECOND_GUILD` (shard 1). The tests check:

- one adapter that runs both shards: one IDENTIFY per shard, each connection gets
  its own guilds, each dispatch is taken in its shard's sequence, and
  :meth:`DiscordAdapter.connected` follows every shard's connection;
- ``connected()`` without sharding: true after start, false from the moment the
  gateway drops the connection until the RESUME is answered, false after close;
- two real ``threadbot run`` processes, ``THREADBOT_DISCORD_SHARD_IDS=0`` and ``=1``
  of ``THREADBOT_DISCORD_SHARD_COUNT=2``, on one SQLite file: each process's
  connection gets its own guild only, and a conversation in each guild goes from
  the mention to the answer, handled by the process that holds the guild's shard;
- shard settings that cannot work end ``threadbot run`` with exit 2 and the reason.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from adapters.discord.runner import DiscordAdapter, DiscordConfig
from conversations.events import InboundEvent, MessagePosted
from tests.cli_harness import threadbot
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.discord_api import (
    GUILD_ID,
    TEXT_CHANNEL_ID,
    FakeDiscord,
    GatewayRecord,
    shard_of,
    shown_text,
)
from tests.instances import PLAN, is_answer, side_effects, story_model
from tests.process_harness import BotProcess, eventually
from tests.test_discord_story import ALICE, mention_d, reaction_d

SECOND_GUILD = "1198205278621925477"
"""A guild in shard 1 of 2 (the fixtures' guild, :data:`GUILD_ID`, is in shard 0)."""
SECOND_CHANNEL = "1198205278621925480"
DM_CHANNEL = "1250000000000000777"
TOKEN = "test-discord-token"
WAIT = 60.0
"""Seconds an in-process test waits for what it expects (it goes on as soon as it
happens; discord.py spaces a second shard's IDENTIFY 5 s after the first)."""


class Taken:
    """A hub stand-in: keeps every event the adapter hands over."""

    def __init__(self) -> None:
        self.events: list[InboundEvent] = []

    async def handle(self, event: InboundEvent) -> None:
        self.events.append(event)


async def until(condition: Callable[[], object]) -> None:
    """Return once ``condition()`` holds (polled every 10 ms, :data:`WAIT` s at most)."""
    async with asyncio.timeout(WAIT):
        while not condition():  # noqa: ASYNC110 (the condition reads the adapter's state)
            await asyncio.sleep(0.01)


async def until_connected(adapter: DiscordAdapter, wanted: bool) -> None:
    """Return once ``adapter.connected()`` is ``wanted`` (polled every 10 ms)."""
    async with asyncio.timeout(WAIT):
        while await adapter.connected() != wanted:  # noqa: ASYNC110 (the adapter's state)
            await asyncio.sleep(0.01)


def adapter_for(fake: FakeDiscord, **config: Any) -> DiscordAdapter:
    """A :class:`DiscordAdapter` pointed at ``fake`` (``config``: more of its config)."""
    return DiscordAdapter(
        DiscordConfig(token=TOKEN, api_url=fake.api_url, gateway_url=fake.gateway_url, **config)
    )


@asynccontextmanager
async def started(fake: FakeDiscord, **config: Any) -> AsyncIterator[tuple[DiscordAdapter, Taken]]:
    """A started :func:`adapter_for` ``fake`` and the :class:`Taken` it hands events to;
    closed on the way out."""
    adapter, taken = adapter_for(fake, **config), Taken()
    try:
        await adapter.start(taken)
        yield adapter, taken
    finally:
        await adapter.close()


def guild_of(record: GatewayRecord) -> str | None:
    """The guild a dispatch the fake sent is about (GUILD_CREATE: the guild itself)."""
    d = record.d if isinstance(record.d, dict) else {}
    guild = d.get("guild_id") or (d.get("id") if record.t == "GUILD_CREATE" else None)
    return None if guild is None else str(guild)


def guilds_created(fake: FakeDiscord, shard: int) -> list[str]:
    """The guilds whose GUILD_CREATE went to shard ``shard``'s connections."""
    return [str(r.d["id"]) for r in fake.sent_on_shard(shard, "GUILD_CREATE")]


def misrouted(fake: FakeDiscord, count: int) -> list[tuple[str | None, str, int]]:
    """Dispatches about a guild sent on a connection of another shard:
    ``(event, guild, connection)``."""
    wrong = []
    for record in fake.sent():
        pair = fake.connection_shards.get(record.connection)
        guild = guild_of(record)
        if record.op == 0 and guild is not None and pair is not None:
            if shard_of(guild, count) != pair[0]:
                wrong.append((record.t, guild, record.connection))
    return wrong


def test_the_two_guilds_fall_in_different_shards_by_discords_rule() -> None:
    assert [shard_of(g, 2) for g in (GUILD_ID, SECOND_GUILD)] == [0, 1]
    assert [(int(g) >> 22) % 2 for g in (GUILD_ID, SECOND_GUILD)] == [0, 1]
    assert shard_of(None, 2) == 0  # DMs: shard 0


async def test_one_adapter_runs_both_shards_each_with_its_guilds_and_its_sequence() -> None:
    async with FakeDiscord(token=TOKEN) as fake:
        fake.add_guild(SECOND_GUILD, SECOND_CHANNEL, name="Second")
        async with started(fake, shard_count=2) as (adapter, taken):
            # start() returned: READY came on both shards, not just the first
            assert sorted(d["shard"] for d in fake.identifies) == [[0, 2], [1, 2]]
            assert await adapter.connected()
            assert guilds_created(fake, 0) == [GUILD_ID]
            assert guilds_created(fake, 1) == [SECOND_GUILD]

            first = mention_d(fake, "in the first guild")
            second = mention_d(fake, "in the second", channel=SECOND_CHANNEL, guild=SECOND_GUILD)
            s_first = await fake.dispatch("MESSAGE_CREATE", first)
            s_second = await fake.dispatch("MESSAGE_CREATE", second)
            # each shard numbers its own dispatches: READY, GUILD_CREATE, the mention
            assert (s_first, s_second) == (3, 3)
            await until(lambda: min(adapter.processed_seqs.values()) >= 3)
            fake.add_channel({"id": DM_CHANNEL, "type": 1, "recipients": []})
            dm = mention_d(fake, "in a DM", channel=DM_CHANNEL)
            del dm["guild_id"], dm["member"]
            s_dm = await fake.dispatch("MESSAGE_CREATE", dm)
            await until(lambda: adapter.processed_seqs[0] >= s_dm)
            await adapter.idle()
            assert set(adapter.processed_seqs) == {0, 1}

            assert {(e.ref.workspace, e.ref.channel) for e in taken.events} == {
                (GUILD_ID, first["id"]),  # the thread started on the mention
                (SECOND_GUILD, second["id"]),
                ("", DM_CHANNEL),  # a DM: no guild
            }
            assert all(isinstance(e, MessagePosted) for e in taken.events)
            sent_first = [r.d["id"] for r in fake.sent_on_shard(0, "MESSAGE_CREATE")]
            sent_second = [r.d["id"] for r in fake.sent_on_shard(1, "MESSAGE_CREATE")]
            assert first["id"] in sent_first and first["id"] not in sent_second
            assert second["id"] in sent_second and second["id"] not in sent_first
            assert dm["id"] in sent_first and dm["id"] not in sent_second  # DMs: shard 0

            # one shard down is the instance not connected, until that shard resumes
            with fake.hold_resumes():
                await fake.close_connection(shard=1)
                await until(lambda: fake.resumes)
                assert not await adapter.connected()  # shard 1's new connection waits for RESUMED
            await fake.wait_resumed()
            await until_connected(adapter, True)
            # shard 1 resumed on a connection of its own; shard 0 kept its first one
            assert fake.connection_shards == {1: (0, 2), 2: (1, 2), 3: (1, 2)}
        assert not await adapter.connected()
        assert misrouted(fake, 2) == []


async def test_connected_is_true_after_start_false_while_the_gateway_is_down_and_after_close() -> (
    None
):
    async with FakeDiscord(token=TOKEN) as fake:
        assert not await adapter_for(fake).connected()  # not started
    async with FakeDiscord(token=TOKEN) as fake, started(fake) as (adapter, _):
        assert "shard" not in (fake.identify or {})  # no sharding: one connection, as before
        assert await adapter.connected()
        with fake.hold_resumes():
            await fake.close_connection(4000)
            await until_connected(adapter, False)
            await until(lambda: fake.resumes)
            assert not await adapter.connected()  # a new connection, but not resumed yet
        await fake.wait_resumed()
        await until_connected(adapter, True)
        assert fake.connections_made == 2

        s = await fake.dispatch("MESSAGE_CREATE", mention_d(fake, "after the resume"))
        await until(lambda: adapter.processed_seq >= s)
        await adapter.close()
        assert not await adapter.connected()


# -- two processes, one shard each ------------------------------------------------------


def answered(fake: FakeDiscord, thread: str, n: int) -> bool:
    return any(is_answer(str(m["content"]), n) for m in fake.posted(thread))


def offered_plan(fake: FakeDiscord, thread: str) -> str | None:
    """The id of the plan the bot posted in ``thread`` once it put its ✅ under it."""
    for message in fake.posted(thread):
        if PLAN in shown_text(message) and (thread, message["id"], "✅") in fake.reactions:
            return str(message["id"])
    return None


async def converse(fake: FakeDiscord, n: int, guild: str, channel: str) -> str:
    """Alice mentions the bot with ``job n`` in ``channel`` of ``guild``, approves the
    plan with ✅ and waits for the answer ``done n``; the thread's id."""
    d = mention_d(fake, f"job {n}", channel=channel, guild=guild)
    thread = str(d["id"])
    await fake.dispatch("MESSAGE_CREATE", d)
    await eventually(lambda: offered_plan(fake, thread))
    plan = offered_plan(fake, thread)
    assert plan is not None
    await fake.dispatch("MESSAGE_REACTION_ADD", reaction_d(thread, plan, "✅", ALICE, guild=guild))
    await eventually(lambda: answered(fake, thread, n))
    return thread


async def test_two_processes_one_shard_each_get_their_own_guilds_and_tell_their_conversations(
    tmp_path: Path,
) -> None:
    async with (
        FakeDiscord(token=TOKEN) as fake,
        FakeAnthropicServer(respond=story_model()) as model,
    ):
        fake.add_guild(SECOND_GUILD, SECOND_CHANNEL, name="Second")
        fake.gateway_shards = 2
        bots = [
            BotProcess(
                tmp_path,
                fake,
                model.base_url,
                instance=f"shard-{n}",
                discord_shard_count="2",
                discord_shard_ids=str(n),
            )
            for n in (0, 1)
        ]
        try:
            await asyncio.gather(*(bot.start() for bot in bots))
            assert sorted(d["shard"] for d in fake.identifies) == [[0, 2], [1, 2]]
            assert guilds_created(fake, 0) == [GUILD_ID]
            assert guilds_created(fake, 1) == [SECOND_GUILD]

            first, second = await asyncio.gather(
                converse(fake, 1, GUILD_ID, TEXT_CHANNEL_ID),
                converse(fake, 2, SECOND_GUILD, SECOND_CHANNEL),
            )
            # the conversation of each guild was told to its shard's process alone,
            # and that process delivered it
            assert misrouted(fake, 2) == []
            owners = dict(bots[0].query("select thread, delivery_owner from conversations"))
            assert owners == {first: "shard-0", second: "shard-1"}, [b.log for b in bots]
            assert side_effects(tmp_path / "workspaces") == Counter({"1": 1, "2": 1})

            for bot in bots:
                bot.signal(signal.SIGTERM)
            assert [await bot.wait() for bot in bots] == [0, 0], [b.log for b in bots]
        finally:
            for bot in bots:
                await bot.kill()


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        (
            {"THREADBOT_DISCORD_SHARD_IDS": "1"},
            "discord_shard_ids needs discord_shard_count",
        ),
        (
            {"THREADBOT_DISCORD_SHARD_COUNT": "2", "THREADBOT_DISCORD_SHARD_IDS": "0,2"},
            "discord_shard_ids [2] are not below discord_shard_count (2): shards are "
            "numbered from 0",
        ),
    ],
)
def test_shard_settings_that_cannot_work_end_run_with_exit_2_and_the_reason(
    tmp_path: Path, settings: dict[str, str], said: str
) -> None:
    env = {"DISCORD_TOKEN": TOKEN, "THREADBOT_OPS_PORT": "0"} | settings
    result = threadbot(tmp_path, "run", env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[0] == "threadbot: bad settings:"
    assert said in result.stderr and "Traceback" not in result.stderr
    assert TOKEN not in result.stderr
