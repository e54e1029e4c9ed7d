"""The operations address of real ``threadbot run`` processes (issue 27's acceptance).

- ``/readyz`` fails while the database is down and recovers when it is back, and
  ``/healthz`` answers meanwhile, the process outliving its restart limit (an outage
  is retried, never counted), in HTTP mode, Socket Mode and Discord-only: the
  process's PostgreSQL is reached through a TCP proxy the test cuts and restores
  (:class:`tests.fakes.tcp_proxy.TcpProxy`).
- ``/metrics`` shows the outbox depth going up under a 429 storm of ``chat.postMessage``
  and back to 0 once it ends, and counts the 429s by method.
- With ``THREADBOT_LOG_FORMAT=json``, every line the process writes parses as JSON and
  the lines about a conversation carry its id.

A lease takeover counted in ``/metrics`` is shown by ``test_instances_takeover.py``.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import aiohttp
import pytest
from sqlalchemy.engine import make_url

from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.slack_api import FakeSlackApi
from tests.fakes.slack_socket import FakeSocketModeServer
from tests.fakes.tcp_proxy import TcpProxy
from tests.instances import story_model
from tests.process_harness import WAIT, BotProcess, Channel, Sample, eventually, scrape

T = TypeVar("T")
DEPTH: Sample = ("threadbot_outbox_depth", ())
RATE_LIMITED = "threadbot_rate_limited_total"


async def get(http: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with http.get(url) as response:
        return response.status, await response.text()


async def polled(probe: Callable[[], Awaitable[T]], wanted: Callable[[T], bool]) -> T:
    """``await probe()`` until ``wanted`` of what it gives; that (fails after WAIT)."""
    async with asyncio.timeout(WAIT):
        while not wanted(value := await probe()):  # noqa: ASYNC110 (another process's state)
            await asyncio.sleep(0.1)
    return value


def proxied(url: str, proxy: TcpProxy) -> str:
    """``url`` (a PostgreSQL database) reached through ``proxy`` instead."""
    return make_url(url).set(host="127.0.0.1", port=proxy.port).render_as_string(False)


def outlasted(bot: BotProcess, limit: int) -> bool:
    """Whether one of ``bot``'s background tasks has been retried past ``limit`` restarts
    (the log's ``... failed: ...; retrying in`` lines): had those counted, it would have
    given up and the process ended."""
    tasks = Counter(re.findall(r"WARNING bot\.supervise \[-\]: (.+?) failed: ", bot.log))
    return any(n > limit + 1 for n in tasks.values())


async def readiness_follows_the_database(
    http: aiohttp.ClientSession, ops: str, proxy: TcpProxy, outlasted: Callable[[], bool]
) -> None:
    """Ready; the database cut: not ready (``database: ...``), alive for longer than the
    restart limit allows a failing task (``outlasted``); back: ready again."""

    def readyz() -> Awaitable[tuple[int, str]]:
        return get(http, f"{ops}/readyz")

    await polled(readyz, lambda answer: answer[0] == 200)
    proxy.cut()
    _, body = await polled(readyz, lambda answer: answer[0] == 503)
    assert body.startswith("database: "), body
    assert await get(http, f"{ops}/healthz") == (200, "ok\n")
    await polled(lambda: asyncio.sleep(0, outlasted()), bool)
    assert await get(http, f"{ops}/healthz") == (200, "ok\n")  # still there
    proxy.restore()
    assert await polled(readyz, lambda answer: answer[0] == 200) == (200, "ready\n")


@pytest.mark.parametrize("mode", ["slack_http", "slack_socket_mode", "discord"])
async def test_not_ready_while_the_database_is_down(
    tmp_path: Path, postgres_url: str, mode: str
) -> None:
    async with (
        TcpProxy(make_url(postgres_url).port or 5432) as proxy,
        FakeSocketModeServer() as socket,
        FakeSlackApi(socket_url=socket.url) as slack,
        FakeDiscord(token="test-discord-token") as discord,
        FakeAnthropicServer() as model,
        aiohttp.ClientSession() as http,
    ):
        bot = BotProcess(
            tmp_path,
            discord if mode == "discord" else slack,
            model.base_url,
            database_url=proxied(postgres_url, proxy),
            socket_mode=mode == "slack_socket_mode",
            restart_limit="2",  # an outage is no failure of the bot's: it never counts
            log_level="WARNING",
        )
        try:
            await bot.start()
            await readiness_follows_the_database(
                http, bot.ops_url, proxy, outlasted=lambda: outlasted(bot, 2)
            )
            proxy.cut()  # and a SIGTERM while the database is away is a clean end still
            await polled(lambda: get(http, f"{bot.ops_url}/readyz"), lambda a: a[0] == 503)
            bot.signal(signal.SIGTERM)
            assert await bot.wait() == 0, bot.log
        finally:
            await bot.kill()


async def test_the_outbox_depth_rises_under_a_429_storm_and_falls_back_to_zero(
    tmp_path: Path,
) -> None:
    jobs = 4
    async with (
        FakeSlackApi() as api,
        FakeAnthropicServer(respond=story_model()) as model,
        aiohttp.ClientSession() as http,
    ):
        bot = BotProcess(tmp_path, api, model.base_url)
        channel = Channel(api, http)
        try:
            await bot.start()
            api.rate_limit_window("chat.postMessage", seconds=3600, retry_after=1)
            threads = [await channel.mention(bot, f"job {n}") for n in range(1, jobs + 1)]

            def samples() -> Awaitable[dict[Sample, float]]:
                return scrape(http, bot.ops_url)

            limited = (RATE_LIMITED, (("method", "chat.postMessage"), ("platform", "slack")))
            # every plan waits (and each thread's session status behind it)
            counted = await polled(
                samples, lambda found: found.get(limited, 0) >= 1 and found[DEPTH] >= jobs
            )
            assert counted[("threadbot_outbox_oldest_seconds", ())] > 0
            assert not any(channel.bot_posts(t) for t in threads)

            api.clock = lambda: time.monotonic() + 7200  # the storm is over
            await polled(samples, lambda found: found[DEPTH] == 0)
            assert all(len(channel.bot_posts(t)) == 1 for t in threads)  # each plan, once
            counted = await samples()
            delivered = ("threadbot_delivery_seconds_count", (("platform", "slack"),))
            assert counted[delivered] >= jobs
            assert counted[("threadbot_outbox_oldest_seconds", ())] == 0
            bot.signal(signal.SIGTERM)
            assert await bot.wait() == 0, bot.log
        finally:
            await bot.kill()


async def test_json_logs_parse_line_by_line_and_carry_the_conversation(tmp_path: Path) -> None:
    async with (
        FakeSlackApi() as api,
        FakeAnthropicServer(respond=story_model()) as model,
        aiohttp.ClientSession() as http,
    ):
        bot = BotProcess(tmp_path, api, model.base_url, log_format="json", log_level="DEBUG")
        channel = Channel(api, http)
        try:
            await bot.start()
            api.rate_limit("chat.postMessage", retry_after=0)  # a line about the conversation
            thread = await channel.mention_and_approve(bot, "job 1")
            await eventually(lambda: any("done 1" in text for text in channel.texts(thread)))
            bot.signal(signal.SIGTERM)
            assert await bot.wait() == 0, bot.log
        finally:
            await bot.kill()
    conversation = bot.query("select id from conversations")[0][0]
    lines = [json.loads(line) for line in bot.log.splitlines()]  # each one parses
    lines += [json.loads(line) for line in bot.said]
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    about = [line for line in lines if "conversation" in line]
    assert about and {line["conversation"] for line in about} == {conversation}
    assert "xoxb-test" not in bot.log
