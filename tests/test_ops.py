"""The operations address in-process (:mod:`bot.ops`): what ``/healthz``, ``/readyz`` and
``/metrics`` answer for each state of the database and the platforms, what a metric
counts (:mod:`bot.metrics`), and the JSON log lines (:mod:`bot.logs`).

How each platform's 429s are counted: by the adapters' hooks on the real SDKs, pointed at
the fakes. The same endpoints of a real ``threadbot run`` process, with the database cut and
under a 429 storm, are in ``test_ops_process.py``.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import aiohttp
import discord
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError
from slack_sdk.errors import SlackApiError

from adapters.slack.web import WebClients
from bot.logs import TEXT_FORMAT, JsonLines
from bot.metrics import MeteredModel, Metrics
from bot.ops import Operations
from bot.settings import Settings
from conversations.logcontext import ConversationFilter, about
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from conversations.store.sql import SqlStore, create_engine
from core.models.base import ModelRequest, TextDelta, TurnEnd, Usage
from core.models.scripted import ScriptedModel
from core.pricing import Price, Rates
from core.secrets import RedactingFilter, Redactor
from tests.fakes.discord_api import TEXT_CHANNEL_ID, FakeDiscord
from tests.fakes.slack_api import FakeSlackApi
from tests.slack_harness import slack_workspace
from tests.test_discord_shards import TOKEN, started


class Platform:
    """A platform's connection check that the test turns on and off, or hangs."""

    def __init__(self) -> None:
        self.up = True
        self.hang = False

    async def connected(self) -> bool:
        if self.hang:
            await asyncio.Event().wait()
        return self.up


def metrics_of(working: int = 0, takeovers: int = 0) -> Metrics:
    return Metrics(
        version="0.1.0", instance="host:1", working=lambda: working, takeovers=lambda: takeovers
    )


@pytest.fixture
async def slack() -> Platform:
    return Platform()


async def serving(ops: Operations) -> AsyncIterator[str]:
    address = await ops.start()
    try:
        yield address
    finally:
        await ops.close()


@pytest.fixture
async def memory_ops(slack: Platform) -> AsyncIterator[tuple[str, Operations]]:
    ops = Operations(
        host="127.0.0.1",
        port=0,
        health=MemoryStore(render=render_event).health,
        metrics=metrics_of(working=2, takeovers=3),
        platforms={"slack": slack.connected},
        clock=lambda: datetime.now(UTC),
        check_timeout=0.5,
    )
    async for address in serving(ops):
        yield address, ops


async def get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text(), response.headers["Content-Type"]


async def test_ready_when_the_database_answers_and_every_platform_is_connected(
    memory_ops: tuple[str, Operations], slack: Platform
) -> None:
    address, ops = memory_ops
    assert address.startswith("http://127.0.0.1:") and not address.endswith(":0")
    assert (await get(f"{address}/healthz"))[:2] == (200, "ok\n")
    assert (await get(f"{address}/readyz"))[:2] == (200, "ready\n")
    index = await get(f"{address}/")
    assert index[0] == 200 and "/healthz /readyz /metrics" in index[1]

    slack.up = False
    assert (await get(f"{address}/readyz"))[:2] == (503, "slack: not connected\n")
    assert (await get(f"{address}/healthz"))[:2] == (200, "ok\n")

    slack.up, slack.hang = True, True  # a check that never answers is a failed check
    assert (await get(f"{address}/readyz"))[:2] == (503, "slack: no answer within 0.5 s\n")

    slack.hang = False
    ops.draining = True
    assert (await get(f"{address}/readyz"))[:2] == (503, "shutting down\n")


async def test_not_ready_while_the_database_does_not_answer(slack: Platform) -> None:
    store = SqlStore(
        engine=create_engine("postgresql+asyncpg://threadbot@127.0.0.1:1/threadbot"),
        render=render_event,
    )
    ops = Operations(
        host="127.0.0.1",
        port=0,
        health=store.health,
        metrics=metrics_of(),
        platforms={"slack": slack.connected},
        clock=lambda: datetime.now(UTC),
    )
    try:
        async for address in serving(ops):
            status, body, _ = await get(f"{address}/readyz")
            assert status == 503 and body.startswith("database: cannot reach the database"), body
            assert (await get(f"{address}/healthz"))[:2] == (200, "ok\n")
            status, body, _ = await get(f"{address}/metrics")  # the rest is still scraped
            families = {f.name: f for f in text_string_to_metric_families(body)}
            assert families["threadbot_store_up"].samples[0].value == 0
    finally:
        await store.close()


