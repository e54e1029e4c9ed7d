"""A Slack workspace for story tests: the real bolt app and slack-sdk against the fakes.

:func:`slack_workspace` builds the bot (``bot.app.build``) with a scripted model, a
:class:`SlackAdapter` in HTTP mode (signed POSTs to ``/slack/events`` on its bound
port) or in Socket Mode (envelopes from a :class:`FakeSocketModeServer`), and a
:class:`FakeSlackApi` behind both. A :class:`Workspace` speaks as people do in
Slack (mention, reply, react, ``/stop``, press a button) with payloads built from
``tests/fixtures/slack/*.json``, the message ts taken from what the fake answered,
and reads what the bot posted back from the fake.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode

import aiohttp

from adapters.slack.oauth import OAuthConfig
from adapters.slack.runner import SlackAdapter, SlackConfig
from bot.app import App, build
from bot.settings import Settings
from core.models.scripted import ScriptedModel
from core.tools.base import Toolbox
from core.vocabulary.snapshot import ConversationSnapshot
from tests.fakes.slack_api import (
    BOT_ID,
    BOT_USER_ID,
    TEAM_ID,
    FakeSlackApi,
    RecordedCall,
    next_seq,
    sign,
)
from tests.fakes.slack_socket import FakeSocketModeServer

FIXTURES = Path(__file__).parent / "fixtures" / "slack"
SECRET = "test-signing-secret"
CHANNEL = "C0PROJ0001"
ALICE = "U0ALICE001"
BOB = "U0BOB00001"
WAIT = 10.0
"""Seconds any single wait may take before the test fails instead of hanging."""

Transport = Literal["http", "socket"]
EnvelopeKind = Literal["events_api", "slash_commands", "interactive"]

_ids = itertools.count(1)

# Tasks that run bolt listeners after the ack (bolt's asyncio listener runner) and
# that run Socket Mode message listeners (slack-sdk): the inbound side is idle once
# none of them is left.
_INBOUND_TASKS = frozenset({"run_ack_function_asynchronously", "run_message_listeners"})


def fixture(name: str) -> dict[str, Any]:
    """A fixture file, parsed (a fresh copy)."""
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def event_body(name: str) -> dict[str, Any]:
    """The Events API body of a fixture, with a fresh ``event_id``."""
    body: dict[str, Any] = copy.deepcopy(fixture(name)["payload"])
    body["event_id"] = f"Ev0TEST{next(_ids):05d}"
    return body


@dataclass(frozen=True)
class Delivery:
    """How the bot answered one delivery: the HTTP status, or the envelope's ack.

    ``seq`` places the answer's arrival in the order shared with the fakes' records
    (``RecordedCall.seq``): the socket server's ``ack`` entry, or the moment the
    HTTP response was read.
    """

    status: int
    seq: int
    ack: dict[str, Any] | None = None


class Workspace:
    """One Slack channel, the bot in it, and the people who talk to it."""

    def __init__(
        self,
        *,
        transport: Transport,
        app: App,
        api: FakeSlackApi,
        adapter: SlackAdapter,
        http: aiohttp.ClientSession,
        socket: FakeSocketModeServer | None,
    ) -> None:
        self.transport = transport
        self.app = app
        self.api = api
        self.adapter = adapter
        self.http = http
        self.socket = socket

    # --- delivering payloads ---------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.adapter.port}/slack/events"

    async def deliver(
        self,
        kind: EnvelopeKind,
        payload: Mapping[str, Any],
        *,
        retry: int = 0,
        secret: str = SECRET,
    ) -> Delivery:
        """Send one payload the way Slack would, and return once it is acknowledged.

        HTTP: an event as JSON, a slash command as a form, a button click as the
        ``payload`` form field, each signed with ``secret`` and a fresh timestamp;
        ``retry`` sets ``X-Slack-Retry-Num``. Socket Mode: an envelope of ``kind``
        with ``retry_attempt``, and the client's ack.
        """
        if self.socket is not None:
            envelope_id = await self.socket.send_envelope(
                kind,
                payload,
                retry_attempt=retry,
                retry_reason="timeout" if retry else "",
                accepts_response_payload=kind == "slash_commands",
            )
            ack = await self.socket.ack(envelope_id, timeout=WAIT)
            return Delivery(status=200, seq=self.socket.entry("ack", envelope_id).seq, ack=ack)
        if kind == "events_api":
            raw, content_type = json.dumps(payload), "application/json"
        elif kind == "slash_commands":
            raw, content_type = urlencode(payload), "application/x-www-form-urlencoded"
        else:
            raw = urlencode({"payload": json.dumps(payload)})
            content_type = "application/x-www-form-urlencoded"
        headers = {"Content-Type": content_type, **sign(raw, secret)}
        if retry:
            headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
        async with asyncio.timeout(WAIT):
            async with self.http.post(self.url, data=raw.encode(), headers=headers) as response:
                await response.read()
                return Delivery(status=response.status, seq=next_seq())

    async def settle(self) -> None:
        """Wait until bolt's listeners have handed everything to the hub, then for the hub."""
        async with asyncio.timeout(WAIT):
            while True:
                current = asyncio.current_task()
                pending = [
                    task
                    for task in asyncio.all_tasks()
                    if task is not current
                    and not task.done()
                    and getattr(task.get_coro(), "__name__", "") in _INBOUND_TASKS
                ]
                if not pending:
                    break
                await asyncio.wait(pending)
            await self.app.hub.settled()

    # --- what people do ----------------------------------------------------------

    async def mention(
        self, text: str = "please fix the flaky login test", *, by: str = ALICE, settle: bool = True
    ) -> str:
        """``by`` mentions the bot at the top of the channel; returns the message ts.

        Slack sends one message as both an ``app_mention`` and a ``message`` event
        (different event ids, same ts): both are delivered.
        """
        said = f"<@{BOT_USER_ID}> {text}"
        ts = str(self.api.add_message(CHANNEL, said, user=by)["ts"])
        await self.deliver("events_api", self.mention_body(ts, said, by=by))
        await self.deliver("events_api", self.message_body(ts, said, by=by))
        if settle:
            await self.settle()
        return ts

    def mention_body(self, ts: str, text: str, *, by: str = ALICE) -> dict[str, Any]:
        body = event_body("app_mention")
        event = body["event"]
        event.update(text=text, user=by, ts=ts, event_ts=ts)
        event.pop("blocks", None)  # the fixture's blocks hold the fixture's text
        return body

    def message_body(
        self, ts: str, text: str, *, by: str = ALICE, thread: str | None = None
    ) -> dict[str, Any]:
        """A ``message`` event (the fixture of a thread reply) at ``ts``."""
        body = event_body("message_thread_reply")
        event = body["event"]
        event.update(text=text, user=by, ts=ts, event_ts=ts)
        if thread is None:
            event.pop("thread_ts", None)
            event.pop("parent_user_id", None)
        else:
            event["thread_ts"] = thread
        return body

    async def reply(
        self, thread: str, text: str, *, by: str = ALICE, retry_too: bool = False
    ) -> str:
        """``by`` answers in ``thread`` (no mention); returns the reply's ts."""
        ts = str(self.api.add_message(CHANNEL, text, user=by, thread_ts=thread)["ts"])
        body = self.message_body(ts, text, by=by, thread=thread)
        await self.deliver("events_api", body)
        if retry_too:
            await self.deliver("events_api", body, retry=1)
        await self.settle()
        return ts

    def reaction_body(
        self, message: str, emoji: str = "white_check_mark", *, by: str = ALICE
    ) -> dict[str, Any]:
        body = event_body("reaction_added")
        body["event"].update(user=by, reaction=emoji)
        body["event"]["item"]["ts"] = message
        return body

    async def react(
        self, message: str, emoji: str = "white_check_mark", *, by: str = ALICE
    ) -> None:
        """``by`` adds the reaction ``emoji`` to ``message``."""
        await self.deliver("events_api", self.reaction_body(message, emoji, by=by))
        await self.settle()

    def command_body(
        self, command: str = "/stop", text: str = "", *, by: str = ALICE
    ) -> dict[str, str]:
        """The ``/stop`` fixture's form fields, for another command, text, user."""
        form = dict(parse_qsl(fixture("slash_command_stop")["payload"], keep_blank_values=True))
        form.update(
            command=command,
            text=text,
            user_id=by,
            trigger_id=f"7200000000002.{next(_ids)}.fakefakefake",
        )
        return form

    async def slash(self, command: str = "/stop", text: str = "", *, by: str = ALICE) -> Delivery:
        """``by`` types the slash command ``command`` in the channel."""
        delivery = await self.deliver("slash_commands", self.command_body(command, text, by=by))
        await self.settle()
        return delivery

    def press_body(
        self, message: Mapping[str, Any], action: str, *, by: str = ALICE, ephemeral: bool = False
    ) -> dict[str, Any]:
        """A ``block_actions`` click on the button ``action`` of ``message`` as Slack shows it.

        ``message`` is what the bot posted (from the fake: ts, thread_ts, blocks);
        the click carries that button's element, as Slack sends it back.
        """
        payload: dict[str, Any] = copy.deepcopy(fixture("socket_mode_block_actions")["payload"])
        click: dict[str, Any] = payload["payload"]
        element, block_id = _button(message, action)
        ts = str(message["ts"])
        thread = message.get("thread_ts")
        click["user"] = {"id": by, "username": by, "name": by, "team_id": TEAM_ID}
        click["trigger_id"] = f"1717171790123.{next(_ids)}.0a1b2c3d4e5f"
        click["container"] = {
            "type": "message",
            "message_ts": ts,
            "channel_id": CHANNEL,
            "is_ephemeral": ephemeral,
        }
        if thread:
            click["container"]["thread_ts"] = thread
        click.pop("message")
        if not ephemeral:  # Slack sends no copy of an ephemeral message
            click["message"] = {
                "type": "message",
                "subtype": "bot_message",
                "text": message.get("text", ""),
                "ts": ts,
                "bot_id": BOT_ID,
                "blocks": message.get("blocks", []),
            }
            if thread:
                click["message"]["thread_ts"] = thread
        click["actions"] = [
            {**element, "block_id": block_id, "action_ts": f"1717171790.{next(_ids):06d}"}
        ]
        return click

    async def press(
        self, message: Mapping[str, Any], action: str, *, by: str = ALICE, ephemeral: bool = False
    ) -> Delivery:
        """``by`` presses the button ``action`` under ``message``."""
        body = self.press_body(message, action, by=by, ephemeral=ephemeral)
        delivery = await self.deliver("interactive", body)
        await self.settle()
        return delivery

    # --- what the bot did ----------------------------------------------------------

    def calls(self, *methods: str) -> list[RecordedCall]:
        """Web API calls of ``methods`` (when none: all but the identity look-ups and the
        agent sessions' statuses, which ``api.session_statuses`` tells), in order."""
        return [
            call
            for call in self.api.calls
            if (call.method in methods if methods else call.method not in _NOT_SHOWN)
        ]

    def posts(self, thread: str) -> list[dict[str, Any]]:
        """The bot's messages in ``thread`` as they are now, oldest first."""
        return [m for m in self.api.thread(CHANNEL, thread) if m.get("user") == BOT_USER_ID]

    def post(self, thread: str, marker: str) -> dict[str, Any]:
        """The bot's last message in ``thread`` containing ``marker``."""
        found = [m for m in self.posts(thread) if marker in m.get("text", "")]
        assert found, f"no bot message with {marker!r} in {self.posts(thread)}"
        return found[-1]

    async def conversation_ids(self) -> list[str]:
        return [c.id for c in await self.app.store.threads.conversations()]

    async def outbox(self) -> dict[str, int]:
        """``{platform message id: outbox row id}`` of the rows sent with a message id."""
        rows = await self.app.store.outbox.rows()
        return {r.platform_message_id: r.id for r in rows if r.platform_message_id is not None}

    async def snapshot(self, thread: str, channel: str = CHANNEL) -> ConversationSnapshot:
        """The stored conversation bound to ``thread`` of ``channel``."""
        from conversations.events import PlatformRef

        ref = PlatformRef(platform="slack", workspace=TEAM_ID, channel=channel, thread=thread)
        conversation = await self.app.store.threads.find_by_thread(ref)
        assert conversation is not None, f"no conversation in thread {thread}"
        return await self.app.store.journal.load(conversation.id)


