"""Slack for the benchmarks: the local Web API fake, threadbot in HTTP mode, the floor's
minimal bolt app, and signed deliveries.

Both bots are real slack-bolt ``AsyncApp`` s behind an aiohttp server on 127.0.0.1,
reached with signed Events API POSTs (``tests.fakes.slack_api.sign``), and post
through slack-sdk to their own :class:`WatchedSlackApi`, in the same event loop
as the benchmark. A mention is delivered as its ``app_mention`` event only (Slack
also sends a ``message`` event with the same ts, which threadbot drops as a
duplicate of the same message; it is left out so both bots get the same requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack_api import BOT_USER_ID, FakeSlackApi, RecordedCall, sign
from tests.slack_harness import ALICE, CHANNEL, SECRET, event_body

TOKEN = "xoxb-bench"

_ids = itertools.count(1)


class WatchedSlackApi(FakeSlackApi):
    """:class:`FakeSlackApi` that tells waiters about posts, and finds messages by ts at once.

    :meth:`post_in` returns a future for the next ``chat.postMessage`` in a thread
    whose text contains a marker; it resolves with the :class:`RecordedCall`
    (``call.time`` is ``time.monotonic()`` on arrival). Messages are indexed by
    ``(channel, ts)``: the fake's own look-up scans the channel, which costs
    seconds of the shared loop with thousands of messages.
    """

    def __init__(self) -> None:
        super().__init__()
        self._index: dict[tuple[str, str], dict[str, Any]] = {}
        self._waiters: dict[tuple[str, str], list[tuple[str, asyncio.Future[RecordedCall]]]] = (
            defaultdict(list)
        )
        self.answers = 0
        """``chat.postMessage`` calls whose text held :data:`bench._agent.ANSWER`."""

    def post_in(
        self, thread: str, marker: str, channel: str = CHANNEL
    ) -> asyncio.Future[RecordedCall]:
        """A future for the next post in ``thread`` whose text contains ``marker``."""
        future: asyncio.Future[RecordedCall] = asyncio.get_running_loop().create_future()
        self._waiters[(channel, thread)].append((marker, future))
        return future

    async def _api(self, request: web.Request) -> web.StreamResponse:
        response = await super()._api(request)
        call = self.calls[-1]  # appended by super()._api with no await since
        if call.method == "chat.postMessage" and call.ok:
            self._seen(call)
        return response

    def _seen(self, call: RecordedCall) -> None:
        text = str(call.args.get("text") or "")
        if "bench answer" in text:
            self.answers += 1
        key = (str(call.args.get("channel")), str(call.args.get("thread_ts") or ""))
        waiters = self._waiters.get(key)
        if not waiters:
            return
        for entry in list(waiters):
            marker, future = entry
            if marker in text:
                waiters.remove(entry)
                if not future.done():
                    future.set_result(call)
        if not waiters:
            del self._waiters[key]

    def _store(self, channel: str, message: dict[str, Any]) -> None:
        super()._store(channel, message)
        self._index[(channel, str(message["ts"]))] = message

    def _find(self, channel: str, ts: str) -> dict[str, Any] | None:
        return self._index.get((channel, ts))


def mention_body(ts: str, text: str = "please look into it", *, by: str = ALICE) -> dict[str, Any]:
    """An Events API ``app_mention`` body for the message ``ts`` (the fixture, a fresh id)."""
    body = event_body("app_mention")
    body["event_id"] = f"Ev0BENCH{next(_ids):07d}"
    event = body["event"]
    said = f"<@{BOT_USER_ID}> {text}"
    event.update(text=said, user=by, ts=ts, event_ts=ts)
    event.pop("blocks", None)  # the fixture's blocks hold the fixture's text
    return body


def reaction_body(
    message: str, emoji: str = "white_check_mark", *, by: str = ALICE
) -> dict[str, Any]:
    """An Events API ``reaction_added`` body: ``by`` reacts ``emoji`` on ``message``."""
    body = event_body("reaction_added")
    body["event_id"] = f"Ev0BENCH{next(_ids):07d}"
    body["event"].update(user=by, reaction=emoji)
    body["event"]["item"]["ts"] = message
    return body


class Deliverer:
    """Signed Events API POSTs to a bot's ``/slack/events`` (one aiohttp session)."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._session = session

    async def post(self, url: str, body: dict[str, Any]) -> None:
        """POST ``body`` signed with the benchmark's secret; raises unless Slack's 200."""
        raw = json.dumps(body)
        headers = {"Content-Type": "application/json", **sign(raw, SECRET)}
        async with self._session.post(url, data=raw.encode(), headers=headers) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"the bot answered {response.status} to an event")