async def bad_requests_are_one_line_each(
    address: str, caplog: pytest.LogCaptureFixture, loggers: tuple[str, ...], path: bytes
) -> None:
    """Requests aiohttp cannot parse, sent to ``address``: each a 400 and one line of the
    ``loggers`` at INFO at most, without a traceback or the request's bytes."""
    host, port = address.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)
    long_url = path + b"?" + b"a" * 9000
    bad = (
        b"GET " + long_url + b" HTTP/1.1\r\nHost: x\r\n\r\n",  # aiohttp's LineTooLong
        b"GET " + path + b" HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",  # two Hosts
        b"GET /\x1b[2J HTTP/1.1\r\nHost: a\r\n\r\n",  # an escape code in the path
    )
    caplog.set_level(logging.DEBUG)
    for raw in bad:
        caplog.clear()
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(raw)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 400") or answer.startswith(b"HTTP/1.0 400"), answer
        said = [  # the access log's line (Slack's port keeps one) is no error's
            r
            for r in caplog.records
            if r.name.startswith(("aiohttp", *loggers)) and r.name != "aiohttp.access"
        ]
        assert len(said) == 1, [r.getMessage() for r in said]
        (line,) = said
        assert line.exc_info is None and line.levelno <= logging.INFO
        message = line.getMessage()
        assert "a bad HTTP request" in message and "127.0.0.1" in message
        assert "\n" not in message and "\x1b" not in message and "aaaa" not in message


async def test_a_bad_request_is_one_log_line_without_a_traceback(
    memory_ops: tuple[str, Operations], caplog: pytest.LogCaptureFixture
) -> None:
    address, _ = memory_ops
    await bad_requests_are_one_line_each(address, caplog, ("bot.ops",), b"/metrics")
    assert (await get(address + "/healthz"))[0] == 200  # and it serves on