_IDENTITY = frozenset({"auth.test", "bots.info", "apps.connections.open"})
_NOT_SHOWN = _IDENTITY | {"agents.sessions.setStatus"}


def _button(message: Mapping[str, Any], action: str) -> tuple[dict[str, Any], str]:
    """The clicked element as Slack sends it back, and its block's id: a button's own
    element, or, for one side of a ``feedback_buttons`` element, the element's type and
    ``action_id`` with that side's ``value`` and ``text`` (a ``FeedbackButtonsAction``,
    https://docs.slack.dev/tools/bolt-js/reference/interfaces/FeedbackButtonsAction)."""
    for block in message.get("blocks", []):
        if block.get("type") not in ("actions", "context_actions"):
            continue
        block_id = str(block.get("block_id") or block["type"])
        for element in block.get("elements", []):
            if element.get("value") == action or element.get("action_id") == action:
                return dict(element), block_id
            for side in ("positive_button", "negative_button"):
                button = element.get(side) or {}
                if button.get("value") == action:
                    clicked = {"type": element["type"], "action_id": element.get("action_id")}
                    return clicked | {"value": action, "text": button["text"]}, block_id
    raise AssertionError(f"no button {action!r} in {message.get('blocks')}")


@contextlib.asynccontextmanager
async def slack_workspace(
    settings: Settings,
    model: ScriptedModel | None,
    *,
    transport: Transport = "http",
    wall_clock: Callable[[], datetime] | None = None,
    api: FakeSlackApi | None = None,
    bot_token: str | None = "xoxb-test",
    toolbox: Toolbox | None = None,
) -> AsyncIterator[Workspace]:
    """The bot on Slack over ``transport``, against the fakes; everything closed after.
    ``model``: None for the settings' own (the real client against a fake Messages API).
    ``wall_clock``: the app's wall clock (the sweeper's), when the test moves it.
    ``api``: a Slack fake of the test's own (kept across two bots: a restart).
    With ``slack_client_id`` in ``settings``, the app is installed through OAuth too (its
    installs in the store, kept fresh by the app); ``bot_token``: ``SLACK_BOT_TOKEN``
    (None: installs only); ``toolbox``: the bot's tools instead of its own."""
    async with contextlib.AsyncExitStack() as stack:
        socket: FakeSocketModeServer | None = None
        if transport == "socket":
            socket = await stack.enter_async_context(FakeSocketModeServer())
        if api is None:
            api = await stack.enter_async_context(
                FakeSlackApi(socket_url=socket.url if socket is not None else None)
            )
        elif socket is not None:
            api.socket_url = socket.url
        http = await stack.enter_async_context(aiohttp.ClientSession())
        clocked = {"wall_clock": wall_clock} if wall_clock is not None else {}
        app = await build(settings, model=model, toolbox=toolbox, **clocked)
        stack.push_async_callback(app.close)
        oauth = None
        if settings.slack_client_id is not None and settings.slack_client_secret is not None:
            oauth = OAuthConfig(
                client_id=settings.slack_client_id,
                client_secret=settings.slack_client_secret.get_secret_value(),
                redirect_uri=settings.slack_redirect_uri,
            )
        adapter = SlackAdapter(
            SlackConfig(
                bot_token=bot_token,
                oauth=oauth,
                app_token="xapp-test" if transport == "socket" else None,
                signing_secret=SECRET,
                api_url=api.base_url,
                host="127.0.0.1",
                port=0,
                stop_command=settings.stop_command,
                file_threshold=settings.file_threshold,
                allow_bots=settings.allow_bots,
                bot_thread_cap=settings.bot_thread_cap,
            )
        )
        if app.installs is not None:
            adapter.use_installs(app.installs)
        app.add_sender(adapter)
        app.add_texts(adapter.texts)
        app.add_fetcher(adapter.files)
        await app.start()
        stack.push_async_callback(adapter.close)  # closed before the app and the fakes
        await asyncio.wait_for(adapter.start(app.hub), WAIT)
        if socket is not None:
            await socket.wait_connected(WAIT)
        yield Workspace(
            transport=transport, app=app, api=api, adapter=adapter, http=http, socket=socket
        )