@dataclass
class SlackBot:
    """A bot behind ``url`` that posts to ``api``; ``app`` is threadbot's ``App`` (or None)."""

    url: str
    api: WatchedSlackApi
    app: Any = None


@contextlib.asynccontextmanager
async def threadbot_on_slack(
    root: Path, *, model: Any, toolbox: Any = None, **settings: Any
) -> AsyncIterator[SlackBot]:
    """threadbot (``bot.app.build``) on a new SQLite file under ``root``, its Slack
    adapter in HTTP mode on a free port, posting to a new :class:`WatchedSlackApi`.

    ``settings`` override :class:`bot.settings.Settings` fields (defaults otherwise);
    a ``database_url`` among them puts the store there instead (benchmark 9's
    PostgreSQL database).
    """
    from adapters.slack.runner import SlackAdapter, SlackConfig
    from bot.app import build
    from bot.settings import Settings

    defaults = {
        "database_url": f"sqlite+aiosqlite:///{root / 'threadbot.db'}",
        "workspace_root": root / "workspaces",
    }
    config = Settings(**(defaults | settings))
    async with contextlib.AsyncExitStack() as stack:
        api = await stack.enter_async_context(WatchedSlackApi())
        app = await build(config, model=model, toolbox=toolbox)
        stack.push_async_callback(app.close)
        adapter = SlackAdapter(
            SlackConfig(
                bot_token=TOKEN,
                signing_secret=SECRET,
                api_url=api.base_url,
                host="127.0.0.1",
                port=0,
            )
        )
        app.add_sender(adapter)
        app.add_texts(adapter.texts)
        await app.start()
        stack.push_async_callback(adapter.close)
        await adapter.start(app.hub)
        yield SlackBot(url=f"http://127.0.0.1:{adapter.port}/slack/events", api=api, app=app)


MentionHandler = Callable[[dict[str, Any], AsyncWebClient], Awaitable[None]]


@contextlib.asynccontextmanager
async def minimal_bolt_app(on_mention: MentionHandler) -> AsyncIterator[SlackBot]:
    """A minimal bolt app in HTTP mode: one ``app_mention`` listener, ``on_mention(event,
    client)``, behind an aiohttp server on a free port, posting to a new
    :class:`WatchedSlackApi` with slack-sdk's ``AsyncWebClient``."""
    async with WatchedSlackApi() as api:
        client = AsyncWebClient(token=TOKEN, base_url=api.base_url)
        bolt = AsyncApp(client=client, signing_secret=SECRET)

        @bolt.event("app_mention")
        async def mentioned(event: dict[str, Any]) -> None:
            await on_mention(event, client)

        async def handle(request: web.Request) -> web.Response:
            return await to_aiohttp_response(
                await bolt.async_dispatch(await to_bolt_request(request))
            )

        server = web.Application()
        server.router.add_post("/slack/events", handle)
        runner = web.AppRunner(server, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            port = runner.addresses[0][1]
            yield SlackBot(url=f"http://127.0.0.1:{port}/slack/events", api=api)
        finally:
            await runner.cleanup()


async def reply_in_thread(event: dict[str, Any], client: AsyncWebClient, text: str) -> None:
    """Post ``text`` in the thread of the mention ``event`` (``chat.postMessage``)."""
    await client.chat_postMessage(channel=event["channel"], thread_ts=event["ts"], text=text)