async def test_a_bad_request_to_slacks_events_port_is_one_log_line_too(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    async with slack_workspace(settings, ScriptedModel([])) as ws:
        events = ws.url
        await bad_requests_are_one_line_each(events, caplog, ("adapters",), b"/slack/events")


async def test_metrics_parse_as_the_prometheus_text_format(
    memory_ops: tuple[str, Operations],
) -> None:
    address, _ = memory_ops
    status, body, content_type = await get(f"{address}/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    assert samples[("threadbot_runs_active", ())] == 2
    assert samples[("threadbot_lease_takeovers_total", ())] == 3
    assert samples[("threadbot_store_up", ())] == 1
    assert samples[("threadbot_outbox_depth", ())] == 0
    assert samples[("threadbot_inbox_depth", ())] == 0
    assert samples[("threadbot_runs_waiting", ())] == 0
    info = (("instance", "host:1"), ("version", "0.1.0"))
    assert samples[("threadbot_build_info", info)] == 1


async def test_a_port_in_use_is_refused_with_the_address(
    memory_ops: tuple[str, Operations],
) -> None:
    address, _ = memory_ops
    port = int(address.rsplit(":", 1)[1])
    second = Operations(
        host="127.0.0.1",
        port=port,
        health=MemoryStore(render=render_event).health,
        metrics=metrics_of(),
        platforms={},
        clock=lambda: datetime.now(UTC),
    )
    with pytest.raises(OSError, match=str(port)):
        await second.start()


class OneCall:
    """A model that answers once, with usage; or waits forever when ``hang``."""

    name = "claude-test"

    def __init__(self, *, hang: bool = False) -> None:
        self.hang = hang
        self.waiting = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[object]:
        yield TextDelta(text="hi")
        if self.hang:
            self.waiting.set()
            await asyncio.Event().wait()
        yield Usage(
            model="claude-test-20261201",
            input_tokens=1000,
            output_tokens=200,
            cache_read_tokens=50,
            cache_write_tokens=0,
        )
        yield TurnEnd(stop_reason="end_turn")


CALLS = "threadbot_model_calls_total"


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


async def test_model_calls_tokens_and_cost_are_counted_by_the_model_that_answered() -> None:
    metrics = metrics_of()
    rates = Rates(input=3_000_000, output=15_000_000, cache_read=300_000, cache_write=0)
    price = Price(id=1, model="claude-test", rates=rates, since=datetime.now(UTC))
    model = MeteredModel(OneCall(), metrics, {"claude-test": price})  # type: ignore[arg-type]
    request = ModelRequest(system="", messages=[], tools=[], max_tokens=10)
    assert [type(e).__name__ async for e in model.stream(request)] == [
        "TextDelta",
        "Usage",
        "TurnEnd",
    ]
    answered = "claude-test-20261201"
    assert sample(metrics, CALLS, model="claude-test", role="executor", outcome="ok") == 1
    assert sample(metrics, "threadbot_model_tokens_total", model=answered, kind="input") == 1000
    assert sample(metrics, "threadbot_model_tokens_total", model=answered, kind="output") == 200
    assert sample(metrics, "threadbot_model_tokens_total", model=answered, kind="cache_read") == 50
    # 1000 x $3 + 200 x $15 + 50 x $0.30 per million tokens
    cost = sample(metrics, "threadbot_model_cost_usd_total", model=answered)
    assert cost == pytest.approx(0.006015)

    hangs = OneCall(hang=True)
    hanging = MeteredModel(hangs, metrics, {})  # type: ignore[arg-type]

    async def consume() -> None:
        async for _ in hanging.stream(request):
            pass

    task = asyncio.create_task(consume())
    await hangs.waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sample(metrics, CALLS, model="claude-test", role="executor", outcome="cancelled") == 1


def test_json_lines_carry_the_conversation_and_nothing_unredacted() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(RedactingFilter(Redactor({"SLACK_BOT_TOKEN": "xoxb-1-secret"})))
    handler.addFilter(ConversationFilter())
    handler.setFormatter(JsonLines())
    log = logging.getLogger("tests.json_lines")
    log.addHandler(handler)
    log.propagate = False
    try:
        with about("c-42"):
            log.warning("posting with xoxb-1-secret", extra={"token": "xoxb-1-secret"})
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("outside ä")
    finally:
        log.removeHandler(handler)
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert list(first) == ["time", "level", "logger", "message", "conversation"]
    assert first["conversation"] == "c-42" and "xoxb-1-secret" not in out.getvalue()
    assert datetime.fromisoformat(first["time"]).tzinfo is not None
    assert (second["level"], second["message"]) == ("ERROR", "outside ä")
    assert "conversation" not in second and "ValueError: boom" in second["exc_info"]
    assert "%(conversation)s" in TEXT_FORMAT


async def test_discords_429s_are_counted_by_route_though_discord_py_waits_them_out() -> None:
    async with FakeDiscord(token=TOKEN) as fake, started(fake) as (adapter, _):
        seen: list[str] = []
        adapter.rate_limited = seen.append
        channel = adapter.client.get_channel(int(TEXT_CHANNEL_ID))
        assert isinstance(channel, discord.TextChannel)
        fake.rate_limit(f"/channels/{TEXT_CHANNEL_ID}/messages", retry_after=0.05)
        await channel.send("after a 429")  # discord.py retries it itself
    posts = fake.calls_to("POST", path=f"/channels/{TEXT_CHANNEL_ID}/messages")
    assert [c.status for c in posts] == [429, 200]
    assert seen == ["POST /channels/{id}/messages"]


async def test_slacks_429s_are_counted_by_method_whichever_client_met_them() -> None:
    async with FakeSlackApi() as api:
        seen: list[str] = []
        clients = WebClients.for_token("xoxb-test", base_url=api.base_url, rate_limited=seen.append)
        api.rate_limit("chat.postMessage")
        api.rate_limit("auth.test", retry_after=0)
        with pytest.raises(SlackApiError):  # the post client retries nothing
            await clients.post_client.chat_postMessage(channel="C1", text="hi")
        assert (await clients.client.auth_test())["ok"]  # waited out by slack-sdk
    assert seen == ["chat.postMessage", "auth.test"]


def test_the_operations_port_is_not_the_slack_port() -> None:
    with pytest.raises(ValidationError, match="ops_port and slack_port are both 3000"):
        Settings(ops_port=3000, slack_port=3000)
    assert Settings(ops_port=0, slack_port=0).ops_port == 0  # any free port, each
